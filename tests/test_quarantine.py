"""--isolation-quarantine: known failures are reported as quarantined and do
not fail the run; fixed ones and stale entries are pointed out; malformed
entries are usage errors naming the file and line."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import run_file_mode
from conftest import run_guard
from pytest_isolation.ci.quarantine import PLATFORMS
from pytest_isolation.ci.quarantine import Entry
from pytest_isolation.ci.quarantine import parse

SUITE = {
    "test_a": """
        import pytest

        def test_known_bad():
            assert 1 == 2

        def test_fixed():
            pass

        @pytest.mark.parametrize("n", [1, 2])
        def test_param(n):
            assert n == 1

        def test_fine():
            pass
    """,
    "test_b": """
        class TestGroup:
            def test_one(self):
                raise RuntimeError("broken")

        def test_other():
            assert False
    """,
}

QUARANTINE = """\
# Known failures.
test_a.py::test_known_bad  # bug 12: the server is down
test_a.py::test_fixed  # bug 13
test_a.py::test_param
test_b.py::TestGroup
"""


def _root() -> Path:
    return Path("/project")


@pytest.mark.parametrize(
    ("pattern", "nodeid", "expected"),
    [
        ("t/test_a.py::test_x", "t/test_a.py::test_x", True),
        ("t/test_a.py::test_x", "t/test_a.py::test_x[1-2]", True),
        ("t/test_a.py::test_x", "t/test_a.py::test_xy", False),
        ("t/test_a.py::TestC", "t/test_a.py::TestC::test_m", True),
        ("t/test_a.py::test_x[1-2]", "t/test_a.py::test_x[1-2]", True),
        ("t/test_a.py", "t/test_a.py::TestC::test_m", True),
        ("t/test_a.py", "t/test_a.pyc::test", False),
        ("t", "t/sub/test_a.py::test_x", True),
        ("t/", "t/sub/test_a.py::test_x", True),
        ("t", "tests/test_a.py::test_x", False),
        ("t/test_*.py::test_net_*", "t/test_a.py::test_net_up", True),
        ("t/test_*.py::test_net_*", "t/test_a.py::test_disk", False),
        ("t/test_[ab].py", "t/test_b.py::test_x", True),
        ("t/test_[!ab].py", "t/test_b.py::test_x", False),
    ],
)
def test_entry_matching(pattern: str, nodeid: str, expected: bool) -> None:
    assert Entry(pattern, "", "q.txt:1").matches(nodeid) is expected


def test_parse_reads_entries_reasons_and_comments() -> None:
    entries = parse(
        "# comment\n\n  a.py::t  # why # not split further\nb.py\n#c.py\n", "q.txt", _root()
    )
    assert entries == [
        Entry("a.py::t", "why # not split further", "q.txt:3"),
        Entry("b.py", "", "q.txt:4"),
    ]


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("/abs/test_a.py::t", "absolute path; write it relative to the rootdir (/project)"),
        ("C:\\tests\\test_a.py", "absolute path"),
        ("../other/test_a.py", "the path leaves the rootdir (/project)"),
        ("tests/../../test_a.py::t", "the path leaves the rootdir"),
        ("tests/test_[ab.py", "unbalanced '['"),
        ("tests/test_a.py::t[]", "unbalanced '['"),
        ("::test_a", "no file part; write PATH::NAME"),
        ("::", "no file part"),
        ("tests/test_a.py::", "no test name after '::'"),
    ],
)
def test_malformed_entries_name_file_and_line(line: str, problem: str) -> None:
    with pytest.raises(pytest.UsageError) as raised:
        parse(f"# first\nok.py\n{line}  # reason\n", "q.txt", _root())
    message = str(raised.value)
    assert message.startswith("q.txt:3: ")
    assert problem in message
    assert repr(line) in message


def test_quarantined_failures_do_not_fail_the_run(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(**SUITE)
    pytester.path.joinpath("quarantine.txt").write_text(QUARANTINE + "test_b.py::test_other\n")
    result = run_file_mode(
        pytester, start, "--isolation-quarantine=quarantine.txt", "--junitxml=junit.xml", "-x"
    )
    assert result.ret == 0
    result.assert_outcomes(passed=3)
    outcomes = result.parseoutcomes()
    assert outcomes["quarantined"] == 4
    result.stdout.fnmatch_lines(
        [
            "*= isolation: quarantine (quarantine.txt) =*",
            "QUARANTINED test_a.py::test_known_bad - bug 12: the server is down (quarantine.txt:2)",
            "    assert 1 == 2",
            "QUARANTINED test_a.py::test_param[2] - no reason given (quarantine.txt:4)",
            "QUARANTINED test_b.py::TestGroup::test_one - no reason given (quarantine.txt:5)",
            "    RuntimeError: broken",
            "passes now: remove it from quarantine: test_a.py::test_fixed (quarantine.txt:3)",
            "passes now: remove it from quarantine: test_a.py::test_param[1] (quarantine.txt:4)",
        ]
    )
    case = ET.parse(pytester.path / "junit.xml").find(".//testcase[@name='test_known_bad']")
    assert case is not None
    skipped = case.find("skipped")
    assert skipped is not None
    assert skipped.get("message") == "quarantined: bug 12: the server is down"


def test_quarantine_without_file_mode(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(**SUITE)
    pytester.path.joinpath("quarantine.txt").write_text(QUARANTINE)
    result = run_guard(pytester, "--isolation-quarantine=quarantine.txt", "-v")
    result.assert_outcomes(passed=3, failed=1)
    assert result.parseoutcomes()["quarantined"] == 3
    result.stdout.fnmatch_lines(["test_a.py::test_known_bad QUARANTINED*"])
    result.stdout.fnmatch_lines(["FAILED test_b.py::test_other - assert False"])


def test_platform_override_is_merged_and_stale_entries_are_warned(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(**SUITE)
    pytester.path.joinpath("known.txt").write_text(
        "test_a.py::test_known_bad\ntest_a.py::test_renamed  # gone\ntest_gone.py\n"
        "test_a.py::test_param[[]2]\n"
    )
    here = PLATFORMS[sys.platform]
    elsewhere = next(name for name in PLATFORMS.values() if name != here)
    pytester.path.joinpath(f"known-{here}.txt").write_text("test_b.py  # broken on this OS\n")
    pytester.path.joinpath(f"known-{elsewhere}.txt").write_text("test_a.py  # elsewhere only\n")
    result = run_file_mode(
        pytester, "fork", "--isolation-quarantine=known.txt", "-p", "no:cacheprovider"
    )
    assert result.ret == 0
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            f"QUARANTINED test_b.py::test_other - broken on this OS (known-{here}.txt:1)",
            "warning: stale entry known.txt:2: 'test_a.py::test_renamed' matches no test",
            "warning: stale entry known.txt:3: 'test_gone.py' matches no file",
        ]
    )
    result.stdout.no_fnmatch_line("*elsewhere only*")


def test_entries_outside_the_run_are_not_called_stale(pytester: pytest.Pytester) -> None:
    """Only the run's own files are judged: another directory, -k, another shard."""
    pytester.makepyfile(**SUITE)
    pytester.path.joinpath("q.txt").write_text("test_b.py::test_other\ntest_a.py::test_known_bad\n")
    for args in (["test_a.py"], ["-k", "fine"], ["--isolation-shard=1/2"]):
        result = run_file_mode(pytester, "fork", "--isolation-quarantine=q.txt", *args)
        result.stdout.no_fnmatch_line("*stale entry*")


def test_ini_path_is_relative_to_the_ini_file(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(**SUITE)
    pytester.mkdir("ci").joinpath("quarantine.txt").write_text(
        QUARANTINE + "test_b.py::test_other\n"
    )
    pytester.makeini("[pytest]\nisolation_quarantine = ci/quarantine.txt\n")
    monkeypatch.chdir(pytester.mkdir("elsewhere"))
    result = run_guard(pytester, str(pytester.path))
    assert result.ret == 0
    assert result.parseoutcomes()["quarantined"] == 4


def test_a_malformed_file_is_a_usage_error_before_any_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(**SUITE)
    pytester.path.joinpath("q.txt").write_text("# ok\ntest_a.py::test_fixed\n/etc/test.py\n")
    result = run_file_mode(pytester, "spawn", "--isolation-quarantine=q.txt")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*q.txt:3: absolute path; write it relative to the rootdir*"])
    result.stdout.no_fnmatch_line("*passed*")


def test_a_quarantine_file_that_is_not_utf8_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(**SUITE)
    pytester.path.joinpath("q.txt").write_bytes(b"test_a.py::test_fixed  # caf\xe9\n")
    result = run_guard(pytester, "--isolation-quarantine=q.txt")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --isolation-quarantine: cannot read the quarantine file '*q.txt': not UTF-8 text*"]
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_a_missing_file_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(**SUITE)
    result = run_guard(pytester, "--isolation-quarantine=nope.txt")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--isolation-quarantine: cannot read the quarantine file '*nope.txt': *"]
    )


def test_a_quarantined_test_that_crashes_is_quarantined_not_retried(
    pytester: pytest.Pytester, start: str
) -> None:
    pytester.makepyfile(
        test_native="""
        import os, signal

        def test_segv():
            os.kill(os.getpid(), signal.SIGSEGV)

        def test_after():
            pass
        """
    )
    pytester.path.joinpath("q.txt").write_text("test_native.py::test_segv  # crashes in libfoo\n")
    result = run_file_mode(pytester, start, "--isolation-quarantine=q.txt", "--isolation-retries=2")
    assert result.ret == 0
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_native.py: attempt 1: crashed (SIGSEGV) in test_segv",
            "QUARANTINED test_native.py::test_segv - crashes in libfoo (q.txt:1)",
            "    isolation: killed by signal 11 (SIGSEGV) while running test_segv (call)*",
        ]
    )
