"""The start of a file's child: forked from a fork server, spawned, or
forked from the spawned fork server, as the start method says.

Three objects, one per way: :class:`Forking` (``fork``: the origin, its fork
servers and the child forked ahead for the next file), :class:`SpawnedServer`
(``forkserver``: the spawned fork server) and :func:`.spawn.spawn_child`
(``spawn``); :class:`Starter` picks one for each child and falls back, and
says so, when one cannot serve (a thread runs, a test killed the origin).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import threading
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_isolation.core import names
from pytest_isolation.core import pytest_private
from pytest_isolation.core.keys import START_METHOD
from pytest_isolation.core.kinds import Started
from pytest_isolation.core.settings import THREADS_RUNNING
from pytest_isolation.core.settings import Settings
from pytest_isolation.core.settings import plugin_threads
from pytest_isolation.core.settings import resolve_start
from pytest_isolation.core.startup import STARTED
from pytest_isolation.core.xdist import is_worker
from pytest_isolation.filemode import compat
from pytest_isolation.filemode import wire
from pytest_isolation.filemode.child.forked import ChildPlugin
from pytest_isolation.filemode.child.forked import collect_forked
from pytest_isolation.filemode.child.forked import finish
from pytest_isolation.filemode.child.forked import prepare_forked
from pytest_isolation.filemode.child.forked import start_forked
from pytest_isolation.filemode.parent.servers import PRELOAD_SECONDS
from pytest_isolation.filemode.parent.servers import OriginEnded
from pytest_isolation.filemode.parent.servers import Servers
from pytest_isolation.filemode.parent.spawn import spawn_child
from pytest_isolation.filemode.processes import Child
from pytest_isolation.filemode.processes import Launch
from pytest_isolation.filemode.processes import Warm
from pytest_isolation.filemode.processes import fork_warm
from pytest_isolation.filemode.server import preload
from pytest_isolation.filemode.server.forkserver import ForkServer
from pytest_isolation.filemode.server.forkserver import ServerEnded
from pytest_isolation.filemode.server.origin import Origin
from pytest_isolation.filemode.server.origin import serve_order

#: The session of the run, kept by the controller at its start.
SESSION = pytest.StashKey[pytest.Session]()


class Starter:
    """Starts each file's child by the run's start method.

    Keeps what every way of starting needs: the run's start method (in the
    stash, for the run report) and why, the threads a plugin runs before any
    test (more than those: fork no more), the environment and the recursion
    headroom the run loop started with, and the run's base temporary
    directory.
    """

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        #: Threads of the process before any test ran: the main one and the plugins' idle ones.
        idle, beside = plugin_threads(config, is_worker(config))
        self.baseline_threads = 1 + idle
        self.method, self.reason = resolve_start(settings.start, self.baseline_threads, beside)
        self.basetemp: Path | None = None
        #: The environment the run's tests started with: every forked child starts
        #: from it (what a test run in this process, of a non-Python collector, sets
        #: is its own); a fresh interpreter starts from the one pytest started in.
        self.environ: dict[str, str] | None = None
        #: The recursion headroom of pytest's run loop: spawned children run their tests as deep.
        self.loop_room = 0
        self.forking = Forking(config, settings)
        self.spawned_server = SpawnedServer(config, settings)
        #: Spawned children so far (each gets a base temporary directory of its own).
        self.spawned = 0

    @property
    def method(self) -> Started:
        """How children start: ``fork``, ``spawn`` or ``forkserver`` (kept in
        the stash for the run report)."""
        return self.config.stash[START_METHOD]

    @method.setter
    def method(self, value: Started) -> None:
        self.config.stash[START_METHOD] = value

    def start(
        self, spec: wire.ChildSpec, file: pytest.File, index: int = -1, more: Path | None = None
    ) -> Child:
        """A child for ``file``; ``more``: the file after it, whose child is
        forked ahead."""
        if self.basetemp is None:
            self.basetemp = shared_basetemp(self.config)
        self.leave_fork_if_threads()
        paths = [Path(path) for path, _ in spec.files]
        if self.method in ("spawn", "forkserver"):
            spec, launch = self._launch(spec)
            warm = None if self.method == "spawn" else self.spawned_server.child(launch)
            if warm is None:  # spawn, or no fork server could start: a fresh interpreter
                fds = inherited_fds(self.config)
                return spawn_child(spec, launch.argv, launch.cwd, launch.environ, fds)
            return warm.activate(spec, index, launch)
        if index < 0:  # --collect-only: during collection, before any fork server
            return self.forking.fork_now(file).activate(spec, index)
        try:
            return self.forking.child(spec, index, paths, more)
        except OriginEnded as ended:  # a test killed it: fresh interpreters from now on
            self.method, self.reason = "spawn", str(ended)
            write_line(self.config, f"{ended}; each child is spawned instead")
            self.forking.discard_warm()
            return self.start(spec, file, index, more)

    def leave_fork_if_threads(self) -> None:
        """``auto``: fork no more once a thread runs beside the run's own."""
        threads = threading.active_count() > self.baseline_threads
        if self.method == "fork" and self.settings.start == "auto" and threads:
            self.method, self.reason = "forkserver", f"auto: {THREADS_RUNNING}"
            write_line(
                self.config,
                "isolation: threads are running, forking children from a fresh interpreter",
            )
            self.forking.discard_warm()

    def server_went(self) -> bool:
        """Whether a fork server (or the origin) has gone: a test killed it."""
        return self.forking.server_went() or self.spawned_server.ended()

    def _launch(self, spec: wire.ChildSpec) -> tuple[wire.ChildSpec, Launch]:
        """How a child that runs pytest itself (spawn, forkserver) is started:
        the run's own arguments, directory and environment, and what it
        must do beyond them.  The environment is the one pytest started in,
        before the conftests' imports: the child's own start-up imports them
        again (a conftest's ``PATH`` prepended at import is prepended once)."""
        params = self.config.invocation_params
        args = list(params.args)
        if is_worker(self.config):  # the child runs its file itself, not through xdist
            args += ["-n", "0", "--dist", "no"]
            workerinput = _json_values(self.config.workerinput)  # type: ignore[attr-defined]
            spec = dataclasses.replace(spec, workerinput=workerinput)
        if self.config.pluginmanager.has_plugin("_cov"):
            args.append("--cov-append")  # else pytest-cov erases the other children's data
        basetemp = None
        if self.basetemp is not None:  # a directory per child: pytest empties it first
            self.spawned += 1
            basetemp = str(self.basetemp / f"spawned-{self.spawned}")
        started = self.config.stash.get(STARTED, None)
        if started is not None:
            environ = dict(started.environ)
        else:  # this plugin was loaded by a conftest: after the start-up began
            environ = dict(os.environ) if self.environ is None else self.environ
        return spec, Launch(args, str(params.dir), environ, basetemp)

    def close(self) -> None:
        self.forking.close()
        self.spawned_server.close()


class Forking:
    """``fork``: the origin, the fork servers it forks, and the child forked
    ahead for the next file."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        #: Forks the fork servers (forked as the run loop starts).
        self.origin: Origin | None = None
        #: Fork the prepared children of the run.
        self.servers: Servers | None = None
        #: A child prepared ahead of time for the next file, and the start
        #: of the imports its fork server preloaded.
        self.warm: Warm | None = None
        self.warm_key: tuple[str, ...] = ()

    def fork_origin(
        self, session: pytest.Session, environ: dict[str, str] | None
    ) -> ChildPlugin | None:
        """Fork the origin of the run's fork servers (from the frame of
        pytest's run loop: the caller's).  Returns None here; each fork
        server the origin forks returns here too and serves, and each child
        a server forks returns here, started for its file, with its plugin;
        ``environ`` is the one every child starts from."""
        turn = Origin.fork()
        if isinstance(turn, Origin):
            self.origin = turn
            return None
        try:
            return serve_order(session, turn, environ)
        except BaseException:  # pragma: no cover - in a server or a child
            traceback.print_exc()
            os._exit(3)

    def start_preloading(self, paths: list[Path]) -> None:
        """Plan what to preload and start the servers that do, so that the
        header can say what they preloaded."""
        servers = self._servers()
        servers.make_plan(paths)
        if is_worker(self.config):  # a worker forks in xdist's loop, as it needs them
            return
        servers.start_planned()
        if self.config.option.verbose >= 0:
            for line in servers.lines(self.config.option.verbose):
                write_line(self.config, line)

    def child(
        self, spec: wire.ChildSpec, index: int, paths: list[Path], more: Path | None
    ) -> Child:
        """A child from the fork server (the one forked ahead, if it suits),
        and the one for ``more``, forked ahead."""
        servers = self._servers()
        ended = servers.replace_ended()
        if self.warm is not None and (ended or self.warm_key != servers.key_for(*paths)):
            self.discard_warm()
        warm = self.warm if self.warm is not None else self._fork_ahead(*paths)
        self.warm = None
        try:
            child = warm.activate(spec, index)
        except OSError:  # it went with its fork server, which a test killed
            warm.discard()
            child = self._fork_ahead(*paths).activate(spec, index)
        if more is not None:
            with contextlib.suppress(OriginEnded):  # the next file's start says so
                self.warm = self._fork_ahead(more)
        return child

    def fork_now(self, file: pytest.File) -> Warm:
        """Fork a child of the parent itself, for ``file``."""
        session, parent = file.session, file.parent

        def body(control: int, fd: int) -> None:
            plugin = start_forked(session, prepare_forked(session), control, fd, parent)
            collect_forked(session)
            finish(session, plugin)

        return fork_warm(body)

    def _fork_ahead(self, *paths: Path) -> Warm:
        """A prepared child from the fork server for ``paths``, forked ahead."""
        servers = self._servers()
        try:
            warm = servers.server_for(*paths).fork()
        except ServerEnded:  # a test killed it: server_for starts a new one
            warm = servers.server_for(*paths).fork()
        self.warm_key = servers.key_for(*paths)
        return warm

    def _servers(self) -> Servers:
        if self.servers is None:
            session = self.config.stash[SESSION]
            on = self.settings.preload == "auto"
            self.servers = Servers(session, self.origin, on, self.settings.timeout)
        return self.servers

    def server_went(self) -> bool:
        """Whether a fork server or the origin has gone (servers that went are closed)."""
        servers = self.servers is not None and self.servers.replace_ended()
        origin = self.origin is not None and self.origin.ended()
        return servers or origin

    def discard_warm(self) -> None:
        if self.warm is not None:
            self.warm.discard()
            self.warm = None

    def close(self) -> None:
        self.discard_warm()
        if self.servers is not None:
            self.servers.close()
        if self.origin is not None:
            self.origin.close()
            self.origin = None


class SpawnedServer:
    """``forkserver``: the spawned fork server, started at the first file.

    First choice: the zygote, which runs pytest's start-up for the run's
    arguments once (:mod:`..server.zygote`).  When it refuses (a thread runs
    after the start-up) or fails, a server that imports what a child may
    import before its pytest does (:func:`.plugins.modules`), each child
    running all of pytest; with pytest alone when that server refuses one of
    those imports (a server in which a refused import ran is not used).  The
    header says why each one was passed over.  When not even that one starts
    in time, each child is spawned.
    """

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.server: ForkServer | None = None
        #: Why no fork server could start: each child is spawned.
        self.failed = ""

    def child(self, launch: Launch) -> Warm | None:
        """A child of the spawned fork server (a new server when a test killed
        it), or None when no server could start."""
        for _ in range(2):
            server = self._server(launch)
            if server is None:
                return None
            try:
                return server.fork()
            except ServerEnded:  # a test killed it: _server starts a new one
                continue
        return None

    def ended(self) -> bool:
        """Whether the server has gone (a test killed it)."""
        return self.server is not None and self.server.ended()

    def _server(self, launch: Launch) -> ForkServer | None:
        if self.ended():
            self.close()
        if self.failed:
            return None
        if self.server is None:
            seconds = PRELOAD_SECONDS if self.settings.timeout is None else self.settings.timeout
            seconds = min(seconds, PRELOAD_SECONDS)
            tries = (
                (
                    names.CHILD_CONFIGURE_IMPORTS,
                    launch.args,
                    "each child runs pytest's start-up",
                    "",
                ),
                (
                    compat.modules(self.config),
                    None,
                    "the fork server preloads no plugin",
                    "an import",
                ),
            )
            fds = inherited_fds(self.config)
            for modules, args, passed_over, unnamed in tries:
                server, why = _spawn_server(launch, modules, seconds, args, unnamed, fds)
                if server is not None:
                    self.server = server
                    return server
                write_line(self.config, f"isolation: {passed_over} ({why})")
            try:
                self.server = ForkServer.spawn(launch.cwd, launch.environ, [], seconds, fds=fds)
            except RuntimeError as error:  # did not start in time: each child is spawned
                self.failed = str(error).strip().splitlines()[-1]
                write_line(self.config, f"{self.failed}; each child is spawned instead")
                return None
        return self.server

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None


def shared_basetemp(config: pytest.Config) -> Path | None:
    """The run's base temporary directory, made once by the parent.

    Without it every child would make a basetemp of its own: a new
    ``pytest-N`` per file (pytest keeps only the last three), or, with
    ``--basetemp``, wipe the directories of the files before it.
    """
    factory = pytest_private.tmp_path_factory(config)
    return None if factory is None else factory.getbasetemp()


def inherited_fds(config: pytest.Config) -> tuple[int, ...]:
    """The file descriptors the run inherited (still open), which a fresh
    interpreter for a file inherits too, as a fresh ``pytest FILE`` would."""
    started = config.stash.get(STARTED, None)
    return () if started is None else started.open_fds()


def write_line(config: pytest.Config, line: str) -> None:
    """A line of its own (``--setup-show`` leaves its last line open)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        writer = config.get_terminal_writer()
        if writer.width_of_current_line:
            writer.line()
        reporter.write_line(line)


def _json_values(mapping: dict[str, Any]) -> dict[str, Any]:
    """``mapping`` with what JSON cannot carry as strings."""
    loaded: dict[str, Any] = json.loads(json.dumps(mapping, default=str))
    return loaded


def _spawn_server(
    launch: Launch,
    modules: Sequence[str],
    seconds: float,
    args: Sequence[str] | None,
    unnamed: str,
    fds: tuple[int, ...],
) -> tuple[ForkServer | None, str]:
    """A spawned fork server for ``launch`` that took all of ``modules`` (and,
    with ``args``, pytest's start-up), inheriting ``fds``, or why there is none."""
    try:
        server = ForkServer.spawn(launch.cwd, launch.environ, modules, seconds, args, fds)
    except RuntimeError as error:  # its start-up failed: each child's will say how
        return None, str(error).strip().splitlines()[-1]
    loaded = preload.Loaded(**json.loads(server.hello))
    if loaded.why:
        server.close()
        return None, loaded.reason(unnamed)
    return server, ""
