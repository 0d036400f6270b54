"""Replaying one file's child messages into the parent's hooks.

The parent's terminal reporter, junitxml, cacheprovider (``--lf``), the
``-x`` logic and every other plugin see the same hook calls as in an ordinary
run, with the real node ids of the child's tests.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from pytest_isolation import wire
from pytest_isolation.attempts import FAILED
from pytest_isolation.attempts import PASSED
from pytest_isolation.attempts import QUARANTINED
from pytest_isolation.attempts import FileAttempts
from pytest_isolation.attempts import Held
from pytest_isolation.attempts import ProcessEnd
from pytest_isolation.attempts import TestAttempts
from pytest_isolation.placeholder import ChildTest
from pytest_isolation.quarantine import PLUGIN_NAME as QUARANTINE_NAME
from pytest_isolation.xdist_bridge import FILE_TESTS

Location = tuple[str, int | None, str]


def warning_category(module: str, qualname: str) -> type[Warning]:
    """The warning class by name, or a stand-in of that name.

    A category defined in a test module cannot be imported by the parent
    (it never imports test modules); the summary only needs its name.
    """
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except Exception:
        found = None
    if isinstance(found, type) and issubclass(found, Warning):
        return found
    return type(qualname.rpartition(".")[2], (UserWarning,), {"__module__": module})


class FileRelay:
    """Replays the messages of the children of one test file.

    One relay lives for all children of a file: after a crash the rest of the
    file runs in a new child, and only the first good collection (collected
    count, deselections, collection reports) is replayed.

    With retries, each test's replay is held back until its outcome is
    known: a passing test is replayed at once, a failing one only when no
    attempt is left or when a later attempt passes (then as passed, and
    flaky).  A whole attempt at the file is every child it takes to run the
    tests wanted once, crash resumes included.
    """

    def __init__(
        self,
        file: pytest.Collector,
        on_notfound: Callable[[str], None],
        collect_only: bool = False,
        retries: int = 0,
        scope: str = "failed",
    ) -> None:
        self.file = file
        #: ``--collect-only``: collection problems are kept for the placeholder
        #: to raise, not replayed, and the session counts the stand-ins itself.
        self.collect_only = collect_only
        self.config = file.config
        self.ihook = file.ihook
        self.on_notfound = on_notfound
        self.retries = retries
        self.scope = scope
        #: Attempts at the file so far (1-based), its processes and its tests' outcomes.
        self.record = FileAttempts(str(file.nodeid))
        #: Node ids the first good collection found (after deselection); None until known.
        self.collected: list[str] | None = None
        #: Node ids whose protocol completed in this attempt (including crashed ones).
        self.ran: list[str] = []
        #: Node ids this attempt runs; None: all of the file.
        self.wanted: set[str] | None = None
        #: Node ids whose final outcome has been replayed.
        self.reported: set[str] = set()
        #: Failed tests waiting for the next attempt.
        self.held: dict[str, Held] = {}
        #: The running test's replay while retries are possible.
        self.pending: Held | None = None
        #: Failed collection reports waiting for the next attempt, with whether
        #: the child died collecting.
        self.held_collection: list[tuple[pytest.CollectReport, bool]] = []
        #: How the current child died, as the outcome of the test it was running.
        self.death: str | None = None
        #: The file's test count, until its first report carries it.
        self.announce: int | None = None
        self.inflight: tuple[str, Location] | None = None
        self.phases: set[str] = set()
        #: Collection reports that did not pass (errors, module-level skips).
        self.problems: list[pytest.CollectReport] = []
        #: ``--collect-only``: what the child deselected, for the parent to deselect.
        self.deselected: list[str] = []
        self.finished = False
        #: The child saw Ctrl-C (no reason) or ``pytest.exit(reason, returncode)``.
        self.interrupted = False
        self.exit_reason: str | None = None
        self.exit_code: int | None = None
        self._handlers: dict[str, Callable[..., None]] = {
            wire.HELLO: self._hello,
            wire.COLLECTREPORT: self._collectreport,
            wire.DESELECTED: self._deselected,
            wire.NOTFOUND: self._notfound,
            wire.COLLECTED: self._collected,
            wire.LOGSTART: self._logstart,
            wire.REPORT: self._report,
            wire.WARNING: self._warning,
            wire.LEAK: self._leak,
            wire.KEPT: self._kept,
            wire.LOGFINISH: self._logfinish,
            wire.INTERRUPTED: self._interrupted,
            wire.FINISHED: self._finished,
        }

    def handle(self, kind: str, payload: dict[str, Any]) -> None:
        self._handlers[kind](**payload)

    def next_child(self) -> None:
        """The current attempt goes on in a new child (after a crash)."""
        self.finished = False
        self.death = None

    @property
    def remaining(self) -> list[str]:
        """Tests this attempt still has to run."""
        ran, wanted = set(self.ran), self.wanted
        return [
            nodeid
            for nodeid in self.collected or ()
            if nodeid not in ran and (wanted is None or nodeid in wanted)
        ]

    def skip(self) -> frozenset[str]:
        """What the next child of this attempt must leave out."""
        wanted = self.wanted
        if wanted is None:
            return frozenset(self.ran)
        return frozenset(self.ran).union(n for n in self.collected or () if n not in wanted)

    def process_ended(self, returncode: int, timed_out: bool = False) -> None:
        running = self.inflight[0] if self.inflight is not None else None
        ended = ProcessEnd(self.record.attempts, returncode, timed_out, running)
        self.record.processes.append(ended)

    def retry(self) -> bool:
        """Start another attempt if something failed and attempts are left."""
        if self.record.attempts > self.retries or not (self.held or self.held_collection):
            return False
        if self.held_collection:  # the file did not collect: all of it again
            self.held_collection = []
            self.wanted = None
        elif self.scope == "file":
            self.wanted = None
        else:  # its failed tests, and those a -x stop never reached
            self.wanted = {n for n in self.collected or () if n not in self.reported}
        self.record.attempts += 1
        self.ran = []
        self.next_child()
        return True

    def conclude(self) -> None:
        """No attempt is left: replay what is still held back."""
        for report, died in self.held_collection:
            self._replay_collection_failure(report, died)
        self.held_collection = []
        for nodeid, held in list(self.held.items()):
            self.record.tests[nodeid].outcomes.append((self.record.attempts, "not run"))
            self._replay(nodeid, held)
        self.held = {}

    def _collecting(self) -> bool:
        return self.collected is None

    def _hello(self, version: int, pid: int) -> None:
        if version != wire.PROTOCOL_VERSION:
            raise RuntimeError(
                f"isolation: child {pid} speaks protocol {version}, "
                f"the parent {wire.PROTOCOL_VERSION}; reinstall pytest-isolation"
            )

    def _collectreport(self, data: dict[str, Any]) -> None:
        if not self._collecting():
            return
        report = self.config.hook.pytest_report_from_serializable(config=self.config, data=data)
        if report.failed and self._attempts_left():
            self.held_collection.append((report, False))
            return
        self.problems.append(report)
        if not self.collect_only:
            self.ihook.pytest_collectreport(report=report)

    def _deselected(self, nodeids: list[str]) -> None:
        if self.collect_only:
            self.deselected.extend(nodeids)
        elif self._collecting():
            items = [ChildTest.for_nodeid(self.file, nodeid) for nodeid in nodeids]
            self.config.hook.pytest_deselected(items=items)

    def _notfound(self, arg: str) -> None:
        if self._collecting():
            self.on_notfound(arg)

    def _collected(self, nodeids: list[str]) -> None:
        if not self._collecting() or self.held_collection:
            return
        self.collected = nodeids
        if self.collect_only:
            return
        # The placeholder counted as one test; progress needs the real count.
        self.file.session.testscollected += len(nodeids) - 1
        self.announce = len(nodeids)  # for an xdist controller, on the first report

    def _attempts_left(self) -> bool:
        return not self.collect_only and self.record.attempts <= self.retries

    def _emit(self, call: Callable[[], object]) -> None:
        """Replay now, or keep with the running test's replay while it may be retried."""
        if self.pending is not None:
            self.pending.calls.append(call)
        else:
            call()

    def _logstart(self, nodeid: str, location: Location) -> None:
        self.inflight = (nodeid, location)
        self.phases = set()
        if self.retries:
            self.pending = Held()
        self._emit(lambda: self.ihook.pytest_runtest_logstart(nodeid=nodeid, location=location))

    def _report(self, data: dict[str, Any]) -> None:
        report = self.config.hook.pytest_report_from_serializable(config=self.config, data=data)
        self._log(report)

    def _log(self, report: pytest.TestReport) -> None:
        if self.announce is not None:
            setattr(report, FILE_TESTS, self.announce)
            self.announce = None
        self.phases.add(report.when)
        if self.pending is not None:
            self.pending.reports.append(report)
        self._emit(lambda: self.ihook.pytest_runtest_logreport(report=report))

    def _warning(
        self,
        module: str,
        qualname: str,
        message: str,
        filename: str,
        lineno: int,
        when: str,
        nodeid: str,
        location: tuple[str, int, str] | None,
    ) -> None:
        category = warning_category(module, qualname)
        record = warnings.WarningMessage(category(message), category, filename, lineno)
        self.config.hook.pytest_warning_recorded.call_historic(
            kwargs={"warning_message": record, "when": when, "nodeid": nodeid, "location": location}
        )

    def _leak(self, fields: dict[str, Any]) -> None:
        # Every attempt's leaks happened: recorded at once (the log drops repeats).
        guard = self.config.pluginmanager.get_plugin(wire.GUARD_NAME)
        if guard is not None:
            guard.record(fields)

    def _kept(self, lines: list[str]) -> None:
        from pytest_isolation.fixtures import KEPT_KEY

        self.config.stash.setdefault(KEPT_KEY, []).extend(lines)

    def _logfinish(self, nodeid: str, location: Location) -> None:
        self._emit(lambda: self.ihook.pytest_runtest_logfinish(nodeid=nodeid, location=location))
        self.ran.append(nodeid)
        self.inflight = None
        held, self.pending = self.pending, None
        if held is not None:
            self._settle(nodeid, held)

    def _settle(self, nodeid: str, held: Held) -> None:
        """Replay a finished test, or hold it back for the next attempt."""
        if held.quarantined:
            outcome = QUARANTINED
        else:
            outcome = self.death or (FAILED if held.failed else PASSED)
        test = self.record.tests.setdefault(nodeid, TestAttempts(nodeid))
        test.outcomes.append((self.record.attempts, outcome))
        if nodeid in self.reported:  # a whole-file retry ran it again; its result stands
            return
        if held.failed and self._attempts_left():
            self.held[nodeid] = held
            return
        self.held.pop(nodeid, None)
        self._replay(nodeid, held)

    def _replay(self, nodeid: str, held: Held) -> None:
        test = self.record.tests[nodeid]
        if test.flaky:  # passed in the end: say so in junit XML and the summary
            for report in held.reports:
                report.user_properties.append(("isolation_flaky", test.describe()))
        elif test.retried:
            for report in held.reports:
                if report.failed:
                    report.sections.append(("isolation: attempts", test.describe()))
        self.reported.add(nodeid)
        held.replay()

    def _interrupted(self, reason: str | None, returncode: int | None) -> None:
        self.interrupted = True
        self.exit_reason = reason
        self.exit_code = returncode

    def _finished(self) -> None:
        self.finished = True

    def crashed(self, how: str, stderr_tail: str) -> bool:
        """Report a child that died; return whether the rest of the attempt can resume."""
        path = self.file.nodeid
        if self.inflight is not None:
            nodeid, location = self.inflight
            name = nodeid.split("::", 1)[-1]
            when = "teardown" if "call" in self.phases else "call"
            self.death = how if how.startswith("timed out") else f"crashed ({how})"
            text = f"the process running {path} {how} while running {name} ({when})"
            self._log(self._failed_report(nodeid, location, when, _with_tail(text, stderr_tail)))
            self._logfinish(nodeid, location)
            return bool(self.remaining)
        if self.collected is None:
            text = f"the process collecting {path} {how}"
            report = self._failed_collection(_with_tail(text, stderr_tail))
            if self._attempts_left():
                self.held_collection.append((report, True))
            else:
                self._replay_collection_failure(report, True)
            return False
        text = f"the process running {path} {how} after its last test"
        if self.ran:  # the file's tests are done: reported, never retried
            last = self.ran[-1]
            failure = self._failed_report(
                last, (path, None, last), "teardown", _with_tail(text, stderr_tail)
            )
            self.ihook.pytest_runtest_logreport(report=failure)
        else:
            self._replay_collection_failure(
                self._failed_collection(_with_tail(text, stderr_tail)), False
            )
        return bool(self.remaining)

    def _failed_report(
        self, nodeid: str, location: Location, when: str, text: str
    ) -> pytest.TestReport:
        report = pytest.TestReport(
            nodeid=nodeid,
            location=location,
            keywords={},
            outcome="failed",
            longrepr=text,
            when=when,  # type: ignore[arg-type]
        )
        quarantine = self.config.pluginmanager.get_plugin(QUARANTINE_NAME)
        if quarantine is not None:  # a quarantined test that crashed is quarantined too
            quarantine.apply(report)
        return report

    def _failed_collection(self, text: str) -> pytest.CollectReport:
        return pytest.CollectReport(self.file.nodeid, "failed", longrepr=text, result=[])

    def _replay_collection_failure(self, report: pytest.CollectReport, died: bool) -> None:
        self.problems.append(report)
        if not self.collect_only:
            self.ihook.pytest_collectreport(report=report)
        if died and not self.collect_only:  # no child counted the file's tests
            self.file.session.testscollected -= 1


def _with_tail(text: str, tail: str) -> str:
    text = f"isolation: {text}"
    if tail.strip():
        text += f"\n\n--- last lines of its stderr ---\n{tail.rstrip()}"
    return text
