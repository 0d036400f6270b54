"""File mode is exact whatever the start method (issue 30): each file's
child sees what a fresh ``pytest FILE`` would, for what a conftest does at
import and for the program's own name."""

from __future__ import annotations

import pytest

from conftest import FILE_MODE
from conftest import TIMEOUT

START_METHODS = ["fork", "forkserver", "spawn"]

CONFTEST_AT_IMPORT = {
    "conftest": """
        import os
        os.environ["SET_BY_CONFTEST"] = "yes"
        os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "sub"))
    """,
    "test_one": """
        import os

        def test_the_conftest_s_environment():
            assert os.environ.get("SET_BY_CONFTEST") == "yes"

        def test_the_conftest_s_directory():
            assert os.path.basename(os.getcwd()) == "sub"
    """,
}


@pytest.mark.parametrize("start", START_METHODS)
def test_what_a_conftest_does_at_import_is_each_file_s(
    pytester: pytest.Pytester, start: str
) -> None:
    pytester.mkdir("sub")
    pytester.makepyfile(**CONFTEST_AT_IMPORT)
    pytester.makepyfile(test_two=CONFTEST_AT_IMPORT["test_one"])
    oracle = pytester.runpytest_subprocess("-p", "no:isolation", "test_two.py", timeout=TIMEOUT)
    oracle.assert_outcomes(passed=2)
    result = pytester.runpytest_subprocess(
        *FILE_MODE, f"--isolation-start={start}", timeout=TIMEOUT
    )
    result.assert_outcomes(passed=4)


@pytest.mark.parametrize("start", START_METHODS)
def test_the_program_s_name_is_the_run_s(pytester: pytest.Pytester, start: str) -> None:
    """``sys.argv[0]`` (what ``argparse`` shows as the program) is the
    parent's, never ``-c`` from a spawned interpreter's command line."""
    pytester.makepyfile(
        test_argv="""
        import sys

        def test_argv0():
            assert sys.argv[0] not in ("", "-c")
            assert sys.argv[0].endswith(("pytest", "__main__.py", "pytest.exe"))
        """
    )
    assert pytester.runpytest_subprocess("-p", "no:isolation", timeout=TIMEOUT).ret == 0
    result = pytester.runpytest_subprocess(
        *FILE_MODE, f"--isolation-start={start}", timeout=TIMEOUT
    )
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize("start", ["fork", "forkserver"])
def test_a_fork_server_that_dies_is_contained_like_a_crash(
    pytester: pytest.Pytester, start: str
) -> None:
    """A test that kills its parent (the fork server; the OOM killer does
    the same): its file is reported as killed, a new server forks the next
    children, and the other files run."""
    pytester.makepyfile(
        test_a="""
        import os, signal

        def test_kills_its_parent():
            os.kill(os.getppid(), signal.SIGKILL)
        """,
        test_b="def test_b():\n    pass\n",
        test_c="def test_c():\n    pass\n",
    )
    result = pytester.runpytest_subprocess(
        *FILE_MODE, f"--isolation-start={start}", "-p", "no:randomly", timeout=TIMEOUT
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*test_a.py*killed by signal 9 (SIGKILL)*"])
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] >= 2  # test_b and test_c
    if outcomes.get("failed", 0) + outcomes.get("errors", 0):  # killed in its call or teardown
        assert result.ret == 1
    else:  # killed after its last test, in its plugins' unconfigure: a process crashed
        result.stdout.fnmatch_lines(
            ["*test_a.py was killed by signal 9 (SIGKILL) after its last test"]
        )
        assert result.ret == 3


def test_a_timeout_shorter_than_the_fork_server_s_start_is_reported_per_file(
    pytester: pytest.Pytester,
) -> None:
    """``--isolation-timeout=0.01`` with ``forkserver``: no server starts
    that fast, so each child is spawned, and each file is reported (here
    timed out), with no internal error."""
    pytester.makepyfile(test_a="def test_a():\n    pass\n", test_b="def test_b():\n    pass\n")
    result = pytester.runpytest_subprocess(
        *FILE_MODE, "--isolation-start=forkserver", "--isolation-timeout=0.01", timeout=TIMEOUT
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*did not start in 0.01 s*; each child is spawned instead"])
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("errors", 0) == 2
