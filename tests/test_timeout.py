"""--isolation-timeout: the running test fails with a traceback, and no
process of the child's tree survives, not even one that left the session
and ignores SIGTERM."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_file_mode
from conftest import run_plain

HANGS = """
    import os, subprocess, sys, time

    def test_quick():
        pass

    def test_hangs():
        code = (
            "import os, signal, time; os.setsid(); signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "open('grandchild.pid', 'w').write(str(os.getpid())); time.sleep(600)"
        )
        subprocess.Popen([sys.executable, "-c", code])
        while not os.path.exists("grandchild.pid"):
            time.sleep(0.01)
        time.sleep(600)

    def test_after_the_hang():
        pass
"""


def alive(pid: int) -> bool:
    """Running (a zombie whose parent is gone does not count)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_timeout_ends_the_process_tree_and_fails_the_running_test(
    pytester: pytest.Pytester, start: str
) -> None:
    pytester.makepyfile(test_hang=HANGS, test_next="def test_next_file(): pass\n")
    result = run_file_mode(
        pytester, start, "-p", "no:randomly", "--isolation-timeout=2", "--isolation-kill-grace=1"
    )
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*isolation: timed out after 2 s while running test_hangs (call), "
            "the process of test_hang.py*",
            '*File "*test_hang.py", line * in test_hangs*',
        ]
    )
    pid = int((pytester.path / "grandchild.pid").read_text())
    assert not alive(pid), f"grandchild {pid} survived the timeout"


@pytest.mark.parametrize("value", ["soon", "0", "-1", "nan"])
def test_invalid_timeout_is_a_usage_error(pytester: pytest.Pytester, value: str) -> None:
    result = run_file_mode(pytester, "fork", f"--isolation-timeout={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: --isolation-timeout: invalid value '{value}'; expected a positive number*"]
    )


def test_timeout_needs_file_mode(pytester: pytest.Pytester) -> None:
    result = run_plain(pytester, "-p", "isolation", "--isolation-timeout=5")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --isolation-timeout bounds each file's child*"])
