"""Starting, watching and ending file-mode child processes.

Children start in one of three ways: forked from a fork server, itself a
forked copy of the prepared parent (``fork``); as a fresh interpreter each
(``spawn``); or forked from a fork server that is a fresh interpreter with
pytest imported and nothing else, each child then running pytest as a
spawned one does (``forkserver``, for a parent with threads of its own).

Each child runs in a session (and process group) of its own, so ending it
with ``killpg`` also ends whatever it started, and a Ctrl-C at the terminal
reaches only the parent, which then ends its children.  On Linux every
child (and the fork server) also gets SIGKILL when its parent ends, however
it ends: no child outlives the run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import gc
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from collections.abc import Sequence
from typing import IO
from typing import Any
from typing import BinaryIO

from pytest_isolation.core import frozen
from pytest_isolation.core.names import CHILD_ENV
from pytest_isolation.core.signals import signal_name
from pytest_isolation.filemode.lifetime import die_with_parent
from pytest_isolation.filemode.lifetime import ending_default
from pytest_isolation.filemode.wire import START
from pytest_isolation.filemode.wire import ChildSpec
from pytest_isolation.filemode.wire import Sender
from pytest_isolation.filemode.wire import receive

#: How much of a dead child's stderr goes into its failure report: enough for
#: a faulthandler dump of a deep stack after the test's own last words.
STDERR_TAIL_BYTES = 12000
STDERR_TAIL_LINES = 100

# What a spawned interpreter does first, with ``spec`` read: end with its
# parent, asked before pytest loads (see filemode/lifetime.py); put back the
# parent's sys.path[0] (``python -m pytest`` and the ``pytest`` script differ
# there) and the file and module name of its ``__main__`` (multiprocessing's
# spawn start method and tests read them).
_AS_THE_PARENT = (
    "from pytest_isolation.filemode.lifetime import die_with_parent\n"
    "die_with_parent(spec['parent'])\n"
    "sys.path[0] = spec['path0']\n"
    "sys.argv[0] = spec['argv0']\n"
    "if spec['main_file']:\n"
    "    __file__ = spec['main_file']\n"
    "if spec['main_name']:\n"
    "    __spec__ = importlib.util.find_spec(spec['main_name'])\n"
)

# Run by a spawned child: the above, then pytest as usual.
_SPAWN_CODE = (
    "import faulthandler, importlib.util, json, os, signal, sys\n"
    # A timed-out child dumps every thread's traceback to its stderr file on SIGUSR1.
    "faulthandler.register(signal.SIGUSR1, os.dup(2), all_threads=True)\n"
    f"spec = json.loads(os.environ[{CHILD_ENV!r}])\n"
    f"{_AS_THE_PARENT}"
    "del spec\n"
    "import pytest\n"
    "raise SystemExit(pytest.main())\n"
)

# Run by the spawned fork server (``forkserver``): the same start, then it
# imports pytest and forks the children.
_FORKSERVER_CODE = (
    "# pytest-isolation: the fork server of a file-mode run\n"
    "import importlib.util, json, sys\n"
    "spec = json.loads(sys.argv.pop(1))\n"
    f"{_AS_THE_PARENT}"
    "if spec['args'] is None:\n"
    "    from pytest_isolation.filemode.launch import serve_spawned\n"
    "    serve_spawned(spec['fd'], spec['modules'])\n"
    # Run pytest's start-up for the run's arguments (and import the modules
    # each child would import at its configure), then serve; in each child,
    # the rest of pytest's run.  Called from here: as shallow as the parent.
    "import traceback\n"
    "from pytest_isolation.filemode.zygote import Zygote, end\n"
    "import pytest\n"
    "try:\n"
    "    sys.argv[1:] = spec['args']\n"
    "    code = int(pytest.main(spec['args'], plugins=[Zygote(spec['fd'], spec['modules'])]))\n"
    "except BaseException:\n"
    "    traceback.print_exc()\n"
    "    code = 3\n"
    "end(code)\n"
)


def _as_the_parent() -> dict[str, Any]:
    """What a spawned interpreter needs of this process (``_AS_THE_PARENT``):
    its pid, its ``sys.path[0]`` and ``sys.argv[0]`` (the program's name,
    which ``argparse`` shows in its usage), and the file and the module name
    (``pytest.__main__``, or empty) of its ``__main__``."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return {
        "parent": os.getpid(),
        "path0": sys.path[0],
        "argv0": sys.argv[0] if sys.argv else "",
        "main_file": str(getattr(main, "__file__", "") or ""),
        "main_name": str(getattr(spec, "name", "") or ""),
    }


@dataclasses.dataclass
class Child:
    """A running child: its pid, the message stream and its stderr file."""

    pid: int
    stream: BinaryIO
    stderr: IO[bytes]
    process: subprocess.Popen[bytes] | None = None
    returncode: int | None = None
    #: For children of a fork server: asks the server for the exit code.
    waiter: Callable[[int], int] | None = None

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
                self.returncode = self.waiter(self.pid)
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
    waiter: Callable[[int], int] | None = None

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
    pid = _fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        close = (control_write, read_fd)
        _child_main(close, stderr, lambda: body(control_read, write_fd), parent)
    os.close(control_read)
    os.close(write_fd)
    return Warm(pid, control_write, os.fdopen(read_fd, "rb"), stderr)


def _fork() -> int:
    """``os.fork()`` from the parent.

    In a pytest-xdist worker, execnet's I/O thread runs beside pytest, and
    Python 3.12+ warns about forking a process with threads (an error under
    ``-W error``).  The children never touch that thread's objects: xdist's
    plugin is unregistered in them before any hook runs.
    """
    _before_fork()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*fork.*", category=DeprecationWarning)
        pid = os.fork()
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
        _child_start(close, stderr, parent)
        body()
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def _child_start(close: tuple[int, ...], stderr: IO[bytes], parent: int) -> None:
    """What a forked child does first: end with ``parent``, take the default
    signal handlers, close the parent's ends, lead a session of its own and
    write its stderr to ``stderr``."""
    die_with_parent(parent)
    ending_default()
    for fd in close:
        os.close(fd)
    os.setsid()
    os.dup2(stderr.fileno(), 2)
    if faulthandler.is_enabled():
        # A fatal error's traceback goes to the stderr tail, on an fd of
        # its own: pytest's capture points fd 2 elsewhere during tests.
        faulthandler.enable(os.dup(2))
    # A timed-out child dumps every thread's traceback there on SIGUSR1.
    faulthandler.register(signal.SIGUSR1, os.dup(2), all_threads=True)


class ForkServer:
    """A prepared copy of the parent that forks the children of the run.

    The :class:`Origin` forks it; it prepares itself as a child (detaches
    the controller and the terminal, registers the child plugin) and from
    then on only forks.  Each file's child thus starts prepared, and the
    parent, which keeps working, never shares its pages with a running
    child.  The server reaps its children and tells the parent the exit
    status of the ones that died.
    """

    def __init__(
        self,
        pid: int,
        channel: socket.socket,
        hello: bytes = b"",
        process: subprocess.Popen[bytes] | None = None,
    ) -> None:
        self.pid = pid
        self.channel = channel
        #: What ``prepare()`` had to say (what the server preloaded).
        self.hello = hello
        #: The spawned fork server's process (``forkserver``).
        self.process = process
        #: False once the server has gone (a test killed it, or the OOM
        #: killer): its children went with it, and a new one must be started.
        self.alive = True

    @classmethod
    def spawn(
        cls,
        cwd: str,
        environ: dict[str, str] | None,
        modules: Sequence[str],
        seconds: float,
        args: Sequence[str] | None = None,
    ) -> ForkServer:
        """Start the spawned fork server: a fresh interpreter that imports
        pytest and ``modules`` and forks the children (:func:`serve_spawned`);
        with ``args``, one that runs pytest's start-up for them first
        (:class:`.zygote.Zygote`).  Waits for it at most ``seconds``;
        ``RuntimeError`` names why it did not start.  Its ``hello`` says what
        it prepared (JSON: a :class:`~.preload.Loaded`, or the zygote's word)."""
        channel, server_end = socket.socketpair()
        stderr = tempfile.TemporaryFile()  # noqa: SIM115 - read here if it fails to start
        spec = {
            "fd": server_end.fileno(),
            "modules": list(modules),
            "args": None if args is None else list(args),
            **_as_the_parent(),
        }
        try:
            process = subprocess.Popen(
                [sys.executable, "-c", _FORKSERVER_CODE, json.dumps(spec)],
                cwd=cwd,
                env=os.environ if environ is None else environ,
                pass_fds=(server_end.fileno(),),
                stderr=stderr,
                start_new_session=True,
            )
        finally:
            server_end.close()
        try:
            hello = _read_hello(channel, seconds)
        except TimeoutError:
            hello = None
        if hello is None:
            process.kill()
            process.wait()
            channel.close()
            stderr.seek(0)
            said = stderr.read().decode(errors="replace").strip()
            raise RuntimeError(
                f"isolation: the fork server (a fresh interpreter) did not start in "
                f"{seconds:g} s{': ' + said if said else ''}"
            )
        stderr.close()
        return cls(process.pid, channel, hello, process)

    def fork(self) -> Warm:
        """A new prepared child, waiting for its file; :class:`ServerEnded`
        if the server has gone."""
        try:
            self.channel.sendall(_FORK)
            data, fds, _, _ = socket.recv_fds(self.channel, 8, 3)
        except OSError:
            data, fds = b"", []
        if len(data) < 8 or len(fds) != 3:
            self.alive = False
            for fd in fds:
                os.close(fd)
            raise ServerEnded("isolation: the fork server ended unexpectedly")
        control, stream, stderr = fds
        pid = int.from_bytes(data, "big")
        return Warm(pid, control, os.fdopen(stream, "rb"), os.fdopen(stderr, "w+b"), self.wait)

    def wait(self, pid: int) -> int:
        """The exit code of one of the server's children (negative: a signal).
        A server that has gone took its children with it (each ends with its
        parent): they were killed."""
        try:
            self.channel.sendall(_WAIT + pid.to_bytes(8, "big"))
            reply = _recv_exactly(self.channel, 8)
        except OSError:
            reply = b""
        if len(reply) < 8:
            self.alive = False
            return -signal.SIGKILL
        return int.from_bytes(reply, "big", signed=True)

    def ended(self) -> bool:
        """Whether the server has gone, asked without talking to it (its
        channel may still take a request it will never answer)."""
        if self.alive:
            if self.process is not None:
                self.alive = self.process.poll() is None
            else:  # it sends nothing unasked: a readable channel has been closed
                self.alive = not select.select([self.channel], [], [], 0)[0]
        return not self.alive

    def close(self) -> None:
        """Let the server go: it ends when its channel closes (the origin
        reaps a forked one)."""
        self.channel.close()
        if self.process is not None:
            self.process.wait()


@dataclasses.dataclass
class PendingServer:
    """A fork server the origin has forked, still preparing."""

    pid: int
    channel: socket.socket

    def ready(self, seconds: float | None) -> ForkServer:
        """The server, once it has said what it prepared; waits at most
        ``seconds``, else kills it and raises ``TimeoutError``."""
        try:
            hello = _read_hello(self.channel, seconds)
        except TimeoutError:
            os.kill(self.pid, signal.SIGKILL)  # the origin reaps it
            self.channel.close()
            raise
        return ForkServer(self.pid, self.channel, hello or b"")


class Origin:
    """A pristine copy of the parent that forks the run's fork servers.

    The parent forks it once, from the frame of pytest's run loop, before
    any test runs.  Every fork server it forks later returns from
    :meth:`fork` in that frame, and every child that server forks returns
    from :func:`serve` there too: so a file's child runs its tests from
    the frame pytest's own run loop would (as deep in the stack as a plain
    run), and a server that a test killed is replaced by one as pristine.
    """

    def __init__(self, pid: int, channel: socket.socket) -> None:
        self.pid = pid
        self.channel = channel
        #: False once the origin has gone (a test killed it; reaped then): no
        #: server can start.
        self.alive = True

    @classmethod
    def fork(cls) -> Origin | ServerOrder:
        """Fork the origin.  Returns its handle here and, in each fork server
        it forks later, what that server is to prepare."""
        channel, origin_end = socket.socketpair()
        parent = os.getpid()
        pid = _fork()
        if pid == 0:  # pragma: no cover - the child's coverage is not collected
            try:
                with tempfile.TemporaryFile() as stderr:  # fd 2 is its copy
                    _child_start((channel.detach(),), stderr, parent)
                return _originate(origin_end)
            except BaseException:
                traceback.print_exc()
                os._exit(3)
        origin_end.close()
        return cls(pid, channel)

    def order_server(self, modules: list[str] | None, careful: bool) -> PendingServer:
        """Have a new fork server forked; it prepares while the parent goes
        on (several prepare at once), until :meth:`PendingServer.ready`."""
        channel, server_end = socket.socketpair()
        order = json.dumps({"modules": modules, "careful": careful}).encode()
        try:
            header = _SERVE + len(order).to_bytes(4, "big")
            socket.send_fds(self.channel, [header + order], [server_end.fileno()])
            reply = _recv_exactly(self.channel, 8)
        except OSError:
            reply = b""
        finally:
            server_end.close()
        if len(reply) < 8:
            channel.close()
            raise ServerEnded("isolation: the origin of the fork servers ended unexpectedly")
        return PendingServer(int.from_bytes(reply, "big"), channel)

    def ended(self) -> bool:
        """Whether the origin has gone (reaped here if so)."""
        if self.alive:
            try:
                self.alive = not os.waitpid(self.pid, os.WNOHANG)[0]
            except ChildProcessError:  # reaped already (SIGCHLD ignored): gone
                self.alive = False
        return not self.alive

    def close(self) -> None:
        """End the origin once its servers have ended, and reap it."""
        self.channel.close()
        if self.alive:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)


@dataclasses.dataclass(frozen=True)
class ServerOrder:
    """What a new fork server prepares: the modules it preloads (``None``:
    it preloads nothing) and how (``careful``: one check per module), and
    its channel to the parent."""

    channel: socket.socket
    modules: list[str] | None
    careful: bool


def _originate(channel: socket.socket) -> ServerOrder:
    """The origin's loop: fork a fork server for each order of the parent.
    Returns in each server only; the origin ends, once its servers have,
    when the parent closes the channel."""
    origin = os.getpid()
    while True:
        data, fds, _, _ = socket.recv_fds(channel, 5, 1)
        if len(data) < 5 or not fds:
            break
        order = json.loads(_recv_exactly(channel, int.from_bytes(data[1:5], "big")))
        _reap({})
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's coverage is not collected
            with tempfile.TemporaryFile() as stderr:  # fd 2 is its copy
                _child_start((channel.detach(),), stderr, origin)
            return ServerOrder(socket.socket(fileno=fds[0]), order["modules"], order["careful"])
        os.close(fds[0])
        channel.sendall(pid.to_bytes(8, "big"))
    while True:  # the servers end when the parent closes their channels
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(0)


_FORK = b"F"
_WAIT = b"W"
_SERVE = b"S"


class ServerEnded(RuntimeError):
    """The fork server has gone: a new one is started for the next child."""


def _read_hello(channel: socket.socket, seconds: float | None) -> bytes | None:
    """The server's first message (what it prepared), or None if it ended
    first; ``TimeoutError`` when ``seconds`` pass."""
    channel.settimeout(seconds)
    header = _recv_exactly(channel, 4)
    hello = _recv_exactly(channel, int.from_bytes(header, "big")) if len(header) == 4 else None
    channel.settimeout(None)
    return hello


def _recv_exactly(channel: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = channel.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def say_hello(channel: socket.socket, hello: bytes) -> None:
    """The fork server's first message to the parent: what it prepared."""
    channel.sendall(len(hello).to_bytes(4, "big") + hello)


def serve(channel: socket.socket, hello: bytes) -> tuple[int, int]:
    """The fork server's loop: fork prepared children, report exit codes.
    Returns in each child only (its control and write fds); the server
    itself ends when the parent closes the channel.

    What the server made while it prepared (the modules it preloaded) is
    frozen as the parent's objects are (see :func:`_before_fork`)."""
    gc.freeze()
    say_hello(channel, hello)
    exited: dict[int, int] = {}
    while request := _recv_exactly(channel, 1):
        _reap(exited)
        if request == _FORK:
            fds = _serve_fork(channel)
            if fds is not None:
                return fds
        else:
            pid = int.from_bytes(_recv_exactly(channel, 8), "big")
            code = exited.pop(pid, None)
            if code is None:
                code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
            channel.sendall(code.to_bytes(8, "big", signed=True))
    os._exit(0)


def _reap(exited: dict[int, int]) -> None:
    """Reap the children that ended, keeping the codes the parent may ask for."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if not pid:
            return
        exited[pid] = os.waitstatus_to_exitcode(status)


def _serve_fork(channel: socket.socket) -> tuple[int, int] | None:
    """Fork a child; in it, return its control and write fds (``None`` here)."""
    control_read, control_write = os.pipe()
    read_fd, write_fd = os.pipe()
    stderr = tempfile.TemporaryFile()  # noqa: SIM115 - handed to the parent, then closed
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        try:
            # detached: the socket object lives on in the frames this child returns to
            _child_start((channel.detach(), control_write, read_fd), stderr, parent)
        except BaseException:
            traceback.print_exc()
            os._exit(3)
        stderr.close()  # fd 2 is its copy
        return control_read, write_fd
    os.close(control_read)
    os.close(write_fd)
    socket.send_fds(channel, [pid.to_bytes(8, "big")], [control_write, read_fd, stderr.fileno()])
    os.close(control_write)
    os.close(read_fd)
    stderr.close()
    return None


def serve_spawned(fd: int, modules: list[str]) -> None:
    """The spawned fork server: imports pytest and ``modules`` (what every
    child would import before its own pytest marks modules for assertion
    rewriting: ``plugins.modules`` in the parent), then forks the children,
    each of which runs pytest as a spawned child does (:func:`_run_pytest`).
    The imports are checked as preloads are; the parent does not use a
    server that refused one."""
    import pytest  # noqa: F401 - what every child imports first

    from pytest_isolation.filemode import preload

    loaded = preload.load(modules, watched=False)  # plugins, as a forked child's
    hello = json.dumps(dataclasses.asdict(loaded)).encode()
    _run_pytest(*serve(socket.socket(fileno=fd), hello))


def _run_pytest(control: int, fd: int) -> None:  # pragma: no cover - runs in a child
    """A child of the spawned fork server: wait for the file, then run pytest
    for it in the run's environment and directory, as a spawned child does;
    the child plugin ends the process."""
    frozen.keep_until_observed()  # what the server froze (see serve)
    take_start(control, fd)
    import pytest

    code = pytest.main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(code))


def take_start(control: int, fd: int, started: bool = False) -> Launch:
    """In a child of a spawned fork server: wait for the file to run (end if
    the parent no longer needs this child), then take the run's environment,
    directory and arguments, with the child's spec in ``CHILD_ENV``, as a
    spawned child for that file has them.

    ``started``: the server ran pytest's start-up (the zygote), which began
    in that environment and directory; what the start-up changed in them (a
    conftest that sets ``os.environ[...]`` or calls ``os.chdir`` at import)
    is kept, as a spawned child's own start-up would leave it."""
    with os.fdopen(control, "rb") as stream:
        message = next(receive(stream), None)
    if message is None:  # the parent no longer needs this child
        os._exit(0)
    payload = message[1]
    launch: Launch = payload["launch"]
    spec = dataclasses.replace(payload["spec"], fd=fd)
    if not started:
        os.environ.clear()
        os.environ.update(launch.environ)
        os.chdir(launch.cwd)
    os.environ[CHILD_ENV] = spec.to_env()
    sys.argv[1:] = launch.argv
    return launch


def spawn_child(
    spec: ChildSpec, args: list[str], cwd: str, environ: dict[str, str] | None = None
) -> Child:
    """Start a fresh interpreter that runs pytest as a child for ``spec``,
    in ``environ`` (default: this process's environment)."""
    read_fd, write_fd = os.pipe()
    stderr = tempfile.TemporaryFile()  # noqa: SIM115 - owned by the returned Child
    spec = dataclasses.replace(spec, fd=write_fd, **_as_the_parent())
    env = {**(os.environ if environ is None else environ), CHILD_ENV: spec.to_env()}
    try:
        process = subprocess.Popen(
            [sys.executable, "-c", _SPAWN_CODE, *args],
            cwd=cwd,
            env=env,
            pass_fds=(write_fd,),
            stderr=stderr,
            start_new_session=True,
        )
    finally:
        os.close(write_fd)
    return Child(process.pid, os.fdopen(read_fd, "rb"), stderr, process)


#: Signal a timed-out child gets first: it dumps every thread's traceback.
DUMP_SIGNAL = signal.SIGUSR1


def _tree(root: int) -> set[int]:
    """``root``'s descendants, also those that left its session (Linux ``/proc``)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return set()
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                ppid = int(stat.read().rpartition(b")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found: set[int] = set()
    todo = [root]
    while todo:
        for pid in children.get(todo.pop(), ()):
            if pid not in found:
                found.add(pid)
                todo.append(pid)
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True


def _signal_all(pids: set[int], number: int) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, number)


def end_at_once(child: Child, keep_stream: bool = False) -> None:
    """End a child and every process it started, now (the run was
    interrupted), and reap it: the descendants are found before the kill,
    which would cut their parent links.  With ``keep_stream``, what it sent
    can still be read; the caller closes it."""
    tree = _tree(child.pid)
    child.kill()
    _signal_all(tree, signal.SIGKILL)
    child.wait()
    if not keep_stream:
        child.close()


def end_tree(child: Child, grace: float) -> None:
    """End a timed-out child and every process it started.

    The child first dumps its threads' tracebacks (SIGUSR1); then the whole
    tree is frozen (SIGSTOP, so nothing forks while it is found), sent
    SIGTERM and let go, and what still runs after ``grace`` seconds is
    killed.  Descendants that started a session of their own are found by
    their parent links, not by the process group.
    """
    _signal_all({child.pid}, DUMP_SIGNAL)
    time.sleep(0.2)  # the dump is written from the signal handler at once
    tree = {child.pid} | _tree(child.pid)
    _signal_all(tree, signal.SIGSTOP)
    for pid in list(tree):
        tree |= _tree(pid)
    _signal_all(tree, signal.SIGSTOP)
    with contextlib.suppress(OSError):
        os.killpg(child.pid, signal.SIGTERM)
    _signal_all(tree, signal.SIGTERM)
    _signal_all(tree, signal.SIGCONT)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(alive(pid) for pid in tree):
        time.sleep(0.05)
    for pid in list(tree):
        tree |= _tree(pid)
    child.kill()
    _signal_all({pid for pid in tree if alive(pid)}, signal.SIGKILL)
