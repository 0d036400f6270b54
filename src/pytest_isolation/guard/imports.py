"""Project modules first imported inside a test, snapshotted as their import
completes.

A module a test imports for the first time has no snapshot from before the
test, so what the test then changes in it (``import proj.cfg;
proj.cfg.LEVEL = 99``) would go unseen.  While a test runs, a finder at the
front of ``sys.meta_path`` asks the other finders for the spec and, for a
module of the project, gives it a loader of a subclass of the real loader's
class whose ``exec_module`` tells the guard once the module's code has run.
The subclass keeps ``isinstance`` checks on the loader true; a loader that
cannot be subclassed or copied is left alone.

Only an import (or ``importlib.reload``) is answered: a lookup that loads
nothing (``importlib.util.find_spec``, which Flask calls for every app it
makes) gets ``None`` at once, as it would from a finder that knows nothing.
Answering it would ask every finder twice for a name none of them has (the
import system asks them again after this finder's ``None``).
"""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Callable
from collections.abc import Sequence
from importlib.abc import Loader
from importlib.machinery import ModuleSpec
from typing import Any
from typing import cast

#: Told of each watched module once its code has run.
Loaded = Callable[[types.ModuleType], None]
#: Whether a module file (its spec's origin) is one to watch.
Wanted = Callable[[str], bool]
_loaded: Loaded | None = None
_subclasses: dict[type, type] = {}
_local = threading.local()


class ImportWatch:
    """The finder; it does nothing unless :attr:`wanted` says a spec's origin
    is the project's and a guard listens."""

    def __init__(self, wanted: Wanted) -> None:
        self.wanted = wanted
        self.listening = False

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: object = None
    ) -> ModuleSpec | None:
        if not self.listening or getattr(_local, "busy", False) or not _asked_by_an_import():
            return None
        _local.busy = True
        try:
            spec = _find_after(self, fullname, path, target)
        finally:
            _local.busy = False
        if spec is None or not isinstance(spec.origin, str) or not self.wanted(spec.origin):
            return spec
        loader = _watched(spec.loader)
        if loader is not None:
            spec.loader = cast(Loader, loader)
        return spec

    def invalidate_caches(self) -> None:
        """Nothing cached here (``importlib.invalidate_caches`` calls every finder)."""


#: The functions of ``importlib._bootstrap`` (and ``importlib``) that ask
#: ``_find_spec`` for a spec and then run the module it names.
_IMPORTERS = frozenset({"_find_and_load_unlocked", "reload"})


def _asked_by_an_import() -> bool:
    """Whether the finder's caller's caller is an import or a reload.

    A private detail of CPython's import system (the names of its
    functions), fenced here: ``tests/test_guard_fences.py`` fails loudly if
    an import stops being recognised (then no module imported in a test
    would be snapshotted at the end of its import)."""
    # 0: this function, 1: find_spec, 2: importlib's _find_spec, 3: its caller
    try:
        caller = sys._getframe(3)
    except ValueError:  # called from the top of a stack: not by importlib
        return False
    return caller.f_code.co_name in _IMPORTERS


def _find_after(
    watch: ImportWatch, fullname: str, path: Sequence[str] | None, target: object
) -> ModuleSpec | None:
    """The spec the other finders give, asked in ``sys.meta_path`` order."""
    for finder in list(sys.meta_path):
        if finder is watch:
            continue
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        spec = find(fullname, path, target)
        if spec is not None:
            return spec  # type: ignore[no-any-return]
    return None


#: The wrapper's code claims a file name with ``importlib`` and ``_bootstrap``
#: in it: the warnings machinery skips such frames when it applies a
#: ``stacklevel`` (CPython's private ``_is_internal_frame``, in C and in
#: ``warnings.py``), so a module that warns at import with ``stacklevel=2``
#: names the same file as without the guard (jsonschema's suite checks it).
#: ``tests/test_guard_trust.py::test_a_warning_at_import_names_the_same_file``
#: fails loudly if that stops being so.
INTERNAL_FILENAME = "<pytest_isolation: importlib._bootstrap stand-in>"
_WRAPPER = """
def exec_module(self, module):
    real(self, module)
    tell(module)
"""


def _tell(module: types.ModuleType) -> None:
    if _loaded is not None:
        _loaded(module)


def _exec_and_tell(cls: type) -> Callable[[Any, types.ModuleType], None]:
    namespace: dict[str, Any] = {"real": cls.exec_module, "tell": _tell}  # type: ignore[attr-defined]
    exec(compile(_WRAPPER, INTERNAL_FILENAME, "exec"), namespace)
    return namespace["exec_module"]  # type: ignore[no-any-return]


def _watched(loader: object) -> object | None:
    """A copy of ``loader`` whose class tells :data:`_loaded` after ``exec_module``."""
    cls = type(loader)
    state = getattr(loader, "__dict__", None)
    if not isinstance(state, dict) or not callable(getattr(cls, "exec_module", None)):
        return None
    try:
        sub = _subclasses.get(cls)
        if sub is None:
            sub = type(cls.__name__, (cls,), {"exec_module": _exec_and_tell(cls)})
            sub.__module__ = cls.__module__
            sub.__qualname__ = cls.__qualname__
            _subclasses[cls] = sub
        copy: object = object.__new__(sub)
        vars(copy).update(state)
    except TypeError:  # a class that cannot be subclassed or instantiated so
        return None
    return copy


def install(watch: ImportWatch, loaded: Loaded) -> Loaded | None:
    """Put the finder first and send loaded modules to ``loaded``; returns
    the previous receiver (an in-process inner run nests)."""
    global _loaded
    previous, _loaded = _loaded, loaded
    if watch not in sys.meta_path:
        sys.meta_path.insert(0, watch)
    return previous


def uninstall(watch: ImportWatch, previous: Loaded | None) -> None:
    global _loaded
    _loaded = previous
    if watch in sys.meta_path:
        sys.meta_path.remove(watch)
