"""Whether importing a module ahead, in a fork server, is the same as
importing it in the file's own child.

A module imported in the fork server is imported once, and every file's
child gets a copy of the result; a fresh ``pytest FILE`` imports it in its
own process.  The two agree unless the import depends on the process it
runs in, or leaves something there that belongs to that process.  While the
server preloads, :class:`Watch` records, for each import, the first thing it
does that would differ:

* values that differ from process to process: the pid (``os.getpid``), the
  clock (``time.time``, ``datetime.now``...), random bytes and seeds (the
  ``random`` module's shared generator, a ``random.Random()`` seeded from
  the system, ``os.urandom``, ``uuid``), ``/proc/self``;
* resources of the process that the copies would share: a temporary file or
  directory, a file opened for writing, a socket, a process started, a
  signal sent, a file descriptor left open, a reference to ``sys.stdout``
  or ``sys.stderr`` kept (the server's stand-in, where a child's import
  would keep the child's capture stream);
* hooks that run later in the process: ``atexit.register`` and
  ``os.register_at_fork`` (a fork handler would run in the server at each
  fork);
* a file read outside the installed packages and ``sys.path`` (a test of
  an earlier file may change it; a file's own child would read it then).

Reads that are the same in the server as in a file's child are not
recorded: the environment and the working directory (a file's child has the
server's, and a file that starts from the server imports its preloaded
modules before anything of its own runs), ``sys.argv``, the platform.  What
a C extension reads in C is not seen (docs/explanation/limitations.md).

Python calls are seen through ``sys.setprofile`` (removed after the
imports: nothing of it is left in the children); calls that open files,
make sockets or start processes through the audit events Python raises for
them (an audit hook cannot be removed; it does nothing once the imports
are done).

Imports: stdlib only (runs in the fork server).
"""

from __future__ import annotations

import contextlib
import datetime
import gc
import os
import random
import sys
import tempfile
import time
import types
import uuid
from collections.abc import Iterator
from typing import Any

_CLOCKS = (
    "time",
    "time_ns",
    "monotonic",
    "monotonic_ns",
    "perf_counter",
    "perf_counter_ns",
    "process_time",
    "process_time_ns",
    "thread_time",
    "thread_time_ns",
    "clock_gettime",
    "clock_gettime_ns",
)
#: Classes whose ``now``/``today`` read the clock.
_CLOCK_CLASSES = (datetime.datetime, datetime.date)
_CLOCK_METHODS = frozenset({"now", "utcnow", "today"})
#: Python functions whose call makes an import depend on its process.
_FUNCTIONS: dict[types.CodeType, str] = {
    uuid.uuid1.__code__: "reads the clock and the host (uuid.uuid1)",
    uuid.uuid4.__code__: "draws random bytes (uuid.uuid4)",
}
#: Audit events of resources that a copy of the process would share.
_EVENTS = {
    "tempfile.mkstemp": "makes a temporary file",
    "tempfile.mkdtemp": "makes a temporary directory",
    "socket.__new__": "makes a socket",
    "socket.connect": "connects a socket",
    "socket.bind": "binds a socket",
    "subprocess.Popen": "starts a process",
    "os.system": "starts a process",
    "os.posix_spawn": "starts a process",
    "os.spawn": "starts a process",
    "os.fork": "forks",
    "os.forkpty": "forks",
    "os.exec": "runs another program",
    "os.kill": "sends a signal",
    "os.killpg": "sends a signal",
    "signal.pthread_kill": "sends a signal",
    "os.putenv": "changes the environment",
    "os.unsetenv": "changes the environment",
    "os.mkdir": "makes a directory",
    "os.remove": "removes a file",
    "os.rename": "renames a file",
    "shutil.rmtree": "removes a directory",
}
_WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


class Watch:
    """Records the first thing an import does that ties it to its process."""

    def __init__(self) -> None:
        self.found = ""
        self.active = False
        self.hooked = False
        self._calls = _process_calls()
        self._roots = _read_roots()
        self._random_init = random.Random.__init__.__code__

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.active or self.found:
            return
        if event in ("open", "os.remove"):
            within = _tempfile_frame()
            if within == "_get_default_tempdir":
                return  # it tries a file in each candidate directory, once a process
            if within:
                if event == "open" and _writes(*args[1:3]):
                    self.found = "makes a temporary file"  # TemporaryFile, O_TMPFILE
                return
        if event == "open":
            self._opened(*args[:3])
        elif event in _EVENTS and not _is_bytecode(args):
            self.found = _EVENTS[event]

    def _opened(self, path: object, mode: object, flags: object) -> None:
        if not isinstance(path, (str, bytes, os.PathLike)):
            return  # a file descriptor: its opening was seen
        name = os.path.abspath(os.fsdecode(path))
        if _is_bytecode((name,)):
            return
        if name == os.devnull:
            return
        if _writes(mode, flags):
            self.found = f"opens {name} for writing"
        elif name in ("/dev/urandom", "/dev/random"):
            self.found = f"draws random bytes ({name})"
        elif name.startswith("/proc/self/") or name.startswith(f"/proc/{os.getpid()}/"):
            self.found = f"reads {name}"
        elif not name.startswith(self._roots):
            self.found = f"reads {name}, outside the installed packages and sys.path"

    def _profile(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if self.found:
            return
        if event == "c_call":
            if frame.f_code.co_filename == tempfile.__file__:
                return  # its temporary names check the pid; what it makes is an audit event
            what = self._calls.get(id(arg))
            if what is not None:
                self.found = what
                return
            owner = getattr(arg, "__self__", None)
            if owner is random._inst:  # the functions of the random module are its methods
                self.found = f"uses the random module's shared generator (random.{arg.__name__})"
            elif arg.__name__ in _CLOCK_METHODS:
                # Identity only: ``in`` would call the owner's ``__eq__``, the
                # code under import (typing_extensions' Protocol raises there).
                for clock in _CLOCK_CLASSES:
                    if owner is clock:
                        self.found = f"reads the clock ({clock.__name__}.{arg.__name__})"
        elif event == "call":
            code = frame.f_code
            caller = frame.f_back
            if caller is not None and caller.f_code.co_filename == tempfile.__file__:
                return  # its generator of temporary names, likewise
            if code is self._random_init and frame.f_locals.get("x") is None:
                self.found = "seeds a random generator from the system (random.Random())"
            elif code in _FUNCTIONS:
                self.found = _FUNCTIONS[code]

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """Record what the code run inside does (one import)."""
        if not self.hooked:
            sys.addaudithook(self._audit)
            self.hooked = True
        self.found = ""
        fds = _open_fds()
        streams = _streams()  # one referrer each, before and after
        counts = [_referrer_count(stream) for stream in streams]
        previous = sys.getprofile()
        self.active = True
        sys.setprofile(self._profile)
        try:
            yield
        finally:
            sys.setprofile(previous)
            self.active = False
        if not self.found and _open_fds() > fds:
            self.found = "leaves a file descriptor open"
        if not self.found and [_referrer_count(stream) for stream in streams] != counts:
            self.found = "keeps a reference to sys.stdout or sys.stderr"


def _process_calls() -> dict[int, str]:
    """Builtins whose call ties an import to its process (by ``id``: a bound
    builtin may not be hashable), each with what it does."""
    import atexit
    import signal

    named: list[tuple[str, str, Any]] = [
        ("reads the process id", "os", os.getpid),
        ("reads the process id", "os", os.getppid),
        ("registers a fork handler", "os", os.register_at_fork),
        ("registers an atexit function", "atexit", atexit.register),
    ]
    named += [("reads the clock", "time", getattr(time, n)) for n in _CLOCKS if hasattr(time, n)]
    for name in ("urandom", "getrandom"):
        if hasattr(os, name):
            named.append(("draws random bytes", "os", getattr(os, name)))
    for name in ("alarm", "setitimer"):
        if hasattr(signal, name):
            named.append(("sets an alarm", "signal", getattr(signal, name)))
    return {
        id(function): f"{what} ({module}.{function.__name__})" for what, module, function in named
    }


def _writes(mode: object, flags: object) -> bool:
    """Whether an ``open`` event's mode or flags write."""
    if isinstance(mode, str) and any(c in mode for c in "wax+"):
        return True
    return isinstance(flags, int) and bool(flags & _WRITING)


def _tempfile_frame() -> str:
    """The innermost function of :mod:`tempfile` on the stack ("": none)."""
    frame: types.FrameType | None = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == tempfile.__file__:
            return frame.f_code.co_name
        frame = frame.f_back
    return ""


def _read_roots() -> tuple[str, ...]:
    """Where an import may read: the installed packages and ``sys.path``
    (whose empty entry, ``python -c``'s, is the working directory)."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    roots.update(entry or os.getcwd() for entry in sys.path)
    if sys.pycache_prefix:
        roots.add(sys.pycache_prefix)
    return tuple(os.path.join(os.path.abspath(root), "") for root in roots) + tuple(
        os.path.abspath(root) for root in sys.path if root and os.path.isfile(root)
    )


def _is_bytecode(args: tuple[Any, ...]) -> bool:
    """A ``__pycache__`` file or directory: the import system's own writes."""
    path = args[0] if args else None
    if not isinstance(path, (str, bytes, os.PathLike)):
        return False
    name = os.fsdecode(path)
    prefix = sys.pycache_prefix
    return "__pycache__" in name or bool(prefix and name.startswith(prefix))


def _open_fds() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


def _streams() -> list[object]:
    """The standard streams as they are while the server preloads."""
    found: list[object] = []
    for stream in (sys.stdout, sys.stderr):
        if stream is not None and not any(stream is seen for seen in found):
            found.append(stream)
    return found


def _referrer_count(stream: object) -> int:
    # Made by the import, so not frozen: gc.get_referrers finds them.
    return len(gc.get_referrers(stream))
