"""Retries of a file in file mode: which tests an attempt runs, and the
replays held back until a test's final outcome is known.

A passing test is replayed at once; a failing one only when no attempt is
left or when a later attempt passes (then as passed, and flaky).  A whole
attempt at the file is every child it takes to run the tests wanted once,
crash resumes included.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from pytest_isolation.core.kinds import RetryScope
from pytest_isolation.core.records import FAILED
from pytest_isolation.core.records import PASSED
from pytest_isolation.core.records import QUARANTINED
from pytest_isolation.core.records import FileAttempts
from pytest_isolation.core.records import TestAttempts


@dataclasses.dataclass
class Held:
    """A test's replay, kept back until it is known whether the test is retried."""

    calls: list[Callable[[], object]] = dataclasses.field(default_factory=list)
    reports: list[pytest.TestReport] = dataclasses.field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(report.failed for report in self.reports)

    @property
    def quarantined(self) -> bool:
        return any(hasattr(report, "isolation_quarantined") for report in self.reports)

    def replay(self) -> None:
        for call in self.calls:
            call()


#: A failed collection report held for the next attempt, with whether the child died collecting.
HeldCollection = tuple[pytest.CollectReport, bool]


class Attempts:
    """The attempts at one file: what each runs and what waits for the next."""

    def __init__(self, nodeid: str, retries: int, scope: RetryScope, collect_only: bool) -> None:
        self.retries = retries
        self.scope = scope
        #: ``--collect-only`` runs nothing, so nothing is retried.
        self.collect_only = collect_only
        #: Attempts at the file so far (1-based), its processes and its tests' outcomes.
        self.record = FileAttempts(nodeid)
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
        self.held_collection: list[HeldCollection] = []

    def left(self) -> bool:
        """Whether another attempt may follow this one."""
        return not self.collect_only and self.record.attempts <= self.retries

    def remaining(self, collected: list[str] | None) -> list[str]:
        """Tests this attempt still has to run."""
        ran, wanted = set(self.ran), self.wanted
        return [
            nodeid
            for nodeid in collected or ()
            if nodeid not in ran and (wanted is None or nodeid in wanted)
        ]

    def skip(self, collected: list[str] | None) -> frozenset[str]:
        """What the next child of this attempt must leave out."""
        wanted = self.wanted
        if wanted is None:
            return frozenset(self.ran)
        return frozenset(self.ran).union(n for n in collected or () if n not in wanted)

    def begin_test(self) -> None:
        if self.retries:
            self.pending = Held()

    def emit(self, call: Callable[[], object]) -> None:
        """Replay now, or keep with the running test's replay while it may be retried."""
        if self.pending is not None:
            self.pending.calls.append(call)
        else:
            call()

    def add_report(self, report: pytest.TestReport) -> None:
        if self.pending is not None:
            self.pending.reports.append(report)

    def end_test(self, nodeid: str, death: str | None) -> None:
        """The test's protocol is over: replay it, or hold it back for the next attempt."""
        self.ran.append(nodeid)
        held, self.pending = self.pending, None
        if held is None:
            return
        outcome = QUARANTINED if held.quarantined else death or (FAILED if held.failed else PASSED)
        test = self.record.tests.setdefault(nodeid, TestAttempts(nodeid))
        test.outcomes.append((self.record.attempts, outcome))
        if nodeid in self.reported:  # a whole-file retry ran it again; its result stands
            return
        if held.failed and self.left():
            self.held[nodeid] = held
            return
        self.held.pop(nodeid, None)
        self._release(nodeid, held)

    def _release(self, nodeid: str, held: Held) -> None:
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

    def retry(self, collected: list[str] | None) -> bool:
        """Start another attempt if something failed and attempts are left."""
        if self.record.attempts > self.retries or not (self.held or self.held_collection):
            return False
        if self.held_collection:  # the file did not collect: all of it again
            self.held_collection = []
            self.wanted = None
        elif self.scope == "file":
            self.wanted = None
        else:  # its failed tests, and those a -x stop never reached
            self.wanted = {n for n in collected or () if n not in self.reported}
        self.record.attempts += 1
        self.ran = []
        return True

    def take_held_collection(self) -> list[HeldCollection]:
        """No attempt is left: the held collection failures, for the relay to replay."""
        failures, self.held_collection = self.held_collection, []
        return failures

    def release_held(self) -> None:
        """No attempt is left: replay the tests still held back."""
        for nodeid, held in list(self.held.items()):
            self.record.tests[nodeid].outcomes.append((self.record.attempts, "not run"))
            self._release(nodeid, held)
        self.held = {}
