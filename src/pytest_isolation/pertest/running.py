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
from pytest_isolation.core.kinds import Phase
from pytest_isolation.core.signals import signal_name
from pytest_isolation.filemode import forks
from pytest_isolation.filemode import lifetime
from pytest_isolation.filemode.processes import describe_exit
from pytest_isolation.filemode.wire import Sender
from pytest_isolation.pertest import ending
from pytest_isolation.pertest import testchild
from pytest_isolation.pertest.limits import Limits
from pytest_isolation.pertest.replay import Replay
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
        self.replay = Replay(item, limits, hold)
        self.ended = Ended()
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
                self.replay.handle(kind, payload)
        finally:
            lifetime.give_back_sigchld()
        self.ended = waiting.ended
        self._settle()

    @property
    def failed(self) -> bool:
        """Whether a phase of the test failed (a crash and a limit included)."""
        return self.replay.failed or bool(self.death)

    def outcome(self) -> str:
        """``passed``, ``failed``, ``crashed (...)`` or ``timed out ...``, as
        a retry's attempts say."""
        return self.death or ("failed" if self.failed else "passed")

    def release(self, note: Callable[[pytest.TestReport], None]) -> None:
        """Log the held reports, each ``note``d first (:meth:`.Replay.release`)."""
        self.replay.release(note)

    @property
    def teardown(self) -> pytest.TestReport | None:
        """The test's last teardown report, for the forking side's merge."""
        return self.replay.teardown

    @property
    def interrupted(self) -> tuple[str | None, int | None] | None:
        """How a Ctrl-C or ``pytest.exit()`` in the test ended the run, if one did."""
        return self.replay.interrupted

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
        ended, replay = self.ended, self.replay
        done = replay.teardown is not None and ended.returncode == 0 and not ended.timed_out
        if done or replay.interrupted is not None:
            return
        replay.flush_teardown()
        phase: Phase = "setup" if replay.last is None else _NEXT_PHASE[replay.last.when]
        if replay.last is not None and replay.last.when == "teardown":
            phase = "teardown"
        cause = ending.cause(ended, self.limits, replay.timer, phase)
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
        captured = (out, err, "\n".join(replay.log_lines))
        report = ending.died(self.item, phase, text, replay.last, captured, ended.wall_seconds)
        replay.last = report
        if phase == "teardown":
            replay.teardown = report
            return
        replay.log(report)
        replay.teardown = pytest.TestReport(
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
