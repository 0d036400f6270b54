"""What a fork server preloads, imported in the server (planned in the
parent: :mod:`..parent.plan`).

:func:`load` imports the modules one by one and stops at the first whose
import fails, warns, starts a thread, ties itself to its process
(:mod:`.purity`) or changes state outside its own package (a module that
existed before, the environment, the working directory, signal handlers,
warning filters, logging...).  The parent then starts a new server without
that module: a server in which a refused import ran is never used.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import io
import logging
import os
import signal
import socket
import sys
import tempfile
import threading
import types
import warnings
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Sequence
from typing import IO
from typing import Any

from pytest_isolation.filemode.server import purity

#: Modules whose public state any import changes: ``sys`` (its import-system
#: state is compared on its own), ``__main__``, ``linecache``, where
#: generated code (attrs, dataclasses) registers its source, and coverage.py,
#: which measures the imports.
_VOLATILE = {"sys", "__main__", "linecache"}
_VOLATILE_PACKAGES = ("coverage.",)


@dataclasses.dataclass
class Loaded:
    """What the server imported, or the module that stopped it and why."""

    modules: list[str]
    refused: str = ""
    why: str = ""
    #: Modules imported in all, those they import included.
    total: int = 0
    #: The files of the modules imported, a refused one's included: what a
    #: remembered verdict depends on (:mod:`..parent.verdicts`).
    files: list[str] = dataclasses.field(default_factory=list)

    def reason(self, unnamed: str = "") -> str:
        """Why the server refused: the refused module (else ``unnamed``) and why."""
        who = self.refused or unnamed
        return f"{who}: {self.why}" if who else self.why


def load(modules: Sequence[str], careful: bool = False, watched: bool = True) -> Loaded:
    """Import ``modules`` in order; stop at the first refused one.

    ``watched``: an import that ties itself to its process is refused
    (:mod:`.purity`); the zygote's plugins are not watched, as a forked
    child's plugins are the parent's.

    The modules that existed before are compared once, at the end; when
    that finds a change, ``careful`` (the next server) compares after each
    import, to name the module that made it.  Output written while importing
    refuses the module: a plain run shows it under ``-s``, as the file's
    child imports it.
    """
    done: list[str] = []
    count = len(sys.modules)
    existed = set(sys.modules)
    every = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    loggers = [logger for logger in every if isinstance(logger, logging.Logger)]
    before = _fingerprint(loggers)
    states = _module_states(sys.modules.items())
    watch = purity.Watch() if watched else None
    with _quiet() as output:
        for name in modules:
            known = set(sys.modules)
            why = _import_one(name, watch) or _compare(before, _fingerprint(loggers))
            if not why and output.grew():  # shown under -s, in the order the files run
                why = "its import writes to stdout or stderr"
            if not why and careful:
                why = _changed_modules(states)
            if why:
                return Loaded(done, name, why, files=_files_of(existed, name))
            done.append(name)
            states.update(_module_states((n, sys.modules[n]) for n in set(sys.modules) - known))
    why = _changed_modules(states)
    if why:
        return Loaded([], "", why)
    return Loaded(done, total=len(sys.modules) - count, files=_files_of(existed))


def _files_of(existed: set[str], refused: str = "") -> list[str]:
    """The files of the modules imported since ``existed``, and the file of
    ``refused`` (an import that raised left no module behind)."""
    paths = [
        getattr(sys.modules.get(name), "__file__", None) for name in set(sys.modules) - existed
    ]
    if refused:
        with contextlib.suppress(Exception):  # a module that cannot be found has no file
            spec = importlib.util.find_spec(refused)
            paths.append(None if spec is None else spec.origin)
    return sorted({os.path.abspath(p) for p in paths if isinstance(p, str) and os.path.isfile(p)})


def _import_one(name: str, watch: purity.Watch | None) -> str:
    threads = _thread_count()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with watch.watching() if watch else contextlib.nullcontext():
                importlib.import_module(name)
        except BaseException as error:  # any failure refuses the module
            return f"its import raised {type(error).__name__}"
    if caught:
        first = caught[0]
        return f"its import warns ({first.category.__name__}: {str(first.message)[:80]})"
    if _thread_count() != threads:
        return "its import starts a thread"
    if watch and watch.found:
        return f"its import {watch.found}"
    return ""


def _thread_count() -> int:
    """Threads of this process, native ones included (Linux)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


class _Output:
    """What the imports wrote: to fds 1 and 2 (a file) or to ``sys.stdout``/``stderr``."""

    def __init__(self, file: IO[bytes], stream: io.StringIO) -> None:
        self.file = file
        self.stream = stream
        self.seen = 0

    def grew(self) -> bool:
        """Whether something was written since the last call."""
        sys.stdout.flush()
        size = os.fstat(self.file.fileno()).st_size + len(self.stream.getvalue())
        grew, self.seen = size > self.seen, size
        return grew


def _scratch() -> IO[bytes]:
    """A file for what the imports write, made without touching the
    ``tempfile`` module's state (its ``tempdir``), which a preloaded import's
    check compares: an anonymous memory file on Linux."""
    if hasattr(os, "memfd_create"):
        return os.fdopen(os.memfd_create("isolation-preload-output"), "w+b")
    return tempfile.TemporaryFile(dir=os.environ.get("TMPDIR") or "/tmp")


@contextlib.contextmanager
def _quiet() -> Iterator[_Output]:
    """Keep what is written to fds 1 and 2 and to ``sys.stdout``/``stderr``
    from the terminal."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    streams = sys.stdout, sys.stderr
    with _scratch() as written:
        try:
            os.dup2(written.fileno(), 1)
            os.dup2(written.fileno(), 2)
            stream = io.StringIO()
            sys.stdout = sys.stderr = stream
            yield _Output(written, stream)
        finally:
            sys.stdout, sys.stderr = streams
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


def _fingerprint(loggers: Sequence[logging.Logger]) -> dict[str, object]:
    """Process-wide state outside any one module that an import may change
    (of the ``loggers`` that existed before: a new package's own logger, and
    the handler it gives it, are its own)."""
    handlers = {}
    for number in signal.valid_signals():
        with contextlib.suppress(OSError, ValueError):
            handlers[int(number)] = signal.getsignal(number)
    return {
        "the environment": dict(os.environ),
        "the working directory": os.getcwd(),
        "sys.path": list(sys.path),
        "sys.meta_path": list(sys.meta_path),
        "sys.path_hooks": list(sys.path_hooks),
        "the warning filters": list(warnings.filters),
        "signal handlers": handlers,
        "logging handlers": [(list(logger.handlers), logger.level) for logger in loggers],
        "sys.stdin, stdout or stderr": (sys.stdin, sys.__stdout__, sys.__stderr__),
        "a sys hook": (sys.excepthook, sys.displayhook, sys.gettrace(), sys.getprofile()),
        "the recursion limit": sys.getrecursionlimit(),
        "threading's hooks": (threading.excepthook, threading.gettrace(), threading.getprofile()),
        "the socket timeout": socket.getdefaulttimeout(),
    }


def _compare(before: dict[str, object], after: dict[str, object]) -> str:
    for what, value in before.items():
        if after[what] != value:
            return f"its import changes {what}"
    return ""


#: A module's public names, each with its value and the length of a dict,
#: list or set (a registry filled in); values are compared by identity.
State = tuple[dict[str, Any], list[tuple[str, Any, int]]]


def _module_states(modules: Iterable[tuple[str, Any]]) -> dict[str, State]:
    states = {}
    for name, module in modules:
        if not isinstance(module, types.ModuleType) or name in _VOLATILE:
            continue
        if name.startswith(_VOLATILE_PACKAGES) or name + "." in _VOLATILE_PACKAGES:
            continue
        namespace = module.__dict__
        states[name] = (namespace, _public(namespace))
    return states


def _public(namespace: dict[str, Any]) -> list[tuple[str, Any, int]]:
    """A cache (a container named so) may grow: only its identity counts."""
    return [
        (key, value, _length(key, value))
        for key, value in list(namespace.items())
        if not key.startswith("_") and not isinstance(value, types.ModuleType)
    ]


def _length(key: str, value: object) -> int:
    if type(value) not in (dict, list, set) or "cache" in key.lower():
        return -1
    return len(value)  # type: ignore[arg-type]


def _changed_modules(states: dict[str, State]) -> str:
    """The first module (of ``states``) whose public names changed since."""
    missing = object()
    for name, (namespace, names) in states.items():
        for key, value, length in names:
            now = namespace.get(key, missing)
            if now is not value or (length >= 0 and len(now) != length):
                return f"preloading changes {name}.{key}"
        if len(_public(namespace)) != len(names):
            return f"preloading adds names to {name}"
    return ""
