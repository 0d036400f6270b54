"""Where each test file runs in file mode: in a process of its own, in a named
group's process, or with the other files that are not isolated.

Set, from the most specific to the least, by the ``isolation`` marker in a
module's ``pytestmark`` (read from the file's syntax tree: the parent never
imports a test file), by ``isolation_mode`` / ``isolation_group`` in the
nearest conftest, by the ini list ``isolation_paths`` (the most specific
pattern wins) and by the run's mode.  Two settings of one level that
disagree about a file are a usage error naming both.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
import types
from collections.abc import Iterable
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import pytest

from pytest_isolation.core import options
from pytest_isolation.core import pysource
from pytest_isolation.core.globs import Glob
from pytest_isolation.core.kinds import Mode
from pytest_isolation.core.kinds import Placed
from pytest_isolation.core.settings import MODE_ENV
from pytest_isolation.core.settings import MODES
from pytest_isolation.core.settings import ModeFrom
from pytest_isolation.core.settings import ModeSource

#: How a file runs, as the settings spell it.
ALONE: Final = "file"
GROUP: Final = "group"
TOGETHER: Final = "off"
#: A process of its own, and each of its tests in a process forked from it.
TESTS: Final = "test"
#: The placements a mode alone gives (a group needs a name).
UNGROUPED: tuple[Placed, ...] = (ALONE, TOGETHER, TESTS)
#: The conftest variables, by the setting they give.
CONFTEST_MODE = "isolation_mode"
CONFTEST_GROUP = "isolation_group"
#: The marker's arguments that place a file.
MARKER_KEYS = ("mode", "group")
_NAME = re.compile(r"[A-Za-z0-9_.\-]+\Z")


@dataclasses.dataclass(frozen=True)
class Placement:
    """How one test file runs, and which setting said so."""

    how: Placed = ALONE
    group: str = ""
    #: Where it was set (``tests/db/conftest.py: isolation_group``), empty for the run's mode.
    source: str = ""
    #: Set by the file's own marker (which its child checks once imported).
    marked: bool = False

    @property
    def process(self) -> str | None:
        """The shared process the file runs in (``None``: a process of its own)."""
        if self.how == GROUP:
            return f"group {self.group!r}"
        return None if self.how in (ALONE, TESTS) else ""

    def same(self, other: Placement) -> bool:
        return (self.how, self.group) == (other.how, other.group)

    def spelled(self) -> str:
        """As in ``isolation_paths``: ``file``, ``off``, ``test`` or ``group=NAME``."""
        return f"group={self.group}" if self.how == GROUP else self.how


def parse(text: str, source: str) -> Placement:
    """``file``, ``off``, ``test`` or ``group=NAME`` (an ``isolation_paths`` value)."""
    value = text.strip()
    kind, equals, name = value.partition("=")
    how = _ungrouped(value)
    if how is not None:
        return Placement(how, "", source)
    if kind.strip() == GROUP and equals:
        return Placement(GROUP, _group_name(name.strip(), source), source)
    raise pytest.UsageError(
        f"{source}: invalid mode {value!r}; choose from 'file', 'off', 'test', 'group=NAME'"
    )


def _group_name(name: object, source: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise pytest.UsageError(
            f"{source}: invalid group name {name!r}; use letters, digits, '_', '-' and '.'"
        )
    return name


def _ungrouped(mode: object) -> Placed | None:
    """``file`` or ``off``, typed as a placement, if ``mode`` is one of them."""
    return next((how for how in UNGROUPED if how == mode), None)


def from_arguments(values: Mapping[str, object], source: str) -> Placement | None:
    """The placement that ``mode=`` and ``group=`` (of the marker, or a
    conftest's variables) give, if any."""
    mode, group = values.get("mode"), values.get("group")
    if mode is None and group is None:
        return None
    how = GROUP if mode is None else _ungrouped(mode)
    if how is None:
        raise pytest.UsageError(
            f"{source}: invalid mode {mode!r}; choose from 'file', 'off', 'test'"
        )
    if group is None:
        return Placement(how, "", source)
    name = _group_name(group, source)
    if how in (TOGETHER, TESTS):
        raise pytest.UsageError(
            f"{source}: mode={how!r} and group={name!r} contradict each other (a group runs in "
            "a process of its own, its tests together); give one of them"
        )
    return Placement(GROUP, name, source)


# -- the marker ---------------------------------------------------------------


def marker_in_source(path: Path) -> Placement | None:
    """The placement of ``pytestmark = pytest.mark.isolation(mode=..., group=...)``
    at the top level of ``path``, read without importing it."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if b"isolation" not in data:  # most files: no parse
        return None
    tree = pysource.parse(data, str(path))
    if tree is None:  # the child's import reports it
        return None
    found: list[Placement] = []
    for node in tree.body:
        value = _pytestmark_value(node)
        if value is None:
            continue
        for call in _calls(value):
            where = f"{path}:{call.lineno}: pytestmark"
            arguments = {}
            for keyword in call.keywords:
                if keyword.arg not in MARKER_KEYS:
                    continue
                if not isinstance(keyword.value, ast.Constant):
                    raise pytest.UsageError(
                        f"{where}: pytest.mark.isolation({keyword.arg}=...) must be a literal "
                        "string: file mode reads it without importing the file"
                    )
                arguments[keyword.arg] = keyword.value.value
            placement = from_arguments(arguments, where)
            if placement is not None:
                found.append(dataclasses.replace(placement, marked=True))
    return _one(found)


def _pytestmark_value(node: ast.stmt) -> ast.expr | None:
    if isinstance(node, ast.Assign):
        names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        return node.value if "pytestmark" in names else None
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
        target = node.target
        return node.value if isinstance(target, ast.Name) and target.id == "pytestmark" else None
    return None


def _calls(value: ast.expr) -> Iterable[ast.Call]:
    """The ``isolation`` marker calls in a ``pytestmark`` value."""
    items = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
    for item in items:
        if isinstance(item, ast.Call) and _is_isolation_mark(item.func):
            yield item


def _is_isolation_mark(func: ast.expr) -> bool:
    """``pytest.mark.isolation`` or ``mark.isolation``."""
    if not isinstance(func, ast.Attribute) or func.attr != "isolation":
        return False
    owner = func.value
    return (isinstance(owner, ast.Attribute) and owner.attr == "mark") or (
        isinstance(owner, ast.Name) and owner.id == "mark"
    )


def marker_of_module(module: types.ModuleType, where: str) -> Placement | None:
    """The placement the imported module's ``pytestmark`` gives."""
    marks = getattr(module, "pytestmark", [])
    found = []
    for entry in marks if isinstance(marks, (list, tuple)) else [marks]:
        mark = getattr(entry, "mark", entry)
        if getattr(mark, "name", None) != "isolation":
            continue
        placement = from_arguments(getattr(mark, "kwargs", {}), f"{where}: pytestmark")
        if placement is not None:
            found.append(placement)
    return _one(found)


def imported_differently(path: Path, module: types.ModuleType, written: str) -> str | None:
    """Why the imported module's placement is not ``written``, the one its
    source gave the parent (spelled; empty: none), if it is not (a
    ``pytestmark`` built at import time)."""
    imported = marker_of_module(module, str(path))
    made = "" if imported is None else imported.spelled()
    if made == written:
        return None
    said, made = written or "none", made or "none"
    return (
        f"{path}: its pytestmark places it {made!r} once imported, but its source "
        f"{said!r}; file mode reads the placement without importing the file: write "
        "pytestmark = pytest.mark.isolation(mode=..., group=...) with literal values at "
        "the top level"
    )


def _one(found: list[Placement]) -> Placement | None:
    for other in found[1:]:
        if not other.same(found[0]):
            raise pytest.UsageError(
                f"{found[0].source} ({found[0].spelled()}) and {other.source} "
                f"({other.spelled()}) disagree; keep one isolation marker"
            )
    return found[0] if found else None


# -- conftests and ini patterns -------------------------------------------------


def conftest_placement(module: types.ModuleType) -> Placement | None:
    """What a conftest's ``isolation_mode`` / ``isolation_group`` say for its directory."""
    values = {
        key: getattr(module, variable)
        for key, variable in (("mode", CONFTEST_MODE), ("group", CONFTEST_GROUP))
        if hasattr(module, variable)
    }
    source = f"{module.__file__}: " + " and ".join(
        name for name in (CONFTEST_MODE, CONFTEST_GROUP) if hasattr(module, name)
    )
    return from_arguments(values, source)


@dataclasses.dataclass(frozen=True)
class Pattern:
    """One line of ``isolation_paths``: ``GLOB: MODE``."""

    text: str
    glob: Glob
    #: Leading path segments without a wildcard: the more, the more specific.
    depth: int
    placement: Placement

    def matches(self, relative: str) -> bool:
        """Whether the pattern matches the path or one of its directories."""
        return self.glob.match_or_parent(relative)


def patterns(lines: Iterable[str], key: str = "isolation_paths") -> list[Pattern]:
    found = []
    for line in lines:
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        glob, colon, mode = text.rpartition(":")
        source = f"{key} (ini) line {text!r}"
        glob = glob.strip().replace("\\", "/")
        if not colon or not glob.strip("/"):
            raise pytest.UsageError(
                f"{source}: expected 'GLOB: MODE', e.g. 'tests/legacy/**: off' or "
                "'tests/db/**: group=db'"
            )
        if os.path.isabs(glob) or glob.startswith("/") or glob.split("/")[0] == "..":
            raise pytest.UsageError(f"{source}: the pattern must be relative to the ini file")
        glob = glob.strip("/")
        segments = glob.split("/")
        depth = next((i for i, s in enumerate(segments) if _wild(s)), len(segments))
        found.append(Pattern(text, Glob(glob, source), depth, parse(mode, source)))
    return found


def _wild(segment: str) -> bool:
    return any(char in segment for char in "*?[")


def from_patterns(found: list[Pattern], relative: str) -> Placement | None:
    """The most specific pattern's placement for ``relative`` (a path below the
    ini file's directory, with ``/``)."""
    matching = [pattern for pattern in found if pattern.matches(relative)]
    if not matching:
        return None
    best = max(pattern.depth for pattern in matching)
    tied = [pattern for pattern in matching if pattern.depth == best]
    for other in tied[1:]:
        if not other.placement.same(tied[0].placement):
            raise pytest.UsageError(
                f"isolation_paths (ini): {tied[0].text!r} and {other.text!r} both match "
                f"{relative!r} and disagree; make one of them more specific"
            )
    return tied[0].placement


def opting_in(config: pytest.Config) -> Placement | None:
    """What puts files in processes of their own in a run whose ini mode is
    ``off``: an ``isolation_paths`` line, or a conftest pytest loaded at
    start-up."""
    for pattern in patterns(config.getini("isolation_paths")):
        if pattern.placement.how != TOGETHER:
            return pattern.placement
    for plugin in config.pluginmanager.get_plugins():
        found = _conftest_of(plugin)
        if found is not None and found.how != TOGETHER:
            return found
    return None


def _conftest_of(plugin: object) -> Placement | None:
    if not isinstance(plugin, types.ModuleType):
        return None
    file = getattr(plugin, "__file__", None)
    if not file or os.path.basename(file) != "conftest.py":
        return None
    return conftest_placement(plugin)


def asked_late(config: pytest.Config, items: Iterable[pytest.Item]) -> list[Placement]:
    """In a plain run: the test modules' markers and the conftests collected
    late that ask for processes of their own, which only file mode gives (it
    starts before the files are collected)."""
    found = [_conftest_of(plugin) for plugin in config.pluginmanager.get_plugins()]
    seen = set()
    for item in items:
        module = getattr(item, "module", None)
        if isinstance(module, types.ModuleType) and id(module) not in seen:
            seen.add(id(module))
            found.append(marker_of_module(module, str(item.path)))
    return [asked for asked in found if asked is not None and asked.how != TOGETHER]


def late_line(asked: list[Placement]) -> str:
    """The header line that says a plain run did not give them their processes."""
    first = asked[0]
    more = f" (and {len(asked) - 1} more)" if len(asked) > 1 else ""
    return (
        f"isolation: {first.source} asks for a process of its own ({first.spelled()}){more}, "
        "but this run is not in file mode, which starts before the files are collected: "
        "every file runs in this process; set isolation_mode = file or "
        "PYTEST_ISOLATION_MODE=file, or name the files in isolation_paths"
    )


class Placements:
    """Finds each test file's placement (in the parent, before collecting it)."""

    def __init__(self, config: pytest.Config, default: Placement) -> None:
        self.default = default
        self.base = config.inipath.parent if config.inipath is not None else config.rootpath
        self.patterns = patterns(config.getini("isolation_paths"))
        #: Directory -> its conftest module, as pytest registers them.
        self.conftests: dict[Path, types.ModuleType] = {}
        self._by_directory: dict[Path, Placement | None] = {}
        for plugin in config.pluginmanager.get_plugins():
            self.add(plugin)

    def add(self, plugin: object) -> None:
        """Note a conftest module (``pytest_plugin_registered``)."""
        file = getattr(plugin, "__file__", None)
        is_module = isinstance(plugin, types.ModuleType)
        if is_module and file and os.path.basename(file) == "conftest.py":
            self.conftests[Path(file).parent] = plugin  # type: ignore[assignment]
            self._by_directory.clear()

    def of(self, path: Path) -> Placement:
        """Where ``path`` runs: its marker, its nearest conftest's setting, the
        most specific ini pattern, else the run's mode."""
        placement = marker_in_source(path)
        if placement is None:
            placement = self._of_directory(path.parent)
        if placement is None:
            try:
                relative = path.relative_to(self.base).as_posix()
            except ValueError:
                relative = ""
            placement = from_patterns(self.patterns, relative) if relative else None
        return self.default if placement is None else placement

    def _of_directory(self, directory: Path) -> Placement | None:
        if directory not in self._by_directory:
            module = self.conftests.get(directory)
            found = None if module is None else conftest_placement(module)
            if found is None and directory.parent != directory:
                found = self._of_directory(directory.parent)
            self._by_directory[directory] = found
        return self._by_directory[directory]


def run_mode(config: pytest.Config) -> tuple[Mode, ModeFrom]:
    """The run's mode and where it was set: ``--isolation-mode``, else
    ``PYTEST_ISOLATION_MODE``, else the ini key ``isolation_mode``; with the
    ini key's ``off``, ``file`` when ``isolation_paths`` or a conftest loaded
    at start-up puts files in processes of their own (the other files then
    run together, as in a plain run)."""
    if config.getoption("isolation_mode") is None and os.environ.get(MODE_ENV, "").strip():
        value = os.environ[MODE_ENV].strip()
        chosen = options.one_of(value, MODES)
        if chosen is None:
            allowed = ", ".join(repr(mode) for mode in MODES)
            raise pytest.UsageError(f"{MODE_ENV}: invalid value {value!r}; choose from {allowed}")
        return chosen, ModeFrom(ModeSource.ENV)
    mode = options.choice(config, "isolation_mode", MODES)
    if config.getoption("isolation_mode") is not None:
        return mode, ModeFrom(ModeSource.OPTION)
    opting = opting_in(config) if mode == "off" else None
    if opting is not None:
        return "file", ModeFrom(ModeSource.PLACEMENT, opting.source)
    return mode, ModeFrom(ModeSource.INI)
