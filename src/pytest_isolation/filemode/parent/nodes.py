"""Collection nodes the parent uses in file mode, none of which imports a test module."""

from __future__ import annotations

import types
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from pytest_isolation.core.keys import COLLECT_IN_CHILD
from pytest_isolation.core.keys import FILE_PLACEHOLDER
from pytest_isolation.core.words import agreeing
from pytest_isolation.core.words import counted
from pytest_isolation.filemode.placement import Placement

#: On an :class:`IsolatedFile`: where it runs, or why its placement is wrong.
PLACEMENT = pytest.StashKey[Placement]()
PLACEMENT_ERROR = pytest.StashKey[str]()
#: On a file's placeholder: where its child's module-level skip was raised
#: (path, line, reason), for the parent's report of it.
CHILD_SKIP = pytest.StashKey[tuple[str, int, str]]()

#: Name of the one placeholder item of each file (its node id is ``path::<isolated file>``).
PLACEHOLDER_NAME = "<isolated file>"


class ChildCollectionError(Exception):
    """A child reported that its file failed to collect (or died collecting it)."""

    def __init__(self, longrepr: Any) -> None:
        super().__init__(str(longrepr))
        self.longrepr = longrepr


class IsolatedFile(pytest.File):
    """A test file whose tests are collected and run in a child process."""

    def collect(self) -> Iterable[pytest.Item]:
        if PLACEMENT_ERROR in self.stash:
            raise self.CollectError(f"isolation: {self.stash[PLACEMENT_ERROR]}")
        _check_module_name(self)
        if self.config.option.collectonly:
            return self.config.stash[COLLECT_IN_CHILD](self)
        item = IsolatedFileItem.from_parent(self, name=PLACEHOLDER_NAME)
        item.stash[FILE_PLACEHOLDER] = True
        manager = self.config.pluginmanager
        if manager.has_plugin("timeout") or manager.has_plugin("pytest_timeout"):
            # pytest-timeout times each test in the children; not the whole file here.
            item.add_marker(pytest.mark.timeout(0))
        return [item]

    def repr_failure(  # type: ignore[override]
        self, excinfo: pytest.ExceptionInfo[BaseException]
    ) -> Any:
        if isinstance(excinfo.value, ChildCollectionError):
            return excinfo.value.longrepr
        return super().repr_failure(excinfo)


#: In the parent: the first test file seen under each module name.
_MODULE_FILES = pytest.StashKey[dict[str, Path]]()


def module_name(path: Path) -> str:
    """The name ``--import-mode=prepend`` (or ``append``) imports a test file as."""
    names = [path.stem]
    directory = path.parent
    while (directory / "__init__.py").is_file() and directory.name.isidentifier():
        names.insert(0, directory.name)
        directory = directory.parent
    return ".".join(names)


def _check_module_name(file: IsolatedFile) -> None:
    """Fail to collect a test file whose module name an earlier one has, as a
    plain run does when it imports both into one process."""
    config = file.config
    if file.path.suffix != ".py":  # a doctest text file or another collector's: not imported
        return
    if config.getoption("importmode") == "importlib" or _namespace_packages(config):
        return
    name = module_name(file.path)
    first = config.stash.setdefault(_MODULE_FILES, {}).setdefault(name, file.path)
    if first != file.path:
        raise file.CollectError(
            "import file mismatch:\n"
            f"imported module {name!r} has this __file__ attribute:\n"
            f"  {first}\n"
            "which is not the same as the test file we want to collect:\n"
            f"  {file.path}\n"
            "HINT: remove __pycache__ / .pyc files and/or use a unique basename for your "
            "test file modules"
        )


def _namespace_packages(config: pytest.Config) -> bool:
    """``consider_namespace_packages`` (pytest 8.1+) names modules by other rules."""
    try:
        return bool(config.getini("consider_namespace_packages"))
    except ValueError:
        return False


def process_of(item: pytest.Item) -> str | None:
    """The shared process a placeholder's file runs in (``None``: its own, or not a placeholder)."""
    parent = item.parent
    if not isinstance(item, IsolatedFileItem) or parent is None or PLACEMENT not in parent.stash:
        return None
    return parent.stash[PLACEMENT].process


def gather_shared(items: list[pytest.Item]) -> None:
    """Move the files of each shared process next to its first one, keeping
    every other order: a process runs its files one after the other."""
    members: dict[str, list[pytest.Item]] = {}
    slots: list[pytest.Item | list[pytest.Item]] = []
    for item in items:
        process = process_of(item)
        if process is None:
            slots.append(item)
        elif process in members:
            members[process].append(item)
        else:
            members[process] = [item]
            slots.append(members[process])
    if members:
        items[:] = [i for slot in slots for i in (slot if isinstance(slot, list) else [slot])]


def placements_line(processes: list[str | None]) -> str:
    """``isolation: 40 test files: 34 each in its own process, 4 in 2 groups
    (api: 2, db: 2), 2 together in one process``."""
    total = len(processes)
    alone = processes.count(None)
    groups: dict[str, int] = {}
    for process in processes:
        if process:
            groups[process] = groups.get(process, 0) + 1
    together = processes.count("")
    files = counted(total, "test file")
    if alone == total:
        # pytest has just said "collected 5 items": they are files, not tests.
        items = agreeing(total, "the item is", f"each of the {total} items is")  # agrees: >1
        return (
            f"isolation: {items} a test file, collected and run in its own process; "
            "its tests are counted as they run"
        )
    parts = [f"{alone} each in its own process"] if alone else []
    if groups:
        grouped = sum(groups.values())
        names = ", ".join(f"{name[7:-1]}: {n}" for name, n in sorted(groups.items()))
        parts.append(f"{grouped} in {counted(len(groups), 'group')}, a process per group ({names})")
    if together:
        parts.append(f"{together} together in one process (mode off)")
    return f"isolation: {files}: " + ", ".join(parts)


class IsolatedFileItem(pytest.Item):
    """Stands for all tests of one file; the controller runs them in a child."""

    @property
    def module(self) -> types.ModuleType:
        """An empty stand-in named as the test module will be (never imported here).

        Plugins that order tests by module, such as pytest-randomly, then order
        the files as in a plain run: the name is the one pytest's default
        import mode gives the module (its package path above it, if any).
        """
        parts = [self.path.stem]
        directory = self.path.parent
        while (directory / "__init__.py").is_file() and directory.parent != directory:
            parts.insert(0, directory.name)
            directory = directory.parent
        return types.ModuleType(".".join(parts))

    def runtest(self) -> None:
        raise RuntimeError(f"{self.nodeid} runs in a child process, never in the parent")

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, ""


class ChildTest(pytest.Item):
    """A test that exists in a child process, named in the parent.

    Used for ``--collect-only`` listings and for ``pytest_deselected``.
    """

    #: The child deselected it (-k, -m, --deselect, --lf); the parent drops it.
    deselected_in_child = False

    def runtest(self) -> None:
        raise RuntimeError(f"{self.nodeid} runs in a child process, never in the parent")

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, self.name

    @classmethod
    def for_nodeid(cls, file: pytest.Collector, nodeid: str, deselected: bool = False) -> ChildTest:
        name = nodeid.split("::", 1)[1] if "::" in nodeid else nodeid
        item = cls.from_parent(file, name=name, nodeid=nodeid)
        item.deselected_in_child = deselected
        return item
