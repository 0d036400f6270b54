"""What runs inside a file-mode child process.

The child collects one test file, runs its items through pytest's ordinary
runtest protocol and streams every hook the parent must replay over the pipe.
It ends its session like a pytest-xdist worker (:mod:`.session_end`): the
plugins living in it finish there, the parent finishes the terminal, junit
XML and the cache for the whole run; then the child ends with ``os._exit``.

Imports: stdlib, pytest, the wire protocol, the core and the coverage hand-off
only, so a child starts light (``lint-imports`` keeps it so).
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from collections.abc import Generator
from collections.abc import Iterator
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from typing import NamedTuple

import pytest

from pytest_isolation.core.keys import FILE_PLACEHOLDER
from pytest_isolation.core.keys import IN_OWN_PROCESS
from pytest_isolation.core.keys import KEPT_DIRS
from pytest_isolation.core.keys import REPEAT
from pytest_isolation.core.keys import SHARED_CHILD
from pytest_isolation.core.kinds import WarningWhen
from pytest_isolation.core.nodeid import matches
from pytest_isolation.core.records import Leak
from pytest_isolation.filemode import cov
from pytest_isolation.filemode import lifetime
from pytest_isolation.filemode import placement
from pytest_isolation.filemode.child import inherited
from pytest_isolation.filemode.child import session_end
from pytest_isolation.filemode.child.captured import keep_crash_output
from pytest_isolation.filemode.child.collection import named_as_in_the_run
from pytest_isolation.filemode.child.collection import with_directories
from pytest_isolation.filemode.child.grouped import FileRun
from pytest_isolation.filemode.child.grouped import HeldMessages
from pytest_isolation.filemode.child.terminal import TerminalStandIn
from pytest_isolation.filemode.child.terminal import detach_terminal
from pytest_isolation.filemode.child.terminal import written_to_stderr
from pytest_isolation.filemode.depth import call_deeper
from pytest_isolation.filemode.depth import headroom
from pytest_isolation.filemode.loops import call_suite_impls
from pytest_isolation.filemode.loops import run_suite_loops
from pytest_isolation.filemode.loops import suite_impls
from pytest_isolation.filemode.loops import suite_loops
from pytest_isolation.filemode.shared import SHARED_VALUES
from pytest_isolation.filemode.shared import flush_files
from pytest_isolation.filemode.wire import COLLECTED
from pytest_isolation.filemode.wire import COLLECTREPORT
from pytest_isolation.filemode.wire import DESELECTED
from pytest_isolation.filemode.wire import DONE
from pytest_isolation.filemode.wire import EXECUTED
from pytest_isolation.filemode.wire import EXITING
from pytest_isolation.filemode.wire import FINISHED
from pytest_isolation.filemode.wire import HELLO
from pytest_isolation.filemode.wire import INTERRUPTED
from pytest_isolation.filemode.wire import JUNIT
from pytest_isolation.filemode.wire import KEPT
from pytest_isolation.filemode.wire import LEAK
from pytest_isolation.filemode.wire import LOGFINISH
from pytest_isolation.filemode.wire import LOGSTART
from pytest_isolation.filemode.wire import NOTFOUND
from pytest_isolation.filemode.wire import PROTOCOL_VERSION
from pytest_isolation.filemode.wire import REPEATING
from pytest_isolation.filemode.wire import REPORT
from pytest_isolation.filemode.wire import SERVER_ENDED
from pytest_isolation.filemode.wire import STATUS
from pytest_isolation.filemode.wire import TIMER
from pytest_isolation.filemode.wire import USES
from pytest_isolation.filemode.wire import WARNING
from pytest_isolation.filemode.wire import WRITE
from pytest_isolation.filemode.wire import ChildSpec
from pytest_isolation.filemode.wire import MessageKind
from pytest_isolation.filemode.wire import Sender
from pytest_isolation.filemode.wire import report_data
from pytest_isolation.filemode.wire import warning_payload
from pytest_isolation.record.executed import Recorder

#: Exit code of a child whose run was interrupted (as pytest's own).
INTERRUPTED_EXIT = 2
#: A child's tests to run, each with the next one.
Tests = Iterator[tuple[pytest.Item, "pytest.Item | None"]]


class ChildPlugin:
    """Streams one file's collection and run to the parent."""

    def __init__(self, config: pytest.Config, sender: Sender) -> None:
        self.config = config
        self.sender = sender
        self.spec = ChildSpec(path="")
        #: The directory collector of the file in a forked child; ``None`` when spawned.
        self.parent_collector: pytest.Collector | None = None
        #: pytest_warning_recorded is historic: registering replays the parent's
        #: past warnings, which the parent has already shown.
        self.live = False
        #: A shared process: each file's collection messages, held while all
        #: files are collected, and then each file's items.
        self.held: HeldMessages | None = None
        self.runs: list[FileRun] = []
        #: How the run was interrupted, if it was.
        self.interruption: Interruption | None = None
        #: While a spawned child collects: its files and their directories.
        self.wanted: set[Path] = set()
        #: ``--isolation-record``: what the file's tests execute, and the tests
        #: not run yet (a record is kept only when all of them ran).
        self.recorder: Recorder | None = None
        self.unfinished: set[str] = set()
        self.partial = False

    def start(self, spec: ChildSpec, parent_collector: pytest.Collector | None) -> None:
        lifetime.server_went()  # a server that ended before this file began is not its
        self.spec = spec
        self.parent_collector = parent_collector
        # -x/--maxfail count across files: the parent passes the failures left.
        self.config.option.maxfail = spec.maxfail
        self.config.stash[SHARED_CHILD] = bool(spec.more)
        if spec.record and not (spec.more or spec.collect_only or spec.skip or spec.selectors):
            self.recorder = Recorder(spec.record)
            self.recorder.start()
        self._send(HELLO, version=PROTOCOL_VERSION, pid=os.getpid())
        keep_crash_output(self.config, self.sender, spec.capture_dir)
        inherited.leave_connections()
        inherited.keep_shared_fixtures(self.config)
        shared = self.config.stash.get(SHARED_VALUES, {})
        self.config.hook.pytest_isolation_child_started(config=self.config, shared=shared)

    def _send(self, kind: MessageKind, path: str | None = None, **payload: Any) -> None:
        """Send now, or, while a shared process collects, hold for ``path``'s
        turn (default: the file being collected)."""
        if self.held is None:
            self.sender.send(kind, **payload)
        else:
            self.held.put(kind, payload, path)

    @pytest.hookimpl(tryfirst=True)  # replaces the session's walk of every argument
    def pytest_collection(self, session: pytest.Session) -> bool:
        call_suite_impls(
            session, suite_impls(self.config, "pytest_collection", self), "pytest_collection"
        )
        paths = [path for path, _ in self.spec.files]
        if self.spec.more:  # as a plain run: every file is collected before any test runs
            self.held = HeldMessages(paths)
        try:
            if self.parent_collector is None:
                session.config.args = paths
                self.wanted = with_directories(paths)
                try:
                    with named_as_in_the_run(session, set(paths) - set(self.spec.named)):
                        session.perform_collect()
                finally:
                    self.wanted = set()
            else:
                self._collect_forked(session, self._parents(session, self.parent_collector))
        finally:
            held, self.held = self.held, None
        if held is None:
            self._send(COLLECTED, nodeids=[str(item.nodeid) for item in session.items])
            self.unfinished = {str(item.nodeid) for item in session.items}
        else:
            self.runs = held.split(session.items)
        inherited.set_up_where_resolved_otherwise(self.config, session.items)
        if self.spec.uses:
            used = inherited.shared_in_use(self.spec.uses, session.items)
            self.sender.send(USES, names=used)  # None: any of them may be asked for
        return True

    @pytest.hookimpl(tryfirst=True)
    def pytest_ignore_collect(self, collection_path: Path) -> bool | None:
        """A spawned child collects its files from its arguments, as ``pytest
        FILE`` does, but not the other files and directories beside each
        directory on the way, which pytest would make a node for (without
        importing it) before it finds the one named: the parent made those
        once for the run, and a forked child never makes them."""
        if self.wanted and collection_path not in self.wanted:
            return True
        return None

    def _parents(
        self, session: pytest.Session, first: pytest.Collector
    ) -> list[tuple[Path, pytest.Collector]]:
        """Each file's directory collector, from the parent's placeholders
        (looked up only for a shared process's other files)."""
        parents = [(Path(self.spec.path), first)]
        if not self.spec.more:
            return parents
        found = {
            str(item.path): item.parent.parent
            for item in session.items
            if item.stash.get(FILE_PLACEHOLDER, False) and item.parent and item.parent.parent
        }
        return parents + [(Path(path), found[path]) for path, _ in self.spec.more]

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(
        self, collector: pytest.Collector
    ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
        """A module whose placement differs once imported fails to collect, and
        so does one that defines database models the shared test database
        was made without."""
        database = "django_db_setup" in self.config.stash.get(SHARED_VALUES, {})
        models = inherited.django_models() if database else None
        report = yield
        if isinstance(collector, pytest.Module) and report.passed:
            written = dict(self.spec.marked).get(str(collector.path), "")
            why = placement.imported_differently(collector.path, collector.obj, written)
            if why is None and models is not None:
                why = inherited.make_tables(self.config, models, collector.path)
            if why is not None:
                nodeid = collector.nodeid
                return pytest.CollectReport(nodeid, "failed", f"isolation: {why}", [])
        return report

    def pytest_collectstart(self, collector: pytest.Collector) -> None:
        if self.held is not None:
            self.held.enter(str(collector.path))

    def _collect_forked(
        self, session: pytest.Session, parents: list[tuple[Path, pytest.Collector]]
    ) -> None:
        config = session.config
        items: list[pytest.Item] = []
        for path, parent in parents:
            for collector in parent.ihook.pytest_collect_file(file_path=path, parent=parent):
                items.extend(session.genitems(collector))
        config.hook.pytest_collection_modifyitems(session=session, config=config, items=items)
        session.items = items  # what pytest_collection_finish reads, as in a plain run
        session.testscollected = len(items)
        config.hook.pytest_collection_finish(session=session)

    @pytest.hookimpl(wrapper=True, tryfirst=True)  # narrow to path::name args before -k/-m/--lf
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> Generator[None]:
        for path, selectors in self.spec.files:
            if selectors is not None:
                self._select(items, path, selectors)
        if self.spec.skip:
            items[:] = [i for i in items if str(i.nodeid) not in self.spec.skip]
        result = yield
        if self.spec.more:  # the parent relays file by file, in its order
            order = {path: index for index, (path, _) in enumerate(self.spec.files)}
            items.sort(key=lambda item: order.get(str(item.path), 0))
        return result

    def _select(
        self, items: list[pytest.Item], path: str, selectors: tuple[tuple[str, ...], ...]
    ) -> None:
        """Keep of ``path``'s items those its ``path::name`` arguments name."""
        mine = [item for item in items if str(item.path) == path]
        chosen = {s: [i for i in mine if matches(str(i.nodeid), s)] for s in selectors}
        for selector, found in chosen.items():
            if not found:
                self._send(NOTFOUND, path, arg="::".join((path, *selector)))
        keep = {id(item) for found in chosen.values() for item in found}
        drop = {id(item) for item in mine} - keep
        items[:] = [item for item in items if id(item) not in drop]

    def pytest_plugin_registered(self, plugin: object, manager: pytest.PytestPluginManager) -> None:
        """A plugin that replaces the terminal reporter after the child detached
        it (pytest-instafail, in a spawned child's configure) is detached too."""
        is_reporter = manager.get_name(plugin) == "terminalreporter"
        if is_reporter and not isinstance(plugin, TerminalStandIn):
            detach_terminal(self.config, self.write_terminal)

    def pytest_deselected(self, items: Sequence[pytest.Item]) -> None:
        self.partial = True
        by_file: dict[str, list[str]] = {}
        for item in items:
            by_file.setdefault(str(item.path), []).append(str(item.nodeid))
        for path, nodeids in by_file.items():
            self._send(DESELECTED, path, nodeids=nodeids)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self.partial = self.partial or report.failed
        if not report.passed:
            self._send(COLLECTREPORT, data=report_data(self.config, report))

    @pytest.hookimpl(tryfirst=True)  # before the repeat's set-up can crash
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if item.stash.get(REPEAT, "") == "again":  # --isolation-twice
            self.sender.send(REPEATING)

    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        alone = self.config.stash.get(IN_OWN_PROCESS, False)
        self.sender.send(LOGSTART, nodeid=str(nodeid), location=location, alone=alone)

    @pytest.hookimpl(trylast=True)  # after the child's plugins have seen the report
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Plugins may settle a report's outcome while its status is asked for
        # (pytest's subtests fail a test with failed subtests there), from
        # state kept in this process: ask here, so the parent gets it settled.
        self.config.hook.pytest_report_teststatus(report=report, config=self.config)
        self.sender.send(REPORT, data=report_data(self.config, report))
        if lifetime.server_went():  # a test that kills its fork server is named
            self.sender.send(SERVER_ENDED, nodeid=str(report.nodeid))

    def pytest_runtest_logfinish(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        self.unfinished.discard(str(nodeid))
        self.sender.send(LOGFINISH, nodeid=str(nodeid), location=location)

    @pytest.hookimpl(optionalhook=True)  # pytest-timeout's
    def pytest_timeout_set_timer(self, item: pytest.Item, settings: Any) -> None:
        """Tell the parent that pytest-timeout armed its timer (its thread
        method ends this process: the parent names it as the cause)."""
        seconds = getattr(settings, "timeout", None)
        if seconds:
            self.sender.send(TIMER, seconds=float(seconds), method=str(settings.method))

    def write_terminal(self, text: str) -> None:
        if self.live:
            self._send(WRITE, text=text)

    def record_junit(self, what: str, nodeid: str, name: str, value: str) -> None:
        self.sender.send(JUNIT, what=what, nodeid=nodeid, name=name, value=value)

    def pytest_isolation_leak(self, leak: Leak) -> None:
        self._send(LEAK, fields=leak.to_wire())

    def pytest_warning_recorded(
        self,
        warning_message: Any,
        when: WarningWhen,
        nodeid: str,
        location: tuple[str, int, str] | None,
    ) -> None:
        # The parent has issued the config-time warnings (pytest re-checks the
        # ini keys after each collection, the child's too).
        if not self.live or when == "config":
            return
        self._send(WARNING, **warning_payload(warning_message, when, nodeid, location))

    @pytest.hookimpl(tryfirst=True)  # replaces pytest's loop, which stops on collection errors
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        # The tests run as deep in the stack as from the parent's loop: from
        # here, or through the frames this spawned child has to spare (.depth).
        spare = headroom() - self.spec.loop_room if self.spec.loop_room else 0
        if spare > 1:
            call_deeper(spare - 1, self.run, session)
        elif spare == 1:
            self.run(session)
        with self.testing(session) as tests:
            for item, nextitem in tests:  # as deep as the parent's loop, or deeper
                item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
        return True  # not reached: finish() ends the process

    def run(self, session: pytest.Session) -> None:
        """Run the tests from this frame, end the session and the process."""
        with self.testing(session) as tests:
            for item, nextitem in tests:
                item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)

    @contextlib.contextmanager
    def testing(self, session: pytest.Session, loops: list[Any] | None = None) -> Iterator[Tests]:
        """Run the suite's own loop hooks (:mod:`..loops`; ``loops``: those the
        parent found before it forked, else this process's), then give the tests
        to run, each with the next one, in the caller's frame (as deep in the
        stack as pytest's loop would run them); whatever happens in the
        ``with`` body, end the session and the process (:func:`finish`)."""
        try:
            run_suite_loops(session, suite_loops(self.config, self) if loops is None else loops)
            yield self.items(session)
        except BaseException as error:
            self.stopped(error)
        finish(session, self)

    def items(self, session: pytest.Session) -> Iterator[tuple[pytest.Item, pytest.Item | None]]:
        """The collected items to run, each with the one after it; between
        the files of a shared process, the messages that end one and start
        the next.  Stops where pytest's loop would (``-x``, ``--maxfail``)."""
        if self.spec.collect_only:
            return
        runs = self.runs or [FileRun(self.spec.path, session.items, [])]
        items = [item for run in runs for item in run.items]
        position = 0
        for number, run in enumerate(runs):
            if self.runs:  # a shared process: the file's collection, then its tests
                for kind, payload in run.messages:
                    self.sender.send(kind, **payload)
                self.sender.send(COLLECTED, nodeids=[str(item.nodeid) for item in run.items])
            for item in run.items:
                position += 1
                yield item, items[position] if position < len(items) else None
                if session.shouldfail or session.shouldstop:
                    return
            if number + 1 < len(runs):
                self.sender.send(DONE)

    def stopped(self, error: BaseException) -> None:
        """Keep how a Ctrl-C or ``pytest.exit()`` (which ends the whole run)
        interrupted the run; raise anything else."""
        if isinstance(error, KeyboardInterrupt):
            where = traceback.extract_tb(error.__traceback__)[-1]
            self.interruption = Interruption(None, None, (where.filename, where.lineno or 1))
        elif isinstance(error, pytest.exit.Exception):
            self.interruption = Interruption(error.msg, error.returncode)
        else:
            raise error


class Interruption(NamedTuple):
    """A Ctrl-C (no reason) or ``pytest.exit(reason, returncode)`` in the child."""

    reason: str | None
    returncode: int | None
    #: Where a KeyboardInterrupt was raised: path and line.
    where: tuple[str, int] | None = None


def finish(session: pytest.Session, plugin: ChildPlugin) -> None:
    """End the session, tell the parent, and end the process."""
    interruption = plugin.interruption
    if not plugin.spec.collect_only:
        status = session_end.session_status(session, interruption is not None)
        raised = session_end.end_session(session, status)
        if raised != status:  # a plugin failed the run at its end
            plugin.sender.send(STATUS, status=raised)
    flush_files(session.config.stash.get(SHARED_VALUES, {}))  # os._exit flushes nothing
    sys.stdout.flush()
    sys.stderr.flush()
    kept = session.config.stash.get(KEPT_DIRS, [])
    if kept:  # isolated_tmp directories kept: the parent's summary lists them
        plugin.sender.send(KEPT, lines=kept)
    cov.save()
    recorder = plugin.recorder
    done: list[object] = []
    code = 0
    if recorder is not None:
        if interruption is None:  # what the project's own unconfigure runs is the file's
            done, code = session_end.unconfigure_own(session, recorder.owns)
        executed = recorder.finish()  # the process ends: nothing to put back
        if interruption is None and not (plugin.partial or plugin.unfinished or recorder.lost):
            plugin.sender.send(EXECUTED, **executed)
    if interruption is not None:
        if not plugin.spec.collect_only:
            session_end.unconfigure(session)
        reason, returncode, where = interruption
        plugin.sender.send(INTERRUPTED, reason=reason, returncode=returncode, where=where)
        os._exit(INTERRUPTED_EXIT)
    # How much of its stderr the child wrote before finishing: the parent
    # shows that now, and what its unconfigure writes when it has ended.
    plugin.sender.send(FINISHED, stderr=written_to_stderr())
    if not (plugin.spec.collect_only or code):
        code = session_end.unconfigure(session, done)
    sys.stdout.flush()
    sys.stderr.flush()
    with contextlib.suppress(OSError):  # the parent has gone, or does not wait for it
        if lifetime.server_went():  # after the file's last report
            plugin.sender.send(SERVER_ENDED, nodeid=plugin.spec.path)
        plugin.sender.send(EXITING, code=code)
    os._exit(code)
