"""Ending a child and everything it started: its whole process tree, also
the processes that left its session (a timed-out or interrupted child, the
end of the run); and the children that have finished their files and run
their plugins' ``pytest_unconfigure`` while the run goes on, until they have
ended (:class:`Finishing`)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from typing import NamedTuple

import pytest

from pytest_isolation.core.keys import SERVERS_ENDED
from pytest_isolation.filemode import wire
from pytest_isolation.filemode.parent.raised import AT_UNCONFIGURE
from pytest_isolation.filemode.parent.raised import KILLED_AFTER
from pytest_isolation.filemode.processes import DUMP_SIGNAL
from pytest_isolation.filemode.processes import Child
from pytest_isolation.filemode.processes import describe_exit


def _tree(root: int) -> set[int]:
    """``root``'s descendants, also those that left its session (Linux ``/proc``)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return set()
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                ppid = int(stat.read().rpartition(b")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found: set[int] = set()
    todo = [root]
    while todo:
        for pid in children.get(todo.pop(), ()):
            if pid not in found:
                found.add(pid)
                todo.append(pid)
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True


def _signal_all(pids: set[int], number: int) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, number)


#: Signals held back while a tree is signalled: a second Ctrl-C, or the SIGINT
#: execnet sends itself 5 s after its controller ended, would leave it half-ended.
_HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def _uninterrupted() -> Iterator[None]:
    """Hold the ending signals back until the block has run (POSIX)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def end_at_once(child: Child, keep_stream: bool = False) -> None:
    """End a child and every process it started, now (the run was
    interrupted), and reap it: the descendants are found before the kill,
    which would cut their parent links.  With ``keep_stream``, what it sent
    can still be read; the caller closes it."""
    with _uninterrupted():
        tree = _tree(child.pid)
        child.kill()
        _signal_all(tree, signal.SIGKILL)
    child.wait()
    if not keep_stream:
        child.close()


def end_tree(child: Child, grace: float) -> None:
    """End a timed-out child and every process it started.

    The child first dumps its threads' tracebacks (DUMP_SIGNAL); then the whole
    tree is frozen (SIGSTOP, so nothing forks while it is found), sent
    SIGTERM and let go, and what still runs after ``grace`` seconds is
    killed.  Descendants that started a session of their own are found by
    their parent links, not by the process group.
    """
    _signal_all({child.pid}, DUMP_SIGNAL)
    time.sleep(0.2)  # the dump is written from the signal handler at once
    tree = {child.pid} | _tree(child.pid)
    _signal_all(tree, signal.SIGSTOP)
    for pid in list(tree):
        tree |= _tree(pid)
    _signal_all(tree, signal.SIGSTOP)
    with contextlib.suppress(OSError):
        os.killpg(child.pid, signal.SIGTERM)
    _signal_all(tree, signal.SIGTERM)
    _signal_all(tree, signal.SIGCONT)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(alive(pid) for pid in tree):
        time.sleep(0.05)
    for pid in list(tree):
        tree |= _tree(pid)
    child.kill()
    _signal_all({pid for pid in tree if alive(pid)}, signal.SIGKILL)


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


def end_child(child: Child) -> None:
    """End a child that is not needed (any more) and wait for it."""
    child.kill()
    child.wait()
    child.close()
