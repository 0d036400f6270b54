"""Process-wide state outside module attributes and the interpreter: the
environment, the working directory, signal handlers, the socket timeout,
the umask and asyncio's event loop policy.  The interpreter's own state
(``sys.modules``, the import system, ``sys`` settings) is
:mod:`.interpreter`'s; logging's is :mod:`.loggers`'."""

from __future__ import annotations

import os
import signal
import socket
import sys
from collections.abc import Callable
from functools import partial
from typing import Any
from typing import NamedTuple
from typing import cast

from pytest_isolation.guard.state import MISSING
from pytest_isolation.guard.state import Change
from pytest_isolation.guard.state import Flat
from pytest_isolation.guard.state import Slot
from pytest_isolation.guard.state import Slots
from pytest_isolation.guard.state import describe

# The real functions, read once: a test may replace the module attributes.
# Kept in a dict, not as module globals, which pyfakefs would patch too.
_ENVIRON = os.environ


class _Real(NamedTuple):
    getcwd: Callable[[], str]
    chdir: Callable[[str], None]
    umask: Callable[[int], int]


REAL = _Real(os.getcwd, os.chdir, os.umask)


def text(value: object) -> str:
    return os.fsdecode(value) if isinstance(value, bytes) else str(value)


def environ_data() -> dict[Any, Any]:
    """A copy of the environment as stored (bytes on POSIX).

    Private stdlib detail, for speed: copying ``os.environ._data`` costs about
    a microsecond, ``dict(os.environ)`` about thirty.  Falls back to the
    public mapping if the attribute goes; ``tests/test_guard_fences.py``
    checks both give the same keys.
    """
    data = getattr(_ENVIRON, "_data", None)
    return dict(data) if isinstance(data, dict) else dict(_ENVIRON)


class Environ(Flat):
    """``os.environ``, key by key."""

    name = "env"
    hint = "use monkeypatch.setenv/delenv"
    #: Set and removed by pytest around every test.
    ignored = frozenset({"PYTEST_CURRENT_TEST"})

    def read(self) -> dict[str, object]:
        return environ_data()

    def unchanged(self, saved: object) -> bool:
        data = getattr(_ENVIRON, "_data", None)  # compared in place, not copied
        return bool((data if isinstance(data, dict) else dict(_ENVIRON)) == saved)

    def diff(self, saved: object) -> list[Change]:
        return [(text(key), old, new) for key, old, new in super().diff(saved)]

    def label(self, key: str) -> str:
        return f"os.environ[{key!r}]"

    def show(self, value: object) -> str:
        return "unset" if value is MISSING else repr(text(value))

    def is_leak(self, key: str, old: object, new: object) -> bool:
        return key not in self.ignored

    def restore(self, key: str, old: object) -> None:
        if old is MISSING:
            _ENVIRON.pop(key, None)
        else:
            _ENVIRON[key] = text(old)


class WorkingDirectory(Flat):
    """The current working directory."""

    name = "cwd"
    hint = "use monkeypatch.chdir, or tmp_path with monkeypatch.chdir"

    def read(self) -> dict[str, object]:
        try:
            return {"cwd": REAL.getcwd()}
        except FileNotFoundError:  # the directory was removed under us
            return {"cwd": MISSING}

    def unchanged(self, saved: object) -> bool:
        assert isinstance(saved, dict)
        try:
            return bool(REAL.getcwd() == saved["cwd"])
        except FileNotFoundError:
            return saved["cwd"] is MISSING

    def label(self, key: str) -> str:
        return "the working directory"

    def restore(self, key: str, old: object) -> None:
        if isinstance(old, str):
            REAL.chdir(old)


def _umask() -> object:
    mask = REAL.umask(0o022)
    REAL.umask(mask)
    return mask


def _raw_getsignal() -> Any:
    """The fastest way to read a signal's handler.

    The C module ``_signal`` (what ``signal`` wraps) when present:
    ``signal.getsignal`` converts to an enum and costs ~5 us per call, the
    raw call ~0.1 us.  Both return the same handler objects for Python
    handlers; ``tests/test_guard_fences.py`` checks they agree.
    """
    raw = sys.modules.get("_signal")
    return getattr(raw, "getsignal", signal.getsignal)


_getsignal = _raw_getsignal()


#: The handlers ``_signal`` returns as plain ints, as the enum members (which
#: are singletons, so a snapshot compares them by identity).
_HANDLERS = {int(handler): handler for handler in (signal.SIG_DFL, signal.SIG_IGN)}


#: Plugins that arm a signal around every test and disarm it (to ``SIG_DFL``)
#: when it ends or fails: their handler counts as the default.
_TIMER_PLUGINS = frozenset({"pytest_timeout"})


def _read_signal(number: int) -> object:
    handler = _getsignal(number)
    if type(handler) is int:
        return _HANDLERS.get(handler, handler)
    if getattr(handler, "__module__", None) in _TIMER_PLUGINS:
        return signal.SIG_DFL
    return handler


def _show_handler(value: object) -> str:
    return value.name if isinstance(value, signal.Handlers) else describe(value)


def _signal_slot(number: int) -> Slot:
    def put(old: object) -> None:
        if old is not None:  # None: a handler not installed from Python
            signal.signal(number, cast(Any, old))

    return partial(_read_signal, number), put


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


def _set_socket_timeout(old: object) -> None:
    socket.setdefaulttimeout(cast("float | None", old))


def _set_umask(old: object) -> None:
    REAL.umask(cast(int, old))


#: The event loop policy asyncio makes on first use: a test that merely
#: reads the policy creates it, which is no change.
DEFAULT_POLICY = "asyncio's default"


def _loop_policy() -> object:
    """asyncio's event loop policy, read without creating one; any instance of
    asyncio's default policy counts as the default.  A private attribute of
    ``asyncio.events`` (``get_event_loop_policy()`` would create the policy);
    ``tests/test_guard_fences.py`` fails loudly if it goes."""
    policy = getattr(sys.modules.get("asyncio.events"), "_event_loop_policy", None)
    default = getattr(sys.modules.get("asyncio"), "DefaultEventLoopPolicy", None)
    if policy is None or (default is not None and type(policy) is default):
        return DEFAULT_POLICY
    return policy


def _set_loop_policy(old: object) -> None:
    asyncio = sys.modules.get("asyncio")
    if asyncio is not None:
        asyncio.set_event_loop_policy(None if old == DEFAULT_POLICY else old)


def _process() -> list[object]:
    return [
        *map(_read_signal, _SIGNALS),
        socket.getdefaulttimeout(),
        _umask(),
        _loop_policy(),
    ]


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
        "the asyncio event loop policy": (_loop_policy, _set_loop_policy),
    },
    formats={
        **{f"the handler of {signal.Signals(number).name}": _show_handler for number in _SIGNALS},
        "the umask": lambda value: oct(value) if isinstance(value, int) else describe(value),
        "the asyncio event loop policy": lambda value: (
            str(value) if value == DEFAULT_POLICY else describe(value)
        ),
    },
    reader=_process,
)
