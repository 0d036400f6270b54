"""Modules a test imported for the first time: which of them the guard takes
out of ``sys.modules`` again.

Code may behave differently when a module is present (``if "proj.extra" in
sys.modules``, a plugin system that lists what is imported), so a module a
test imported is part of what it left behind.  Taking a module out is safe
only where importing it again later gives an equivalent module and leaves
nothing of the first import behind:

- its code is a pure-Python file of the project (under the rootdir, not a
  test file or conftest) or of the standard library; never a C extension,
  which cannot be loaded twice, nor an installed library;
- none of its classes derives from a class outside the standard library
  and the modules taken out with it (a base class of the project or of a
  library may keep a registry of its subclasses, which a second import
  would fill twice);
- no module that stays holds it (``from proj import extra`` in a module
  that stays: that module would keep the old copy while the rest of the
  process got a new one); its parent package's attribute is removed with it,
  and a package stays while a module under it stays;
- it is not one of the standard library's packages whose import installs
  process-wide hooks (``atexit`` callbacks, the event loop policy, logging's
  handlers, thread and multiprocessing machinery).
"""

from __future__ import annotations

import contextlib
import operator
import os
import sys
import sysconfig
import types
from collections.abc import Callable
from collections.abc import Iterable
from itertools import repeat

#: Standard library packages whose import registers process-wide hooks.
PROCESS_HOOKS = frozenset(
    {
        "asyncio",
        "atexit",
        "concurrent",
        "ctypes",
        "doctest",
        "encodings",
        "faulthandler",
        "idlelib",
        "importlib",
        "logging",
        "multiprocessing",
        "pdb",
        "readline",
        "rlcompleter",
        "site",
        "threading",
        "tkinter",
        "tracemalloc",
        "turtle",
        "unittest",
        "zipimport",
    }
)
_STDLIB = os.path.join(os.path.normpath(sysconfig.get_paths()["stdlib"]), "")


class NewModules:
    """Decides which modules a window added may be taken out."""

    def __init__(self, project: Callable[[str, types.ModuleType], bool]) -> None:
        #: Whether a module is the project's (not a test file or conftest).
        self.project = project

    def removable(self, added: dict[str, types.ModuleType]) -> set[str]:
        """The names among ``added`` (name -> module, first imported in the
        window) that may be taken out of ``sys.modules``."""
        candidates = {
            name: module for name, module in added.items() if self._pure_source(name, module)
        }
        candidates = {
            name: module
            for name, module in candidates.items()
            if _own_bases(module, candidates.values())
        }
        taken = set(candidates) - _held_by_others(candidates)
        # A package stays while any module under it stays.
        staying = set(added) - taken
        return {
            name for name in taken if not any(other.startswith(f"{name}.") for other in staying)
        }

    def _pure_source(self, name: str, module: types.ModuleType) -> bool:
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or not path.endswith(".py"):
            return False
        if name.partition(".")[0] in PROCESS_HOOKS or name == "__main__":
            return False
        stdlib = name.partition(".")[0] in sys.stdlib_module_names and os.path.normpath(
            path
        ).startswith(_STDLIB)
        return stdlib or self.project(name, module)


def _own_bases(module: types.ModuleType, taken: Iterable[types.ModuleType]) -> bool:
    """Whether every class the module defines derives only from builtins, the
    standard library and the modules taken out with it."""
    names = {other.__name__ for other in taken}
    for value in list(vars(module).values()):
        if not isinstance(value, type) or value.__module__ != module.__name__:
            continue
        for base in value.__mro__[1:]:
            home = base.__module__
            stdlib = home == "builtins" or home.partition(".")[0] in sys.stdlib_module_names
            if home not in names and not stdlib:
                return False
    return True


def _held_by_others(candidates: dict[str, types.ModuleType]) -> set[str]:
    """Candidates a module that stays holds as a global (other than a parent
    package's attribute for its submodule, which goes with it).  Every
    module's dict is scanned in C (``map(operator.is_, ...)``); only a dict
    that holds a candidate is looked at name by name.  No ``id()``: each call
    raises an audit event, which the guard's own audit hook would hear."""
    held: set[str] = set()
    for name, module in list(sys.modules.items()):
        if name in candidates or not isinstance(module, types.ModuleType):
            continue
        values = list(vars(module).values())
        for found, target in candidates.items():
            if found in held or not any(map(operator.is_, values, repeat(target))):
                continue
            holders = [key for key, value in vars(module).items() if value is target]
            if any(f"{name}.{key}" != found for key in holders):
                held.add(found)
    return held


def take_out(name: str, module: object) -> None:
    """Remove a module from ``sys.modules`` and from its parent package."""
    if sys.modules.get(name) is module:
        del sys.modules[name]
    parent, _, child = name.rpartition(".")
    package = sys.modules.get(parent) if parent else None
    if package is not None and getattr(package, child, None) is module:
        with contextlib.suppress(AttributeError):
            delattr(package, child)
