"""What happened on each attempt at a file in file mode: its processes and its tests.

The relay fills these in; the retry logic, the terminal summary and the JSON
run report read them.  Plain data only.
"""

from __future__ import annotations

import dataclasses
import signal
from collections.abc import Callable

import pytest

PASSED = "passed"
FAILED = "failed"
QUARANTINED = "quarantined"


@dataclasses.dataclass
class TestAttempts:
    """The outcome of one test on each attempt that ran it (1-based attempt numbers)."""

    nodeid: str
    outcomes: list[tuple[int, str]] = dataclasses.field(default_factory=list)

    @property
    def flaky(self) -> bool:
        """Passed on one attempt and not on another."""
        results = [outcome == PASSED for _, outcome in self.outcomes]
        return any(results) and not all(results)

    @property
    def retried(self) -> bool:
        return len(self.outcomes) > 1

    def describe(self) -> str:
        """``attempt 1 failed, attempt 2 passed``."""
        return ", ".join(f"attempt {number} {outcome}" for number, outcome in self.outcomes)


@dataclasses.dataclass
class ProcessEnd:
    """How one child process of a file ended."""

    attempt: int
    #: The exit status as ``Popen.returncode`` gives it (negative: a signal);
    #: 0 for a child that finished its file.
    returncode: int
    timed_out: bool = False
    #: The test running when it died, if any.
    running: str | None = None

    @property
    def finished(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    @property
    def signal_name(self) -> str | None:
        if self.returncode >= 0:
            return None
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"

    def describe(self) -> str:
        """``timed out in test_x`` or ``crashed (SIGSEGV) in test_x``; '' when finished."""
        if self.finished:
            return ""
        where = f" in {self.running.split('::', 1)[-1]}" if self.running else ""
        if self.timed_out:
            return f"timed out{where}"
        how = self.signal_name or f"exit code {self.returncode}"
        return f"crashed ({how}){where}"


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


@dataclasses.dataclass
class FileAttempts:
    """Everything the relay learned about one file's attempts."""

    path: str
    attempts: int = 1
    processes: list[ProcessEnd] = dataclasses.field(default_factory=list)
    tests: dict[str, TestAttempts] = dataclasses.field(default_factory=dict)

    @property
    def flaky(self) -> list[TestAttempts]:
        return [test for test in self.tests.values() if test.flaky]

    def last_processes(self) -> list[ProcessEnd]:
        """The processes of the final attempt."""
        return [p for p in self.processes if p.attempt == self.attempts]

    @property
    def notable(self) -> bool:
        """Worth a line in the terminal summary: retried, crashed or timed out."""
        return self.attempts > 1 or any(not p.finished for p in self.processes)

    def describe(self) -> str:
        """One line: ``attempt 1: 2 failed, crashed (SIGSEGV) in test_x; attempt 2: passed``."""
        parts = []
        for number in range(1, self.attempts + 1):
            failed = sum(
                1
                for test in self.tests.values()
                for n, outcome in test.outcomes
                if n == number and outcome == FAILED
            )
            events = [f"{failed} failed"] if failed else []
            events += [p.describe() for p in self.processes if p.attempt == number and p.describe()]
            if not events:
                ran = any(n == number for t in self.tests.values() for n, _ in t.outcomes)
                events = ["passed" if ran else "ran no test"]
            parts.append(f"attempt {number}: {', '.join(events)}")
        flaky = self.flaky
        if flaky:
            names = ", ".join(t.nodeid.split("::", 1)[-1] for t in flaky)
            parts.append(f"flaky: {names}")
        return "; ".join(parts)
