"""No process of a file-mode run outlives its parent (issue 16): SIGTERM and
SIGHUP end the run as Ctrl-C does, and a parent killed outright takes its
children with it (Linux's parent-death signal)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import TIMEOUT

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="the parent-death signal is Linux's"
)

HANGS = """
import os, subprocess, sys, time
from pathlib import Path

def test_done():
    pass

def test_hangs():
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    Path("pids").write_text(f"{os.getpid()} {grandchild.pid}")
    time.sleep(120)
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def start(pytester: pytest.Pytester, start_method: str) -> subprocess.Popen[str]:
    pytester.makepyfile(test_hang=HANGS)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "isolation",
            "-p",
            "no:randomly",
            "--isolation-mode=file",
            f"--isolation-start={start_method}",
            "--junitxml=junit.xml",
        ],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def running_pids(pytester: pytest.Pytester, parent: subprocess.Popen[str]) -> list[int]:
    pids = pytester.path / "pids"
    deadline = time.monotonic() + TIMEOUT
    while not pids.exists() or len(pids.read_text().split()) < 2:
        assert parent.poll() is None, parent.communicate()
        assert time.monotonic() < deadline, "the test never started"
        time.sleep(0.05)
    return [int(pid) for pid in pids.read_text().split()]


def gone_soon(pids: list[int], seconds: float = 10.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(pid) for pid in pids):
        time.sleep(0.05)
    return [pid for pid in pids if alive(pid)]


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_sigterm_ends_the_run_as_ctrl_c_does(
    pytester: pytest.Pytester, number: signal.Signals, start_method: str
) -> None:
    parent = start(pytester, start_method)
    try:
        pids = running_pids(pytester, parent)
        time.sleep(1.0)  # the parent has read test_done's reports (not those in flight)
        parent.send_signal(number)
        stdout, stderr = parent.communicate(timeout=TIMEOUT)
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
    assert parent.returncode == pytest.ExitCode.INTERRUPTED, stdout + stderr
    assert f"isolation: {number.name} received: ending the run as Ctrl-C does" in stderr
    assert "KeyboardInterrupt" in stdout
    assert "1 passed" in stdout  # the summary of what ran
    junit = Path(pytester.path, "junit.xml").read_text()  # as a plain run's Ctrl-C leaves it
    assert 'tests="1"' in junit
    assert 'name="test_done"' in junit
    assert gone_soon(pids) == [], "a process of the run outlived it"


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_a_parent_killed_outright_takes_its_child_with_it(
    pytester: pytest.Pytester, start_method: str
) -> None:
    parent = start(pytester, start_method)
    try:
        child, _ = running_pids(pytester, parent)
        parent.kill()
        parent.communicate(timeout=TIMEOUT)
        assert gone_soon([child]) == [], "the file's child outlived its killed parent"
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
