"""The project's Python files, its import roots and which files are tests.

Every path is a *key*: rootdir-relative, POSIX separators.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import posixpath
import sys
from collections.abc import Iterable
from collections.abc import Sequence
from pathlib import Path

#: Directories never searched, besides ``norecursedirs`` and virtualenvs.
SKIPPED_DIRS = frozenset(
    {".git", "__pycache__", "build", "dist", ".tox", ".nox", ".venv", "venv", "node_modules"}
)
#: Files whose change may change everything: a full run, which the selector refuses.
GLOBAL_TRIGGERS = frozenset(
    {
        "pyproject.toml",
        "setup.cfg",
        "setup.py",
        "tox.ini",
        "pytest.ini",
        "Pipfile",
        "Pipfile.lock",
        "poetry.lock",
        "uv.lock",
        "pdm.lock",
    }
)


_UNKNOWN = object()


def is_global_trigger(key: str) -> bool:
    name = posixpath.basename(key)
    if name in GLOBAL_TRIGGERS or name.endswith(".lock"):
        return True
    stem, suffix = posixpath.splitext(name)
    if suffix in {".txt", ".in"} and stem.startswith(("requirements", "constraints")):
        return True
    return "/requirements/" in f"/{key}" and suffix in {".txt", ".in"}


def _is_identifier_path(parts: Sequence[str]) -> bool:
    return all(part.isidentifier() for part in parts)


@dataclasses.dataclass
class Project:
    root: Path
    #: Every Python file, by key.
    files: frozenset[str]
    #: Every directory holding a Python file (and its ancestors), by key ('' is the root).
    dirs: frozenset[str]
    #: Import roots, by key, in lookup order.
    roots: tuple[str, ...]
    #: Test files (matching ``python_files`` under ``testpaths``).
    tests: frozenset[str]
    #: Directories of the test tree (``testpaths``, or wherever tests are).
    test_dirs: tuple[str, ...]
    _located: dict[tuple[str, str], str | None] = dataclasses.field(
        default_factory=dict, repr=False, compare=False
    )
    _local_roots: dict[str, str] = dataclasses.field(
        default_factory=dict, repr=False, compare=False
    )

    # -- what a file is ----------------------------------------------------------

    def is_conftest(self, key: str) -> bool:
        return posixpath.basename(key) == "conftest.py"

    def in_test_tree(self, key: str) -> bool:
        return any(d == "" or key == d or key.startswith(d + "/") for d in self.test_dirs)

    def is_test_side(self, key: str) -> bool:
        """A test file, a conftest, or a helper module of the tests."""
        return key in self.tests or self.is_conftest(key) or self.in_test_tree(key)

    def tests_under(self, directory: str) -> list[str]:
        prefix = "" if directory == "" else directory + "/"
        return sorted(t for t in self.tests if t.startswith(prefix))

    # -- module names ------------------------------------------------------------

    def locate(self, base: str, dotted: str) -> str | None:
        """The file (or namespace directory) of module ``dotted`` under ``base``."""
        known = self._located.get((base, dotted), _UNKNOWN)
        if known is _UNKNOWN:
            known = self._located[(base, dotted)] = self._locate(base, dotted)
        return known  # type: ignore[return-value]

    def _locate(self, base: str, dotted: str) -> str | None:
        relative = dotted.strip(".").replace(".", "/")
        path = f"{base}/{relative}" if base and relative else base or relative
        if not relative:
            init = f"{path}/__init__.py" if path else "__init__.py"
            return init if init in self.files else (path if path in self.dirs else None)
        if path + ".py" in self.files:
            return path + ".py"
        init = path + "/__init__.py"
        if init in self.files:
            return init
        return path if path in self.dirs else None

    def local_root(self, key: str) -> str:
        """Where pytest's default import mode puts a test-side file's directory
        on ``sys.path``: the first ancestor that is not a package."""
        start = directory = posixpath.dirname(key)
        found = self._local_roots.get(start)
        if found is not None:
            return found
        while directory and f"{directory}/__init__.py" in self.files:
            directory = posixpath.dirname(directory)
        self._local_roots[start] = directory
        return directory

    def roots_for(self, key: str) -> list[str]:
        roots = list(self.roots)
        local = self.local_root(key)
        if local not in roots:
            roots.append(local)
        return roots

    def module_names(self, key: str) -> list[str]:
        """Every dotted name the file can be imported by, one per root."""
        names = []
        for root in self.roots_for(key):
            prefix = "" if root == "" else root + "/"
            if not key.startswith(prefix):
                continue
            parts = key[len(prefix) :].removesuffix(".py").split("/")
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if parts and _is_identifier_path(parts):
                names.append(".".join(parts))
        return names

    def parents(self, root: str, dotted: str) -> list[str]:
        """The ``__init__.py`` files importing ``dotted`` runs first."""
        found = []
        parts = dotted.split(".")
        for depth in range(1, len(parts)):
            init = self.locate(root, ".".join(parts[:depth]))
            if init is not None and init.endswith("__init__.py"):
                found.append(init)
        return found


def _skipped(name: str, path: str, norecurse: Sequence[str]) -> bool:
    if name in SKIPPED_DIRS or name.endswith(".egg-info"):
        return True
    if any(fnmatch.fnmatch(name, pattern) for pattern in norecurse):
        return True
    return os.path.isfile(os.path.join(path, "pyvenv.cfg"))  # a virtualenv


def walk(root: Path, norecurse: Sequence[str]) -> Iterable[str]:
    """Keys of every ``.py`` file under ``root``, skipping what pytest would."""
    top = str(root)
    for directory, subdirs, names in os.walk(top):
        subdirs[:] = sorted(
            d for d in subdirs if not _skipped(d, os.path.join(directory, d), norecurse)
        )
        relative = os.path.relpath(directory, top)
        base = "" if relative == "." else relative.replace(os.sep, "/")
        for name in sorted(names):
            if name.endswith(".py"):
                yield f"{base}/{name}" if base else name


def build(
    root: Path,
    norecurse: Sequence[str],
    python_files: Sequence[str],
    testpaths: Sequence[str],
    pythonpath: Sequence[Path],
) -> Project:
    files = frozenset(walk(root, norecurse))
    dirs = {""}
    for key in files:
        directory = posixpath.dirname(key)
        while directory and directory not in dirs:
            dirs.add(directory)
            directory = posixpath.dirname(directory)
    test_dirs = tuple(sorted({t.strip("/") for t in testpaths if t.strip("/") != "."})) or ("",)
    patterns = list(python_files) or ["test_*.py", "*_test.py"]
    tests = frozenset(
        key
        for key in files
        if any(fnmatch.fnmatch(posixpath.basename(key), p) for p in patterns)
        and posixpath.basename(key) != "conftest.py"
        and any(d == "" or key.startswith(d + "/") for d in test_dirs)
    )
    if test_dirs == ("",):  # no testpaths: the test tree is the tests' own directories
        test_dirs = tuple(sorted({d for d in map(_test_tree_of, tests) if d is not None}))
    return Project(
        root=root,
        files=files,
        dirs=frozenset(dirs),
        roots=_roots(root, dirs, pythonpath),
        tests=tests,
        test_dirs=test_dirs,
    )


def _test_tree_of(key: str) -> str | None:
    """``tests`` for ``tests/unit/test_x.py``; None for a test beside the sources."""
    parts = key.split("/")[:-1]
    for index, part in enumerate(parts):
        if part in {"tests", "test", "testing"}:
            return "/".join(parts[: index + 1])
    return None


def _roots(root: Path, dirs: set[str], pythonpath: Sequence[Path]) -> tuple[str, ...]:
    """``pythonpath`` ini entries, ``src``, the rootdir, then ``sys.path`` entries inside it."""
    found: list[str] = []

    def add(path: Path) -> None:
        try:
            relative = Path(os.path.realpath(path)).relative_to(os.path.realpath(root))
        except ValueError:
            return
        key = relative.as_posix()
        key = "" if key == "." else key
        if key not in found and (key in dirs or key == ""):
            found.append(key)

    for path in pythonpath:
        add(path)
    if "src" in dirs:
        add(root / "src")
    add(root)
    for entry in sys.path:
        if entry:
            add(Path(entry))
    return tuple(found)
