"""Forked processes of file mode, and the parent's handles on its children.

Every process file mode forks (the origin, each fork server, each file's
child) starts the same way (:func:`child_start`): it ends with the process
that forked it, takes the default signal handlers, leads a session (and
process group) of its own, so ending it with ``killpg`` also ends whatever
it started, and writes its stderr to a file the parent reads when it dies.
A Ctrl-C at the terminal reaches only the parent, which then ends its
children.  On Linux every such process also gets SIGKILL when its parent
ends, however it ends: no child outlives the run.

:class:`Child` and :class:`Warm` are the parent's handles on a running or a
waiting child, however it started; :class:`Launch` is how a child of the
spawned fork server runs pytest.  Used on every side: the parent, the
servers (:mod:`.server`) and what the spawned interpreter runs first
(:data:`AS_THE_PARENT`).
"""

from __future__ import annotations

import dataclasses
import faulthandler
import gc
import os
import signal
import subprocess
import sys
import tempfile
import traceback
import warnings
from collections.abc import Callable
from typing import IO
from typing import Any
from typing import BinaryIO

from pytest_isolation.core import startup
from pytest_isolation.core.signals import signal_name
from pytest_isolation.filemode import forks
from pytest_isolation.filemode.lifetime import die_with_parent
from pytest_isolation.filemode.lifetime import end_with
from pytest_isolation.filemode.lifetime import ending_default
from pytest_isolation.filemode.lifetime import suite_sigchld
from pytest_isolation.filemode.wire import START
from pytest_isolation.filemode.wire import ChildSpec
from pytest_isolation.filemode.wire import Sender

#: How much of a dead child's stderr goes into its failure report: enough for
#: a faulthandler dump of a deep stack after the test's own last words.
STDERR_TAIL_BYTES = 12000


STDERR_TAIL_LINES = 100


def _dump_signal() -> int:
    """The signal a timed-out child gets first: it dumps every thread's
    traceback.  A real-time signal where there are some (Linux), which no
    suite's handler uses: a conftest's own ``SIGUSR1`` handler stays the
    suite's.  ``SIGUSR1`` elsewhere."""
    first_real_time = getattr(signal, "SIGRTMIN", None)
    return int(first_real_time) + 5 if first_real_time is not None else int(signal.SIGUSR1)


DUMP_SIGNAL = _dump_signal()


# What a spawned interpreter does first, with ``spec`` read: end with its
# parent, asked before pytest loads (see filemode/lifetime.py); put back the
# parent's sys.path[0] (``python -m pytest`` and the ``pytest`` script differ
# there) and the file and module name of its ``__main__`` (multiprocessing's
# spawn start method and tests read them).
AS_THE_PARENT = (
    "from pytest_isolation.filemode.lifetime import die_with_run\n"
    "die_with_run(spec['parent'])\n"
    "sys.path[0] = spec['path0']\n"
    "sys.argv[0] = spec['argv0']\n"
    "if spec['main_file']:\n"
    "    __file__ = spec['main_file']\n"
    "if spec['main_name']:\n"
    "    __spec__ = importlib.util.find_spec(spec['main_name'])\n"
)


def as_the_parent() -> dict[str, Any]:
    """What a spawned interpreter needs of this process (``AS_THE_PARENT``):
    its pid, its ``sys.path[0]`` and ``sys.argv[0]`` (the program's name,
    which ``argparse`` shows in its usage), and the file and the module name
    (``pytest.__main__``, or empty) of its ``__main__``."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return {
        "parent": os.getpid(),
        "path0": startup.PATH0,  # not a conftest's folder pytest inserted since
        "argv0": sys.argv[0] if sys.argv else "",
        "main_file": str(getattr(main, "__file__", "") or ""),
        "main_name": str(getattr(spec, "name", "") or ""),
    }


def interpreter_options(environ: dict[str, str]) -> list[str]:
    """The options this interpreter runs with (``-O``, ``-B``, ``-X dev``,
    ``-X int_max_str_digits=...``, ``-W error``), for an interpreter started
    in ``environ``, so that it runs as this one does.  The ``-W`` options
    that ``PYTHONWARNINGS`` gave are left out: it reads them from
    ``environ`` too.  Private standard library, the way ``multiprocessing``
    starts its spawned interpreters (``tests/test_inherited.py`` fails
    loudly if it goes)."""
    options: list[str] = subprocess._args_from_interpreter_flags()  # type: ignore[attr-defined]
    if not sys.flags.ignore_environment:
        for option in environ.get("PYTHONWARNINGS", "").split(","):
            if option and f"-W{option}" in options:
                options.remove(f"-W{option}")
    given = {options[at + 1].partition("=")[0] for at, arg in enumerate(options) if arg == "-X"}
    for name, value in getattr(sys, "_xoptions", {}).items():
        if name not in given:
            options += ["-X", name if value is True else f"{name}={value}"]
    return options


@dataclasses.dataclass
class Child:
    """A running child: its pid, the message stream and its stderr file."""

    pid: int
    stream: BinaryIO
    stderr: IO[bytes]
    process: subprocess.Popen[bytes] | None = None
    returncode: int | None = None
    #: For children of a fork server: asks the server for the exit code.
    waiter: Callable[[int], int | None] | None = None
    #: The fork server that would tell the exit code had gone.
    unknown: bool = False

    def poll(self) -> bool:
        """Reap the child if it has exited; return whether it has."""
        if self.waiter is not None:
            return True  # the fork server reaps its children
        if self.returncode is None:
            if self.process is not None:
                self.returncode = self.process.poll()
            else:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode is not None

    def wait(self) -> int:
        """Reap the child; return its exit code, negative for a signal."""
        if self.returncode is None:
            if self.waiter is not None:
                code = self.waiter(self.pid)
                self.unknown = code is None
                self.returncode = -signal.SIGKILL if code is None else code
            elif self.process is not None:
                self.returncode = self.process.wait()
            else:
                _, status = os.waitpid(self.pid, 0)
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def kill(self) -> None:
        """End the child and everything in its process group."""
        for kill in (os.killpg, os.kill):
            try:
                kill(self.pid, signal.SIGKILL)
                return
            except (ProcessLookupError, PermissionError):
                continue

    def stderr_tail(self) -> str:
        self.stderr.seek(0, os.SEEK_END)
        size = self.stderr.tell()
        self.stderr.seek(max(0, size - STDERR_TAIL_BYTES))
        lines = self.stderr.read().decode(errors="replace").splitlines()
        return "\n".join(lines[-STDERR_TAIL_LINES:])

    def close(self) -> None:
        self.stream.close()
        self.stderr.close()


def describe_exit(returncode: int) -> str:
    """``'was killed by signal 11 (SIGSEGV)'`` or ``'exited with code 3'``."""
    if returncode < 0:
        name = signal_name(-returncode) or "unknown signal"
        return f"was killed by signal {-returncode} ({name})"
    return f"exited with code {returncode}"


@dataclasses.dataclass
class Warm:
    """A forked child that has prepared itself and waits to be told its file.

    Forking and preparing the next child while the current one runs takes
    both off the critical path of a run.
    """

    pid: int
    control: int
    stream: BinaryIO
    stderr: IO[bytes]
    #: For children of a fork server: asks the server for the exit code.
    waiter: Callable[[int], int | None] | None = None

    def activate(self, spec: ChildSpec, index: int, launch: Launch | None = None) -> Child:
        """Send the file to run (``index``: its placeholder in ``session.items``);
        a child of the spawned fork server also gets how to run pytest."""
        try:
            Sender(self.control).send(START, spec=spec, index=index, launch=launch)
        finally:
            os.close(self.control)
        return Child(self.pid, self.stream, self.stderr, waiter=self.waiter)

    def discard(self) -> None:
        """Let the child go unused: it exits when its control pipe closes."""
        os.close(self.control)
        self.stream.close()
        self.stderr.close()
        Child(self.pid, self.stream, self.stderr, waiter=self.waiter).wait()


@dataclasses.dataclass(frozen=True)
class Launch:
    """How a child of the spawned fork server runs pytest, as a spawned child
    would: its arguments, its working directory and its environment."""

    args: list[str]
    cwd: str
    environ: dict[str, str]
    #: The child's own ``--basetemp`` (pytest empties it first), if any.
    basetemp: str | None = None

    @property
    def argv(self) -> list[str]:
        """The arguments with the child's ``--basetemp``."""
        if self.basetemp is None:
            return list(self.args)
        return [*self.args, f"--basetemp={self.basetemp}"]


def fork_warm(body: Callable[[int, int], None]) -> Warm:
    """Fork a child that runs ``body(control_fd, write_fd)`` and never returns."""
    control_read, control_write = os.pipe()
    read_fd, write_fd = os.pipe()
    stderr = tempfile.TemporaryFile()  # noqa: SIM115 - owned by the returned Warm
    parent = os.getpid()
    pid = fork_process()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        close = (control_write, read_fd)
        _child_main(close, stderr, lambda: body(control_read, write_fd), parent)
    os.close(control_read)
    os.close(write_fd)
    return Warm(pid, control_write, os.fdopen(read_fd, "rb"), stderr)


def fork_process() -> int:
    """``os.fork()`` from the parent.

    In a pytest-xdist worker, execnet's I/O thread runs beside pytest, and
    Python 3.12+ warns about forking a process with threads (an error under
    ``-W error``).  The children never touch that thread's objects: xdist's
    plugin is unregistered in them before any hook runs.
    """
    _before_fork()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*fork.*", category=DeprecationWarning)
        pid = forks.fork()
    if pid:  # frozen objects are missing from gc.get_objects(), which a test here may use
        gc.unfreeze()
    return pid


def _before_fork() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    # Frozen objects are skipped by the garbage collector of the fork server,
    # which would otherwise touch, and so copy, every page of the heap it
    # shares with the parent and its children.  The parent thaws them after
    # forking, each file's child once it has its file (frozen objects are
    # missing from gc.get_objects() and gc.get_referrers()).
    gc.freeze()


def _child_main(
    close: tuple[int, ...], stderr: IO[bytes], body: Callable[[], None], parent: int
) -> None:
    """The start of every forked child (``parent`` forked it); never returns."""
    code = 3
    try:
        child_start(close, stderr, parent)
        body()
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def child_start(
    close: tuple[int, ...], stderr: IO[bytes], parent: int, runs_tests: bool = True
) -> None:
    """What a forked child does first: end with ``parent``, take the default
    signal handlers, close the parent's ends, lead a session of its own and
    write its stderr to ``stderr``.  A process that runs tests takes the
    suite's ``SIGCHLD`` setting, timers and faulthandler's watchdog
    (:mod:`.forks`); the origin and the fork servers, which wait for
    children of their own, keep the default and run neither."""
    if runs_tests:  # a test that kills its fork server does not end its own process
        end_with(parent)
    else:
        die_with_parent(parent)
    ending_default()
    if runs_tests:
        suite_sigchld()
    for fd in close:
        os.close(fd)
    os.setsid()
    os.dup2(stderr.fileno(), 2)
    if faulthandler.is_enabled():
        # A fatal error's traceback goes to the stderr tail, on an fd of
        # its own: pytest's capture points fd 2 elsewhere during tests.
        faulthandler.enable(os.dup(2))
    # A timed-out child dumps every thread's traceback there (DUMP_SIGNAL).
    faulthandler.register(DUMP_SIGNAL, os.dup(2), all_threads=True)
    if runs_tests:
        forks.resume()
    else:
        forks.quiet()
