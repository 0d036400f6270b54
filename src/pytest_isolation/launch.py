"""Starting, watching and ending file-mode child processes.

Each child runs in a session (and process group) of its own, so ending it
with ``killpg`` also ends whatever it started, and a Ctrl-C at the terminal
reaches only the parent, which then ends its children.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import gc
import os
import signal
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable
from typing import IO
from typing import BinaryIO

from pytest_isolation.wire import CHILD_ENV
from pytest_isolation.wire import START
from pytest_isolation.wire import ChildSpec
from pytest_isolation.wire import Sender

#: How much of a dead child's stderr goes into its failure report: enough for
#: a faulthandler dump of a deep stack after the test's own last words.
STDERR_TAIL_BYTES = 12000
STDERR_TAIL_LINES = 100

# Run by a spawned interpreter: put back the parent's sys.path[0] (``python -m
# pytest`` and the ``pytest`` script differ there), then run pytest as usual.
_SPAWN_CODE = (
    "import json, os, sys\n"
    f"sys.path[0] = json.loads(os.environ[{CHILD_ENV!r}])['path0']\n"
    "import pytest\n"
    "raise SystemExit(pytest.main())\n"
)


@dataclasses.dataclass
class Child:
    """A running child: its pid, the message stream and its stderr file."""

    pid: int
    stream: BinaryIO
    stderr: IO[bytes]
    process: subprocess.Popen[bytes] | None = None
    returncode: int | None = None

    def poll(self) -> bool:
        """Reap the child if it has exited; return whether it has."""
        if self.returncode is None:
            if self.process is not None:
                self.returncode = self.process.poll()
            else:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode is not None

    def wait(self) -> int:
        """Reap the child; return its exit code, negative for a signal."""
        if self.returncode is None:
            if self.process is not None:
                self.returncode = self.process.wait()
            else:
                _, status = os.waitpid(self.pid, 0)
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def kill(self) -> None:
        """End the child and everything in its process group."""
        for kill in (os.killpg, os.kill):
            try:
                kill(self.pid, signal.SIGKILL)
                return
            except (ProcessLookupError, PermissionError):
                continue

    def stderr_text(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")

    def stderr_tail(self) -> str:
        self.stderr.seek(0, os.SEEK_END)
        size = self.stderr.tell()
        self.stderr.seek(max(0, size - STDERR_TAIL_BYTES))
        lines = self.stderr.read().decode(errors="replace").splitlines()
        return "\n".join(lines[-STDERR_TAIL_LINES:])

    def close(self) -> None:
        self.stream.close()
        self.stderr.close()


def describe_exit(returncode: int) -> str:
    """``'was killed by signal 11 (SIGSEGV)'`` or ``'exited with code 3'``."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown signal"
        return f"was killed by signal {-returncode} ({name})"
    return f"exited with code {returncode}"


@dataclasses.dataclass
class Warm:
    """A forked child that has prepared itself and waits to be told its file.

    Forking and preparing the next child while the current one runs takes
    both off the critical path of a run.
    """

    pid: int
    control: int
    stream: BinaryIO
    stderr: IO[bytes]

    def activate(self, spec: ChildSpec, index: int) -> Child:
        """Send the file to run (``index``: its placeholder in ``session.items``)."""
        try:
            Sender(self.control).send(START, spec=spec, index=index)
        finally:
            os.close(self.control)
        return Child(self.pid, self.stream, self.stderr)

    def discard(self) -> None:
        """Let the child go unused: it exits when its control pipe closes."""
        os.close(self.control)
        self.stream.close()
        self.stderr.close()
        os.waitpid(self.pid, 0)


def fork_warm(body: Callable[[int, int], None]) -> Warm:
    """Fork a child that runs ``body(control_fd, write_fd)`` and never returns."""
    control_read, control_write = os.pipe()
    read_fd, write_fd = os.pipe()
    stderr = tempfile.TemporaryFile()  # noqa: SIM115 - owned by the returned Warm
    sys.stdout.flush()
    sys.stderr.flush()
    # Frozen objects are skipped by the garbage collectors of the child and of
    # the parent, which would otherwise touch, and so copy, every page of the
    # heap they share.  They stay frozen: what the parent built up to here is
    # its configuration and collection, which lives as long as the run.
    gc.freeze()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        code = 3
        try:
            os.close(control_write)
            os.close(read_fd)
            os.setsid()
            os.dup2(stderr.fileno(), 2)
            if faulthandler.is_enabled():
                # A fatal error's traceback goes to the stderr tail, on an fd of
                # its own: pytest's capture points fd 2 elsewhere during tests.
                faulthandler.enable(os.dup(2))
            body(control_read, write_fd)
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    os.close(control_read)
    os.close(write_fd)
    return Warm(pid, control_write, os.fdopen(read_fd, "rb"), stderr)


def spawn_child(spec: ChildSpec, args: list[str], cwd: str) -> Child:
    """Start a fresh interpreter that runs pytest as a child for ``spec``."""
    read_fd, write_fd = os.pipe()
    stderr = tempfile.TemporaryFile()  # noqa: SIM115 - owned by the returned Child
    spec = dataclasses.replace(spec, fd=write_fd, path0=sys.path[0])
    env = {**os.environ, CHILD_ENV: spec.to_env()}
    try:
        process = subprocess.Popen(
            [sys.executable, "-c", _SPAWN_CODE, *args],
            cwd=cwd,
            env=env,
            pass_fds=(write_fd,),
            stderr=stderr,
            start_new_session=True,
        )
    finally:
        os.close(write_fd)
    return Child(process.pid, os.fdopen(read_fd, "rb"), stderr, process)
