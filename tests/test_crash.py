"""A child that dies fails the test it was running; the rest of its file still runs."""

from __future__ import annotations

import pytest

from conftest import run_file_mode

CRASHERS = {
    "exit": ("os._exit(7)", "exited with code 7"),
    "segfault": ("faulthandler._sigsegv()", "was killed by signal 11 (SIGSEGV)"),
    "sigkill": ("os.kill(os.getpid(), signal.SIGKILL)", "was killed by signal 9 (SIGKILL)"),
    "abort": ("os.abort()", "was killed by signal 6 (SIGABRT)"),
}


@pytest.mark.parametrize("how", sorted(CRASHERS))
def test_crash_fails_the_running_test_and_the_file_resumes(
    pytester: pytest.Pytester, start: str, how: str
) -> None:
    statement, description = CRASHERS[how]
    pytester.makepyfile(
        test_a=f"""
        import faulthandler, os, signal, sys

        def test_before():
            pass

        def test_crash():
            sys.stderr.write("last words of the child\\n")
            sys.stderr.flush()
            {statement}

        def test_after():
            pass
        """,
        test_b="def test_other(): pass\n",
    )
    result = run_file_mode(pytester, start, "-v", "-p", "no:randomly", "-s")
    result.stdout.fnmatch_lines(
        [
            "test_a.py::test_before PASSED*",
            "test_a.py::test_crash FAILED*",
            "test_a.py::test_after PASSED*",
            "test_b.py::test_other PASSED*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            f"isolation: {description.removeprefix('was ')} while running test_crash (call), "
            "the process of test_a.py",
            "*--- last lines of its stderr ---*",
            "last words of the child",
        ]
    )
    result.assert_outcomes(passed=3, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_segfault_report_carries_the_python_traceback(
    pytester: pytest.Pytester, start: str
) -> None:
    pytester.makepyfile(
        test_a="""
        import faulthandler

        def test_segv():
            faulthandler._sigsegv()
        """
    )
    result = run_file_mode(pytester, start)
    result.stdout.fnmatch_lines(["*Fatal Python error: Segmentation fault*", "*test_segv*"])
    result.assert_outcomes(failed=1)


def test_crash_in_every_test_reports_each(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(
        test_a="""
        import os
        import pytest

        @pytest.mark.parametrize("n", range(3))
        def test_dies(n):
            os._exit(n + 1)
        """
    )
    result = run_file_mode(pytester, start, "-p", "no:randomly")
    result.assert_outcomes(failed=3)
    for code in (1, 2, 3):
        result.stdout.fnmatch_lines(
            [f"*exited with code {code} while running test_dies[[]{code - 1}[]]*"]
        )


def test_crash_during_collection_is_a_collection_error(
    pytester: pytest.Pytester, start: str
) -> None:
    pytester.makepyfile(
        test_a="import os\nos._exit(5)\ndef test_never(): pass\n",
        test_b="def test_other(): pass\n",
    )
    result = run_file_mode(pytester, start)
    result.stdout.fnmatch_lines(
        [
            "*ERROR collecting test_a.py*",
            "isolation: exited with code 5 while collecting test_a.py",
        ]
    )
    result.assert_outcomes(passed=1, errors=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_crash_in_teardown_is_reported_at_teardown(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(
        test_a="""
        import os
        import pytest

        @pytest.fixture
        def doomed():
            yield
            os._exit(9)

        def test_passes_then_dies(doomed):
            pass

        def test_next():
            pass
        """
    )
    result = run_file_mode(pytester, start, "-p", "no:randomly")
    result.stdout.fnmatch_lines(
        ["*ERROR at teardown of test_passes_then_dies*", "*exited with code 9*(teardown)*"]
    )
    result.assert_outcomes(passed=2, errors=1)


def test_junit_records_a_crash_as_failure(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(test_a="import os\ndef test_dies(): os._exit(4)\n")
    result = run_file_mode(pytester, start, "--junitxml=out.xml")
    result.assert_outcomes(failed=1)
    xml = (pytester.path / "out.xml").read_text()
    assert 'name="test_dies"' in xml
    assert "exited with code 4 while running test_dies" in xml


def test_a_crashed_tests_output_and_log_are_in_its_report(
    pytester: pytest.Pytester, start: str
) -> None:
    pytester.makepyfile(
        test_a="""
        import faulthandler, logging, sys

        def test_crash():
            print("printed before the crash")
            sys.stderr.write("written to stderr before the crash\\n")
            logging.getLogger("app").warning("logged before the crash")
            faulthandler._sigsegv()

        def test_after():
            print("not in the crash's report")
        """
    )
    result = run_file_mode(pytester, start, "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "isolation: killed by signal 11 (SIGSEGV) while running test_crash (call)*",
            "*- Captured stdout call -*",
            "printed before the crash",
            "*- Captured stderr call -*",
            "written to stderr before the crash",
            "*- Captured log call -*",
            "WARNING  app:test_a.py:6 logged before the crash",
        ]
    )
    result.stdout.no_fnmatch_line("*not in the crash's report*")
