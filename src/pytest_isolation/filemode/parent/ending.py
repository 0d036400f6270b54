"""Ending a child and everything it started: its whole process tree, also
the processes that left its session (a timed-out or interrupted child, the
end of the run)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator

from pytest_isolation.filemode.processes import DUMP_SIGNAL
from pytest_isolation.filemode.processes import Child


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
