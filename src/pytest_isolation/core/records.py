"""Records the parts pass to each other: a leak, and what happened on each
attempt at a file in file mode (its processes and its tests).

Plain data only, so a file-mode child or an xdist worker can send them to
the parent: the guard and file mode's relay make them, the summaries and
the JSON run report read them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pytest_isolation.core.kinds import WindowKind
from pytest_isolation.core.nodeid import name_of
from pytest_isolation.core.signals import signal_name

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
        return signal_name(-self.returncode) or f"signal {-self.returncode}"

    def describe(self) -> str:
        """``timed out in test_x`` or ``crashed (SIGSEGV) in test_x``; '' when finished."""
        if self.finished:
            return ""
        where = f" in {name_of(self.running)}" if self.running else ""
        if self.timed_out:
            return f"timed out{where}"
        how = self.signal_name or f"exit code {self.returncode}"
        return f"crashed ({how}){where}"


@dataclasses.dataclass
class FileAttempts:
    """Everything the relay learned about one file's attempts."""

    path: str
    attempts: int = 1
    processes: list[ProcessEnd] = dataclasses.field(default_factory=list)
    tests: dict[str, TestAttempts] = dataclasses.field(default_factory=dict)
    #: What a process that ran all of the file's tests executed
    #: (:meth:`pytest_isolation.record.executed.Recorder.take`), for the record.
    executed: dict[str, Any] | None = None

    @property
    def flaky(self) -> list[TestAttempts]:
        return [test for test in self.tests.values() if test.flaky]

    def to_wire(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> FileAttempts:
        return cls(
            path=data["path"],
            attempts=data["attempts"],
            processes=[ProcessEnd(**p) for p in data["processes"]],
            tests={
                k: TestAttempts(t["nodeid"], [(n, o) for n, o in t["outcomes"]])
                for k, t in data["tests"].items()
            },
            executed=data.get("executed"),
        )

    def last_processes(self) -> list[ProcessEnd]:
        """The processes of the final attempt."""
        return [p for p in self.processes if p.attempt == self.attempts]

    @property
    def notable(self) -> bool:
        """Worth a line in the terminal summary: retried, crashed or timed out."""
        return self.attempts > 1 or any(not p.finished for p in self.processes)

    def kinds(self) -> set[str]:
        """What made it notable: ``crashed``, ``timed out``, ``retried``."""
        ended = {
            "timed out" if p.timed_out else "crashed" for p in self.processes if not p.finished
        }
        return ended | ({"retried"} if self.attempts > 1 else set())

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
            names = ", ".join(name_of(t.nodeid) for t in flaky)
            parts.append(f"flaky: {names}")
        return "; ".join(parts)


@dataclasses.dataclass(frozen=True)
class Leak:
    #: Who leaked: a node id, "fixture 'x' (scope=module)", or a file.
    owner: str
    #: "test", "fixture" or "file", for the summary's counts.
    kind: WindowKind
    category: str
    #: The key ``allow_leaks`` patterns match, e.g. the variable name.
    key: str
    #: What leaked, e.g. ``os.environ['FOO'] (was unset, now 'bar')``.
    what: str
    #: Where it was made (file:line), if known.
    site: str = ""
    hint: str = ""
    #: False for report-only findings (threads, processes, files).
    restored: bool = True
    #: State a project advances as a matter of course (see
    #: :data:`pytest_isolation.guard.routine.KINDS`): put back, never warned.
    routine: str = ""
    #: "error" once the leak was reported as an error (``--isolation-leaks=error``,
    #: or a ``-W error::LeakedStateWarning``): the summary does not repeat it.
    shown: str = ""

    def message(self, owner: bool = True) -> str:
        """The sentence a person reads; ``owner=False`` where the test is
        named already (its error's header and short summary line)."""
        site = f", at {self.site}" if self.site else ""
        undone = "" if self.restored else " (not undone)"
        who = f"{self.owner} " if owner else ""
        return f"{who}leaked {self.what}{site}{undone}; {self.hint}"

    def to_wire(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
