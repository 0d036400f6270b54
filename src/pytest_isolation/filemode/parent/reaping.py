"""The children that have finished their files and run their plugins'
``pytest_unconfigure`` while the run goes on (:func:`..child.end.unconfigure`),
until they have ended."""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import NamedTuple

import pytest

from pytest_isolation.core.keys import SERVERS_ENDED
from pytest_isolation.filemode import wire
from pytest_isolation.filemode.child.session_end import AT_UNCONFIGURE
from pytest_isolation.filemode.child.session_end import KILLED_AFTER
from pytest_isolation.filemode.parent.ending import alive
from pytest_isolation.filemode.parent.ending import end_tree
from pytest_isolation.filemode.processes import Child
from pytest_isolation.filemode.processes import describe_exit


class Exited(NamedTuple):
    """A child that finished its file, until it has ended."""

    child: Child
    nodeid: str
    #: How much of its stderr has been shown.
    seen: int
    #: A fork server's child's messages, where it says its exit code.
    told: wire.Receiver | None = None


class Finishing:
    """Reaps the finished children; says which one failed its unconfigure."""

    def __init__(self, config: pytest.Config, timeout: float | None, grace: float) -> None:
        self.config = config
        #: With ``--isolation-timeout``: how long a finished child may take to end.
        self.timeout = timeout
        self.grace = grace
        self.exited: list[Exited] = []

    def add(self, child: Child, nodeid: str, seen: int, told: wire.Receiver | None = None) -> None:
        self.exited.append(Exited(child, nodeid, seen, told))

    def reap(self, wait: bool) -> tuple[int, str, str] | None:
        """Reap those that have ended (all, with ``wait``): show what they
        wrote to stderr after finishing; return the first failure's exit
        status and file."""
        running, failed = [], None
        for exited in self.exited:
            child = exited.child
            if not wait and (child.waiter is not None or not child.poll()):
                running.append(exited)
                continue
            code = self._ended(child, exited.nodeid)
            if exited.told is not None:
                if child.unknown:  # its fork server has gone: the child says
                    code, gone = _told_exit(exited.told)
                    if gone:
                        self.config.stash.setdefault(SERVERS_ENDED, []).append(exited.nodeid)
                child.stream.close()
            pass_through(child, exited.seen)
            child.stderr.close()
            if code < 0:  # killed after its last test
                ended = describe_exit(code).removeprefix("was ")
                self._say(f"isolation: {ended} after the last test of {exited.nodeid}")
            if code and failed is None:  # its plugins' unconfigure raised, or a signal
                failed = (code, exited.nodeid, AT_UNCONFIGURE)
                if code < 0:
                    why = KILLED_AFTER.format(ended=describe_exit(code))
                    failed = (int(pytest.ExitCode.INTERNAL_ERROR), exited.nodeid, why)
        self.exited = running
        return failed

    def _ended(self, child: Child, nodeid: str) -> int:
        """Wait for a finished child to end; with a timeout, for at most that
        long (its unconfigure hangs): then end its tree."""
        if self.timeout is not None:
            deadline = time.monotonic() + self.timeout
            while alive(child.pid) and time.monotonic() < deadline:
                time.sleep(0.005)
            if alive(child.pid):
                self._say(
                    f"isolation: the process of {nodeid} did not end within "
                    f"{self.timeout:g} s after its last test (its plugins' unconfigure); "
                    "its process tree was ended"
                )
                end_tree(child, self.grace)
        return child.wait()

    def _say(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(line, red=True)


def _told_exit(receiver: wire.Receiver) -> tuple[int, bool]:
    """The exit code a fork server's child sent last, when it has ended
    (its stream closed; killed by an unknown signal if it sent none), and
    whether it saw its server end after its file's last report."""
    code, gone = -int(signal.SIGKILL), False
    for kind, payload in receiver.messages():
        if kind == wire.EXITING:
            code = int(payload["code"])
        gone = gone or kind == wire.SERVER_ENDED
    return code, gone


def pass_through(child: Child, start: int, end: int = -1) -> int:
    """Show what a finished child wrote to its stderr outside of any test
    (e.g. under ``-s``), from byte ``start`` to ``end`` (-1: all); return
    where it stopped.  The child goes on writing after it finished (its
    unconfigure), so the part before it finished is cut by size, not by what
    happens to be there when the parent reads; and read with ``pread``: the
    file's offset is the child's too (a forked child writes through the same
    open file), and moving it would make the child write over itself."""
    fd = child.stderr.fileno()
    size = os.fstat(fd).st_size if end < 0 else end
    data = os.pread(fd, max(size - start, 0), start)
    if data:
        sys.stderr.write(data.decode(errors="replace"))
        sys.stderr.flush()
    return start + len(data)
