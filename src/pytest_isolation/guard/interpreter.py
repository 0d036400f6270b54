"""The interpreter's own state: ``sys.modules``, the import system
(``sys.path``, ``sys.meta_path``, ``sys.path_hooks``) and the interpreter's
settings and hooks (``sys.argv``, the standard streams, ``sys.excepthook``,
the recursion limit, the trace and profile functions)."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any
from typing import cast

from pytest_isolation.guard.state import MISSING
from pytest_isolation.guard.state import Change
from pytest_isolation.guard.state import Flat
from pytest_isolation.guard.state import ListState
from pytest_isolation.guard.state import Slot
from pytest_isolation.guard.state import Slots
from pytest_isolation.guard.state import describe


class _Modules(dict[str, object]):
    """A copy of ``sys.modules`` and its values as a list, for a fast compare
    (building and comparing a list is about half the cost of a tuple)."""

    values_now: list[object]


class SysModules(Flat):
    """``sys.modules``: modules replaced or taken out, and non-modules injected.

    A module a test imports for the first time is never taken out again:
    what its import registered elsewhere (a metric in a registry, a logger
    class, a subclass in its base's registry) stays, and a second import
    would register it again or leave live objects of the old classes.  A
    project module's first import is routine state (listed under ``-v``);
    a library's is not mentioned.
    """

    name = "sys.modules"
    hint = "use monkeypatch.setitem(sys.modules, ...) or mock.patch.dict(sys.modules, ...)"

    def __init__(self, project: Callable[[str, types.ModuleType], bool] | None = None) -> None:
        #: Whether a module is the project's (its first import is listed).
        self.project = project

    def snapshot(self) -> object:
        saved = _Modules(sys.modules)
        saved.values_now = list(saved.values())
        return saved

    def read(self) -> dict[str, object]:
        return dict(sys.modules)

    def unchanged(self, saved: object) -> bool:
        assert isinstance(saved, _Modules)
        # A value whose ``==`` raises: Tier.changed checks again with care.
        return list(sys.modules.values()) == saved.values_now

    def diff(self, saved: object) -> list[Change]:
        """By identity (a module is only ever itself): one pass over the
        live dict and one over the snapshot, not a key union with a compare
        per key; every test file's import changes ``sys.modules``."""
        assert isinstance(saved, _Modules)
        now = dict(sys.modules)
        found: list[Change] = [
            (key, saved.get(key, MISSING), value)
            for key, value in now.items()
            if saved.get(key, MISSING) is not value
        ]
        found += [(key, value, MISSING) for key, value in saved.items() if key not in now]
        return found

    def added_since(self, saved: object) -> set[str]:
        """The names of modules imported since ``saved`` (none for no snapshot)."""
        if not isinstance(saved, _Modules) or len(sys.modules) == len(saved):
            return set()  # a removal and an import together: rare, and only narrows a rule
        return {name for name in list(sys.modules) if name not in saved}

    def label(self, key: str) -> str:
        return f"sys.modules[{key!r}]"

    def is_leak(self, key: str, old: object, new: object) -> bool:
        if key == "Path" and type(new).__module__.startswith("pyfakefs."):
            return False  # pyfakefs leaves it there by design, even after its fs fixture
        if new is MISSING:
            # A module taken out: the next import runs its code again, beside
            # the objects of the first one that live on elsewhere.
            return isinstance(old, types.ModuleType)
        if old is MISSING and isinstance(new, types.ModuleType):
            return self.project is not None and self.project(key, new)
        return True

    def restore(self, key: str, old: object) -> None:
        if old is MISSING:
            sys.modules.pop(key, None)
        else:
            sys.modules[key] = cast(types.ModuleType, old)


def _sys_list(name: str) -> Slot:
    """A list attribute of ``sys``: compared by content and by identity."""

    def get() -> object:
        value = getattr(sys, name)
        return ListState((id(value), tuple(value)))

    def put(old: object) -> None:
        assert isinstance(old, ListState)
        current = getattr(sys, name)
        if id(current) == old[0]:
            current[:] = old.items
        else:
            setattr(sys, name, list(old.items))

    return get, put


def _sys_attribute(name: str) -> Slot:
    return (lambda: getattr(sys, name)), (lambda old: setattr(sys, name, old))


class StreamState(tuple[object, bool]):
    """A standard stream and whether it was closed: a test that closes the
    stream it finds there (``sys.stdout.close()`` in a ``tearDown``, which
    closes pytest's capture file) leaves it bound but unusable."""

    @property
    def stream(self) -> object:
        return self[0]

    @property
    def closed(self) -> bool:
        """Whether the stream is closed now (a closed old value is never put back)."""
        return _closed(self[0])


def _closed(stream: object) -> bool:
    try:
        return getattr(stream, "closed", False) is True
    except Exception:  # a stand-in whose attribute raises
        return False


def _stream(name: str) -> object:
    stream = getattr(sys, name)
    return StreamState((stream, _closed(stream)))


def _stream_slot(name: str) -> Slot:
    def put(old: object) -> None:
        assert isinstance(old, StreamState)
        setattr(sys, name, old.stream)

    return (lambda: _stream(name)), put


def _show_stream(value: object) -> str:
    if not isinstance(value, StreamState):
        return describe(value)
    return describe(value.stream) + (" (closed)" if value[1] else "")


def _set_recursion_limit(old: object) -> None:
    sys.setrecursionlimit(cast(int, old))


def _set_trace(old: object) -> None:
    sys.settrace(cast(Any, old))


def _set_profile(old: object) -> None:
    sys.setprofile(cast(Any, old))


def _import_system() -> list[object]:
    path, meta_path, path_hooks = sys.path, sys.meta_path, sys.path_hooks
    return [
        ListState((id(path), tuple(path))),
        ListState((id(meta_path), tuple(meta_path))),
        ListState((id(path_hooks), tuple(path_hooks))),
    ]


def _interpreter() -> list[object]:
    argv = sys.argv
    return [
        ListState((id(argv), tuple(argv))),
        _stream("stdout"),
        _stream("stderr"),
        _stream("stdin"),
        sys.excepthook,
        sys.getrecursionlimit(),
        sys.gettrace(),
        sys.getprofile(),
    ]


STREAMS = ("stdout", "stderr", "stdin")

IMPORT_SYSTEM = Slots(
    "import",
    "use monkeypatch.syspath_prepend or monkeypatch.setattr(sys, ...)",
    {f"sys.{name}": _sys_list(name) for name in ("path", "meta_path", "path_hooks")},
    reader=_import_system,
)

INTERPRETER = Slots(
    "interpreter",
    "restore it in a fixture, or use monkeypatch.setattr",
    {
        "sys.argv": _sys_list("argv"),
        **{f"sys.{name}": _stream_slot(name) for name in STREAMS},
        "sys.excepthook": _sys_attribute("excepthook"),
        "sys.getrecursionlimit()": (sys.getrecursionlimit, _set_recursion_limit),
        "sys.gettrace()": (sys.gettrace, _set_trace),
        "sys.getprofile()": (sys.getprofile, _set_profile),
    },
    formats={f"sys.{name}": _show_stream for name in STREAMS},
    reader=_interpreter,
)


#: Attributes of ``sys`` watched by the categories above (not again as attributes).
SYS_COVERED = frozenset(
    {"path", "meta_path", "path_hooks", "argv", "stdout", "stderr", "stdin", "excepthook"}
)
