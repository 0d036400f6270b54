"""One test in a process of its own, from the forking side: fork, replay
what the process sends into this process's hooks as it comes, and report
a process that ended early or over a limit."""

from __future__ import annotations

import os
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from typing import IO
from typing import Any

import pytest

from pytest_isolation.core import pytest_private
from pytest_isolation.core.keys import GUARD_KEY
from pytest_isolation.core.kinds import Phase
from pytest_isolation.core.records import Leak
from pytest_isolation.core.signals import signal_name
from pytest_isolation.core.warnings import warning_category
from pytest_isolation.filemode import forks
from pytest_isolation.filemode import lifetime
from pytest_isolation.filemode.processes import describe_exit
from pytest_isolation.filemode.wire import INTERRUPTED
from pytest_isolation.filemode.wire import LEAK
from pytest_isolation.filemode.wire import LOGRECORD
from pytest_isolation.filemode.wire import REPORT
from pytest_isolation.filemode.wire import TIMER
from pytest_isolation.filemode.wire import WARNING
from pytest_isolation.filemode.wire import Sender
from pytest_isolation.pertest import ending
from pytest_isolation.pertest import testchild
from pytest_isolation.pertest.limits import Limits
from pytest_isolation.pertest.waiting import Ended
from pytest_isolation.pertest.waiting import Waiting

_NEXT_PHASE: dict[str, Phase] = {"setup": "call", "call": "teardown", "teardown": "teardown"}


class TestRun:
    """Runs ``item`` in a forked process and replays its reports; the last
    teardown report is held (:attr:`teardown`) for the forking side to
    merge with its own teardown."""

    __test__ = False  # not a test class, whatever pytest's python_classes say

    def __init__(
        self, item: pytest.Item, limits: Limits, dumps: IO[bytes], hold: bool = False
    ) -> None:
        self.item = item
        self.config = item.config
        self.limits = limits
        self.dumps = dumps
        self.teardown: pytest.TestReport | None = None
        #: The last report sent: the phase running now follows it.
        self.last: pytest.TestReport | None = None
        self.log_lines: list[str] = []
        self.timer: ending.Timer | None = None
        self.interrupted: tuple[str | None, int | None] | None = None
        self.ended = Ended()
        #: With a retry left: the reports, kept until it is known whether
        #: this attempt is the one reported (None: each is logged at once).
        self.held: list[pytest.TestReport] | None = [] if hold else None
        #: How the process ended, in the words of a retry's attempts; "" if it finished.
        self.death = ""
        #: The test's process and the read end of its pipe, once forked.
        self.pid = 0
        self.pipe = -1

    def fork(self, enter: Callable[[Sender], None]) -> bool:
        r"""Fork the test's process; True in it (made the test's own, and
        ``enter`` told its sender), False here, which then :meth:`wait`\ s."""
        read_fd, write_fd = os.pipe()
        self.dumps.seek(0)
        self.dumps.truncate()
        parent = os.getpid()
        lifetime.wait_for_own_children()
        pid = _fork()
        if pid == 0:  # pragma: no cover - the test's process
            os.close(read_fd)
            try:
                dumps = self.dumps.fileno()
                enter(testchild.start(self.item, self.limits, write_fd, dumps, parent))
            except BaseException:
                traceback.print_exc()
                os._exit(testchild.BROKEN_EXIT)
            return True
        os.close(write_fd)
        self.pid, self.pipe = pid, read_fd
        return False

    def wait(self) -> None:
        """Replay what the test's process sends until it ends; report how it ended."""
        try:
            timeout = self.limits.timeout
            deadline = time.monotonic() + timeout if timeout else None
            stream = os.fdopen(self.pipe, "rb", buffering=0)
            waiting = Waiting(self.pid, stream, self.dumps, deadline)
            for kind, payload in waiting.messages():
                self._replay(kind, payload)
        finally:
            lifetime.give_back_sigchld()
        self.ended = waiting.ended
        self._settle()

    def _replay(self, kind: str, payload: dict[str, Any]) -> None:
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
        category = warning_category(module, qualname)
        record = warnings.WarningMessage(category(message), category, filename, lineno)
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
        self._flush_teardown()
        if ending.over_memory(report, self.limits):
            ending.lead_with_memory_limit(report, self.limits)
        self.last = report
        self.log_lines.clear()
        if report.when == "teardown":
            self.teardown = report  # merged with the teardown done here
        else:
            self._log(report)

    def _log(self, report: pytest.TestReport) -> None:
        if self.held is not None:
            self.held.append(report)
        else:
            self.item.ihook.pytest_runtest_logreport(report=report)

    def _flush_teardown(self) -> None:
        """A teardown followed by more reports (a rerun's) is not the last."""
        if self.teardown is not None:
            held, self.teardown = self.teardown, None
            self._log(held)

    @property
    def failed(self) -> bool:
        """Whether a phase of the test failed (a crash and a limit included)."""
        reports = [*(self.held or []), *([self.teardown] if self.teardown else [])]
        return any(report.failed for report in reports) or bool(self.death)

    def outcome(self) -> str:
        """``passed``, ``failed``, ``crashed (...)`` or ``timed out ...``, as
        a retry's attempts say."""
        return self.death or ("failed" if self.failed else "passed")

    def release(self, note: Callable[[pytest.TestReport], None]) -> None:
        """Log the held reports, each ``note``d first (the teardown is noted
        and kept for the merge)."""
        held, self.held = self.held or [], None
        for report in held:
            note(report)
            self.item.ihook.pytest_runtest_logreport(report=report)
        if self.teardown is not None:
            note(self.teardown)

    def figures(self) -> dict[str, Any]:
        """The run report's figures of the process (JSON)."""
        ended = self.ended
        code = ended.returncode
        return {
            "seconds": round(ended.wall_seconds, 4),
            "cpu_seconds": round(ended.cpu_seconds, 4),
            "peak_mb": round(ended.peak_mb, 1),
            "exit_code": None if code < 0 else code,
            "signal": None if code >= 0 else (signal_name(-code) or f"signal {-code}"),
            "cause": self.death or None,
        }

    def _settle(self) -> None:
        """A process that ended before its test's last teardown: a failed
        report of the phase it was in, then a teardown of its own."""
        ended = self.ended
        done = self.teardown is not None and ended.returncode == 0 and not ended.timed_out
        if done or self.interrupted is not None:
            return
        self._flush_teardown()
        phase: Phase = "setup" if self.last is None else _NEXT_PHASE[self.last.when]
        if self.last is not None and self.last.when == "teardown":
            phase = "teardown"
        cause = ending.cause(ended, self.limits, self.timer, phase)
        self.death = (
            cause.partition(":")[0]  # over its 2 s time limit, over its 512 MB memory limit
            if cause.startswith("over")
            else f"crashed ({describe_exit(ended.returncode)})"
        )
        text = ending.explained(
            cause,
            ended.dump,
            bool(self.config.getoption("fulltrace", False)),
        )
        out, err = pytest_private.read_capture(self.config)
        captured = (out, err, "\n".join(self.log_lines))
        report = ending.died(self.item, phase, text, self.last, captured, ended.wall_seconds)
        self.last = report
        if phase == "teardown":
            self.teardown = report
            return
        self._log(report)
        self.teardown = pytest.TestReport(
            nodeid=self.item.nodeid,
            location=self.item.location,
            keywords=dict.fromkeys(self.item.keywords, 1),
            outcome="passed",
            longrepr=None,
            when="teardown",
            sections=list(report.sections),
            user_properties=list(self.item.user_properties),
        )


def _fork() -> int:
    """``os.fork()``: Python 3.12+ warns when other threads run (an xdist
    worker's I/O thread, a suite's own); the test's process has only the
    forking thread, as every fork-based runner's has."""
    sys.stdout.flush()
    sys.stderr.flush()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*fork.*", category=DeprecationWarning)
        return forks.fork()


def dump_file() -> IO[bytes]:
    """The file a test's process writes its dumps to (one for the run)."""
    return tempfile.TemporaryFile()  # kept open for the run
