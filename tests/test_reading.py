"""What a person reads (issue 33): each leak reported once, in the leak
summary; errors and crash reports that lead with the cause and show the
test's own frames, not pytest's, pluggy's or this plugin's."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import TIMEOUT
from conftest import literal
from conftest import run_file_mode
from conftest import run_guard
from pytest_isolation.ci.runreport import notable_files
from pytest_isolation.core.records import FileAttempts
from pytest_isolation.core.records import ProcessEnd
from pytest_isolation.filemode.parent.stacks import split_dump

LEAKER = """
import os

import appconf

def test_env():
    os.environ["READ_ONCE"] = "1"

def test_many():
    for name in "abcdefgh":
        setattr(appconf.Settings, name, 1)
"""
APPCONF = "class Settings:\n    a = b = c = d = e = f = g = h = 0\n"


def test_a_leak_is_shown_once_in_the_summary_and_counted_in_the_last_line(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_leaks=LEAKER, appconf=APPCONF)
    result = pytester.runpytest_subprocess("-p", "isolation", "-p", "no:randomly", timeout=TIMEOUT)
    out = result.stdout.str()
    assert "LeakedStateWarning" not in out  # not in pytest's warnings summary
    assert "warnings summary" not in out
    assert out.count("os.environ['READ_ONCE']") == 1
    result.stdout.fnmatch_lines(
        [
            # Counted as the lines name them: 8 attributes and a variable.
            "*= isolation: 9 leaks by 2 tests =*",
            literal(
                "[attribute] appconf.Settings: 8 attributes changed (a, b, c, d, e and 3 more)"
            ),
            "  set during test_leaks.py::test_many",  # setattr with a name not in the source
            literal("[env] os.environ['READ_ONCE'] (was unset, now '1'), at test_leaks.py:6"),
            "  by test_leaks.py::test_env",
            "*= 2 passed, 9 leaks in *",
        ]
    )


def test_a_filter_that_names_the_warning_still_decides(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_leaks=LEAKER, appconf=APPCONF)
    result = run_guard(
        pytester, "-p", "no:randomly", "-W", "error::pytest_isolation.LeakedStateWarning"
    )
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines(
        [
            "ERROR test_leaks.py::test_env - Failed: LeakedStateWarning: leaked os.environ*",
        ]
    )


def test_a_leak_that_errors_is_not_repeated_and_shows_no_traceback_note(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_leaks=LEAKER, appconf=APPCONF)
    result = run_guard(pytester, "-p", "no:randomly", "--isolation-leaks=error")
    result.assert_outcomes(passed=2, errors=2)
    out = result.stdout.str()
    assert "All traceback entries are hidden" not in out
    assert out.count("os.environ['READ_ONCE']") == 2  # the error and its short summary line
    # the attributes of one object changed together: one line, in the error too
    assert (
        out.count("leaked appconf.Settings: 8 attributes changed (a, b, c, d, e and 3 more)") == 1
    )
    result.stdout.fnmatch_lines(
        [
            "*= isolation: * by 2 tests =*",
            "9 leaks shown as errors above",
            # the short summary line leads with the leak, not the test's name again
            literal("ERROR test_leaks.py::test_env - Failed: leaked os.environ['READ_ONCE']*"),
        ]
    )


def test_a_crash_report_leads_with_the_cause_and_shows_the_test_s_frames(
    pytester: pytest.Pytester, start: str
) -> None:
    pytester.makepyfile(
        test_native="""
        import faulthandler

        def crash_here():
            faulthandler._sigsegv()

        def test_segv():
            crash_here()
        """
    )
    result = run_file_mode(pytester, start, "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "isolation: killed by signal 11 (SIGSEGV) while running test_segv (call), "
            "the process of test_native.py",
            "Fatal Python error: Segmentation fault",
            "*(most recent call first):",
            '  File "*test_native.py", line 4 in crash_here',
            '  File "*test_native.py", line 7 in test_segv',
            "  (* frames of pytest, pluggy and pytest-isolation left out; --full-trace shows them)",
            "FAILED test_native.py::test_segv - isolation: killed by signal 11 (SIGSEGV)*",
        ]
    )
    assert "pluggy/_execution.py" not in out
    assert "_pytest/runner.py" not in out


STARTS = {
    "console script": lambda: [str(Path(sys.executable).with_name("pytest"))],
    "python -m pytest": lambda: [sys.executable, "-m", "pytest"],
    "pytest.main()": lambda: [sys.executable, "drive.py"],
}
DRIVE = """
import sys

import pytest

def main():
    return pytest.main(sys.argv[1:])

if __name__ == "__main__":
    sys.exit(main())
"""


@pytest.mark.parametrize("mode", ["file", "test", "file -n 1"])
@pytest.mark.parametrize("start", sorted(STARTS))
def test_a_crash_report_has_only_the_test_s_frames_however_pytest_was_started(
    pytester: pytest.Pytester, start: str, mode: str
) -> None:
    pytester.makepyfile(test_native="import os\n\ndef test_abort():\n    os.abort()\n", drive=DRIVE)
    mode, *workers = mode.split()
    args = [*STARTS[start](), "-p", "isolation", f"--isolation-mode={mode}", "-p", "no:randomly"]
    if workers:
        args += ["-p", "xdist", *workers]
    result = pytester.run(*args, "test_native.py", timeout=TIMEOUT)
    result.stdout.fnmatch_lines(
        [
            "*(most recent call first):",
            '  File "*test_native.py", line 4 in test_abort',
            "  (* frames of pytest, pluggy and pytest-isolation left out; --full-trace shows them)",
        ]
    )
    dump = result.stdout.str().split("(most recent call first):", 1)[1].split("left out")[0]
    assert dump.count('  File "') == 1, dump  # the test's frame, nothing of what started pytest


def test_full_trace_keeps_the_whole_dump(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_native="import faulthandler\ndef test_segv():\n    faulthandler._sigsegv()\n"
    )
    result = run_file_mode(pytester, "fork", "-p", "no:randomly", "--full-trace")
    result.stdout.fnmatch_lines(
        ['  File "*test_native.py", line 3 in test_segv', '  File "*_pytest/*']
    )
    result.stdout.no_fnmatch_line("*frames of pytest, pluggy and pytest-isolation left out*")


def test_a_timeout_report_shows_the_test_s_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_hang="import time\ndef test_hangs():\n    time.sleep(60)\n")
    result = run_file_mode(pytester, "fork", "-p", "no:randomly", "--isolation-timeout=2")
    result.stdout.fnmatch_lines(
        [
            "isolation: timed out after 2 s while running test_hangs (call), the process of "
            "test_hang.py",
            "Current thread * (most recent call first):",
            '  File "*test_hang.py", line 3 in test_hangs',
            "  (* frames of * left out; --full-trace shows them)",
            "FAILED test_hang.py::test_hangs - isolation: timed out after 2 s *",
        ]
    )


DUMP = """\
before the crash
Fatal Python error: Segmentation fault

Current thread 0x00007f71fd87db80 (most recent call first):
  File "/usr/lib/python3.11/ctypes/__init__.py", line 519 in string_at
  File "/tmp/t/test_b.py", line 5 in test_segv
  File "/venv/lib/python3.11/site-packages/_pytest/python.py", line 187 in pytest_pyfunc_call
  File "{pluggy}", line 147 in _multicall
  File "/venv/lib/python3.11/site-packages/_pytest/main.py", line 387 in _main
  File "<frozen runpy>", line 88 in _run_code

Thread 0x00007f71fc000640 (most recent call first):
  File "{plugin}", line 40 in _watch
  File "/usr/lib/python3.11/threading.py", line 975 in run
  File "/usr/lib/python3.11/threading.py", line 1038 in _bootstrap_inner

Thread 0x00007f71fb000640 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 975 in run
  File "/usr/lib/python3.11/threading.py", line 1038 in _bootstrap_inner

Extension modules: _cffi_backend, yaml._yaml (total: 2)
"""


def _dump() -> str:
    import pluggy

    import pytest_isolation

    return DUMP.format(pluggy=pluggy.__file__, plugin=pytest_isolation.__file__)


def test_the_runner_s_frames_and_threads_are_left_out() -> None:
    dump, rest = split_dump(_dump(), False)
    assert dump.splitlines() == [
        "Fatal Python error: Segmentation fault",
        "",
        "Current thread 0x00007f71fd87db80 (most recent call first):",
        '  File "/usr/lib/python3.11/ctypes/__init__.py", line 519 in string_at',
        '  File "/tmp/t/test_b.py", line 5 in test_segv',
        "",
        # a thread of the test's that runs C code (time.sleep): all it has
        "Thread 0x00007f71fb000640 (most recent call first):",
        '  File "/usr/lib/python3.11/threading.py", line 975 in run',
        '  File "/usr/lib/python3.11/threading.py", line 1038 in _bootstrap_inner',
        "  (7 frames of pytest, pluggy and pytest-isolation left out; --full-trace shows them)",
    ]
    assert rest == "before the crash"


def test_full_keeps_every_frame_and_no_dump_leaves_stderr_alone() -> None:
    dump, _ = split_dump(_dump(), True)
    assert "_multicall" in dump
    assert "_bootstrap_inner" in dump
    assert split_dump("just some output\n", False) == ("", "just some output\n")


@pytest.mark.parametrize(
    "how", [("--isolation-leaks=error",), ("-W", "error::pytest_isolation.LeakedStateWarning")]
)
def test_a_fixture_s_leak_is_an_error_at_its_teardown_without_the_hidden_note(
    pytester: pytest.Pytester, how: tuple[str, ...]
) -> None:
    pytester.makeconftest(
        """
        import os, pytest

        @pytest.fixture(scope="module")
        def sloppy():
            os.environ["SLOPPY"] = "x"
            yield
        """
    )
    pytester.makepyfile(
        test_f="def test_a(sloppy): pass\ndef test_b(): pass\n", test_g="def test_c(): pass\n"
    )
    result = run_guard(pytester, "-p", "no:randomly", *how)
    result.assert_outcomes(passed=3, errors=1)
    assert "All traceback entries are hidden" not in result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_b*",
            literal(
                "*fixture 'sloppy' (scope=module) in the teardown of test_f.py::test_b"
                " leaked os.environ['SLOPPY'] *"
            ),
            "1 leak shown as an error above",
        ]
    )


def test_a_refused_write_to_the_home_shows_the_test_s_line_not_the_plugin_s(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = pytester.mkdir("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("TMPDIR", str(pytester.mkdir("system-tmp")))
    pytester.makepyfile(
        test_home="""
        import pathlib

        CACHE = pathlib.Path.home() / ".cache-file"

        def test_writes(isolated_env):
            CACHE.write_text("x")
        """
    )
    result = run_guard(pytester, "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "def check_write" not in out
    assert "def _audit" not in out
    result.stdout.fnmatch_lines(
        [
            ">       CACHE.write_text(*",
            "E       pytest_isolation.RealHomeWriteError: isolated_env: refused writing *",
        ]
    )


def test_a_lint_error_names_each_finding_once_and_its_short_line_the_codes(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_app="import os\n\ndef test_x():\n    os.environ['APP_MODE'] = 'debug'\n"
        "    os.environ['OTHER'] = '1'\n"
    )
    result = run_guard(pytester, "--isolation-lint=error")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        [
            "isolation lint: 2 findings: ISO203 at lines 4, 5",
            "test_app.py:4: ISO203 os.environ changed without a restore *",
            "test_app.py:5: ISO203 os.environ changed without a restore *",
            "*= isolation lint =*",
            "ISO203 (*): 2",
            "2 findings in 1 file (2 shown as collection errors above); *",
            "ERROR test_app.py - isolation lint: 2 findings: ISO203 at lines 4, 5",
        ]
    )
    # Each finding's words once: in the error (not again in the lint summary).
    assert result.stdout.str().count("os.environ changed without a restore") == 2


def _attempts(path: str, attempts: int, *ends: tuple[int, bool]) -> FileAttempts:
    processes = [
        ProcessEnd(attempt=n, returncode=code, timed_out=timed_out)
        for n, (code, timed_out) in enumerate(ends, start=1)
    ]
    return FileAttempts(path, attempts=attempts, processes=processes)


@pytest.mark.parametrize(
    ("records", "heading"),
    [
        ([_attempts("a", 1, (-11, False))], "1 file crashed"),
        ([_attempts("a", 1, (-9, True)), _attempts("b", 1, (-9, True))], "2 files timed out"),
        ([_attempts("a", 2, (0, False), (0, False))], "1 file retried"),  # a test failed
        (
            [_attempts("a", 2, (-11, False), (0, False)), _attempts("b", 1, (-9, True))],
            "files: 1 crashed, 1 timed out, 1 retried",
        ),
    ],
)
def test_the_notable_files_heading_counts_each_kind(
    records: list[FileAttempts], heading: str
) -> None:
    assert all(record.notable for record in records)
    assert notable_files(records) == heading
