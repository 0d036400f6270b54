"""The parent side of file mode: placeholders in, real reports out."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import threading
import time
import traceback
from collections.abc import Generator
from collections.abc import Iterator
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from typing import NamedTuple

import pytest

from pytest_isolation.core import names
from pytest_isolation.core.keys import COLLECT_IN_CHILD
from pytest_isolation.core.keys import START_METHOD
from pytest_isolation.core.placement import ALONE
from pytest_isolation.core.placement import TOGETHER
from pytest_isolation.core.placement import Placement
from pytest_isolation.core.placement import Placements
from pytest_isolation.core.settings import THREADS_RUNNING
from pytest_isolation.core.settings import Settings
from pytest_isolation.core.settings import plugin_threads
from pytest_isolation.core.settings import resolve_start
from pytest_isolation.core.shared import names as shared_names
from pytest_isolation.core.xdist import is_worker
from pytest_isolation.filemode import childcov
from pytest_isolation.filemode import conftests
from pytest_isolation.filemode import crash
from pytest_isolation.filemode import lastfailed
from pytest_isolation.filemode import lifetime
from pytest_isolation.filemode import plugins
from pytest_isolation.filemode import preload
from pytest_isolation.filemode import progress
from pytest_isolation.filemode import shared
from pytest_isolation.filemode import wire
from pytest_isolation.filemode.child import ChildPlugin
from pytest_isolation.filemode.child import collect_forked
from pytest_isolation.filemode.child import finish
from pytest_isolation.filemode.child import prepare_forked
from pytest_isolation.filemode.child import run_loop_logging_kept
from pytest_isolation.filemode.child import start_forked
from pytest_isolation.filemode.childend import apply_raised_status
from pytest_isolation.filemode.childend import write_raised_status
from pytest_isolation.filemode.depth import headroom
from pytest_isolation.filemode.launch import Child
from pytest_isolation.filemode.launch import ForkServer
from pytest_isolation.filemode.launch import Launch
from pytest_isolation.filemode.launch import Origin
from pytest_isolation.filemode.launch import ServerEnded
from pytest_isolation.filemode.launch import Warm
from pytest_isolation.filemode.launch import describe_exit
from pytest_isolation.filemode.launch import end_at_once
from pytest_isolation.filemode.launch import end_tree
from pytest_isolation.filemode.launch import fork_warm
from pytest_isolation.filemode.launch import spawn_child
from pytest_isolation.filemode.nodeargs import NodeArgs
from pytest_isolation.filemode.nodeargs import fail_if_not_found
from pytest_isolation.filemode.nodeargs import split_node_args
from pytest_isolation.filemode.nodeargs import write_not_found
from pytest_isolation.filemode.nodes import PLACEMENT
from pytest_isolation.filemode.nodes import PLACEMENT_ERROR
from pytest_isolation.filemode.nodes import ChildCollectionError
from pytest_isolation.filemode.nodes import ChildTest
from pytest_isolation.filemode.nodes import IsolatedFile
from pytest_isolation.filemode.nodes import IsolatedFileItem
from pytest_isolation.filemode.nodes import gather_shared
from pytest_isolation.filemode.nodes import placements_line
from pytest_isolation.filemode.nodes import process_of
from pytest_isolation.filemode.reaping import Finishing
from pytest_isolation.filemode.reaping import pass_through
from pytest_isolation.filemode.relay import FileRelay
from pytest_isolation.filemode.servers import PRELOAD_SECONDS
from pytest_isolation.filemode.servers import OriginEnded
from pytest_isolation.filemode.servers import Servers
from pytest_isolation.filemode.servers import serve_order

__all__ = ["FileModeController"]

#: How long an interrupted run reads what its ended child had sent.
_DRAIN_SECONDS = 1.0

# Options of pytest's own selection whose work moves into the children, by dest.
_CHILD_SELECTION_OPTIONS = {"keyword": "", "markexpr": "", "deselect": None}


@contextlib.contextmanager
def selection_deferred_to_children(config: pytest.Config) -> Iterator[None]:
    """Hide ``-k``, ``-m`` and ``--deselect`` from the parent's item selection.

    The parent only has one placeholder per file; the children apply the
    selection to the real tests.  This relies on the ``dest`` names of
    pytest's own options; ``tests/test_controller.py`` fails if they change.
    """
    option = config.option
    saved = {name: getattr(option, name) for name in _CHILD_SELECTION_OPTIONS}
    for name, blank in _CHILD_SELECTION_OPTIONS.items():
        setattr(option, name, blank)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(option, name, value)


def shared_basetemp(config: pytest.Config) -> Path | None:
    """The run's base temporary directory, made once by the parent.

    Without it every child would make a basetemp of its own: a new
    ``pytest-N`` per file (pytest keeps only the last three), or, with
    ``--basetemp``, wipe the directories of the files before it.  Private
    pytest API, unavoidable: outside a test the factory is only reachable as
    ``config._tmp_path_factory``; ``tests/test_controller.py`` fails loudly if
    that changes.
    """
    factory: pytest.TempPathFactory | None = getattr(config, "_tmp_path_factory", None)
    return None if factory is None else factory.getbasetemp()


class FileModeController:
    """Runs every test file in a child process and replays its reports.

    Registered as ``isolation-controller`` in file mode (in each xdist worker
    too); it offers :meth:`collect_in_child` under ``COLLECT_IN_CHILD``.  Beside
    the settings it keeps the children it has started or prepared, each stage
    of a child's life in an attribute of its own, as the run moves them along.
    """

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        #: Threads of the process before any test ran: the main one and the plugins' idle ones.
        idle, beside = plugin_threads(config, is_worker(config))
        self.baseline_threads = 1 + idle
        self.method, self.reason = resolve_start(settings.start, self.baseline_threads, beside)
        config.stash[COLLECT_IN_CHILD] = self.collect_in_child
        self.node_args: NodeArgs | None = None
        self.notfound: list[str] = []
        #: The SIGTERM/SIGHUP handlers to put back when the session finishes.
        self.ending: dict[int, Any] = {}
        #: A forked child prepared ahead of time for the next file, and the
        #: modules its fork server preloaded.
        self.warm: Warm | None = None
        self.warm_key: tuple[str, ...] = ()
        #: Children started for a file before pytest's loop reached it, by item index.
        self.started: dict[int, Child] = {}
        #: Fork the prepared children of the run (started at the first file).
        self.servers: Servers | None = None
        #: Forks the fork servers of ``fork`` (forked as the run loop starts).
        self.origin: Origin | None = None
        #: The spawned fork server of ``forkserver`` (started at the first file).
        self.zygote: ForkServer | None = None
        #: Why no fork server could start (``forkserver``): each child is spawned.
        self.server_failed = ""
        #: Index of each placeholder in session.items, for children forked ahead.
        self.positions: dict[pytest.Item, int] = {}
        #: Children that finished and still run their unconfigure, until reaped.
        self.finishing = Finishing(config, settings.timeout, settings.kill_grace)
        self.basetemp: Path | None = None
        self.spawned = 0
        #: The recursion headroom of pytest's run loop: spawned children run their tests as deep.
        self.loop_room = 0
        #: The environment the run started with: every file's child starts from it
        #: (what a test run in this process, of a non-Python collector, sets is its own).
        self.environ: dict[str, str] | None = None
        #: The exit status a plugin raised at the end of a child's session, and the file's.
        self.status = 0
        self.status_from = ""
        #: Where each file runs (alone, in a group's process, with the files not isolated).
        default = TOGETHER if settings.opted_in else ALONE
        self.placements = Placements(config, Placement(default, "", settings.mode_from))
        #: The shared process that runs the next files, after one of them ran.
        self.shared: Shared | None = None
        #: The message stream of each running shared child, by pid (it is read file by file).
        self.receivers: dict[int, wire.Receiver] = {}
        #: The shared fixtures set up in this process, until their teardown.
        self.shared_fixtures: shared.Shared | None = None
        #: The node id of the last test run, whose teardown reports theirs.
        self.last_test = ""
        config.add_cleanup(self.close)

    @property
    def method(self) -> str:
        """How children start: ``fork`` or ``spawn`` (kept in the stash for the run report)."""
        return self.config.stash[START_METHOD]

    @method.setter
    def method(self, value: str) -> None:
        self.config.stash[START_METHOD] = value

    # -- collection: one placeholder per test file, nothing imported ----------

    @pytest.hookimpl(wrapper=True)
    def pytest_collect_file(
        self, file_path: Path, parent: pytest.Collector
    ) -> Generator[None, list[pytest.Collector], list[pytest.Collector]]:
        collectors = yield
        if any(isinstance(c, pytest.Module) for c in collectors):
            file = IsolatedFile.from_parent(parent, path=file_path)
            try:
                file.stash[PLACEMENT] = self.placements.of(file_path)
            except pytest.UsageError as error:  # the file fails to collect: the run stops there
                file.stash[PLACEMENT_ERROR] = str(error)
            return [file]
        return collectors

    def pytest_plugin_registered(self, plugin: object) -> None:
        self.placements.add(plugin)  # a conftest, collected: its directory's placement

    @pytest.hookimpl(wrapper=True, tryfirst=True)  # before the session matches config.args
    def pytest_collection(self, session: pytest.Session) -> Generator[None, object, object]:
        config = self.config
        original = config.args
        if not config.option.pyargs:
            self.node_args = split_node_args(original, config.invocation_params.dir)
            config.args = self.node_args.paths
        try:
            with conftests.item_hook_without_conftests(config):
                return (yield)
        finally:
            config.args = original

    @pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: -k/-m/--deselect see no placeholder
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> Generator[None]:
        with selection_deferred_to_children(self.config):
            yield
        dropped = [i for i in items if isinstance(i, ChildTest) and i.deselected_in_child]
        if dropped:
            items[:] = [i for i in items if i not in dropped]
            self.config.hook.pytest_deselected(items=dropped)
        lastfailed.select_files(self.config, items)
        gather_shared(items)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.positions = {item: index for index, item in enumerate(session.items)}

    def pytest_report_collectionfinish(self, items: Sequence[pytest.Item]) -> list[str] | None:
        """Explain the "collected N items" line, which counts files in file mode."""
        if self.config.option.collectonly or self.config.option.verbose < 0:
            return None
        files = [process_of(item) for item in items if isinstance(item, IsolatedFileItem)]
        lines = [placements_line(files)]
        for path in conftests.with_item_hook(self.config):
            where = os.path.relpath(path, self.config.invocation_params.dir)
            lines.append(
                f"isolation: {where}: pytest_collection_modifyitems runs in each file's "
                f"process, on that file's tests (it cannot reorder tests across files)"
            )
        return lines

    def pytest_report_header(self) -> list[str]:
        how = "each test file in its own process"
        if self.settings.opted_in:
            how = (
                f"set by {self.settings.mode_from}: the files placed in processes of their "
                "own run there, the others together"
            )
        return [
            f"isolation: file mode, {how} (start method {self.method}: {self.reason})",
            *plugins.notices(self.config),
        ]

    # -- running ----------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)  # before pytest's runner would run the placeholder here
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> bool | None:
        if not isinstance(item, IsolatedFileItem):
            return None
        file = item.parent
        assert isinstance(file, IsolatedFile)
        following = self.positions.get(nextitem) if isinstance(nextitem, IsolatedFileItem) else None
        self.run_file(file, self.positions[item], following)
        tear_down_towards(item.session, nextitem)
        if nextitem is None:
            self._tear_down_shared(item)
        return True

    def run_file(self, file: IsolatedFile, index: int, following: int | None) -> None:
        """Run one file in a child: the rest of it in new ones after crashes,
        and again while something failed and retries are left.  ``following``
        is the index of the file the run goes on with (under xdist, the next
        one scheduled for this worker), whose child starts early."""
        started = time.monotonic()
        shared = self.shared if self.shared is not None and index in self.shared.members else None
        members = self._members(index) if shared is None else shared.members
        more = self._path_at(following if len(members) < 2 else members[-1] + 1)
        # A retry cannot give a shared process's file back the state its earlier files left.
        alone = process_of(self.config.stash[_SESSION].items[index]) is None
        retries = self.settings.retries if alone else 0
        relay = FileRelay(file, self._not_found, retries=retries, scope=self.settings.retry_scope)
        spec = self._spec(index, members)
        child = self.started.pop(index, None) if shared is None else shared.child
        self.shared = None
        replaced = False
        while True:
            if child is None:
                skip = relay.skip()
                attempt = dataclasses.replace(
                    spec if not skip else self._spec(index, [index]),
                    skip=skip,
                    maxfail=self._failures_left(),
                )
                members = [index] if skip else members
                child = self._start(attempt, file, index, more)
            death = self._relay(child, relay)
            if death is not None and not replaced and self._went_with_its_server(death, relay):
                replaced = True  # it never ran: the file starts in a child of a new server
                relay.next_child()
                child = None
                continue
            if relay.end.done:
                self.shared = Shared(child, members[1:])
            resumes = death is not None and relay.crashed(death.how, death.tail)
            if resumes and not self._stopping():  # -x/--maxfail count the crash too
                relay.next_child()  # the rest of this attempt, in a new child
            elif self._stopping() or not relay.retry():
                break
            child = None
        relay.conclude()
        if relay.attempts.ran:
            self.last_test = relay.attempts.ran[-1]
        if relay.status is not None and not self.status:
            self.status, self.status_from = relay.status, str(file.nodeid)
        seconds = time.monotonic() - started
        self.config.hook.pytest_isolation_file_finished(
            config=self.config, record=relay.record, seconds=seconds
        )
        if death is None and following is not None and not self._may_be_stolen():
            self._start_next(following)

    def _went_with_its_server(self, death: Death, relay: FileRelay) -> bool:
        """A child forked ahead that a test's killing of its fork server (or
        of the origin) took with it before it said anything."""
        if not relay.silent or "SIGKILL" not in death.how:
            return False
        servers = self.servers is not None and self.servers.replace_ended()
        origin = self.origin is not None and self.origin.ended()
        zygote = self.zygote is not None and self.zygote.ended()
        return servers or origin or zygote

    def _may_be_stolen(self) -> bool:
        """Under ``--dist worksteal`` another worker may take the next file."""
        return is_worker(self.config) and self.config.getoption("dist", "no") == "worksteal"

    def _stopping(self) -> bool:
        session = self.config.stash[_SESSION]
        return bool(session.shouldfail or session.shouldstop)

    def _start_next(self, index: int) -> None:
        """Start the next file's child now, before pytest's loop comes to it.

        Its messages wait in the pipe until the loop reaches the file; this
        takes the loop's own work between two files off the critical path.
        """
        if self._stopping() or (self.shared is not None and index in self.shared.members):
            return
        session = self.config.stash[_SESSION]
        items = session.items
        file = items[index].parent
        assert isinstance(file, IsolatedFile)
        members = self._members(index)
        more = self._path_at(members[-1] + 1)
        spec = dataclasses.replace(self._spec(index, members), maxfail=self._failures_left())
        self.started[index] = self._start(spec, file, index, more)

    def _members(self, index: int) -> list[int]:
        """The placeholders whose files one child runs, from ``index`` on: the
        ones after it of the same shared process, in run order.  Only
        ``index`` in a pytest-xdist worker, which learns its next file only
        as it goes."""
        items = self.config.stash[_SESSION].items
        process = process_of(items[index])
        members = [index]
        if process is None or is_worker(self.config):
            return members
        while members[-1] + 1 < len(items) and process_of(items[members[-1] + 1]) == process:
            members.append(members[-1] + 1)
        return members

    def _spec(self, index: int, members: list[int]) -> wire.ChildSpec:
        """What the child of the files at ``members`` (``index`` first) runs."""
        items = self.config.stash[_SESSION].items
        path = items[index].path
        more = tuple((str(items[i].path), self._selectors(items[i].path)) for i in members[1:])
        marked = tuple(
            (str(items[i].path), found.spelled())
            for i in members
            if (found := _placement(items[i])) and found.marked
        )
        session = self.config.stash[_SESSION]
        named = tuple(str(items[i].path) for i in members if session.isinitpath(items[i].path))
        return wire.ChildSpec(
            path=str(path),
            selectors=self._selectors(path),
            more=more,
            marked=marked,
            named=named,
            loop_room=self.loop_room,
        )

    def _path_at(self, index: int | None) -> Path | None:
        """The file of the placeholder at ``index`` in ``session.items``, if any."""
        items = self.config.stash[_SESSION].items
        if index is None or index >= len(items) or not isinstance(items[index], IsolatedFileItem):
            return None
        return items[index].path

    def collect_in_child(self, file: pytest.File) -> list[ChildTest]:
        """``--collect-only``: ask a child for the file's tests, return stand-ins."""
        relay = FileRelay(file, self._not_found, collect_only=True)
        placed = file.stash.get(PLACEMENT, None)
        marked = ((str(file.path), placed.spelled()),) if placed and placed.marked else ()
        spec = wire.ChildSpec(
            path=str(file.path),
            selectors=self._selectors(file.path),
            collect_only=True,
            marked=marked,
            named=(str(file.path),) if file.session.isinitpath(file.path) else (),
        )
        death = self._relay(self._start(spec, file), relay)
        for report in relay.collection.problems:
            if report.skipped:
                reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else ""
                reason = reason.removeprefix("Skipped: ")
                raise pytest.skip.Exception(reason, allow_module_level=True)
            raise ChildCollectionError(report.longrepr)
        if death is not None:
            how, tail = death
            raise ChildCollectionError(
                f"isolation: the process collecting {file.nodeid} {how}\n{tail}"
            )
        found = relay.collection
        tests = [ChildTest.for_nodeid(file, nodeid) for nodeid in found.collected or ()]
        dropped = [ChildTest.for_nodeid(file, nodeid, True) for nodeid in found.deselected]
        return tests + dropped

    def _relay(self, child: Child, relay: FileRelay) -> Death | None:
        """Replay the child's messages until it finishes or dies.

        Returns None when it finished, else how it died and its stderr tail.
        Any error or Ctrl-C in the parent ends the child first.
        """
        timeout = self.settings.timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        receiver = self.receivers.pop(child.pid, None) or wire.Receiver(child.stream)
        try:
            for kind, payload in receiver.messages(deadline):
                relay.handle(kind, payload)
                if relay.end.finished or relay.end.done:
                    break
        except wire.TimedOut:
            end_tree(child, self.settings.kill_grace)
            tail = child.stderr_tail()
            relay.process_ended(child.wait(), timed_out=True)
            child.close()
            return Death(f"timed out after {timeout:g} s", tail)
        except KeyboardInterrupt:  # Ctrl-C, SIGTERM: report what the child finished
            end_at_once(child, keep_stream=True)
            try:
                for kind, payload in receiver.drain(_DRAIN_SECONDS):
                    relay.handle(kind, payload)
            finally:
                child.close()
            raise
        except BaseException:
            end_at_once(child)
            raise
        end = relay.end
        if end.done:  # the child goes on with the next file of its shared process
            self.receivers[child.pid] = receiver
            relay.process_ended(0)
            return None
        if end.interrupted:
            _end(child)
            relay.conclude()
            if end.exit_reason is not None:
                pytest.exit(end.exit_reason, end.exit_code)
            crash.interrupt_at(end.where)
        if end.finished:  # its plugins' unconfigure runs while the next file does
            seen = pass_through(child, 0, end.stderr)
            child.stream.close()
            relay.process_ended(0)
            self.finishing.add(child, str(relay.file.nodeid), seen)
            return None
        returncode = child.wait()
        relay.process_ended(returncode)
        death = Death(describe_exit(returncode), child.stderr_tail())
        child.close()
        return death

    def _start(
        self, spec: wire.ChildSpec, file: pytest.File, index: int = -1, more: Path | None = None
    ) -> Child:
        """A child for ``file``; ``more``: the file after it, whose child is
        forked ahead."""
        self._reap(wait=False)
        if self.basetemp is None:
            self.basetemp = shared_basetemp(self.config)
        self._leave_fork_if_threads()
        paths = [Path(path) for path, _ in spec.files]
        if self.method in ("spawn", "forkserver"):
            spec, launch = self._launch(spec)
            warm = None if self.method == "spawn" else self._forkserver_child(launch)
            if warm is None:  # spawn, or no fork server could start: a fresh interpreter
                return spawn_child(spec, launch.argv, launch.cwd, launch.environ)
            return warm.activate(spec, index, launch)
        if index < 0:  # --collect-only: during collection, before any fork server
            return self._fork_now(file).activate(spec, index)
        try:
            return self._forked(spec, index, paths, more)
        except OriginEnded as ended:  # a test killed it: fresh interpreters from now on
            self.method, self.reason = "spawn", str(ended)
            _write_line(self.config, f"{ended}; each child is spawned instead")
            self._discard_warm()
            return self._start(spec, file, index, more)

    def _forked(
        self, spec: wire.ChildSpec, index: int, paths: list[Path], more: Path | None
    ) -> Child:
        """A child from the fork server (the one forked ahead, if it suits),
        and the one for ``more``, forked ahead."""
        servers = self._servers()
        ended = servers.replace_ended()
        if self.warm is not None and (ended or self.warm_key != servers.key_for(*paths)):
            self._discard_warm()
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

    def _leave_fork_if_threads(self) -> None:
        """``auto``: fork no more once a thread runs beside the run's own."""
        threads = threading.active_count() > self.baseline_threads
        if self.method == "fork" and self.settings.start == "auto" and threads:
            self.method, self.reason = "forkserver", f"auto: {THREADS_RUNNING}"
            _write_line(
                self.config,
                "isolation: threads are running, forking children from a fresh interpreter",
            )
            self._discard_warm()

    def _launch(self, spec: wire.ChildSpec) -> tuple[wire.ChildSpec, Launch]:
        """How a child that runs pytest itself (spawn, forkserver) is started:
        the run's own arguments, directory and environment, and what it
        must do beyond them."""
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
        environ = dict(os.environ) if self.environ is None else self.environ
        return spec, Launch(args, str(params.dir), environ, basetemp)

    def _forkserver_child(self, launch: Launch) -> Warm | None:
        """A child of the spawned fork server (a new server when a test killed
        it), or None when no server could start."""
        for _ in range(2):
            server = self._forkserver(launch)
            if server is None:
                return None
            try:
                return server.fork()
            except ServerEnded:  # a test killed it: _forkserver starts a new one
                continue
        return None

    def _forkserver(self, launch: Launch) -> ForkServer | None:
        """The spawned fork server (``forkserver``), started at the first file.

        First choice: the zygote, which runs pytest's start-up for the run's
        arguments once (:mod:`.zygote`).  When it refuses (a thread runs
        after the start-up) or fails, a server that imports what a child may
        import before its pytest does (:func:`.plugins.modules`), each child
        running all of pytest; with pytest alone when that server refuses
        one of those imports (a server in which a refused import ran is not
        used).  The header says why each one was passed over.  None when
        not even that one started in time: each child is then spawned."""
        if self.zygote is not None and self.zygote.ended():  # a test killed it
            self.zygote.close()
            self.zygote = None
        if self.server_failed:
            return None
        if self.zygote is None:
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
                    plugins.modules(self.config),
                    None,
                    "the fork server preloads no plugin",
                    "an import",
                ),
            )
            for modules, args, passed_over, unnamed in tries:
                server, why = _spawn_server(launch, modules, seconds, args, unnamed)
                if server is not None:
                    self.zygote = server
                    return server
                _write_line(self.config, f"isolation: {passed_over} ({why})")
            try:
                self.zygote = ForkServer.spawn(launch.cwd, launch.environ, [], seconds)
            except RuntimeError as error:  # did not start in time: each child is spawned
                self.server_failed = str(error).strip().splitlines()[-1]
                _write_line(self.config, f"{self.server_failed}; each child is spawned instead")
                return None
        return self.zygote

    def _fork_now(self, file: pytest.File) -> Warm:
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
            session = self.config.stash[_SESSION]
            on = self.settings.preload == "auto"
            self.servers = Servers(session, self.origin, on, self.settings.timeout)
        return self.servers

    def _discard_warm(self) -> None:
        if self.warm is not None:
            self.warm.discard()
            self.warm = None

    def close(self) -> None:
        """End the run's children: unused ones, the finished ones, the server."""
        for child in self.started.values():
            _end(child)
        self.started = {}
        if self.shared is not None:
            _end(self.shared.child)
            self.shared = None
        self._discard_warm()
        self._reap(wait=True)
        if self.servers is not None:
            self.servers.close()
        if self.origin is not None:
            self.origin.close()
            self.origin = None
        if self.zygote is not None:
            self.zygote.close()
            self.zygote = None

    def _reap(self, wait: bool) -> None:
        """The finished children that have ended (all, with ``wait``)."""
        failed = self.finishing.reap(wait)
        if failed is not None and not self.status:
            self.status, self.status_from = failed

    def _selectors(self, path: Path) -> tuple[tuple[str, ...], ...] | None:
        return None if self.node_args is None else self.node_args.selectors_for(path)

    def _failures_left(self) -> int:
        maxfail = int(self.config.getoption("maxfail") or 0)
        if not maxfail:
            return 0
        return max(maxfail - self.config.stash[_SESSION].testsfailed, 1)

    def _not_found(self, arg: str) -> None:
        path, _, names = arg.partition("::")
        relative = os.path.relpath(path, self.config.invocation_params.dir)
        self.notfound.append(f"{relative}::{names}")

    # -- end of the run ---------------------------------------------------------

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.config.stash[_SESSION] = session
        self.ending = lifetime.interrupt_on_ending()  # until the session finishes

    @pytest.hookimpl(tryfirst=True)  # after the loop's wrappers have set up, before pytest's loop
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        # Called as pytest's own loop is: a child that returns into this
        # frame (see _fork_origin) runs its tests exactly as deep in the stack.
        childcov.quiet_parent()
        found = [item.parent for item in session.items if isinstance(item, IsolatedFileItem)]
        files = [file for file in found if file is not None]
        if not is_worker(self.config):  # an xdist controller counts its workers' files
            progress.estimate(session, files)
        running = bool(files) and not self.config.option.collectonly
        if running:
            self._share_fixtures(files, self._shared_in_use(files))
        # After the shared set-up: what it put into the environment stays for
        # every test after it, as a session fixture's change does in a plain run.
        self.environ = dict(os.environ)
        self.loop_room = headroom()
        if running:
            self._leave_fork_if_threads()  # a thread a plugin started after configure
        if running and self.method == "fork":
            self.basetemp = shared_basetemp(self.config)  # every child's, made once
            plugin = self._fork_origin(session)
            if plugin is not None:  # a file's child, forked by a fork server: see Origin
                try:
                    # It collects and runs its tests from this frame, as pytest's
                    # own loop would: as deep in the stack.
                    with run_loop_logging_kept(self.config):
                        self.config.hook.pytest_collection(session=session)
                    try:
                        for item, nextitem in plugin.items(session):
                            item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
                    except BaseException as error:
                        plugin.stopped(error)
                    finish(session, plugin)  # ends the process
                except BaseException:
                    traceback.print_exc()
                os._exit(3)
            self._start_preloading([file.path for file in files])

    def _fork_origin(self, session: pytest.Session) -> ChildPlugin | None:
        """Fork the origin of the run's fork servers, here, in the frame of
        pytest's run loop.  Returns None here; each fork server the origin
        forks returns here too and serves, and each child a server forks
        returns here, started for its file, with its plugin."""
        turn = Origin.fork()
        if isinstance(turn, Origin):
            self.origin = turn
            return None
        try:
            return serve_order(session, turn, self.environ)
        except BaseException:  # pragma: no cover - in a server or a child
            traceback.print_exc()
            os._exit(3)

    def _shared_in_use(self, files: list[pytest.Collector]) -> set[str] | None:
        """Which shared fixtures the selected tests use, when the run selects
        (``-k``, ``-m``, paths, node ids, ``--lf``...): a throwaway child
        collects the files, as a plain run would before any set-up.  None
        without a selection, or when that child could not tell (said)."""
        wanted = shared_names(self.config)
        if not wanted or self.method != "fork" or not self._selects():
            return None
        first, rest = files[0], files[1:]
        assert isinstance(first, pytest.File)
        spec = wire.ChildSpec(
            path=str(first.path),
            selectors=self._selectors(first.path),
            more=tuple((str(file.path), self._selectors(file.path)) for file in rest),
            collect_only=True,
            uses=tuple(wanted),
            named=tuple(str(f.path) for f in files if f.session.isinitpath(f.path)),
        )
        child = self._fork_now(first).activate(spec, -1)
        timeout = self.settings.timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        used: set[str] | None = None
        try:
            for kind, payload in wire.Receiver(child.stream).messages(deadline):
                if kind == wire.USES:
                    used = set(payload["names"])
                if kind in (wire.USES, wire.FINISHED, wire.INTERRUPTED):
                    break
        except wire.TimedOut:
            pass
        finally:
            _end(child)
        if used is None:
            _write_line(
                self.config,
                "isolation: the collection that finds which shared fixtures the selected "
                "tests use did not finish: every shared fixture is set up",
            )
        return used

    def _selects(self) -> bool:
        """Whether the run selects tests (so some shared fixture may go unused)."""
        config = self.config
        option = config.option
        if option.keyword or option.markexpr or option.deselect:
            return True
        if getattr(option, "lf", False):  # -p no:cacheprovider has no --lf
            return True
        if config.getoption("ignore") or config.getoption("ignore_glob"):
            return True
        return config.args_source == pytest.Config.ArgsSource.ARGS

    def _share_fixtures(self, files: list[pytest.Collector], used: set[str] | None) -> None:
        """Set up the shared fixtures here, before the fork server (fork only);
        only ``used`` ones, when known."""
        session = self.config.stash[_SESSION]
        lines, self.shared_fixtures = shared.share(session, files, self.method, used)
        for line in lines:
            _write_line(self.config, line)

    def _tear_down_shared(self, item: pytest.Item) -> None:
        """Tear down the shared fixtures once, after the last file."""
        held, self.shared_fixtures = self.shared_fixtures, None
        if held is not None:
            shared.tear_down(held, item, self.last_test)

    def _start_preloading(self, paths: list[Path]) -> None:
        """Plan what to preload and start the server that does, so that the
        header can say what it preloaded."""
        servers = self._servers()
        servers.make_plan(paths)
        if is_worker(self.config):  # a worker forks in xdist's loop, as it needs them
            return
        servers.start_planned()
        if self.config.option.verbose >= 0:
            for line in servers.lines(self.config.option.verbose):
                _write_line(self.config, line)

    @pytest.hookimpl(tryfirst=True)  # before the terminal shows its percentage
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        progress.reported(self.config.stash[_SESSION], report.nodeid)

    @pytest.hookimpl(tryfirst=True)  # before the terminal reporter ends the run
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self._reap(wait=True)  # every child's end happens within the run
        if self.shared_fixtures is not None and session.items:  # the run stopped early
            self._tear_down_shared(session.items[-1])
        lifetime.put_back(self.ending)
        fail_if_not_found(session, self.notfound)
        progress.save(self.config)
        apply_raised_status(session, self.status)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        write_not_found(terminalreporter, self.notfound)
        write_raised_status(terminalreporter, self.status, self.status_from)

    def pytest_isolation_workeroutput(self, output: dict[str, Any]) -> None:
        """In an xdist worker: what the controller's summary and run report need."""
        output["notfound"] = list(self.notfound)
        output["start_method"] = self.method
        output["status"] = self.status
        output["status_from"] = self.status_from


_SESSION = pytest.StashKey[pytest.Session]()


def tear_down_towards(session: pytest.Session, nextitem: pytest.Item | None) -> None:
    """Tear down what the parent set up and ``nextitem`` does not share, as
    pytest does after each item: a placeholder sets nothing up, but an item of
    a non-Python collector that ran in the parent before it may have (its
    directories' fixtures), and the next such item, elsewhere, would find them
    ("previous item was not torn down properly", seen with pygments' snippet
    files).  Private pytest API, unavoidable: pytest's runner keeps the stack
    in ``session._setupstate``; ``tests/test_controller.py`` fails loudly if
    it changes.
    """
    session._setupstate.teardown_exact(nextitem)


def _placement(item: pytest.Item) -> Placement | None:
    """Where a placeholder's file runs, as the parent found it."""
    parent = item.parent
    return None if parent is None else parent.stash.get(PLACEMENT, None)


class Shared(NamedTuple):
    """A child that has run a file of its shared process and runs the next ones."""

    child: Child
    #: The indexes in ``session.items`` of the placeholders of the files it
    #: runs next, the next one first.
    members: list[int]


class Death(NamedTuple):
    """How a child died (``was killed by signal 9 (SIGKILL)``), and its stderr's end."""

    how: str
    tail: str


def _json_values(mapping: dict[str, Any]) -> dict[str, Any]:
    """``mapping`` with what JSON cannot carry as strings."""
    loaded: dict[str, Any] = json.loads(json.dumps(mapping, default=str))
    return loaded


def _end(child: Child) -> None:
    child.kill()
    child.wait()
    child.close()


def _write_line(config: pytest.Config, line: str) -> None:
    """A line of its own (``--setup-show`` leaves its last line open)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        writer = config.get_terminal_writer()
        if writer.width_of_current_line:
            writer.line()
        reporter.write_line(line)


def _spawn_server(
    launch: Launch,
    modules: Sequence[str],
    seconds: float,
    args: Sequence[str] | None,
    unnamed: str,
) -> tuple[ForkServer | None, str]:
    """A spawned fork server for ``launch`` that took all of ``modules`` (and,
    with ``args``, pytest's start-up), or why there is none."""
    try:
        server = ForkServer.spawn(launch.cwd, launch.environ, modules, seconds, args=args)
    except RuntimeError as error:  # its start-up failed: each child's will say how
        return None, str(error).strip().splitlines()[-1]
    loaded = preload.Loaded(**json.loads(server.hello))
    if loaded.why:
        server.close()
        return None, loaded.reason(unnamed)
    return server, ""
