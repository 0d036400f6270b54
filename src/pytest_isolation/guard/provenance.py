"""Whose a module is, by where its file lies: the project's, a test file, a
pytest plugin's, or an installed library's.  The watch list
(:mod:`.watchlist`) watches the project's modules and leaves the others."""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Container
from pathlib import Path

from pytest_isolation.core import pytest_private

#: Packages never scanned: pytest's machinery (``warnings`` is rebound by
#: pytest's per-test warning capture) and this plugin.
MACHINERY = frozenset(
    {"pytest", pytest_private.PYTEST_PACKAGE, "pluggy", "pytest_isolation", "__main__", "warnings"}
)

#: Folders that hold a project's tests (and their data modules).
TEST_FOLDERS = frozenset({"tests", "test", "testing"})


def _real(path: str) -> str:
    return os.path.realpath(path)


class Provenance:
    """The rootdir, the library roots, and the test files and plugins the
    run has named so far: what tells a project module from the rest."""

    def __init__(
        self, rootdir: Path, library_roots: tuple[str, ...], installed: tuple[str, ...] = ()
    ) -> None:
        self.root = os.path.join(_real(str(rootdir)), "")
        self.given_root = os.path.join(os.path.normpath(str(rootdir)), "")
        self.library_roots = library_roots
        #: The project's packages installed in site-packages (see :func:`.sites.installed_copies`).
        self.installed = installed
        #: Real paths of collected test modules (never project state).
        self.test_files: set[str] = set()
        #: Their file names, a cheap first check before resolving a path.
        self.test_names: set[str] = set()
        #: Top-level packages of registered pytest plugins (skipped by the scan).
        self.plugin_packages: set[str] = set(MACHINERY)
        #: The modules registered as pytest plugins (syrupy's own module when
        #: syrupy's suite runs): their state is the run's, not the project's.
        self.plugin_modules: set[str] = set()
        self._test_file: dict[str, bool] = {}
        self._project_types: dict[str, bool] = {}

    def add_test_file(self, path: Path) -> None:
        self.test_files.add(_real(str(path)))
        self.test_names.add(path.name)

    def add_plugin(self, name: str) -> None:
        """A module registered as a pytest plugin: its package is the run's machinery."""
        self.plugin_packages.add(name.partition(".")[0])
        self.plugin_modules.add(name)

    def project_origin(self, origin: str) -> bool:
        """Whether a module file is the project's, by its path alone (string
        operations only: this runs inside tests, during an import)."""
        path = os.path.normpath(origin)
        if path.startswith(self.installed):
            return True
        if not path.startswith((self.root, self.given_root)) or path.startswith(self.library_roots):
            return False
        name = os.path.basename(path)
        if name == "conftest.py" or name in self.test_names:
            return False
        parts = Path(path).parts
        return "site-packages" not in parts and "dist-packages" not in parts

    def is_project(self, name: str, module: object) -> bool:
        """A module of the project (not a test file, conftest, plugin or library)."""
        if not isinstance(module, types.ModuleType) or name.partition(".")[0] in MACHINERY:
            return False
        if name in self.plugin_modules:
            return False
        path = getattr(module, "__file__", None)
        if not isinstance(path, str):
            return False
        if path.startswith(self.installed):
            return True
        if path.startswith(self.library_roots):
            return False
        real = _real(path)
        if not real.startswith(self.root) or real.startswith(self.library_roots):
            return False
        parts = Path(real).parts
        if "site-packages" in parts or "dist-packages" in parts:
            return False
        return not self.is_test_file(module)

    def project_types(self, module_name: str, project: Container[str]) -> bool:
        """Whether the classes of the module named ``module_name`` are the
        project's (``project``: the project modules known so far), by name,
        answered once per name."""
        known = self._project_types.get(module_name)
        if known is None:
            known = module_name in project or self.is_project(
                module_name, sys.modules.get(module_name)
            )
            self._project_types[module_name] = known
        return known

    def is_test_file(self, module: types.ModuleType) -> bool:
        path = getattr(module, "__file__", None)
        if not isinstance(path, str):
            return False
        known = self._test_file.get(path)
        if known is None:  # test files are recorded before they are imported
            name = os.path.basename(path)
            known = name == "conftest.py" or (
                name in self.test_names and _real(path) in self.test_files
            )
            self._test_file[path] = known
        return known

    def test_helper(self, module: types.ModuleType) -> bool:
        """A module of the test tree that holds no tests (``tests/data.py``,
        ``tests/helpers/rows.py``): test data, shared by the tests that import it."""
        path = os.path.normpath(str(getattr(module, "__file__", "")))
        relative = path[len(self.given_root) :] if path.startswith(self.given_root) else path
        return any(part in TEST_FOLDERS for part in Path(relative).parts[:-1])
