"""The kinds of process-wide state the leak guard watches.

Each category takes a snapshot as a flat mapping (key -> value), names a key
for messages, says whether a change is a leak, and puts a key back.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import types
from collections.abc import Callable
from typing import Any
from typing import Protocol
from typing import cast
from unittest import mock


class _Missing:
    def __repr__(self) -> str:
        return "<unset>"


#: The value of a key that did not exist in a snapshot.
MISSING = _Missing()

Snapshot = dict[str, object]


class Category(Protocol):
    name: str
    hint: str

    def snapshot(self) -> Snapshot: ...

    def label(self, key: str) -> str: ...

    def is_leak(self, key: str, old: object, new: object) -> bool: ...

    def restore(self, key: str, old: object) -> None: ...


def _text(value: object) -> str:
    return os.fsdecode(value) if isinstance(value, bytes) else str(value)


def _environ_data() -> Snapshot:
    """A copy of the environment as stored (bytes on POSIX).

    Private stdlib detail, for speed: copying ``os.environ._data`` costs about
    a microsecond, ``dict(os.environ)`` about thirty, and the guard copies it
    twice per test.  Falls back to the public mapping if the attribute goes;
    ``tests/test_guard_watch.py`` checks both give the same keys.
    """
    data = getattr(os.environ, "_data", None)
    return dict(data) if isinstance(data, dict) else dict(os.environ)


class Environ:
    """``os.environ``, key by key."""

    name = "env"
    hint = "use monkeypatch.setenv/delenv"
    #: Set and removed by pytest around every test.
    ignored = frozenset({"PYTEST_CURRENT_TEST"})

    def snapshot(self) -> Snapshot:
        return _environ_data()

    def label(self, key: str) -> str:
        return f"os.environ[{_text(key)!r}]"

    def show(self, value: object) -> str:
        return repr(_text(value))

    def is_leak(self, key: str, old: object, new: object) -> bool:
        return _text(key) not in self.ignored

    def restore(self, key: str, old: object) -> None:
        if old is MISSING:
            os.environ.pop(_text(key), None)
        else:
            os.environ[_text(key)] = _text(old)


class WorkingDirectory:
    """The current working directory."""

    name = "cwd"
    hint = "use monkeypatch.chdir"

    def snapshot(self) -> Snapshot:
        try:
            return {"cwd": os.getcwd()}
        except FileNotFoundError:  # the directory was removed under us
            return {"cwd": MISSING}

    def label(self, key: str) -> str:
        return "the working directory"

    def is_leak(self, key: str, old: object, new: object) -> bool:
        return True

    def restore(self, key: str, old: object) -> None:
        if isinstance(old, str):
            os.chdir(old)


class SysModules:
    """``sys.modules``: replaced modules and injected non-modules.

    A real module imported during a test is not a leak, nor is one removed.
    """

    name = "sys.modules"
    hint = "use monkeypatch.setitem(sys.modules, ...) or mock.patch.dict(sys.modules, ...)"

    def snapshot(self) -> Snapshot:
        return dict(sys.modules)

    def label(self, key: str) -> str:
        return f"sys.modules[{key!r}]"

    def is_leak(self, key: str, old: object, new: object) -> bool:
        if new is MISSING:
            return False
        return old is not MISSING or not isinstance(new, types.ModuleType)

    def restore(self, key: str, old: object) -> None:
        if old is MISSING:
            sys.modules.pop(key, None)
        else:
            sys.modules[key] = old  # type: ignore[assignment]


def _active_patches() -> list[object]:
    """The patches started with ``start()`` and not stopped yet.

    Private stdlib API, unavoidable: ``unittest.mock`` keeps them only in
    ``_patch._active_patches``; ``tests/test_guard.py`` fails loudly if that
    changes.
    """
    return list(mock._patch._active_patches)  # type: ignore[attr-defined]


class MockPatches:
    """``unittest.mock`` patches started and never stopped."""

    name = "mock"
    hint = "stop the patch (patcher.stop()), or use the patch as a decorator/context manager"

    def snapshot(self) -> Snapshot:
        return {str(id(patch)): patch for patch in _active_patches()}

    def label(self, key: str) -> str:
        return "an unstopped mock patch"

    def is_leak(self, key: str, old: object, new: object) -> bool:
        return old is MISSING

    def restore(self, key: str, old: object) -> None:
        """Nothing to put back per key; see :func:`stop_patches`."""

    @staticmethod
    def describe(patch: object) -> str:
        target = getattr(patch, "getter", None)
        attribute = getattr(patch, "attribute", None)
        owner = target() if callable(target) else getattr(patch, "in_dict", None)
        name = getattr(owner, "__name__", type(owner).__name__)
        return f"{name}.{attribute}" if attribute else f"{name} (patch.dict)"


def stop_patches(patches: list[object]) -> None:
    """Stop exactly these patches, last started first (never ``patch.stopall()``)."""
    order = {id(patch): index for index, patch in enumerate(_active_patches())}
    for patch in sorted(patches, key=lambda p: order.get(id(p), -1), reverse=True):
        patch.stop()  # type: ignore[attr-defined]


class Slots:
    """Single values read and written through a getter and a setter."""

    def __init__(
        self,
        name: str,
        hint: str,
        slots: dict[str, tuple[Callable[[], object], Callable[[object], object]]],
    ) -> None:
        self.name = name
        self.hint = hint
        self.slots = slots

    def snapshot(self) -> Snapshot:
        return {key: get() for key, (get, _) in self.slots.items()}

    def label(self, key: str) -> str:
        return key

    def is_leak(self, key: str, old: object, new: object) -> bool:
        return True

    def restore(self, key: str, old: object) -> None:
        self.slots[key][1](old)

    def show(self, value: object) -> str:
        if isinstance(value, _ListState):
            return repr(list(value.items))
        return repr(value)


class _ListState(tuple[int, tuple[object, ...]]):
    """A list's identity and items: rebinding ``sys.path`` is a change too."""

    @property
    def items(self) -> tuple[object, ...]:
        return self[1]


def _sys_list(name: str) -> tuple[Callable[[], object], Callable[[object], object]]:
    """A list attribute of ``sys``: compared by content and by identity."""

    def get() -> object:
        value = getattr(sys, name)
        return _ListState((id(value), tuple(value)))

    def put(old: object) -> None:
        assert isinstance(old, _ListState)
        current = getattr(sys, name)
        if id(current) == old[0]:
            current[:] = old.items
        else:
            setattr(sys, name, list(old.items))

    return get, put


def _sys_attribute(name: str) -> tuple[Callable[[], object], Callable[[object], object]]:
    return (lambda: getattr(sys, name)), (lambda old: setattr(sys, name, old))


def _umask() -> object:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _loggers_disabled() -> object:
    manager = logging.Logger.manager
    return frozenset(
        name
        for name, logger in list(manager.loggerDict.items())
        if isinstance(logger, logging.Logger) and logger.disabled
    )


def _enable_loggers(old: object) -> None:
    assert isinstance(old, frozenset)
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger):
            logger.disabled = name in old


def _signal_slot(number: int) -> tuple[Callable[[], object], Callable[[object], object]]:
    def put(old: object) -> None:
        if old is not None:  # None: a handler not installed from Python
            signal.signal(number, cast(Any, old))

    return (lambda: signal.getsignal(number)), put


_SIGNALS = tuple(
    number
    for number in (
        signal.SIGINT,
        signal.SIGTERM,
        getattr(signal, "SIGALRM", None),
        getattr(signal, "SIGHUP", None),
        getattr(signal, "SIGUSR1", None),
        getattr(signal, "SIGUSR2", None),
        getattr(signal, "SIGCHLD", None),
    )
    if number is not None
)


def _set_recursion_limit(old: object) -> None:
    sys.setrecursionlimit(cast(int, old))


def _set_trace(old: object) -> None:
    sys.settrace(cast(Any, old))


def _set_profile(old: object) -> None:
    sys.setprofile(cast(Any, old))


def _root_handlers() -> object:
    return tuple(logging.root.handlers)


def _set_root_handlers(old: object) -> None:
    logging.root.handlers = list(cast(tuple[logging.Handler, ...], old))


def _root_level() -> object:
    return logging.root.level


def _set_root_level(old: object) -> None:
    logging.root.setLevel(cast(int, old))


def _disable_level() -> object:
    return logging.root.manager.disable


def _set_disable_level(old: object) -> None:
    logging.disable(cast(int, old))


def _set_socket_timeout(old: object) -> None:
    socket.setdefaulttimeout(cast("float | None", old))


def _set_umask(old: object) -> None:
    os.umask(cast(int, old))


IMPORT_SYSTEM = Slots(
    "import system",
    "use monkeypatch.syspath_prepend or monkeypatch.setattr(sys, ...)",
    {f"sys.{name}": _sys_list(name) for name in ("path", "meta_path", "path_hooks", "argv")},
)

INTERPRETER = Slots(
    "interpreter",
    "restore it in a fixture, or use monkeypatch.setattr",
    {
        **{
            f"sys.{name}": _sys_attribute(name)
            for name in ("stdout", "stderr", "stdin", "excepthook")
        },
        "sys.getrecursionlimit()": (sys.getrecursionlimit, _set_recursion_limit),
        "sys.gettrace()": (sys.gettrace, _set_trace),
        "sys.getprofile()": (sys.getprofile, _set_profile),
    },
)

LOGGING = Slots(
    "logging",
    "use caplog, or undo the logging configuration in a fixture",
    {
        "the root logger's handlers": (_root_handlers, _set_root_handlers),
        "the root logger's level": (_root_level, _set_root_level),
        "logging.disable()": (_disable_level, _set_disable_level),
        "disabled loggers": (_loggers_disabled, _enable_loggers),
    },
)

PROCESS = Slots(
    "process",
    "restore it in a fixture",
    {
        **{
            f"the handler of {signal.Signals(number).name}": _signal_slot(number)
            for number in _SIGNALS
        },
        "socket.getdefaulttimeout()": (socket.getdefaulttimeout, _set_socket_timeout),
        "the umask": (_umask, _set_umask),
    },
)

CATEGORIES: tuple[Category, ...] = (
    Environ(),
    WorkingDirectory(),
    SysModules(),
    MockPatches(),
    IMPORT_SYSTEM,
    INTERPRETER,
    LOGGING,
    PROCESS,
)
