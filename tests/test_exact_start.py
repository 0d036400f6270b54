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
