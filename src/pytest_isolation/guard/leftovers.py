"""What a test leaves running or lying around, reported but never undone:
threads still alive after a short grace join, child processes still alive,
and files left in the working directory."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

#: How long finished-but-not-yet-exited threads and processes get, in seconds.
GRACE = 0.2

#: Names in the working directory that tools create during a run; pytest's cache
#: makes ``.pytest_cache`` through a ``pytest-cache-files-*`` directory beside it,
#: which another xdist worker sharing the directory may do while a test runs.
TOOL_FILES = (
    "__pycache__",
    ".pytest_cache",
    "pytest-cache-files-",
    ".hypothesis",
    ".coverage",
    ".mypy_cache",
)


# The real functions, read once: a test may replace the module attributes.
# Kept in a dict, not as module globals, which pyfakefs would patch too.
class _Real(NamedTuple):
    getcwd: Callable[[], str]
    stat: Callable[[str], os.stat_result]
    listdir: Callable[[str], list[str]]


_REAL = _Real(os.getcwd, os.stat, os.listdir)
_enumerate = threading.enumerate

#: Modules whose worker threads are pooled by design: an idle worker waits for
#: the next job (concurrent.futures' executors, asyncio's default executor,
#: trio's thread cache, anyio's worker threads).  The pool, if some state
#: keeps it, is that state's business; its workers are not a test's leak.
POOLED = frozenset(
    {"concurrent.futures.thread", "trio._core._thread_cache", "anyio._backends._asyncio"}
)


def pooled(thread: threading.Thread) -> bool:
    """A thread pool's worker, by the module of its target or of its class.

    ``Thread._target`` is private (the stdlib keeps the target only there
    while the thread runs); ``tests/test_guard_fences.py`` checks it."""
    target = getattr(thread, "_target", None)
    module = getattr(target, "__module__", None) or type(thread).__module__
    return module in POOLED


#: One report-only finding: (category, key, description).
Finding = tuple[str, str, str]


def _children() -> dict[int, str]:
    """Live (not zombie) child processes of this process and their command lines (Linux)."""
    found: dict[int, str] = {}
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return found
    for task in tasks:
        try:
            pids = Path(f"/proc/self/task/{task}/children").read_text().split()
        except OSError:
            continue
        for pid in map(int, pids):
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
                if stat.rpartition(")")[2].split()[0] == "Z":
                    continue
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except (OSError, IndexError):
                continue
            found[pid] = " ".join(os.fsdecode(arg) for arg in argv if arg)[:120]
    return found


class Leftovers:
    """Per window: threads, child processes and files in the working directory."""

    def __init__(self, ignored_paths: tuple[str, ...] = ()) -> None:
        self.ignored_paths = {os.path.realpath(path) for path in ignored_paths}
        self.threads: set[threading.Thread] = set()
        #: Set by the audit listener when something starts a process.
        self.spawned = False
        self.known_children: dict[int, str] = _children() if sys.platform == "linux" else {}
        self._listing: tuple[str, tuple[int, int, int], frozenset[str]] | None = None

    def start(self) -> None:
        """Begin a window; the previous window's end is the baseline when nothing ran since."""
        if self._listing is None:
            self.rebase()
        elif self.spawned:
            self.settle_children()

    def rebase(self) -> None:
        """Accept what runs and exists now (after a higher-scoped fixture's setup)."""
        self.threads = set(_enumerate())
        if self.spawned:
            self.settle_children()
        self._list_cwd()

    def settle_children(self) -> None:
        """Accept the children alive now as the baseline."""
        self.spawned = False
        self.known_children = _children()

    def check(self) -> list[Finding]:
        return [*self._threads(), *self._processes(), *self._files()]

    def _threads(self) -> list[Finding]:
        now = _enumerate()
        if len(now) == len(self.threads) and self.threads.issuperset(now):
            return []
        new = [t for t in now if t not in self.threads and t.is_alive() and not pooled(t)]
        deadline = time.monotonic() + GRACE
        for thread in new:
            thread.join(max(0.0, deadline - time.monotonic()))
        self.threads = set(_enumerate())  # a leaked thread is reported once
        return [
            (
                "threads",
                thread.name,
                f"thread {thread.name!r} still running" + (" (daemon)" if thread.daemon else ""),
            )
            for thread in new
            if thread.is_alive() and not pooled(thread)
        ]

    def _processes(self) -> list[Finding]:
        if not self.spawned or sys.platform != "linux":
            return []
        deadline = time.monotonic() + GRACE
        while True:
            now = _children()
            new = {pid: cmd for pid, cmd in now.items() if pid not in self.known_children}
            if not new or time.monotonic() >= deadline:
                break
            time.sleep(0.01)
        self.known_children = now
        self.spawned = False
        return [
            ("processes", str(pid), f"child process {pid} still running ({cmd})")
            for pid, cmd in new.items()
        ]

    def _stat(self) -> tuple[str, tuple[int, int, int]] | None:
        """The working directory and its (inode, device, mtime): one
        ``stat(".")``, and the path only when it is not the listed directory."""
        try:
            stat = _REAL.stat(".")
        except OSError:
            return None
        key = (stat.st_ino, stat.st_dev, stat.st_mtime_ns)
        listing = self._listing
        if listing is not None and listing[1][:2] == key[:2]:
            return listing[0], key
        try:
            return _REAL.getcwd(), key
        except OSError:
            return None

    def _list_cwd(self) -> None:
        """(Re)list the working directory only when its mtime says it changed."""
        current = self._stat()
        if current is None:
            self._listing = None
            return
        cwd, key = current
        if self._listing is None or self._listing[:2] != (cwd, key):
            self._listing = (cwd, key, frozenset(_REAL.listdir(cwd)))

    def _files(self) -> list[Finding]:
        before, current = self._listing, self._stat()
        if before is None or current is None or before[:2] == current:
            return []
        cwd = current[0]
        self._list_cwd()
        if cwd != before[0]:
            return []  # the cwd category reports the change itself
        assert self._listing is not None
        new = sorted(self._listing[2] - before[2])
        left = [
            name
            for name in new
            if not name.startswith(TOOL_FILES)
            and os.path.realpath(os.path.join(cwd, name)) not in self.ignored_paths
        ]
        return [
            ("files", name, f"file {name!r} left in the working directory {cwd}") for name in left
        ]
