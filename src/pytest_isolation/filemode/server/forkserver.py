"""Fork servers: the process that forks each file's child, and the parent's
handle on it (:class:`ForkServer`).

A fork server is either a prepared copy of the parent, forked by the origin
(:mod:`.origin`), or a fresh interpreter with pytest imported (the
``forkserver`` start method: :data:`_FORKSERVER_CODE`, the zygote of
:mod:`.zygote`).  Either way it forks on the parent's request (:func:`serve`),
reaps its children and tells the parent the exit status of the ones that
died.  Each child it forks returns from :func:`serve` with its control and
message pipes.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Sequence

from pytest_isolation.core import frozen
from pytest_isolation.core.names import CHILD_ENV
from pytest_isolation.filemode import forks
from pytest_isolation.filemode.processes import AS_THE_PARENT
from pytest_isolation.filemode.processes import Launch
from pytest_isolation.filemode.processes import Warm
from pytest_isolation.filemode.processes import as_the_parent
from pytest_isolation.filemode.processes import child_start
from pytest_isolation.filemode.processes import interpreter_options
from pytest_isolation.filemode.wire import receive

# Run by the spawned fork server (``forkserver``): the same start, then it
# imports pytest and forks the children.
_FORKSERVER_CODE = (
    "# pytest-isolation: the fork server of a file-mode run\n"
    "import importlib.util, json, sys\n"
    "spec = json.loads(sys.argv.pop(1))\n"
    f"{AS_THE_PARENT}"
    "if spec['args'] is None:\n"
    "    from pytest_isolation.filemode.server.forkserver import serve_spawned\n"
    "    serve_spawned(spec['fd'], spec['modules'])\n"
    # Run pytest's start-up for the run's arguments (and import the modules
    # each child would import at its configure), then serve; in each child,
    # the rest of pytest's run.  Called from here: as shallow as the parent.
    "import traceback\n"
    "from pytest_isolation.filemode.server.zygote import Zygote, end\n"
    "import pytest\n"
    "try:\n"
    "    sys.argv[1:] = spec['args']\n"
    "    code = int(pytest.main(spec['args'], plugins=[Zygote(spec['fd'], spec['modules'])]))\n"
    "except BaseException:\n"
    "    traceback.print_exc()\n"
    "    code = 3\n"
    "end(code)\n"
)


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
        fds: tuple[int, ...] = (),
    ) -> ForkServer:
        """Start the spawned fork server: a fresh interpreter, with this
        one's options and inheriting ``fds``, that imports pytest and
        ``modules`` and forks the children (:func:`serve_spawned`); with
        ``args``, one that runs pytest's start-up for them first
        (:class:`.zygote.Zygote`).  Waits for it at most ``seconds``;
        ``RuntimeError`` names why it did not start.  Its ``hello`` says what
        it prepared (JSON: a :class:`~.preload.Loaded`, or the zygote's word)."""
        channel, server_end = socket.socketpair()
        stderr = tempfile.TemporaryFile()  # noqa: SIM115 - read here if it fails to start
        spec = {
            "fd": server_end.fileno(),
            "modules": list(modules),
            "args": None if args is None else list(args),
            **as_the_parent(),
        }
        env = dict(os.environ if environ is None else environ)
        command = [sys.executable, *interpreter_options(env), "-c", _FORKSERVER_CODE]
        try:
            process = subprocess.Popen(
                [*command, json.dumps(spec)],
                cwd=cwd,
                env=env,
                pass_fds=(server_end.fileno(), *fds),
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

    def wait(self, pid: int) -> int | None:
        """The exit code of one of the server's children (negative: a signal);
        None when the server has gone (its children carry on without it:
        :func:`..lifetime.outlive_server`)."""
        try:
            self.channel.sendall(_WAIT + pid.to_bytes(8, "big"))
            reply = recv_exactly(self.channel, 8)
        except OSError:
            reply = b""
        if len(reply) < 8:
            self.alive = False
            return None
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


_FORK = b"F"


_WAIT = b"W"


SERVE = b"S"


class ServerEnded(RuntimeError):
    """The fork server has gone: a new one is started for the next child."""


def _read_hello(channel: socket.socket, seconds: float | None) -> bytes | None:
    """The server's first message (what it prepared), or None if it ended
    first; ``TimeoutError`` when ``seconds`` pass."""
    channel.settimeout(seconds)
    header = recv_exactly(channel, 4)
    hello = recv_exactly(channel, int.from_bytes(header, "big")) if len(header) == 4 else None
    channel.settimeout(None)
    return hello


def recv_exactly(channel: socket.socket, size: int) -> bytes:
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
    frozen as the parent's objects are (see :func:`_before_fork`).  It runs
    no timer or watchdog: those the zygote's conftests started run in each
    child instead (:mod:`..forks`)."""
    forks.quiet()
    gc.freeze()
    say_hello(channel, hello)
    exited: dict[int, int] = {}
    while request := recv_exactly(channel, 1):
        reap(exited)
        if request == _FORK:
            fds = _serve_fork(channel)
            if fds is not None:
                return fds
        else:
            pid = int.from_bytes(recv_exactly(channel, 8), "big")
            code = exited.pop(pid, None)
            if code is None:
                code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
            channel.sendall(code.to_bytes(8, "big", signed=True))
    os._exit(0)


def reap(exited: dict[int, int]) -> None:
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
    pid = forks.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        try:
            # detached: the socket object lives on in the frames this child returns to
            child_start((channel.detach(), control_write, read_fd), stderr, parent)
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

    from pytest_isolation.filemode.server import preload

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
