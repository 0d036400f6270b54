"""The forking process's side of a test's process while it runs: its
messages as they come, its time limit on this process's clock, and how it
ended (exit status, resources used, the stacks dumped at a time limit)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import time
from collections.abc import Iterator
from typing import IO
from typing import BinaryIO

from pytest_isolation.filemode.processes import DUMP_SIGNAL
from pytest_isolation.filemode.wire import Message
from pytest_isolation.filemode.wire import Receiver
from pytest_isolation.filemode.wire import TimedOut

#: How often the process is looked at while it sends nothing (it may have
#: ended while a process it started holds the pipe open).
POLL_SECONDS = 0.2
#: How long the stacks asked for at a time limit may take to be written.
DUMP_SECONDS = 1.0
#: How long what a process that ended left in the pipe is read.
DRAIN_SECONDS = 0.5


@dataclasses.dataclass
class Ended:
    """How a test's process ended."""

    #: ``os.waitstatus_to_exitcode``: the exit code, or minus the signal.
    returncode: int = 0
    #: Killed by this process at its time limit.
    timed_out: bool = False
    #: Its peak resident memory (MB) and CPU time (s), from the kernel.
    peak_mb: float = 0.0
    cpu_seconds: float = 0.0
    wall_seconds: float = 0.0
    #: What it wrote to its dump file: a fatal error's traceback, or every
    #: thread's stack at its time limit.
    dump: str = ""


class Waiting:
    """Waits for one test's process (``pid``, in a process group of its
    own), reading its pipe; kills it at ``deadline`` (``time.monotonic()``)."""

    def __init__(self, pid: int, pipe: BinaryIO, dumps: IO[bytes], deadline: float | None) -> None:
        self.pid = pid
        self.receiver = Receiver(pipe)
        self.pipe = pipe
        self.dumps = dumps
        self.deadline = deadline
        self.started = time.monotonic()
        self.ended = Ended()
        self._status: tuple[int, float, float] | None = None

    def messages(self) -> Iterator[Message]:
        """The messages until the process ended; then :attr:`ended` is set."""
        try:
            yield from self._until_ended()
        except BaseException:  # Ctrl-C here, or an error replaying a message
            self._kill()
            raise
        finally:
            self.pipe.close()

    def _until_ended(self) -> Iterator[Message]:
        while self._status is None:
            now = time.monotonic()
            until = now + POLL_SECONDS
            if self.deadline is not None:
                until = min(until, self.deadline)
            try:
                yield from self.receiver.messages(until)
            except TimedOut:
                pass
            else:  # the pipe closed: the process is ending
                self._reap(block=self.deadline is None)
            if self._status is None:
                self._reap(block=False)
            overdue = self.deadline is not None and time.monotonic() >= self.deadline
            if self._status is None and overdue:
                self._time_limit()
        yield from self.receiver.drain(DRAIN_SECONDS)
        self._finish()

    def _reap(self, block: bool) -> None:
        try:
            pid, status, usage = os.wait4(self.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            pid, status, usage = self.pid, 0, None
        if pid == 0:  # still running
            return
        code = os.waitstatus_to_exitcode(status) if usage is not None else 0
        peak = usage.ru_maxrss / 1024 if usage is not None else 0.0
        cpu = usage.ru_utime + usage.ru_stime if usage is not None else 0.0
        self._status = (code, peak, cpu)

    def _time_limit(self) -> None:
        """Ask for every thread's stack, give it a moment, end the process group."""
        self.ended.timed_out = True
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, DUMP_SIGNAL)
        size, waited = -1, 0.0
        while waited < DUMP_SECONDS:
            time.sleep(0.05)
            waited += 0.05
            current = os.fstat(self.dumps.fileno()).st_size
            if current == size and current > 0:
                break
            size = current
        self._kill()

    def _kill(self) -> None:
        for kill in (os.killpg, os.kill):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill(self.pid, signal.SIGKILL)
        if self._status is None:
            self._reap(block=True)

    def _finish(self) -> None:
        assert self._status is not None
        code, peak, cpu = self._status
        self.ended.returncode = code
        self.ended.peak_mb = peak
        self.ended.cpu_seconds = cpu
        self.ended.wall_seconds = time.monotonic() - self.started
        self.dumps.seek(0)
        self.ended.dump = self.dumps.read().decode("utf-8", "replace")
