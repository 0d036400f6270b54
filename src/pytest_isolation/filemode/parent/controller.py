"""The parent side of file mode: placeholders in, real reports out.

The controller is pytest's side of it: its hooks hand each stage of a run
to the object that does it.  :class:`.collecting.Collection` collects one
placeholder per file; :class:`.starting.Starter` starts each file's child;
:class:`.relay.Relayer` replays what the child sends and hands it on to be
reaped; :class:`.shared.SharedFixtures` sets the shared fixtures up and
tears them down.  The controller itself keeps only which child runs which
file next.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Generator
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from typing import NamedTuple

import pytest

from pytest_isolation.core import pytest_private
from pytest_isolation.core.keys import COLLECT_IN_CHILD
from pytest_isolation.core.keys import SERVERS_ENDED
from pytest_isolation.core.settings import Settings
from pytest_isolation.core.xdist import is_worker
from pytest_isolation.filemode import compat
from pytest_isolation.filemode import cov
from pytest_isolation.filemode import lifetime
from pytest_isolation.filemode import wire
from pytest_isolation.filemode.child import forked
from pytest_isolation.filemode.depth import headroom
from pytest_isolation.filemode.loops import replacing
from pytest_isolation.filemode.loops import suite_loops
from pytest_isolation.filemode.loops import where
from pytest_isolation.filemode.parent import progress
from pytest_isolation.filemode.parent.collecting import Collection
from pytest_isolation.filemode.parent.ending import end_child
from pytest_isolation.filemode.parent.nodes import CHILD_SKIP
from pytest_isolation.filemode.parent.nodes import PLACEMENT
from pytest_isolation.filemode.parent.nodes import ChildCollectionError
from pytest_isolation.filemode.parent.nodes import ChildTest
from pytest_isolation.filemode.parent.nodes import IsolatedFile
from pytest_isolation.filemode.parent.nodes import IsolatedFileItem
from pytest_isolation.filemode.parent.nodes import process_of
from pytest_isolation.filemode.parent.raised import AT_SESSIONFINISH
from pytest_isolation.filemode.parent.raised import apply_raised_status
from pytest_isolation.filemode.parent.raised import write_raised_status
from pytest_isolation.filemode.parent.relay import FileRelay
from pytest_isolation.filemode.parent.relaying import Death
from pytest_isolation.filemode.parent.relaying import Relayer
from pytest_isolation.filemode.parent.shared import SharedFixtures
from pytest_isolation.filemode.parent.starting import SESSION
from pytest_isolation.filemode.parent.starting import Starter
from pytest_isolation.filemode.parent.starting import shared_basetemp
from pytest_isolation.filemode.placement import Placement
from pytest_isolation.filemode.processes import Child

__all__ = ["FileModeController"]


class FileModeController:
    """Runs every test file in a child process and replays its reports.

    Registered as ``isolation-controller`` in file mode (in each xdist worker
    too); it offers :meth:`collect_in_child` under ``COLLECT_IN_CHILD``.
    """

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        config.stash[COLLECT_IN_CHILD] = self.collect_in_child
        self.collection = Collection(config, settings)
        self.starter = Starter(config, settings)
        self.relayer = Relayer(config, settings)
        self.fixtures = SharedFixtures(config, settings, self.starter, self.collection.selectors)
        #: Children started for a file before pytest's loop reached it, by item index.
        self.started: dict[int, Child] = {}
        #: The shared process that runs the next files, after one of them ran.
        self.shared: SharedChild | None = None
        #: The exit status a plugin raised at the end of a child's session, and the file's.
        self.status = RaisedStatus()
        #: The SIGTERM/SIGHUP handlers to put back when the session finishes.
        self.ending: dict[int, Any] = {}
        config.add_cleanup(self.close)

    # -- collection: one placeholder per test file, nothing imported ----------

    @pytest.hookimpl(wrapper=True)
    def pytest_collect_file(
        self, file_path: Path, parent: pytest.Collector
    ) -> Generator[None, list[pytest.Collector], list[pytest.Collector]]:
        collectors = yield
        if any(isinstance(c, pytest.Module) for c in collectors):
            return [self.collection.file(file_path, parent)]
        return collectors

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(
        self, collector: pytest.Collector
    ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
        report = yield
        where = collector.stash.get(CHILD_SKIP, None)
        if where is not None and report.skipped:
            report.longrepr = where  # the test file's line, not this module's raise
        return report

    def pytest_plugin_registered(self, plugin: object) -> None:
        self.collection.placements.add(plugin)  # a conftest, collected: its directory's placement

    @pytest.hookimpl(wrapper=True, tryfirst=True)  # before the session matches config.args
    def pytest_collection(self, session: pytest.Session) -> Generator[None, object, object]:
        with self.collection.files_only():
            return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: -k/-m/--deselect see no placeholder
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> Generator[None]:
        with self.collection.selecting(items):
            yield

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collection.finished(session.items)

    def pytest_report_collectionfinish(self, items: Sequence[pytest.Item]) -> list[str] | None:
        return self.collection.report_lines(items)

    def pytest_report_header(self) -> list[str]:
        how = "each test file in its own process"
        if self.settings.opted_in:
            how = (
                f"set by {self.settings.mode_from.text}: the files placed in processes of their "
                "own run there, the others together"
            )
        starter = self.starter
        return [
            f"isolation: file mode, {how} (start method {starter.method}: {starter.reason})",
            *compat.notices(self.config),
        ]

    def collect_in_child(self, file: pytest.File) -> list[ChildTest]:
        """``--collect-only``: ask a child for the file's tests, return stand-ins."""
        relay = FileRelay(file, self.collection.not_found, collect_only=True)
        placed = file.stash.get(PLACEMENT, None)
        marked = ((str(file.path), placed.spelled()),) if placed and placed.marked else ()
        spec = wire.ChildSpec(
            path=str(file.path),
            selectors=self.collection.selectors(file.path),
            collect_only=True,
            marked=marked,
            named=(str(file.path),) if file.session.isinitpath(file.path) else (),
        )
        death = self.relayer.relay(self._start(spec, file), relay)
        for report in relay.collection.problems:
            if report.skipped:
                reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else ""
                if isinstance(report.longrepr, tuple):
                    path, line, _ = report.longrepr
                    file.stash[CHILD_SKIP] = (str(path), int(line), reason)
                reason = reason.removeprefix("Skipped: ")
                raise pytest.skip.Exception(reason, allow_module_level=True)
            raise ChildCollectionError(report.longrepr)
        if death is not None:
            how, tail = death.how, death.tail
            raise ChildCollectionError(
                f"isolation: the process collecting {file.nodeid} {how}\n{tail}"
            )
        found = relay.collection
        tests = [ChildTest.for_nodeid(file, nodeid) for nodeid in found.collected or ()]
        dropped = [ChildTest.for_nodeid(file, nodeid, True) for nodeid in found.deselected]
        return tests + dropped

    # -- running ----------------------------------------------------------------

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.config.stash[SESSION] = session
        self.ending = lifetime.interrupt_on_ending()  # until the session finishes
        lifetime.wait_for_own_children()  # a conftest's pytest_configure may ignore SIGCHLD
        refuse_replaced_loop(self.config, self)  # a conftest of the rootdir or above

    @pytest.hookimpl(tryfirst=True)  # after the loop's wrappers have set up, before pytest's loop
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        # Called as pytest's own loop is: a child that returns into this
        # frame (see Forking.fork_origin) runs its tests exactly as deep in the stack.
        cov.quiet_parent()
        lifetime.wait_for_own_children()  # or a conftest found while collecting
        refuse_replaced_loop(self.config, self)  # or one found while collecting
        found = [item.parent for item in session.items if isinstance(item, IsolatedFileItem)]
        files = [file for file in found if file is not None]
        if not is_worker(self.config):  # an xdist controller counts its workers' files
            progress.estimate(session, files)
        running = bool(files) and not self.config.option.collectonly
        if running:
            self.fixtures.set_up(files)
        # After the shared set-up: what it put into the environment stays for
        # every test after it, as a session fixture's change does in a plain run.
        starter = self.starter
        starter.environ = dict(os.environ)
        starter.loop_room = headroom()  # measured in this frame: as deep as pytest's loop
        if running:
            # What ran up to here, every child inherits (the record of what each file executed).
            self.config.hook.pytest_isolation_parent_ready(config=self.config)
            starter.leave_fork_if_threads()  # a thread a plugin started after configure
        if running and starter.method == "fork":
            starter.basetemp = shared_basetemp(self.config)  # every child's, made once
            loops = suite_loops(self.config, self)  # the child runs them after its collection
            lifetime.mark_run_parent()  # a child carries on when a test kills its fork server
            plugin = starter.forking.fork_origin(session, starter.environ)
            if plugin is not None:  # a file's child, forked by a fork server: see Origin
                # It runs its tests from this frame, as pytest's own loop
                # would: as deep in the stack.  The child's one entry; it never returns.
                with forked.run(session, plugin, loops) as tests:
                    for item, nextitem in tests:
                        item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
            starter.forking.start_preloading([file.path for file in files])

    @pytest.hookimpl(tryfirst=True)  # before pytest's runner would run the placeholder here
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> bool | None:
        if not isinstance(item, IsolatedFileItem):
            return None
        file = item.parent
        assert isinstance(file, IsolatedFile)
        positions = self.collection.positions
        following = positions.get(nextitem) if isinstance(nextitem, IsolatedFileItem) else None
        self.run_file(file, positions[item], following)
        tear_down_towards(item.session, nextitem)
        if nextitem is None:
            self.fixtures.tear_down(item)
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
        alone = process_of(self.config.stash[SESSION].items[index]) is None
        retries = self.settings.retries if alone else 0
        relay = FileRelay(
            file, self.collection.not_found, retries=retries, scope=self.settings.retry_scope
        )
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
            death = self.relayer.relay(child, relay)
            if death is not None and not replaced and self._went_with_its_server(death, relay):
                replaced = True  # it never ran: the file starts in a child of a new server
                relay.next_child()
                child = None
                continue
            if relay.end.done:
                self.shared = SharedChild(child, members[1:])
            resumes = death is not None and relay.crashed(death.how, death.tail, death.captured)
            if resumes and not self._stopping():  # -x/--maxfail count the crash too
                relay.next_child()  # the rest of this attempt, in a new child
            elif self._stopping() or not relay.retry():
                break
            child = None
        relay.conclude()
        if relay.attempts.ran:
            self.fixtures.last_test = relay.attempts.ran[-1]
        if relay.status is not None:
            self.status.take(relay.status, str(file.nodeid))
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
        return self.starter.server_went()

    def _may_be_stolen(self) -> bool:
        """Under ``--dist worksteal`` another worker may take the next file."""
        return is_worker(self.config) and self.config.getoption("dist", "no") == "worksteal"

    def _stopping(self) -> bool:
        session = self.config.stash[SESSION]
        return bool(session.shouldfail or session.shouldstop)

    def _start_next(self, index: int) -> None:
        """Start the next file's child now, before pytest's loop comes to it.

        Its messages wait in the pipe until the loop reaches the file; this
        takes the loop's own work between two files off the critical path.
        """
        if self._stopping() or (self.shared is not None and index in self.shared.members):
            return
        session = self.config.stash[SESSION]
        items = session.items
        file = items[index].parent
        assert isinstance(file, IsolatedFile)
        members = self._members(index)
        more = self._path_at(members[-1] + 1)
        spec = dataclasses.replace(self._spec(index, members), maxfail=self._failures_left())
        self.started[index] = self._start(spec, file, index, more)

    def _start(
        self, spec: wire.ChildSpec, file: pytest.File, index: int = -1, more: Path | None = None
    ) -> Child:
        self._reap(wait=False)
        return self.starter.start(spec, file, index, more)

    def _members(self, index: int) -> list[int]:
        """The placeholders whose files one child runs, from ``index`` on: the
        ones after it of the same shared process, in run order.  Only
        ``index`` in a pytest-xdist worker, which learns its next file only
        as it goes."""
        items = self.config.stash[SESSION].items
        process = process_of(items[index])
        members = [index]
        if process is None or is_worker(self.config):
            return members
        while members[-1] + 1 < len(items) and process_of(items[members[-1] + 1]) == process:
            members.append(members[-1] + 1)
        return members

    def _spec(self, index: int, members: list[int]) -> wire.ChildSpec:
        """What the child of the files at ``members`` (``index`` first) runs."""
        items = self.config.stash[SESSION].items
        path = items[index].path
        selectors = self.collection.selectors
        more = tuple((str(items[i].path), selectors(items[i].path)) for i in members[1:])
        marked = tuple(
            (str(items[i].path), found.spelled())
            for i in members
            if (found := _placement(items[i])) and found.marked
        )
        session = self.config.stash[SESSION]
        named = tuple(str(items[i].path) for i in members if session.isinitpath(items[i].path))
        return wire.ChildSpec(
            path=str(path),
            selectors=selectors(path),
            more=more,
            marked=marked,
            named=named,
            loop_room=self.starter.loop_room,
            record=str(self.config.rootpath) if self.settings.recording else "",
            capture_dir=self.relayer.capture_dir,
        )

    def _path_at(self, index: int | None) -> Path | None:
        """The file of the placeholder at ``index`` in ``session.items``, if any."""
        items = self.config.stash[SESSION].items
        if index is None or index >= len(items) or not isinstance(items[index], IsolatedFileItem):
            return None
        return items[index].path

    def _failures_left(self) -> int:
        maxfail = int(self.config.getoption("maxfail") or 0)
        if not maxfail:
            return 0
        return max(maxfail - self.config.stash[SESSION].testsfailed, 1)

    def _reap(self, wait: bool) -> None:
        """The finished children that have ended (all, with ``wait``)."""
        failed = self.relayer.finishing.reap(wait)
        if failed is not None:
            self.status.take(*failed)

    def close(self) -> None:
        """End the run's children: unused ones, the finished ones, the servers."""
        for child in self.started.values():
            end_child(child)
        self.started = {}
        if self.shared is not None:
            end_child(self.shared.child)
            self.shared = None
        self.starter.forking.discard_warm()
        self._reap(wait=True)
        self.starter.close()
        self.relayer.close()

    # -- end of the run ---------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)  # before the terminal shows its percentage
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        progress.reported(self.config.stash[SESSION], report.nodeid)

    @pytest.hookimpl(trylast=True)  # after the terminal showed its percentage
    def pytest_runtest_logfinish(self) -> None:
        progress.displayed(self.config.stash[SESSION])

    @pytest.hookimpl(tryfirst=True)  # before the terminal reporter ends the run
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self._reap(wait=True)  # every child's end happens within the run
        if self.fixtures.held is not None and session.items:  # the run stopped early
            self.fixtures.tear_down(session.items[-1])
        lifetime.put_back(self.ending)
        lifetime.give_back_sigchld()
        self.collection.fail_if_not_found(session)
        progress.save(self.config)
        apply_raised_status(session, self.status.status)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        self.collection.write_not_found(terminalreporter)
        ended: list[str] = self.config.stash.get(SERVERS_ENDED, [])
        for nodeid in dict.fromkeys(ended):
            terminalreporter.write_line(
                f"isolation: the fork server of {nodeid}'s process ended while the file ran "
                "(a test of it, or of the file just before, or a process one started, ended "
                "its parent process); the process carried on, and a new server served the "
                "files after it",
                yellow=True,
            )
        status = self.status
        write_raised_status(terminalreporter, status.status, status.where, status.why)

    def pytest_isolation_workeroutput(self, output: dict[str, Any]) -> None:
        """In an xdist worker: what the controller's summary and run report need."""
        output["notfound"] = list(self.collection.notfound)
        output["start_method"] = self.starter.method
        output["status"] = self.status.status
        output["status_from"] = self.status.where
        output["status_why"] = self.status.why


def tear_down_towards(session: pytest.Session, nextitem: pytest.Item | None) -> None:
    """Tear down what the parent set up and ``nextitem`` does not share, as
    pytest does after each item: a placeholder sets nothing up, but an item of
    a non-Python collector that ran in the parent before it may have (its
    directories' fixtures), and the next such item, elsewhere, would find them
    ("previous item was not torn down properly", seen with pygments' snippet
    files).  pytest offers no public way to do it
    (:func:`.pytest_private.teardown_exact`).
    """
    pytest_private.teardown_exact(session, nextitem)


def _placement(item: pytest.Item) -> Placement | None:
    """Where a placeholder's file runs, as the parent found it."""
    parent = item.parent
    return None if parent is None else parent.stash.get(PLACEMENT, None)


class SharedChild(NamedTuple):
    """A child that has run a file of its shared process and runs the next ones."""

    child: Child
    #: The indexes in ``session.items`` of the placeholders of the files it
    #: runs next, the next one first.
    members: list[int]


@dataclasses.dataclass
class RaisedStatus:
    """The first exit status a plugin raised at the end of a child's session,
    and the file of that child."""

    status: int = 0
    where: str = ""
    why: str = AT_SESSIONFINISH

    def take(self, status: int, where: str, why: str = AT_SESSIONFINISH) -> None:
        if not self.status:
            self.status, self.where, self.why = status, where, why


def refuse_replaced_loop(config: pytest.Config, own: object) -> None:
    """Refuse, before any file runs, a conftest or plugin whose
    ``pytest_runtestloop`` returns a value: it replaces pytest's loop, and so
    file mode's, in the parent and in each file's process."""
    found = replacing(suite_loops(config, own))
    if found:
        pytest.exit(
            f"isolation: --isolation-mode=file cannot run a suite whose pytest_runtestloop "
            f"replaces pytest's run loop ({where(found[0])} returns a value from it); each "
            "file's process runs its tests in a loop of its own. Return None from the hook "
            "(it then runs in each file's process before its tests), or run without "
            "--isolation-mode=file",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )
