"""What a test's own process sends, replayed into the hooks of the process
that forked it as it comes: its reports (the last teardown held, to be
merged with the forking side's teardown; all of them while a retry may
follow), warnings, leaks, log records, pytest-timeout's timer, and a
Ctrl-C or ``pytest.exit()`` that ends the run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pytest_isolation.core.keys import GUARD_KEY
from pytest_isolation.core.records import Leak
from pytest_isolation.core.warnings import rebuilt
from pytest_isolation.filemode.wire import INTERRUPTED
from pytest_isolation.filemode.wire import LEAK
from pytest_isolation.filemode.wire import LOGRECORD
from pytest_isolation.filemode.wire import REPORT
from pytest_isolation.filemode.wire import TIMER
from pytest_isolation.filemode.wire import WARNING
from pytest_isolation.pertest import ending
from pytest_isolation.pertest.limits import Limits


class Replay:
    """Replays one test process's messages into ``item``'s hooks."""

    def __init__(self, item: pytest.Item, limits: Limits, hold: bool) -> None:
        self.item = item
        self.config = item.config
        self.limits = limits
        self.teardown: pytest.TestReport | None = None
        #: The last report sent: the phase running now follows it.
        self.last: pytest.TestReport | None = None
        #: The running phase's log records.
        self.log_lines: list[str] = []
        self.timer: ending.Timer | None = None
        self.interrupted: tuple[str | None, int | None] | None = None
        #: With a retry left: the reports, kept until it is known whether
        #: this attempt is the one reported (None: each is logged at once).
        self.held: list[pytest.TestReport] | None = [] if hold else None

    def handle(self, kind: str, payload: dict[str, Any]) -> None:
        """Replay one message of the test's process."""
        handlers: dict[str, Callable[..., None]] = {
            REPORT: self._data,
            WARNING: self._warning,
            LEAK: self._leak,
            LOGRECORD: self._logrecord,
            TIMER: self._timer,
            INTERRUPTED: self._interrupted,
        }
        handlers[kind](**payload)

    def _data(self, data: dict[str, Any]) -> None:
        config = self.config
        self._report(config.hook.pytest_report_from_serializable(config=config, data=data))

    def _warning(
        self,
        module: str,
        qualname: str,
        message: str,
        filename: str,
        lineno: int,
        **recorded: Any,
    ) -> None:
        """Recorded here as where it was made (``when``, ``nodeid``, ``location``)."""
        record = rebuilt(module, qualname, message, filename, lineno)
        self.config.hook.pytest_warning_recorded.call_historic(
            kwargs={"warning_message": record, **recorded}
        )

    def _leak(self, fields: dict[str, Any]) -> None:
        leak = Leak(**fields)
        guard = self.config.stash.get(GUARD_KEY, None)
        if guard is not None:
            guard.record(leak)
        self.config.hook.pytest_isolation_leak(config=self.config, leak=leak)

    def _logrecord(self, text: str) -> None:
        self.log_lines.append(text)

    def _timer(self, seconds: float, method: str) -> None:
        self.timer = ending.Timer(seconds, method)

    def _interrupted(self, reason: str | None, returncode: int | None, where: object) -> None:
        self.interrupted = (reason, returncode)

    def _report(self, report: pytest.TestReport) -> None:
        self.flush_teardown()
        if ending.over_memory(report, self.limits):
            ending.lead_with_memory_limit(report, self.limits)
        self.last = report
        self.log_lines.clear()
        if report.when == "teardown":
            self.teardown = report  # merged with the teardown done here
        else:
            self.log(report)

    def log(self, report: pytest.TestReport) -> None:
        """Log ``report`` here, or hold it while a retry may follow."""
        if self.held is not None:
            self.held.append(report)
        else:
            self.item.ihook.pytest_runtest_logreport(report=report)

    def flush_teardown(self) -> None:
        """A teardown followed by more reports (a rerun's) is not the last."""
        if self.teardown is not None:
            held, self.teardown = self.teardown, None
            self.log(held)

    @property
    def failed(self) -> bool:
        """Whether a phase of the test reported a failure."""
        reports = [*(self.held or []), *([self.teardown] if self.teardown else [])]
        return any(report.failed for report in reports)

    def release(self, note: Callable[[pytest.TestReport], None]) -> None:
        """Log the held reports, each ``note``d first (the teardown is noted
        and kept for the merge)."""
        held, self.held = self.held or [], None
        for report in held:
            note(report)
            self.item.ihook.pytest_runtest_logreport(report=report)
        if self.teardown is not None:
            note(self.teardown)
