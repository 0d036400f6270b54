"""No process of a file-mode run outlives its parent (issue 16): SIGTERM and
SIGHUP end the run as Ctrl-C does, and a parent killed outright takes its
children with it (Linux's parent-death signal)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import TIMEOUT

#: The signals that end a run as Ctrl-C does.
ENDING = (signal.SIGTERM, signal.SIGHUP)

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="the parent-death signal is Linux's"
)

HANGS = """
import os, subprocess, sys, time
from pathlib import Path

def test_done():
    pass

def ancestors():  # this process's parent, its parent and so on
    pid, found = os.getppid(), []
    while pid > 1:
        found.append(pid)
        with open(f"/proc/{pid}/stat", "rb") as stat:
            pid = int(stat.read().rpartition(b")")[2].split()[1])
    return found

def test_hangs():
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    Path("ancestors").write_text(" ".join(map(str, ancestors())))
    Path("pids").write_text(f"{os.getpid()} {grandchild.pid}")
    time.sleep(120)
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def start(
    pytester: pytest.Pytester, start_method: str, *args: str, source: str = HANGS
) -> subprocess.Popen[str]:
    pytester.makepyfile(test_hang=source)
    # The run takes the ending signals with their default handlers (under
    # nohup, as CI may run, SIGHUP is ignored, and the run rightly keeps so).
    saved = {number: signal.signal(number, signal.SIG_DFL) for number in ENDING}
    try:
        return _popen(pytester, start_method, args)
    finally:
        for number, handler in saved.items():
            signal.signal(number, handler)


def _popen(
    pytester: pytest.Pytester, start_method: str, args: tuple[str, ...]
) -> subprocess.Popen[str]:
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
            *args,
        ],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def start_xdist(pytester: pytest.Pytester, start_method: str, sigint: str) -> subprocess.Popen[str]:
    """One xdist worker, started with SIGINT as ``sigint`` says."""
    handler = signal.SIG_IGN if sigint == "ignored" else signal.SIG_DFL
    before = signal.signal(signal.SIGINT, handler)  # inherited by the run
    try:
        return start(pytester, start_method, "-p", "xdist", "-n", "1")
    finally:
        signal.signal(signal.SIGINT, before)


def running_pids(pytester: pytest.Pytester, parent: subprocess.Popen[str]) -> list[int]:
    pids = pytester.path / "pids"
    deadline = time.monotonic() + TIMEOUT
    while not pids.exists() or len(pids.read_text().split()) < 2:
        assert parent.poll() is None, parent.communicate()
        assert time.monotonic() < deadline, "the test never started"
        time.sleep(0.05)
    return [int(pid) for pid in pids.read_text().split()]


def below(pytester: pytest.Pytester, parent: subprocess.Popen[str]) -> list[int]:
    """The processes between ``parent`` and the running test (the xdist worker,
    the fork server)."""
    chain = [int(pid) for pid in (pytester.path / "ancestors").read_text().split()]
    assert parent.pid in chain, (parent.pid, chain)
    return chain[: chain.index(parent.pid)]


def gone_soon(pids: list[int], seconds: float = 10.0) -> list[str]:
    """The processes of ``pids`` still alive after ``seconds``, each described
    (its state, what it waits in, its command line)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(pid) for pid in pids):
        time.sleep(0.05)
    return [describe(pid) for pid in pids if alive(pid)]


def describe(pid: int) -> str:
    """What a failing test says of a process: its state, its parent, what it
    waits in and its command line."""

    def read(name: str) -> str:
        try:
            return Path(f"/proc/{pid}/{name}").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError as error:
            return f"({error.strerror})"

    fields = dict(line.split(":\t", 1) for line in read("status").splitlines() if ":\t" in line)
    return (
        f"{pid} state={fields.get('State')} ppid={fields.get('PPid')} "
        f"wchan={read('wchan')} cmdline={read('cmdline')}"
    )


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("start_method", ["fork", "spawn", "forkserver"])
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


@pytest.mark.parametrize("start_method", ["fork", "spawn", "forkserver"])
def test_a_burst_of_sigterms_ends_the_run_once_and_every_child_s_tree(
    pytester: pytest.Pytester, start_method: str
) -> None:
    """A second SIGTERM while the first one ends the children does not cut
    that short: Linux sends an xdist worker its parent-death signal again
    each time it passes from one ending thread of its controller to the
    next, and a killed controller has several."""
    parent = start(pytester, start_method)
    try:
        pids = running_pids(pytester, parent)
        deadline = time.monotonic() + TIMEOUT
        while parent.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(ProcessLookupError):
                parent.send_signal(signal.SIGTERM)
            time.sleep(0.002)
        stdout, stderr = parent.communicate(timeout=TIMEOUT)
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
    assert parent.returncode == pytest.ExitCode.INTERRUPTED, stdout + stderr
    assert stderr.count("isolation: SIGTERM received: ending the run as Ctrl-C does") == 1, stderr
    assert "1 passed" in stdout
    assert gone_soon(pids) == [], "a process of the run outlived it"


@pytest.mark.parametrize("start_method", ["fork", "spawn", "forkserver"])
def test_an_interrupt_reports_every_test_the_child_finished(
    pytester: pytest.Pytester, start_method: str
) -> None:
    """Reports the child sent before it was ended are read and reported, not
    lost: here the parent takes 0.3 s over each, so at the SIGTERM nine or
    ten of them are still in the pipe."""
    pytester.makeconftest(
        """
        import sys, time, pytest

        @pytest.hookimpl(trylast=True)
        def pytest_runtest_logreport(report):
            if report.when == "call" and "test_hang" not in sys.modules:  # the parent
                time.sleep(0.3)
        """
    )
    quick = "import pytest\n@pytest.mark.parametrize('n', range(10))\ndef test_quick(n): pass\n"
    parent = start(pytester, start_method, source=quick + HANGS.replace("def test_done", "def _"))
    try:
        pids = running_pids(pytester, parent)
        parent.send_signal(signal.SIGTERM)
        stdout, stderr = parent.communicate(timeout=TIMEOUT)
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
    assert parent.returncode == pytest.ExitCode.INTERRUPTED, stdout + stderr
    assert "10 passed" in stdout, stdout
    junit = Path(pytester.path, "junit.xml").read_text()
    # Each by name: junit's own count can be one short when the interrupt lands
    # inside its hook, between a test's element and its count, as in a plain run.
    assert [n for n in range(10) if f'name="test_quick[{n}]"' not in junit] == [], junit
    assert gone_soon(pids) == []


@pytest.mark.parametrize("start_method", ["fork", "spawn", "forkserver"])
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


@pytest.mark.parametrize("sigint", ["default", "ignored"])
def test_sigterm_to_the_xdist_controller_ends_every_worker_s_tree(
    pytester: pytest.Pytester, sigint: str
) -> None:
    """The controller ends as on Ctrl-C; its workers end their children's trees
    (execnet interrupts a busy worker after 5 s), also when the run was started
    with SIGINT ignored, as a shell's background job is."""
    parent = start_xdist(pytester, "fork", sigint)
    try:
        pids = running_pids(pytester, parent)
        pids += below(pytester, parent)
        time.sleep(1.0)  # the controller has test_done's report
        parent.send_signal(signal.SIGTERM)
        stdout, stderr = parent.communicate(timeout=TIMEOUT)
        left = gone_soon(pids, 30.0)
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
    assert parent.returncode == pytest.ExitCode.INTERRUPTED, stdout + stderr
    assert "isolation: SIGTERM received: ending the run as Ctrl-C does" in stderr
    assert "1 passed" in stdout
    assert 'name="test_done"' in Path(pytester.path, "junit.xml").read_text()
    assert left == [], "a process of the run outlived it"


@pytest.mark.parametrize("start_method", ["fork", "spawn", "forkserver"])
def test_an_xdist_controller_killed_outright_takes_every_worker_s_tree(
    pytester: pytest.Pytester, start_method: str
) -> None:
    """The worker gets SIGTERM when its controller ends and ends its child's
    whole tree, the test's own subprocess included (without it, execnet's
    SIGINT would end the worker, but not one started with SIGINT ignored)."""
    parent = start_xdist(pytester, start_method, "ignored")
    try:
        pids = running_pids(pytester, parent)
        pids += below(pytester, parent)
        parent.kill()
        parent.communicate(timeout=TIMEOUT)
        # The worker's own exit may wait on execnet (up to 15 s on a loaded machine).
        assert gone_soon(pids, 30.0) == [], "a process of the run outlived its killed controller"
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
