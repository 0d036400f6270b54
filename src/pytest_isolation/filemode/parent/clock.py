"""The time limits of a file's process while the parent reads it: the
file's (``--isolation-timeout``, from the start of its reading) and its
running test's (``--isolation-test-timeout``, from the test's start, unless
the test runs in a process of its own, which keeps its own limit)."""

from __future__ import annotations

import time
from collections.abc import Callable
from collections.abc import Iterator

from pytest_isolation.filemode import wire


class Clock:
    """The deadlines of one child's reading; ``running()``: since when its
    running test runs and whether in a process of its own, or None."""

    def __init__(
        self,
        timeout: float | None,
        test_timeout: float | None,
        running: Callable[[], tuple[float, bool] | None],
    ) -> None:
        self.timeout = timeout
        self.test_timeout = test_timeout
        self.running = running
        self.file_deadline = None if timeout is None else time.monotonic() + timeout

    def deadline(self) -> float | None:
        """The nearest of the deadlines that apply now."""
        running = self.running() if self.test_timeout is not None else None
        if running is None or running[1] or self.test_timeout is None:
            return self.file_deadline
        test_deadline = running[0] + self.test_timeout
        if self.file_deadline is None:
            return test_deadline
        return min(test_deadline, self.file_deadline)

    def messages(self, receiver: wire.Receiver) -> Iterator[wire.Message]:
        """The child's messages, each awaited until the deadline that applies
        then; raises ``wire.TimedOut`` when it passes."""
        while True:
            deadline = self.deadline()
            for message in receiver.messages(deadline):
                yield message
                if self.deadline() != deadline:
                    break  # a test started or ended: read on by its deadline
            else:
                return

    def expired(self) -> str:
        """How the child was timed out: by its file's limit or its test's."""
        if self.file_deadline is not None and time.monotonic() >= self.file_deadline:
            return f"timed out after {self.timeout:g} s"
        return f"over its {self.test_timeout:g} s time limit"
