"""Process-wide state outside module attributes: the environment, the working
directory, ``sys.modules``, the import system, interpreter hooks, logging,
signals, the socket timeout and the umask."""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import types
from collections.abc import Callable
from functools import partial
from typing import Any
from typing import NamedTuple
from typing import cast

from pytest_isolation.core import pytest_private
from pytest_isolation.guard.state import MISSING
from pytest_isolation.guard.state import Change
from pytest_isolation.guard.state import Flat
from pytest_isolation.guard.state import ListState
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


def _show_level(value: object) -> str:
    return logging.getLevelName(value) if isinstance(value, int) else describe(value)


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


def _set_recursion_limit(old: object) -> None:
    sys.setrecursionlimit(cast(int, old))


def _set_trace(old: object) -> None:
    sys.settrace(cast(Any, old))


def _set_profile(old: object) -> None:
    sys.setprofile(cast(Any, old))


#: The logging plugin's handlers (``caplog``'s and the reports' capture, live
#: logging, ``--log-file``) belong to the run: it adds and removes the same
#: handler objects around every phase.  A fixture that saves the root's
#: handlers during a phase and puts them back after it (Flask's suite) leaves
#: them there until the next phase takes them off, which the guard must
#: neither blame on the next test nor undo.
_RUN_OWNED = pytest_private.LOGGING_MODULE


def _run_owned(handler: logging.Handler) -> bool:
    return type(handler).__module__ == _RUN_OWNED


def _root_handlers() -> object:
    return tuple(handler for handler in logging.root.handlers if not _run_owned(handler))


def _set_root_handlers(old: object) -> None:
    owned = [handler for handler in logging.root.handlers if _run_owned(handler)]
    logging.root.handlers = [*owned, *cast(tuple[logging.Handler, ...], old)]


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
    REAL.umask(cast(int, old))


_LOGGER_DEFAULTS = (logging.NOTSET, False, True)


def module_logger(name: str) -> bool:
    """A logger named after an imported package (``werkzeug``, ``urllib3``):
    what a library sets up when it creates its logger, at import or lazily
    at first use, is not the test's doing."""
    return name.partition(".")[0] in sys.modules


#: Whether a logger, created inside a window, is a library's own (see
#: :func:`module_logger`); the guard narrows it to installed libraries.
LibraryLogger = Callable[[str], bool]


class Loggers(Flat):
    """Named loggers: level, ``disabled`` and ``propagate``.

    ``logging.config.dictConfig`` disables every existing logger unless told
    otherwise, which silently breaks ``caplog`` in later tests.
    """

    name = "logging"
    hint = "use caplog.set_level, or pass disable_existing_loggers=False to dictConfig"

    def __init__(self, library: LibraryLogger = module_logger) -> None:
        self.library = library

    def read(self) -> dict[str, object]:
        return {
            name: (logger.level, logger.disabled, logger.propagate)
            for name, logger in list(logging.Logger.manager.loggerDict.items())
            if isinstance(logger, logging.Logger)
        }

    def label(self, key: str) -> str:
        return f"logger {key!r} (level, disabled, propagate)"

    def show(self, value: object) -> str:
        if not isinstance(value, tuple):
            value = _LOGGER_DEFAULTS
        level, disabled, propagate = value
        return (
            f"{logging.getLevelName(level)}, {'disabled' if disabled else 'enabled'}, "
            f"propagate={propagate}"
        )

    def is_leak(self, key: str, old: object, new: object) -> bool:
        if new is MISSING:
            return False
        if old is MISSING and self.library(key):
            return False
        # A logger created during the test lives on: only its defaults are clean.
        return new != (old if old is not MISSING else _LOGGER_DEFAULTS)

    def restore(self, key: str, old: object) -> None:
        level, disabled, propagate = old if isinstance(old, tuple) else _LOGGER_DEFAULTS
        logger = logging.getLogger(key)
        logger.setLevel(level)
        logger.disabled, logger.propagate = disabled, propagate


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

ROOT_LOGGER = Slots(
    "logging",
    "use caplog, or undo the logging configuration in a fixture",
    {
        "the root logger's handlers": (_root_handlers, _set_root_handlers),
        "the root logger's level": (_root_level, _set_root_level),
        "logging.disable()": (_disable_level, _set_disable_level),
    },
    formats={"the root logger's level": _show_level, "logging.disable()": _show_level},
)


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

#: Attributes of ``sys`` watched by the categories above (not again as attributes).
SYS_COVERED = frozenset(
    {"path", "meta_path", "path_hooks", "argv", "stdout", "stderr", "stdin", "excepthook"}
)
