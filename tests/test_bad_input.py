"""Bad input is a usage error before anything runs (issue 16): every message
names the option or ini key and the value, and no test runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import TIMEOUT
from pytest_isolation.core import options

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
    # pytest 8.4+ reads the key as a float (the value as pytest read it), before as text.
    value = "1e+20" if options.TYPED_NUMBERS else "99999999999999999999"
    assert_refused(
        pytester,
        result,
        f"isolation_timeout (ini): invalid value {value!r}; expected a positive "
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


@pytest.mark.parametrize(
    ("entry", "cause", "meant"),
    [
        ("env: MYAPP_TOKEN", "a key never starts or ends with a space", "env:MYAPP_TOKEN"),
        ("env:MYAPP_TOKEN=1", "an environment variable's name has no '='", None),
        ("sys.modules:my pkg", "a sys.modules key is a dotted name, without spaces", None),
    ],
)
def test_an_allow_leaks_pattern_that_can_never_match_is_refused(
    pytester: pytest.Pytester, entry: str, cause: str, meant: str | None
) -> None:
    # Accepted, it matched nothing and the leak was reported all the same (issue 49 item 5).
    pytester.makepyfile(
        test_marked=f"""
        import os, pytest

        @pytest.mark.isolation(allow_leaks=[{entry!r}])
        def test_x():
            os.environ["MYAPP_TOKEN"] = "1"
        """
    )
    result = run(pytester)
    fixed = f"; did you mean {meant!r}?" if meant else ""
    assert_refused(
        pytester,
        result,
        f"test_marked.py::test_x: @pytest.mark.isolation: the pattern of {entry!r} can never "
        f"match ({cause}){fixed}",
    )


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ("adir", "'adir' exists and is not a regular file; refusing to replace it"),
        ("/dev/full", "'/dev/full' exists and is not a regular file; refusing to replace it"),
        ("afile/report.json", "cannot write 'afile/report.json': Not a directory"),
        ("/proc/nope/x.json", "cannot write '/proc/nope/x.json': cannot make the directory *"),
    ],
)
@pytest.mark.parametrize("option", ["--isolation-report", "--isolation-store-durations"])
def test_an_output_path_that_cannot_be_a_file_is_refused_at_start(
    pytester: pytest.Pytester, option: str, target: str, problem: str
) -> None:
    (pytester.path / "adir").mkdir()
    (pytester.path / "afile").write_text("keep\n")
    if option == "--isolation-report":
        args = [f"{option}={target}"]
    else:  # the durations file is where --isolation-durations names it
        args = [option, f"--isolation-durations={target}", "--isolation-shard=1/1"]
    result = run(pytester, *args)
    assert_refused(pytester, result, f"{option}: {problem}")
    assert (pytester.path / "afile").read_text() == "keep\n"
    assert (pytester.path / "adir").is_dir()
    assert not Path("/dev/full").is_file()


def test_a_report_path_that_is_a_symlink_is_written_through(pytester: pytest.Pytester) -> None:
    (pytester.path / "reports").mkdir()
    link = pytester.path / "report.json"
    link.symlink_to(pytester.path / "reports" / "run.json")
    result = run(pytester, "--isolation-report=report.json")
    result.assert_outcomes(passed=1)
    assert link.is_symlink()
    assert json.loads((pytester.path / "reports" / "run.json").read_text())["exit_code"] == 0
    assert not list((pytester.path / "reports").glob("*.tmp"))


def test_a_report_that_cannot_be_written_at_the_end_keeps_the_run(
    pytester: pytest.Pytester,
) -> None:
    # Fault injection: the test itself puts a directory where the report goes.
    pytester.makepyfile(
        test_b="""
        import os
        def test_b():
            os.mkdir("report.json")
        """
    )
    result = run(pytester, "--isolation-report=report.json", "--junitxml=junit.xml")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        ["isolation: run report not written: cannot write '*report.json': Is a directory*"]
    )
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert (pytester.path / "junit.xml").read_text().count("<testcase") == 2
    assert (pytester.path / "report.json").is_dir()
    assert [p.name for p in pytester.path.iterdir() if p.name.endswith(".tmp")] == []


def test_a_bad_finder_json_path_is_refused_before_the_search(pytester: pytest.Pytester) -> None:
    (pytester.path / "adir").mkdir()
    result = run(
        pytester, "--isolation-find-polluter=test_a.py::test_a", "--isolation-find-json=adir"
    )
    assert_refused(
        pytester,
        result,
        "--isolation-find-json: '*adir' exists and is not a regular file; refusing to replace it",
        prefix="isolation: ",
    )


def test_a_bad_selector_record_path_is_refused_before_selecting(
    pytester: pytest.Pytester,
) -> None:
    (pytester.path / "adir").mkdir()
    result = run(pytester, "--isolation-for=test_a.py", "--isolation-json=adir")
    assert_refused(
        pytester,
        result,
        "--isolation-json: '*adir' exists and is not a regular file; refusing to replace it",
    )


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--isolation-quarantine=/dev/zero", "--isolation-quarantine: cannot read the quarantine "
         "file '/dev/zero': not a regular file"),
        ("--isolation-durations=/dev/zero", "--isolation-durations: cannot read '/dev/zero': not a "
         "regular file"),
    ],
)  # fmt: skip
def test_an_input_that_is_not_a_regular_file_is_refused_not_read_forever(
    pytester: pytest.Pytester, option: str, message: str
) -> None:
    args = [option, "--isolation-shard=1/1"] if "durations" in option else [option]
    result = run(pytester, *args)
    assert_refused(pytester, result, message)


#: ``ast.parse`` raises RecursionError on it on Python 3.11 and 3.12; on 3.10
#: compiling it raises instead (pytest's collection error either way); 3.13
#: compiles it.
DEEP_SOURCE = "X = " + " + ".join(['"a"'] * 6000) + "\n\ndef test_x():\n    assert X\n"


@pytest.mark.parametrize(
    "args",
    [
        ("--isolation-mode=file", "--isolation-preload=auto", "--isolation-start=fork"),
        ("--isolation-lint=warn",),
        ("--isolation-mode=file", "--isolation-lint=error"),
    ],
)
def test_source_too_deep_to_parse_is_that_file_s_collection_error(
    pytester: pytest.Pytester, args: tuple[str, ...]
) -> None:
    """Issue 31, item 7: a 6,000-term expression makes ``ast.parse`` raise
    ``RecursionError``: an INTERNALERROR from preloading and the lint, where
    plain pytest reports a collection error for that one file."""
    pytester.makepyfile(test_deep=DEEP_SOURCE, test_ok="def test_ok():\n    assert True\n")
    plain = pytester.runpytest_subprocess("-p", "no:isolation", timeout=TIMEOUT)
    result = pytester.runpytest_subprocess("-p", "isolation", *args, timeout=TIMEOUT)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    if "RecursionError" in plain.stdout.str():  # Python 3.10-3.12: too deep for them
        result.stdout.fnmatch_lines(["ERROR test_deep.py - RecursionError*"])
    else:  # 3.13 compiles it
        result.assert_outcomes(passed=2)


def test_the_lint_command_skips_source_too_deep_to_parse(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_deep=DEEP_SOURCE)
    result = pytester.run(sys.executable, "-m", "pytest_isolation.lint", ".", timeout=TIMEOUT)
    assert "Traceback" not in result.stderr.str()
    assert result.ret == 0
