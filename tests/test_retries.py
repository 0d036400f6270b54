"""--isolation-retries: a failed file runs again in a fresh process; a test
that passes on a retry is reported passed and listed as flaky; one that fails
every attempt is a real failure; crashes and timeouts are never hidden."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable

import pytest

from conftest import run_file_mode
from conftest import run_guard

# Each test appends its name to runs.log outside the working directory's
# tests, so the number of runs is visible; the counter makes a test fail
# on its first run only.
COUNTING = """
    import os, pathlib

    LOG = pathlib.Path(os.environ["RUNS_LOG"])

    def ran(name):
        with LOG.open("a") as log:
            log.write(name + "\\n")
        return LOG.read_text().split().count(name)
"""

FLAKY = (
    COUNTING
    + """
    def test_ok():
        ran("ok")

    def test_sometimes():
        assert ran("sometimes") > 1, "fails on its first run"

    def test_after():
        ran("after")
"""
)


@pytest.fixture
def runs(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Callable[[], list[str]]:
    """Reads the names the tests logged (kept beside the test directory)."""
    log = pytester.path.parent / f"{pytester.path.name}-runs.log"
    monkeypatch.setenv("RUNS_LOG", str(log))
    return lambda: log.read_text().split() if log.exists() else []


def test_flaky_test_passes_on_retry_and_is_listed(
    pytester: pytest.Pytester, start: str, runs: Callable[[], list[str]]
) -> None:
    pytester.makepyfile(test_flaky=FLAKY)
    result = run_file_mode(pytester, start, "--isolation-retries=2", "--junitxml=junit.xml")
    result.assert_outcomes(passed=3)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "*= isolation: 1 flaky (passed on retry) =*",
            "test_flaky.py::test_sometimes: attempt 1 failed, attempt 2 passed",
            "*= isolation: 1 file retried =*",
            "test_flaky.py: attempt 1: 1 failed; attempt 2: passed; flaky: test_sometimes",
        ]
    )
    # Only the failed test ran again (scope 'failed').
    assert sorted(runs()) == ["after", "ok", "sometimes", "sometimes"]
    case = ET.parse(pytester.path / "junit.xml").find(".//testcase[@name='test_sometimes']")
    assert case is not None
    assert case.find("failure") is None
    prop = case.find("properties/property[@name='isolation_flaky']")
    assert prop is not None
    assert prop.get("value") == "attempt 1 failed, attempt 2 passed"


def test_a_test_failing_every_attempt_is_a_real_failure(
    pytester: pytest.Pytester, runs: Callable[[], list[str]]
) -> None:
    pytester.makepyfile(
        test_bad=COUNTING + "\n    def test_bad():\n        ran('bad')\n        assert False\n"
    )
    result = run_file_mode(pytester, "fork", "--isolation-retries=2")
    result.assert_outcomes(failed=1)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "*- isolation: attempts -*",
            "attempt 1 failed, attempt 2 failed, attempt 3 failed",
            "test_bad.py: attempt 1: 1 failed; attempt 2: 1 failed; attempt 3: 1 failed",
        ]
    )
    result.stdout.no_fnmatch_line("*flaky*")
    assert runs() == ["bad"] * 3


def test_a_crash_on_every_attempt_is_reported_with_every_attempt(
    pytester: pytest.Pytester, start: str
) -> None:
    pytester.makepyfile(
        test_crash="""
        import os, signal

        def test_before():
            pass

        def test_segv():
            os.kill(os.getpid(), signal.SIGSEGV)

        def test_after():
            pass
        """
    )
    result = run_file_mode(pytester, start, "--isolation-retries=1")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*isolation: killed by signal 11 (SIGSEGV) while running test_segv (call), "
            "the process of test_crash.py*",
            "attempt 1 crashed (was killed by signal 11 (SIGSEGV)), "
            "attempt 2 crashed (was killed by signal 11 (SIGSEGV))",
            "test_crash.py: attempt 1: crashed (SIGSEGV) in test_segv; "
            "attempt 2: crashed (SIGSEGV) in test_segv",
        ]
    )


def test_retry_scope_file_reruns_the_whole_file_and_reports_each_test_once(
    pytester: pytest.Pytester, runs: Callable[[], list[str]]
) -> None:
    pytester.makepyfile(test_flaky=FLAKY)
    result = run_file_mode(
        pytester, "fork", "--isolation-retries=1", "--isolation-retry-scope=file", "-v"
    )
    result.assert_outcomes(passed=3)
    assert sorted(runs()) == ["after", "after", "ok", "ok", "sometimes", "sometimes"]
    assert result.stdout.str().count("test_flaky.py::test_ok PASSED") == 1


def test_a_test_that_timed_out_and_then_passed_is_flaky(
    pytester: pytest.Pytester, runs: Callable[[], list[str]]
) -> None:
    pytester.makepyfile(
        test_slow=COUNTING
        + """
    import time

    def test_slow_once():
        if ran("slow") == 1:
            time.sleep(600)
    """
    )
    result = run_file_mode(
        pytester,
        "fork",
        "--isolation-retries=1",
        "--isolation-timeout=2",
        "--isolation-kill-grace=1",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_slow.py::test_slow_once: attempt 1 timed out after 2 s, attempt 2 passed",
            "test_slow.py: attempt 1: timed out in test_slow_once; attempt 2: passed; "
            "flaky: test_slow_once",
        ]
    )


def test_retries_go_on_past_a_maxfail_stop(
    pytester: pytest.Pytester, runs: Callable[[], list[str]]
) -> None:
    """-x stops the first attempt at the flaky test; the retry runs it and the rest."""
    pytester.makepyfile(test_flaky=FLAKY)
    result = run_file_mode(pytester, "fork", "-x", "--isolation-retries=1")
    result.assert_outcomes(passed=3)
    assert sorted(runs()) == ["after", "ok", "sometimes", "sometimes"]


def test_a_file_that_fails_to_import_once_is_run_again(
    pytester: pytest.Pytester, runs: Callable[[], list[str]]
) -> None:
    pytester.makepyfile(
        test_import=COUNTING
        + """
    if ran("import") == 1:
        raise ImportError("a flaky import")

    def test_one():
        pass
    """
    )
    result = run_file_mode(pytester, "fork", "--isolation-retries=1")
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    result.stdout.no_fnmatch_line("*flaky import*")
    result.stdout.fnmatch_lines(["test_import.py: attempt 1: ran no test; attempt 2: passed"])


def test_a_collection_error_on_every_attempt_is_reported_once(
    pytester: pytest.Pytester, runs: Callable[[], list[str]]
) -> None:
    pytester.makepyfile(
        test_import=COUNTING + "\n    ran('import')\n    raise ImportError('always')\n"
    )
    result = run_file_mode(pytester, "fork", "--isolation-retries=2")
    result.assert_outcomes(errors=1)
    assert runs() == ["import"] * 3


def test_no_retry_lines_on_a_clean_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fine="def test_fine(): pass\n")
    result = run_file_mode(pytester, "fork", "--isolation-retries=2")
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*isolation: *flaky*")
    result.stdout.no_re_match_line(
        r".*= isolation: (files: |\d+ files? )(crashed|timed out|retried)"
    )


def test_ini_sets_the_retries(pytester: pytest.Pytester, runs: Callable[[], list[str]]) -> None:
    pytester.makeini("[pytest]\nisolation_retries = 1\nisolation_retry_scope = file\n")
    pytester.makepyfile(test_flaky=FLAKY)
    result = run_file_mode(pytester, "fork")
    result.assert_outcomes(passed=3)
    assert sorted(runs()) == ["after", "after", "ok", "ok", "sometimes", "sometimes"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--isolation-retries=-1"], "--isolation-retries: invalid value '-1'; expected a whole*"),
        (["--isolation-retries=two"], "--isolation-retries: invalid value 'two'*"),
        (["--isolation-retry-scope=test"], "--isolation-retry-scope: invalid value 'test'*"),
    ],
)
def test_bad_retry_options_are_usage_errors(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    pytester.makepyfile(test_fine="def test_fine(): pass\n")
    result = run_file_mode(pytester, "fork", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}"])


def test_retries_need_file_mode(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fine="def test_fine(): pass\n")
    result = run_guard(pytester, "--isolation-retries=1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*--isolation-retries reruns a failed file (or, in test mode, test) in a fresh "
            "process: it needs --isolation-mode=file or test*"
        ]
    )
