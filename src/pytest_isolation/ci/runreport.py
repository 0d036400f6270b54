"""What each test file did in this run: the terminal lines for notable files,
the flaky tests, and the JSON run report (``--isolation-report``).

Registered in the parent only.  It learns of tests from the ordinary report
hooks (so it works with and without file mode), of processes and attempts
from file mode's ``pytest_isolation_file_finished`` hook, and of leaks from
the guard's ``pytest_isolation_leak``.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import platform
import sys
import time
from collections import Counter
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from pytest_isolation.ci.sharding import SHARDING_KEY
from pytest_isolation.core import options
from pytest_isolation.core import outputs
from pytest_isolation.core.keys import QUARANTINE_KEY
from pytest_isolation.core.keys import RECORDED
from pytest_isolation.core.keys import START_METHOD
from pytest_isolation.core.kinds import Mode
from pytest_isolation.core.nodeid import file_of
from pytest_isolation.core.outputs import SCHEMA
from pytest_isolation.core.outputs import SCHEMA_VERSION
from pytest_isolation.core.records import FileAttempts
from pytest_isolation.core.records import Leak
from pytest_isolation.core.records import TestAttempts
from pytest_isolation.core.words import counted
from pytest_isolation.core.xdist import is_worker

#: Test counts every file and the totals carry, even when zero.
TEST_COUNTS = ("passed", "failed", "error", "skipped", "xfailed", "xpassed", "quarantined")


@dataclasses.dataclass
class FileResult:
    path: str
    tests: Counter[str] = dataclasses.field(default_factory=Counter)
    #: Sum of the tests' phase durations; replaced by the wall time in file mode.
    duration: float = 0.0
    collection_failed: bool = False
    leaks: int = 0
    attempts: FileAttempts | None = None
    #: Tests in processes of their own: each one's figures (the last attempt's).
    test_processes: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: Tests retried in processes of their own that passed in the end.
    flaky_tests: dict[str, TestAttempts] = dataclasses.field(default_factory=dict)

    def outcome(self) -> str:
        record = self.attempts
        last = [] if record is None else record.last_processes()
        if any(p.timed_out for p in last):
            return "timed-out"
        if any(not p.finished for p in last):
            return "crashed"
        if self.collection_failed:
            return "error"
        if self.tests["failed"] or self.tests["error"]:
            return "failed"
        if (record is not None and record.flaky) or self.flaky_tests:
            return "flaky"
        if self.tests["passed"] or self.tests["xfailed"] or self.tests["xpassed"]:
            return "passed"
        if self.tests["skipped"] or self.tests["quarantined"]:
            return "skipped"
        return "no-tests"

    def to_json(self) -> dict[str, Any]:
        record = self.attempts
        processes = [] if record is None else record.processes
        last = processes[-1] if processes else None
        return {
            "path": self.path,
            "outcome": self.outcome(),
            "duration": round(self.duration, 4),
            "attempts": 1 if record is None else record.attempts,
            "exit_code": None if last is None or last.returncode < 0 else last.returncode,
            "signal": None if last is None else last.signal_name,
            "timed_out": any(p.timed_out for p in processes),
            "processes": [
                {
                    "attempt": p.attempt,
                    "exit_code": None if p.returncode < 0 else p.returncode,
                    "signal": p.signal_name,
                    "timed_out": p.timed_out,
                    "running": p.running,
                }
                for p in processes
            ],
            "tests": _counts(self.tests),
            "leaks": self.leaks,
            **({"test_processes": self.test_processes} if self.test_processes else {}),
        }


def _counts(counter: Counter[str]) -> dict[str, int]:
    return {**dict.fromkeys(TEST_COUNTS, 0), **{k: v for k, v in counter.items() if k}}


class RunReport:
    """Registered as ``isolation-runlog`` in the parent (and in xdist workers,
    whose files reach the controller's)."""

    def __init__(self, config: pytest.Config, mode: Mode) -> None:
        self.config = config
        self.mode = mode
        self.files: dict[str, FileResult] = {}
        self.started = time.time()
        self.current: str | None = None
        self.unowned_leaks = 0
        found = options.path(config, "isolation_report")
        #: Count each file's tests only for a report (a worker's go to the
        #: controller, which writes it): asking every plugin for each
        #: report's status costs ~20 µs a test.
        self.counting = found is not None
        # An xdist worker's results reach the controller, which writes the report.
        self.path: Path | None = None
        self.target: Path | None = None
        if found is not None and not is_worker(config):
            self.path = options.relative(config, found[0])  # as the user wrote it
            self.target = outputs.checked(self.path, found[1])
        #: Why the report could not be written at the end, for the summary.
        self.failed: str | None = None
        #: The report as written, once it is.
        self.written: dict[str, Any] | None = None

    def _file(self, path: str) -> FileResult:
        found = self.files.get(path)
        if found is None:
            found = self.files[path] = FileResult(path)
        return found

    # -- what happened ----------------------------------------------------------

    def pytest_isolation_file_finished(self, record: FileAttempts, seconds: float) -> None:
        """File mode: a file's attempts are over."""
        result = self._file(file_of(record.path))
        result.attempts = record
        result.duration = seconds

    def pytest_isolation_workeroutput(self, output: dict[str, Any]) -> None:
        output["files"] = [
            {"record": result.attempts.to_wire(), "duration": result.duration}
            for result in self.files.values()
            if result.attempts is not None
        ]

    def pytest_isolation_merge_workeroutput(self, output: dict[str, Any]) -> None:
        for entry in output.get("files", ()):
            record = FileAttempts.from_wire(entry["record"])
            self.pytest_isolation_file_finished(record, entry["duration"])

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed and report.nodeid:
            result = self._file(file_of(report.nodeid))
            result.collection_failed = True
            result.tests["error"] += 1  # counted as an error on pytest's final line too

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.current = file_of(nodeid)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if hasattr(report, "isolation_attempts") or (
            self.counting and hasattr(report, "isolation_process")
        ):
            self._process_per_test(report)
        if not self.counting:
            return
        result = self._file(file_of(report.nodeid))
        if result.attempts is None:
            result.duration += report.duration
        status = self.config.hook.pytest_report_teststatus(report=report, config=self.config)
        category = status[0] if status else ""
        if category:
            result.tests[category] += 1

    def _process_per_test(self, report: pytest.TestReport) -> None:
        """A test in a process of its own: its process's figures, and its
        attempts when it passed on a retry (file mode's flaky tests are in
        their file's record)."""
        result = self._file(file_of(report.nodeid))
        nodeid = str(report.nodeid)
        outcomes = getattr(report, "isolation_attempts", None) or []
        attempts = TestAttempts(nodeid, [(int(n), str(o)) for n, o in outcomes])
        if attempts.flaky:
            result.flaky_tests[nodeid] = attempts
        figures = getattr(report, "isolation_process", None)
        if isinstance(figures, dict):
            result.test_processes.append({"nodeid": nodeid, **figures})

    def pytest_isolation_leak(self, leak: Leak) -> None:
        if leak.routine:
            return  # routine state is no leak: the count is the summary's leaks
        path: str | None
        if leak.kind == "test":
            path = file_of(leak.owner)
        elif leak.kind == "file":
            path = leak.owner.split(" (", 1)[0]
        else:  # a fixture: the file whose test finalized it, unless session-scoped
            path = None if "scope=session" in leak.owner else self.current
        if path is None:
            self.unowned_leaks += 1
        else:
            self._file(path).leaks += 1

    # -- the terminal summary ---------------------------------------------------

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        flaky = self.flaky()
        if flaky:
            terminalreporter.write_sep("=", f"isolation: {len(flaky)} flaky (passed on retry)")
            for nodeid, text in flaky:
                terminalreporter.write_line(f"{nodeid}: {text}")
        notable = [
            result.attempts
            for result in self.files.values()
            if result.attempts is not None and result.attempts.notable
        ]
        if notable:
            terminalreporter.write_sep("=", f"isolation: {notable_files(notable)}")
            for record in notable:
                terminalreporter.write_line(f"{record.path}: {record.describe()}")
        if self.failed is not None:
            terminalreporter.write_line(f"isolation: run report not written: {self.failed}")
        elif self.path is not None and terminalreporter.verbosity >= 0:
            terminalreporter.write_line(f"isolation: run report written to {self.path}")

    def flaky(self) -> list[tuple[str, str]]:
        return [(test.nodeid, test.describe()) for test in self._flaky_tests()]

    def _flaky_tests(self) -> list[TestAttempts]:
        """File mode's flaky tests (from their files' records), then those
        retried in processes of their own (from their reports)."""
        found = {
            test.nodeid: test
            for result in self.files.values()
            if result.attempts is not None
            for test in result.attempts.flaky
        }
        for result in self.files.values():
            for nodeid, attempts in result.flaky_tests.items():
                found.setdefault(nodeid, attempts)
        return list(found.values())

    # -- the JSON run report ----------------------------------------------------

    @pytest.hookimpl(trylast=True)  # the exit status is final; the terminal summary follows
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.target is None:
            return
        self.written = self.document(int(exitstatus))
        self._write(self.written)

    def record_changed(self) -> None:
        """The record of what each test file executed grew after the report
        was written (the parent's end of the run): write it again."""
        if self.written is not None:
            self.written = {**self.written, **self._recorded()}
            self._write(self.written)

    def _write(self, document: dict[str, Any]) -> None:
        assert self.target is not None
        self.failed = outputs.write(self.target, json.dumps(document, indent=2) + "\n")

    def document(self, exit_code: int) -> dict[str, Any]:
        files = [self.files[path].to_json() for path in sorted(self.files)]
        tests: Counter[str] = Counter()
        for result in self.files.values():
            tests.update(result.tests)
        outcomes = Counter(entry["outcome"] for entry in files)
        return {
            "schema": SCHEMA,
            "version": SCHEMA_VERSION,
            "created": datetime.datetime.fromtimestamp(
                self.started, datetime.timezone.utc
            ).isoformat(timespec="seconds"),
            "duration": round(time.time() - self.started, 3),
            "exit_code": exit_code,
            "mode": self.mode,
            "start_method": self.config.stash.get(START_METHOD, None),
            "shard": self._shard(),
            "versions": {
                "pytest_isolation": _version("pytest-isolation"),
                "pytest": pytest.__version__,
                "python": platform.python_version(),
                "platform": sys.platform,
            },
            "totals": {
                "files": len(files),
                "outcomes": dict(sorted(outcomes.items())),
                "tests": _counts(tests),
                "flaky": sum(1 for _ in self.flaky()),
                "leaks": sum(r.leaks for r in self.files.values()) + self.unowned_leaks,
            },
            "files": files,
            "flaky": [
                {
                    "nodeid": test.nodeid,
                    "attempts": [{"attempt": n, "outcome": o} for n, o in test.outcomes],
                }
                for test in self._flaky_tests()
            ],
            **self._quarantine(),
            **self._recorded(),
        }

    def _recorded(self) -> dict[str, Any]:
        """What each test file executed, when this run recorded it."""
        recorded = self.config.stash.get(RECORDED, None)
        return {} if recorded is None else {"recorded": recorded}

    def _shard(self) -> dict[str, Any] | None:
        sharding = self.config.stash.get(SHARDING_KEY, None)
        if sharding is None or sharding.shard is None:
            return None
        return {
            "index": sharding.shard.index,
            "total": sharding.shard.total,
            "strategy": sharding.used_strategy,
            "source": sharding.shard.source,
            "split": sharding.split,
        }

    def _quarantine(self) -> dict[str, Any]:
        quarantine = self.config.stash.get(QUARANTINE_KEY, None)
        if quarantine is None:
            return {"quarantined": [], "quarantine_passing": [], "quarantine_stale": []}
        return quarantine.to_json()


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def notable_files(notable: list[FileAttempts]) -> str:
    """``1 file crashed``, ``files: 2 crashed, 1 timed out, 1 retried`` (a
    file may count under more than one: crashed, then retried)."""
    counts = [
        (kind, sum(1 for record in notable if kind in record.kinds()))
        for kind in ("crashed", "timed out", "retried")
    ]
    shown = [(kind, count) for kind, count in counts if count]
    if len(shown) == 1:
        kind, count = shown[0]
        return f"{counted(count, 'file')} {kind}"
    return "files: " + ", ".join(f"{count} {kind}" for kind, count in shown)
