"""Bad input is a usage error before anything runs (issue 16): every message
names the option or ini key and the value, and no test runs."""

from __future__ import annotations

import pytest

from conftest import TIMEOUT

TEST = "def test_a(): open('ran', 'w').close()\n"


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_a=TEST)
    return pytester.runpytest_subprocess("-p", "isolation", *args, timeout=TIMEOUT)


def assert_refused(
    pytester: pytest.Pytester, result: pytest.RunResult, message: str, prefix: str = "ERROR: "
) -> None:
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([f"{prefix}{message}"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert not (pytester.path / "ran").exists(), "a test ran"


@pytest.mark.parametrize(
    "option",
    [
        "--isolation-shard",
        "--isolation-since",
        "--isolation-timeout",
        "--isolation-retries",
        "--isolation-find-polluter",
        "--isolation-quarantine",
        "--isolation-for",
    ],
)
@pytest.mark.parametrize("value", ["", " "])
def test_an_empty_value_is_refused_not_ignored(
    pytester: pytest.Pytester, option: str, value: str
) -> None:
    result = run(pytester, f"{option}={value}")
    assert_refused(
        pytester, result, f"{option}: empty value; give a value, or leave the option out"
    )


@pytest.mark.parametrize("value", ["1e308", "99999999999999999999", "604801", "inf"])
@pytest.mark.parametrize(
    ("option", "limit"),
    [
        ("--isolation-timeout", "604800"),
        ("--isolation-kill-grace", "600"),
    ],
)
def test_a_huge_number_of_seconds_is_refused(
    pytester: pytest.Pytester, option: str, limit: str, value: str
) -> None:
    result = run(pytester, "--isolation-mode=file", f"{option}={value}")
    assert_refused(
        pytester,
        result,
        f"{option}: invalid value '{value}'; expected a positive number of seconds, "
        f"at most {limit}",
    )


def test_a_huge_timeout_in_the_ini_file_names_the_key(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nisolation_timeout = 99999999999999999999\n")
    result = run(pytester, "--isolation-mode=file")
    assert_refused(
        pytester,
        result,
        "isolation_timeout (ini): invalid value '99999999999999999999'; expected a positive "
        "number of seconds, at most 604800",
    )


def test_a_huge_find_timeout_is_refused(pytester: pytest.Pytester) -> None:
    result = run(
        pytester, "--isolation-find-polluter=test_a.py::test_a", "--isolation-find-timeout=1e308"
    )
    assert_refused(
        pytester,
        result,
        "--isolation-find-timeout: invalid value '1e308'; expected a positive number of seconds, "
        "at most 604800",
        prefix="isolation: ",  # the finder's own usage errors
    )


def test_the_largest_timeout_is_accepted(pytester: pytest.Pytester) -> None:
    result = run(pytester, "--isolation-mode=file", "--isolation-timeout=604800")
    result.assert_outcomes(passed=1)


def test_a_huge_count_is_refused(pytester: pytest.Pytester) -> None:
    result = run(pytester, "--isolation-mode=file", "--isolation-retries=99999999999999999999")
    assert_refused(
        pytester,
        result,
        "--isolation-retries: invalid value '99999999999999999999'; expected a whole number of 0 "
        "or more, at most 1000000",
    )


@pytest.mark.parametrize("key", ["isolation_leaks_deep", "isolation_env_network"])
def test_a_bad_truth_value_in_the_ini_file_names_the_key(
    pytester: pytest.Pytester, key: str
) -> None:
    pytester.makeini(f"[pytest]\n{key} = maybe\n")
    result = run(pytester)
    assert_refused(
        pytester, result, f"{key} (ini): invalid truth value 'maybe'; expected true or false"
    )


def test_an_unbalanced_bracket_in_allow_leaks_is_refused(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nisolation_allow_leaks = env:[\n")
    result = run(pytester)
    assert_refused(
        pytester,
        result,
        "isolation_allow_leaks (ini): unbalanced '[' in the pattern of 'env:[' "
        "(write '[[]' for a literal '[')",
    )
