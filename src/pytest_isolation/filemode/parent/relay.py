"""The life of a started child, as the parent follows it: its messages
replayed into the parent's hooks (:class:`FileRelay`) until it finishes,
times out or dies (:class:`Relayer`), then its end while the run goes on
(:class:`.ending.Finishing`).

The parent's terminal reporter, junitxml, cacheprovider (``--lf``), the
``-x`` logic and every other plugin see the same hook calls as in an ordinary
run, with the real node ids of the child's tests.  What an attempt runs and
holds back for a retry is :mod:`.retry`'s; the reports of a child that died
are made by :mod:`.crash`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import pytest

from pytest_isolation.core.keys import GUARD_KEY
from pytest_isolation.core.keys import KEPT_DIRS
from pytest_isolation.core.keys import REPEAT_ATTR
from pytest_isolation.core.keys import SERVERS_ENDED
from pytest_isolation.core.kinds import Phase
from pytest_isolation.core.kinds import RetryScope
from pytest_isolation.core.kinds import WarningWhen
from pytest_isolation.core.nodeid import name_of
from pytest_isolation.core.records import FileAttempts
from pytest_isolation.core.records import Leak
from pytest_isolation.core.records import ProcessEnd
from pytest_isolation.core.warnings import LeakedStateWarning
from pytest_isolation.core.warnings import rebuilt
from pytest_isolation.core.xdist import FILE_TESTS
from pytest_isolation.filemode import junit
from pytest_isolation.filemode import wire
from pytest_isolation.filemode.parent import crash
from pytest_isolation.filemode.parent import progress
from pytest_isolation.filemode.parent.nodes import ChildTest
from pytest_isolation.filemode.parent.retry import Attempts

Location = crash.Location


@dataclasses.dataclass
class ChildCollection:
    """What the first good collection of the file found."""

    #: Node ids (after deselection); None until known.
    collected: list[str] | None = None
    #: Collection reports that did not pass (errors, module-level skips).
    problems: list[pytest.CollectReport] = dataclasses.field(default_factory=list)
    #: ``--collect-only``: what the child deselected, for the parent to deselect.
    deselected: list[str] = dataclasses.field(default_factory=list)
    #: The file's test count, until its first report carries it (for an xdist controller).
    announce: int | None = None


@dataclasses.dataclass
class InFlight:
    """The test the child is running: its node id and location, the phases
    it has reported, and whether its repeat (``--isolation-twice``) started."""

    nodeid: str
    location: Location
    phases: set[Phase] = dataclasses.field(default_factory=set)
    repeating: bool = False
    #: It runs in a process of its own, which keeps its own time limit.
    alone: bool = False
    #: When it started (``time.monotonic()``).
    since: float = dataclasses.field(default_factory=time.monotonic)
    #: The log records of its running phase, for a report if the child dies.
    log_lines: list[str] = dataclasses.field(default_factory=list)
    #: pytest-timeout's timer of the test, as armed: seconds and method.
    timer: tuple[float, str] | None = None

    def died_in(self) -> Phase:
        """The phase a death interrupts: teardown once the call reported."""
        return "teardown" if "call" in self.phases and not self.repeating else "call"


@dataclasses.dataclass
class ChildEnd:
    """How the current child's stream ended."""

    finished: bool = False
    #: The file has run and its shared process goes on with the next file.
    done: bool = False
    #: How many bytes of stderr the child had written when it finished (-1: unknown).
    stderr: int = -1
    #: The child saw Ctrl-C (no reason) or ``pytest.exit(reason, returncode)``.
    interrupted: bool = False
    exit_reason: str | None = None
    exit_code: int | None = None
    #: How the child died, as the outcome of the test it was running.
    death: str | None = None
    #: Where the child's KeyboardInterrupt was raised (path, line).
    where: tuple[str, int] | None = None


class FileRelay:
    """Replays the messages of the children of one test file.

    One relay lives for all children of a file: after a crash the rest of the
    file runs in a new child, and only the first good collection (collected
    count, deselections, collection reports) is replayed.
    """

    def __init__(
        self,
        file: pytest.Collector,
        on_notfound: Callable[[str], None],
        collect_only: bool = False,
        retries: int = 0,
        scope: RetryScope = "failed",
    ) -> None:
        self.file = file
        #: ``--collect-only``: collection problems are kept for the placeholder
        #: to raise, not replayed, and the session counts the stand-ins itself.
        self.collect_only = collect_only
        self.config = file.config
        # Attributes: 13, the 13th a cache: the file's hook proxy, which pytest
        # looks up anew on each access (``Node.ihook``), is used for every message.
        self.ihook = file.ihook
        self.on_notfound = on_notfound
        self.attempts = Attempts(str(file.nodeid), retries, scope, collect_only)
        self.collection = ChildCollection()
        self.end = ChildEnd()
        #: pytest-timeout's timer armed for the next test (seconds, method).
        self.armed: tuple[float, str] | None = None
        #: The running test.
        self.inflight: InFlight | None = None
        #: The current child has said nothing but hello.
        self.silent = True
        #: The exit status a plugin raised at the end of a child's session.
        self.status: int | None = None
        #: Messages of leaks the run already warned about (their warning,
        #: which follows the leak, is dropped).
        self.repeated_leaks: set[str] = set()
        self._handlers: dict[wire.MessageKind, Callable[..., None]] = {
            wire.HELLO: self._hello,
            wire.COLLECTREPORT: self._collectreport,
            wire.DESELECTED: self._deselected,
            wire.NOTFOUND: self._notfound,
            wire.COLLECTED: self._collected,
            wire.LOGSTART: self._logstart,
            wire.REPORT: self._report,
            wire.WARNING: self._warning,
            wire.LEAK: self._leak,
            wire.JUNIT: self._junit,
            wire.WRITE: self._write,
            wire.KEPT: self._kept,
            wire.REPEATING: self._repeating,
            wire.LOGFINISH: self._logfinish,
            wire.STATUS: self._status,
            wire.EXECUTED: self._executed,
            wire.INTERRUPTED: self._interrupted,
            wire.FINISHED: self._finished,
            wire.SERVER_ENDED: self._server_ended,
            wire.LOGRECORD: self._logrecord,
            wire.TIMER: self._timer,
            wire.DONE: self._done,
        }

    def handle(self, kind: wire.MessageKind, payload: dict[str, Any]) -> None:
        if kind != wire.HELLO:
            self.silent = False
        self._handlers[kind](**payload)

    # -- attempts ---------------------------------------------------------------

    @property
    def record(self) -> FileAttempts:
        return self.attempts.record

    def next_child(self) -> None:
        """The current attempt goes on in a new child (after a crash)."""
        self.end = ChildEnd()
        self.silent = True

    def skip(self) -> frozenset[str]:
        """What the next child of this attempt must leave out."""
        return self.attempts.skip(self.collection.collected)

    def process_ended(self, returncode: int, timed_out: bool = False) -> None:
        running = self.inflight.nodeid if self.inflight is not None else None
        ended = ProcessEnd(self.record.attempts, returncode, timed_out, running)
        self.record.processes.append(ended)

    def retry(self) -> bool:
        """Start another attempt if something failed and attempts are left."""
        if not self.attempts.retry(self.collection.collected):
            return False
        self.next_child()
        return True

    def conclude(self) -> None:
        """No attempt is left: replay what is still held back."""
        for report, died in self.attempts.take_held_collection():
            self._replay_collection_failure(report, died)
        self.attempts.release_held()

    # -- collection ---------------------------------------------------------------

    def _collecting(self) -> bool:
        return self.collection.collected is None

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
        if report.failed and self.attempts.left():
            self.attempts.held_collection.append((report, False))
            return
        self.collection.problems.append(report)
        if report.failed and report.nodeid == self.file.nodeid:  # the module: no test of it runs
            setattr(report, FILE_TESTS, 0)  # for an xdist controller's count
        if not self.collect_only:
            self.ihook.pytest_collectreport(report=report)

    def _deselected(self, nodeids: list[str]) -> None:
        if self.collect_only:
            self.collection.deselected.extend(nodeids)
        elif self._collecting():
            items = [ChildTest.for_nodeid(self.file, nodeid) for nodeid in nodeids]
            self.config.hook.pytest_deselected(items=items)

    def _notfound(self, arg: str) -> None:
        if self._collecting():
            self.on_notfound(arg)

    def _collected(self, nodeids: list[str]) -> None:
        if not self._collecting() or self.attempts.held_collection:
            return
        self.collection.collected = nodeids
        if self.collect_only:
            return
        progress.correct(self.file, len(nodeids))  # the session counted an estimate
        self.collection.announce = len(nodeids)

    # -- tests ----------------------------------------------------------------------

    def running(self) -> tuple[float, bool] | None:
        """Since when the running test runs, and whether in a process of its own."""
        inflight = self.inflight
        return None if inflight is None else (inflight.since, inflight.alone)

    def _logstart(self, nodeid: str, location: Location, alone: bool = False) -> None:
        self.inflight = InFlight(nodeid, location, alone=alone, timer=self.armed)
        self.armed = None
        self.attempts.begin_test()
        self.attempts.emit(
            lambda: self.ihook.pytest_runtest_logstart(nodeid=nodeid, location=location)
        )

    def _report(self, data: dict[str, Any]) -> None:
        report = self.config.hook.pytest_report_from_serializable(config=self.config, data=data)
        self._log(report)

    def _log(self, report: pytest.TestReport) -> None:
        if self.collection.announce is not None:
            setattr(report, FILE_TESTS, self.collection.announce)
            self.collection.announce = None
        if self.inflight is not None:
            self.inflight.phases.add(report.when)
            self.inflight.log_lines.clear()
        self.attempts.add_report(report)
        self.attempts.emit(lambda: self.ihook.pytest_runtest_logreport(report=report))

    def _timer(self, seconds: float, method: str) -> None:
        """pytest-timeout arms its timer before the test's ``logstart``."""
        self.armed = (seconds, method)

    def _logrecord(self, text: str) -> None:
        if self.inflight is not None:
            self.inflight.log_lines.append(text)

    def _warning(
        self,
        module: str,
        qualname: str,
        message: str,
        filename: str,
        lineno: int,
        when: WarningWhen,
        nodeid: str,
        location: tuple[str, int, str] | None,
    ) -> None:
        record = rebuilt(module, qualname, message, filename, lineno)
        if issubclass(record.category, LeakedStateWarning) and message in self.repeated_leaks:
            # One warning per changed thing per run: another file's process
            # already warned about this key (the summary counts them all).
            self.repeated_leaks.discard(message)
            return
        self.config.hook.pytest_warning_recorded.call_historic(
            kwargs={"warning_message": record, "when": when, "nodeid": nodeid, "location": location}
        )

    def _leak(self, fields: dict[str, Any]) -> None:
        # Every attempt's leaks happened: recorded at once (the log drops repeats).
        guard = self.config.stash.get(GUARD_KEY, None)
        if guard is not None:
            leak = Leak(**fields)
            if not guard.record(leak):
                self.repeated_leaks.add(leak.message())

    def _server_ended(self, nodeid: str) -> None:
        self.config.stash.setdefault(SERVERS_ENDED, []).append(str(self.file.nodeid))

    def _write(self, text: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        if self._collecting():  # a collection hook's: not inside the last file's progress line
            self.attempts.emit(lambda: progress.end_line(reporter))
        self.attempts.emit(lambda: reporter.write(text, flush=True))

    def _junit(self, what: str, nodeid: str, name: str, value: str) -> None:
        junit.record_in_parent(self.config, what, nodeid, name, value)

    def _kept(self, lines: list[str]) -> None:
        self.config.stash.setdefault(KEPT_DIRS, []).extend(lines)

    def _repeating(self) -> None:
        if self.inflight is not None:
            self.inflight.repeating = True

    def _logfinish(self, nodeid: str, location: Location) -> None:
        self.attempts.emit(
            lambda: self.ihook.pytest_runtest_logfinish(nodeid=nodeid, location=location)
        )
        self.inflight = None
        self.attempts.end_test(nodeid, self.end.death)

    # -- the end of a child -------------------------------------------------------

    def _status(self, status: int) -> None:
        self.status = status

    def _executed(self, **executed: Any) -> None:
        """The child ran all of the file's tests: what they executed (the
        first such child's: a retry reruns some of them only)."""
        if self.record.executed is None:
            self.record.executed = executed

    def _interrupted(
        self, reason: str | None, returncode: int | None, where: tuple[str, int] | None
    ) -> None:
        self.end.interrupted = True
        self.end.exit_reason = reason
        self.end.exit_code = returncode
        self.end.where = where

    def _finished(self, stderr: int = -1) -> None:
        self.end.finished = True
        self.end.stderr = stderr

    def _done(self) -> None:
        self.end.done = True

    def crashed(self, how: str, stderr_tail: str, captured: tuple[str, str] = ("", "")) -> bool:
        """Report a child that died (``captured``: what its running phase had
        printed); return whether the rest of the attempt can resume."""
        path = self.file.nodeid
        remaining = self.attempts.remaining
        inflight = self.inflight
        cause = how.removeprefix("was ")  # first: pytest's short summary line is cut
        full = bool(self.config.getoption("fulltrace", False))
        if inflight is not None:
            nodeid, location, when = inflight.nodeid, inflight.location, inflight.died_in()
            timed_out = how.startswith(("timed out", "over its"))
            self.end.death = how if timed_out else f"crashed ({how})"
            if (
                inflight.timer is not None
                and inflight.timer[1] == "thread"
                and how == "exited with code 1"
            ):
                cause = (
                    f"over pytest-timeout's {inflight.timer[0]:g} s limit: its thread method "
                    "ended the process (exit code 1)"
                )
            doing = "repeating" if inflight.repeating else "running"
            text = f"{cause} while {doing} {name_of(nodeid)} ({when}), the process of {path}"
            message = crash.with_tail(text, stderr_tail, full)
            output = (*captured, "\n".join(inflight.log_lines))
            died = crash.failed_test(self.config, nodeid, location, when, message, output)
            if inflight.repeating:  # --isolation-twice: "FAILED WHEN REPEATED"
                setattr(died, REPEAT_ATTR, [])
            self._log(died)
            self._logfinish(nodeid, location)
            return bool(remaining(self.collection.collected))
        if self.collection.collected is None:
            text = crash.with_tail(f"{cause} while collecting {path}", stderr_tail, full)
            report = crash.failed_collection(self.file, text)
            if self.attempts.left():
                self.attempts.held_collection.append((report, True))
            else:
                self._replay_collection_failure(report, True)
            return False
        text = crash.with_tail(f"{cause} after the last test of {path}", stderr_tail, full)
        ran = self.attempts.ran
        if ran:  # the file's tests are done: reported, never retried
            last = ran[-1]
            after = crash.failed_test(self.config, last, (path, None, last), "teardown", text)
            self.ihook.pytest_runtest_logreport(report=after)
        else:
            self._replay_collection_failure(crash.failed_collection(self.file, text), False)
        return bool(remaining(self.collection.collected))

    def _replay_collection_failure(self, report: pytest.CollectReport, died: bool) -> None:
        self.collection.problems.append(report)
        if report.failed and report.nodeid == self.file.nodeid:  # the module: no test of it runs
            setattr(report, FILE_TESTS, 0)  # for an xdist controller's count
        if not self.collect_only:
            self.ihook.pytest_collectreport(report=report)
        if died and not self.collect_only:  # no child counted the file's tests
            progress.forget(self.file)
