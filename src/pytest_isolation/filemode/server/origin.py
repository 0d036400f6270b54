"""The origin: a pristine copy of the parent that forks the run's fork
servers, and what a new server does before it serves (:func:`serve_order`)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import tempfile
import traceback

import pytest

from pytest_isolation.filemode import cov
from pytest_isolation.filemode.child.forked import ChildPlugin
from pytest_isolation.filemode.child.forked import prepare_forked
from pytest_isolation.filemode.child.forked import start_forked
from pytest_isolation.filemode.forks import fork
from pytest_isolation.filemode.processes import child_start
from pytest_isolation.filemode.processes import fork_process
from pytest_isolation.filemode.server import preload
from pytest_isolation.filemode.server.forkserver import SERVE
from pytest_isolation.filemode.server.forkserver import PendingServer
from pytest_isolation.filemode.server.forkserver import ServerEnded
from pytest_isolation.filemode.server.forkserver import reap
from pytest_isolation.filemode.server.forkserver import recv_exactly
from pytest_isolation.filemode.server.forkserver import serve


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
        pid = fork_process()
        if pid == 0:  # pragma: no cover - the child's coverage is not collected
            try:
                with tempfile.TemporaryFile() as stderr:  # fd 2 is its copy
                    child_start((channel.detach(),), stderr, parent, runs_tests=False)
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
            header = SERVE + len(order).to_bytes(4, "big")
            socket.send_fds(self.channel, [header + order], [server_end.fileno()])
            reply = recv_exactly(self.channel, 8)
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
        order = json.loads(recv_exactly(channel, int.from_bytes(data[1:5], "big")))
        reap({})
        pid = fork()
        if pid == 0:  # pragma: no cover - the child's coverage is not collected
            with tempfile.TemporaryFile() as stderr:  # fd 2 is its copy
                child_start((channel.detach(),), stderr, origin, runs_tests=False)
            return ServerOrder(socket.socket(fileno=fds[0]), order["modules"], order["careful"])
        os.close(fds[0])
        channel.sendall(pid.to_bytes(8, "big"))
    while True:  # the servers end when the parent closes their channels
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(0)


#: Bound at import: a module the server preloads may replace ``json.dumps``
#: (the server then reports that, and is not used).
_dumps = json.dumps


def serve_order(
    session: pytest.Session, order: ServerOrder, environ: dict[str, str] | None
) -> ChildPlugin:
    """In a new fork server: prepare as each child will be, preload what
    ``order`` says, then serve.  Returns in each child it forks, started for
    its file; ``environ`` is the one every child starts from."""
    plugin = prepare_forked(session)
    hello = b""
    if order.modules is not None:
        cov.measure_in_fork()
        loaded = preload.load(order.modules, order.careful)
        cov.save_so_far()
        hello = _dumps(dataclasses.asdict(loaded)).encode()
    control, fd = serve(order.channel, hello)
    return start_forked(session, plugin, control, fd, None, environ)
