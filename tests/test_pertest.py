"""A test in a process of its own (issue 48): ``--isolation-mode=test`` and the
``isolation_process`` marker, the limits of a test's process, and how a
test whose process died is reported.  Every run is a real pytest in a
subprocess: the tests fork, crash, hang and go over limits."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import LEAK_WARNINGS
from conftest import TIMEOUT
from conftest import literal

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="fork, and Linux's limits")

TEST_MODE = ("-p", "isolation", *LEAK_WARNINGS, "--isolation-mode=test", "-p", "no:randomly")
PLAIN = ("-p", "isolation", *LEAK_WARNINGS, "-p", "no:randomly")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*args, timeout=TIMEOUT)


def test_a_segfault_fails_its_test_with_the_cause_first_and_the_next_test_runs(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_a="""
        import faulthandler, logging

        def test_before():
            pass

        def test_crash():
            print("said before the crash")
            logging.getLogger("app").warning("logged before the crash")
            faulthandler._sigsegv()

        def test_after():
            pass
        """
    )
    result = run(pytester, *TEST_MODE, "-v")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "test_a.py::test_before PASSED*",
            "test_a.py::test_crash FAILED*",
            "test_a.py::test_after PASSED*",
            "*_ test_crash _*",
            "isolation: the test's process was killed by signal 11 (SIGSEGV) during its call",
            "Fatal Python error: Segmentation fault",
            "*test_a.py*line 9 in test_crash",
            "*- Captured stdout call -*",
            "said before the crash",
            "*- Captured log call -*",
            "WARNING  app:test_a.py:8 logged before the crash",
        ]
    )


@pytest.mark.parametrize(
    ("statement", "cause"),
    [
        ("os._exit(7)", "the test's process exited with code 7 during its call"),
        ("os.abort()", "the test's process was killed by signal 6 (SIGABRT) during its call"),
        ("os.kill(os.getpid(), 9)", "the test's process was killed by signal 9 (SIGKILL)*"),
    ],
)
def test_a_process_that_ends_early_fails_its_test(
    pytester: pytest.Pytester, statement: str, cause: str
) -> None:
    pytester.makepyfile(
        test_a=f"""
        import os, sys

        def test_ends():
            sys.stderr.write("its last words\\n")
            {statement}

        def test_after():
            pass
        """
    )
    result = run(pytester, *TEST_MODE)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [f"isolation: {cause}", "*- Captured stderr call -*", "its last words"]
    )


def test_a_time_limit_shows_every_threads_stack_and_the_output_so_far(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_a="""
        import threading, time, pytest

        def helper():
            time.sleep(60)

        @pytest.mark.isolation_process(timeout=1)
        def test_hangs():
            threading.Thread(target=helper, name="helper", daemon=True).start()
            print("waiting for ever")
            time.sleep(60)

        def test_after():
            pass
        """
    )
    result = run(pytester, *PLAIN, "-v")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "test_a.py::test_hangs FAILED*",
            "test_a.py::test_after PASSED*",
            "isolation: over its 1 s time limit: the test's process was killed",
            "*Thread 0x*",
            "*line 4 in helper",
            "*line 10 in test_hangs",
            "*- Captured stdout call -*",
            "waiting for ever",
        ]
    )
    assert result.duration < 30


def test_the_run_wide_time_limit_and_the_marker_that_lifts_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_a="""
        import time, pytest

        def test_slow():
            time.sleep(30)

        @pytest.mark.isolation_process(timeout=0)
        def test_unlimited():
            time.sleep(1.5)
        """
    )
    result = run(pytester, *TEST_MODE, "--isolation-test-timeout=1")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "isolation: test mode: each test in a process of its own*(limits: time 1 s, "
            "memory none, CPU none)",
            "FAILED test_a.py::test_slow - isolation: over its 1 s time limit*",
        ]
    )


def test_a_memory_limit_fails_the_allocation_over_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_a="""
        import pytest

        @pytest.mark.isolation_process(memory=100)
        def test_greedy():
            data = bytearray(400 * 1024 * 1024)

        @pytest.mark.isolation_process(memory=100)
        def test_modest():
            data = bytearray(10 * 1024 * 1024)
        """
    )
    result = run(pytester, *PLAIN)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_greedy _*",
            "isolation: over its 100 MB memory limit: an allocation failed (MemoryError)",
            "*MemoryError*",
        ]
    )


def test_a_cpu_limit_ends_a_busy_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_a="""
        import pytest

        @pytest.mark.isolation_process(cpu=1)
        def test_busy():
            while True:
                pass

        def test_after():
            pass
        """
    )
    result = run(pytester, *PLAIN)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["isolation: over its 1 s CPU time limit: the test's process was killed by SIGXCPU"]
    )


COUNTED = """
import json, os
from pathlib import Path
import pytest

def count(name):
    path = Path(os.environ["COUNTS"])
    counts = json.loads(path.read_text()) if path.exists() else {}
    counts[name] = counts.get(name, 0) + 1
    path.write_text(json.dumps(counts))
"""


def _counting_suite(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        COUNTED
        + """
@pytest.fixture(scope="session")
def session_resource():
    count("session setup")
    yield
    count("session teardown")
"""
    )
    pytester.makepyfile(
        test_a=COUNTED
        + """
from conftest import count as tally

def setup_module():
    tally("setup_module")

def teardown_module():
    tally("teardown_module")

@pytest.fixture(scope="module", params=["x", "y"])
def module_resource(request, session_resource):
    tally(f"module setup {request.param}")
    yield request.param
    tally(f"module teardown {request.param}")

@pytest.fixture(scope="class")
def class_resource():
    tally("class setup")
    yield
    tally("class teardown")

@pytest.fixture
def function_resource():
    tally("function setup")
    yield
    tally("function teardown")

def test_one(module_resource, function_resource):
    pass

def test_two(module_resource):
    pass

@pytest.mark.usefixtures("class_resource")
class TestGrouped:
    def test_three(self, session_resource):
        pass

    def test_four(self, function_resource):
        pass
""",
        test_b="""
def test_five(session_resource):
    pass
""",
    )


def test_fixtures_above_function_scope_are_set_up_as_often_as_in_a_plain_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _counting_suite(pytester)
    counts = {}
    for name, args in {"plain": PLAIN, "test": TEST_MODE}.items():
        monkeypatch.setenv("COUNTS", str(pytester.path / f"counts-{name}.json"))
        run(pytester, *args).assert_outcomes(passed=7)
        counts[name] = json.loads((pytester.path / f"counts-{name}.json").read_text())
    assert counts["test"] == counts["plain"]
    assert counts["test"]["session setup"] == 1
    assert counts["test"]["module setup x"] == 1
    assert counts["test"]["function setup"] == 3


def test_the_same_outcomes_sections_and_junit_xml_as_a_plain_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_a="""
        import logging, warnings, pytest

        @pytest.fixture(scope="module")
        def resource():
            print("module set-up output")
            logging.getLogger("fx").warning("module set-up record")
            yield
            print("module teardown output")
            raise RuntimeError("module teardown failed")

        @pytest.fixture(scope="module")
        def broken():
            raise ValueError("broken module fixture")

        def test_one(resource, record_property):
            record_property("answer", 42)
            warnings.warn(UserWarning("a warning of the test"))
            print("test output")

        def test_two(resource):
            assert 0, "a plain failure"

        def test_three(broken):
            pass

        @pytest.mark.skip(reason="skipped by mark")
        def test_four(broken):
            pass

        @pytest.mark.xfail(reason="known")
        def test_five():
            assert 0
        """
    )
    outputs = {}
    for name, args in {"plain": PLAIN, "test": TEST_MODE}.items():
        result = run(
            pytester, *args, "-rA", f"--junitxml=junit-{name}.xml", "-o", "junit_family=legacy"
        )
        # the module fixture's teardown error is the last test's, which its
        # xfail mark turns into a second "xfailed", as in a plain run
        result.assert_outcomes(passed=1, failed=1, errors=1, skipped=1, xfailed=2, warnings=1)
        lines = [
            line
            for line in result.outlines
            if not line.startswith(("isolation: test mode", "platform ", "rootdir", "plugins"))
            and " in " not in line
            and "junit-" not in line
        ]
        outputs[name] = lines
    assert outputs["test"] == outputs["plain"]
    plain_xml = (pytester.path / "junit-plain.xml").read_text()
    test_xml = (pytester.path / "junit-test.xml").read_text()

    def normal(xml: str) -> str:
        import re

        return re.sub(r'(time|timestamp|hostname)="[^"]*"', "", xml)

    assert normal(test_xml) == normal(plain_xml)


def test_a_same_file_polluter_no_longer_fails_its_victim(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_a="""
        import json

        def test_polluter():
            json.loads = lambda text: "patched"

        def test_victim():
            assert json.loads("1") == 1
        """
    )
    run(pytester, "-p", "no:randomly", "-p", "no:isolation").assert_outcomes(passed=1, failed=1)
    run(pytester, *TEST_MODE).assert_outcomes(passed=2)


def test_xdist_workers_run_each_test_in_a_process_of_its_own(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        **{
            f"test_{name}": """
            import faulthandler, os, pytest
            SEEN = set()

            @pytest.mark.parametrize("n", range(3))
            def test_own_process(n):
                assert os.getpid() not in SEEN
                SEEN.add(os.getpid())

            def test_crash():
                faulthandler._sigsegv()
            """
            for name in "ab"
        }
    )
    result = run(pytester, *TEST_MODE, "-p", "xdist", "-n", "2")
    result.assert_outcomes(passed=6, failed=2)
    result.stdout.fnmatch_lines(["isolation: test mode: each test in a process of its own*"])
    result.stdout.fnmatch_lines(
        ["*isolation: the test's process was killed by signal 11 (SIGSEGV)*"]
    )


def test_a_marked_test_inside_file_mode(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_a="""
        import os, pytest

        PIDS = []

        @pytest.fixture(scope="module")
        def file_process():
            return os.getpid()

        def test_first(file_process):
            assert os.getpid() == file_process

        @pytest.mark.isolation_process(timeout=1)
        def test_marked(file_process):
            assert os.getpid() != file_process
            os.environ["LEFT_BY_MARKED"] = "1"
            while True:
                pass

        def test_last(file_process):
            assert os.getpid() == file_process
            assert "LEFT_BY_MARKED" not in os.environ
        """
    )
    result = run(pytester, "-p", "isolation", "--isolation-mode=file", "-p", "no:randomly", "-v")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "test_a.py::test_first PASSED*",
            "test_a.py::test_marked FAILED*",
            "test_a.py::test_last PASSED*",
            "*isolation: over its 1 s time limit*",
        ]
    )


def test_pytest_timeout_signal_method_fails_the_test_inside_its_process(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_a="""
        import time, pytest

        @pytest.mark.timeout(1, method="signal")
        def test_slow():
            time.sleep(30)

        def test_after():
            pass
        """
    )
    result = run(pytester, *TEST_MODE, "-p", "pytest_timeout")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*Failed: Timeout (>1.0s) from pytest-timeout*"])
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


def test_pytest_timeout_thread_method_is_named_as_the_cause(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_a="""
        import time, pytest

        @pytest.mark.timeout(1, method="thread")
        def test_slow():
            time.sleep(30)

        def test_after():
            pass
        """
    )
    result = run(pytester, *TEST_MODE, "-p", "pytest_timeout")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "isolation: over pytest-timeout's 1 s limit: its thread method ended the test's "
            "process (exit code 1)"
        ]
    )


def test_pytest_exit_in_a_tests_process_ends_the_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_a="""
        import pytest

        def test_stops():
            pytest.exit("enough for today", returncode=3)

        def test_never():
            pass
        """
    )
    result = run(pytester, *TEST_MODE)
    assert result.ret == 3
    result.stdout.fnmatch_lines(["*Exit: enough for today*"])
    result.stdout.no_fnmatch_line("*test_never*PASSED*")


def test_last_failed_and_maxfail_see_the_tests_reports(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_a="""
        def test_one():
            assert 0

        def test_two():
            assert 0

        def test_three():
            pass
        """
    )
    run(pytester, *TEST_MODE, "-x").assert_outcomes(failed=1)
    run(pytester, *TEST_MODE).assert_outcomes(failed=2, passed=1)
    run(pytester, *TEST_MODE, "--lf").assert_outcomes(failed=2, passed=0)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--isolation-test-timeout=soon",), "--isolation-test-timeout: invalid value 'soon'*"),
        (("--isolation-test-memory=-1",), "--isolation-test-memory: invalid value '-1'*"),
        (("-o", "isolation_test_cpu=x"), "isolation_test_cpu (ini): invalid value 'x'*"),
    ],
)
def test_a_bad_limit_is_refused_before_anything_runs(
    pytester: pytest.Pytester, args: tuple[str, ...], message: str
) -> None:
    pytester.makepyfile(test_a="def test_one():\n    open('ran', 'w').close()\n")
    result = run(pytester, *TEST_MODE, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    assert not Path(pytester.path / "ran").exists()


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("isolation_process(5)", "*takes keyword arguments only*"),
        ("isolation_process(seconds=5)", "*unknown argument 'seconds'; choose from timeout*"),
        ("isolation_process(timeout=-1)", "*isolation_process(timeout=-1): give a number >= 0*"),
    ],
)
def test_a_bad_marker_is_refused_before_anything_runs(
    pytester: pytest.Pytester, marker: str, message: str
) -> None:
    pytester.makepyfile(
        test_a=f"""
        import pytest

        def test_first():
            open("ran", "w").close()

        @pytest.mark.{marker}
        def test_marked():
            pass
        """
    )
    result = run(pytester, *PLAIN)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: test_a.py::test_marked: {message}"])
    assert not Path(pytester.path / "ran").exists()


def test_the_guard_names_what_a_test_left_behind_in_its_process(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_a="""
        import os

        def test_polluter():
            os.environ["LEFT_BEHIND"] = "1"

        def test_victim():
            assert "LEFT_BEHIND" not in os.environ
        """
    )
    result = run(pytester, *TEST_MODE)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            literal("[env] os.environ['LEFT_BEHIND'] (was unset, now '1')*"),
            "  by test_a.py::test_polluter",
        ]
    )


PIDS_SUITE = """
import os

def test_one():
    with open(f"pids-{__name__}", "a") as pids:
        pids.write(f"{os.getpid()}\\n")

def test_two():
    with open(f"pids-{__name__}", "a") as pids:
        pids.write(f"{os.getpid()}\\n")
"""


def _pids(pytester: pytest.Pytester, name: str) -> int:
    """How many processes the module's two tests ran in."""
    return len(set((pytester.path / f"pids-{name}").read_text().split()))


def test_isolation_paths_places_files_tests_in_processes_of_their_own(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\nisolation_paths =\n    tests/alone/**: test\n")
    pytester.mkpydir("tests")
    pytester.mkpydir("tests/alone")
    (pytester.path / "tests/alone/test_alone.py").write_text(PIDS_SUITE)
    (pytester.path / "tests/test_together.py").write_text(PIDS_SUITE)
    result = run(pytester, "-p", "isolation", "-p", "no:randomly")
    result.assert_outcomes(passed=4)
    assert _pids(pytester, "tests.alone.test_alone") == 2
    assert _pids(pytester, "tests.test_together") == 1


def test_test_mode_leaves_the_files_placed_off_in_the_runs_process(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\nisolation_paths =\n    test_together.py: off\n")
    pytester.makepyfile(test_alone=PIDS_SUITE, test_together=PIDS_SUITE)
    run(pytester, *TEST_MODE).assert_outcomes(passed=4)
    assert _pids(pytester, "test_alone") == 2
    assert _pids(pytester, "test_together") == 1


def test_a_conftest_or_the_modules_marker_places_a_files_tests_alone(
    pytester: pytest.Pytester,
) -> None:
    pytester.mkpydir("sub")
    (pytester.path / "sub/conftest.py").write_text('isolation_mode = "test"\n')
    (pytester.path / "sub/test_conftest.py").write_text(PIDS_SUITE)
    pytester.makepyfile(
        test_marked='import pytest\npytestmark = pytest.mark.isolation(mode="test")\n' + PIDS_SUITE,
        test_file=PIDS_SUITE,
    )
    run(pytester, "-p", "isolation", "--isolation-mode=file", "-p", "no:randomly").assert_outcomes(
        passed=6
    )
    assert _pids(pytester, "sub.test_conftest") == 2
    assert _pids(pytester, "test_marked") == 2
    assert _pids(pytester, "test_file") == 1


def test_file_mode_ends_a_files_process_over_a_tests_time_limit_and_goes_on(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_a="""
        import time, pytest

        def test_before():
            pass

        def test_hangs():
            print("stuck")
            time.sleep(60)

        @pytest.mark.isolation_process(timeout=5)
        def test_own_limit():
            time.sleep(1.5)

        def test_after():
            pass
        """
    )
    result = run(
        pytester,
        "-p",
        "isolation",
        "--isolation-mode=file",
        "--isolation-test-timeout=1",
        "-p",
        "no:randomly",
        "-v",
    )
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "test_a.py::test_before PASSED*",
            "test_a.py::test_hangs FAILED*",
            "test_a.py::test_own_limit PASSED*",
            "test_a.py::test_after PASSED*",
            "isolation: over its 1 s time limit while running test_hangs (call), the process "
            "of test_a.py*",
            "*line 8 in test_hangs",
            "*- Captured stdout call -*",
            "stuck",
        ]
    )
    assert result.duration < 30


def test_retries_in_test_mode_run_a_failed_test_again_in_a_new_process(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_a="""
        import faulthandler, os

        def test_crashes_once():
            if not os.path.exists("crashed"):
                open("crashed", "w").close()
                faulthandler._sigsegv()

        def test_always_fails():
            assert 0
        """
    )
    result = run(
        pytester, *TEST_MODE, "--isolation-retries=1", "--isolation-report=run.json", "-rA"
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*isolation: attempts*",
            "attempt 1 failed, attempt 2 failed",
            "*isolation: 1 flaky (passed on retry)*",
            "test_a.py::test_crashes_once: attempt 1 crashed (was killed by signal 11 "
            "(SIGSEGV)), attempt 2 passed",
        ]
    )
    report = json.loads((pytester.path / "run.json").read_text())
    assert report["mode"] == "test"
    assert report["flaky"] == [
        {
            "nodeid": "test_a.py::test_crashes_once",
            "attempts": [
                {"attempt": 1, "outcome": "crashed (was killed by signal 11 (SIGSEGV))"},
                {"attempt": 2, "outcome": "passed"},
            ],
        }
    ]
    figures = {entry["nodeid"]: entry for entry in report["files"][0]["test_processes"]}
    assert set(figures) == {"test_a.py::test_crashes_once", "test_a.py::test_always_fails"}
    assert figures["test_a.py::test_always_fails"]["exit_code"] == 0
    assert figures["test_a.py::test_always_fails"]["peak_mb"] > 0


def test_the_run_report_has_each_tests_process_figures_and_its_cause(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_a="""
        import time, pytest

        @pytest.mark.isolation_process(timeout=1)
        def test_hangs():
            time.sleep(30)

        def test_quick():
            pass
        """
    )
    run(pytester, *PLAIN, "--isolation-report=run.json").assert_outcomes(passed=1, failed=1)
    report = json.loads((pytester.path / "run.json").read_text())
    (entry,) = report["files"][0]["test_processes"]
    assert entry["nodeid"] == "test_a.py::test_hangs"
    assert entry["cause"] == "over its 1 s time limit"
    assert entry["signal"] == "SIGKILL"
    assert 1 <= entry["seconds"] < 10


def test_pdb_reads_the_terminal_from_the_tests_process(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_a="""
        def test_inspected():
            answer = 41
            assert answer == 42
        """
    )
    result = pytester.run(
        sys.executable,
        "-m",
        "pytest",
        *TEST_MODE,
        "--pdb",
        stdin=b"p answer * 100\nc\n",
        timeout=TIMEOUT,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*PDB post_mortem*", "(Pdb) 4100"])


def test_twice_and_quarantine_in_test_mode(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_a="""
        import faulthandler

        REGISTRY = []

        def test_registers():
            REGISTRY.append(1)
            assert REGISTRY == [1]

        def test_crashes():
            faulthandler._sigsegv()
        """
    )
    pytester.path.joinpath("quarantine.txt").write_text("test_a.py::test_crashes  # known\n")
    result = run(pytester, *TEST_MODE, "--isolation-twice", "--isolation-quarantine=quarantine.txt")
    assert result.parseoutcomes() == {"failed": 1, "passed": 1, "quarantined": 1}
    result.stdout.fnmatch_lines(
        [
            "QUARANTINED test_a.py::test_crashes - known (quarantine.txt:1)",
            "*isolation: the test's process was killed by signal 11 (SIGSEGV) during its call",
            "*FAILED WHEN REPEATED test_a.py::test_registers*",
        ]
    )


def test_every_start_method_forks_a_placed_files_tests_from_its_process(
    pytester: pytest.Pytester, start: str
) -> None:
    pytester.makeini("[pytest]\nisolation_paths =\n    test_alone.py: test\n")
    pytester.makepyfile(
        test_alone=PIDS_SUITE + "\ndef test_crash():\n    import os\n    os.abort()\n"
    )
    result = run(pytester, "-p", "isolation", f"--isolation-start={start}", "-p", "no:randomly")
    result.assert_outcomes(passed=2, failed=1)
    assert _pids(pytester, "test_alone") == 2
    result.stdout.fnmatch_lines(
        ["*isolation: the test's process was killed by signal 6 (SIGABRT) during its call"]
    )
    if start != "fork":
        result.stdout.fnmatch_lines(
            [
                "isolation: a test in a process of its own (*) is forked from its file's process, "
                f"which {start} starts"
            ]
        )


def test_file_mode_names_pytest_timeouts_thread_method_as_the_cause(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_a="""
        import time, pytest

        @pytest.mark.timeout(1, method="thread")
        def test_slow():
            print("before the timeout")
            time.sleep(30)

        def test_after():
            pass
        """
    )
    result = run(
        pytester,
        "-p",
        "isolation",
        "--isolation-mode=file",
        "-p",
        "pytest_timeout",
        "-p",
        "no:randomly",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "isolation: over pytest-timeout's 1 s limit: its thread method ended the process "
            "(exit code 1) while running test_slow (call), the process of test_a.py*",
        ]
    )


SNAPSHOT_SUITE = """
import pytest

def test_first(snapshot):
    assert {"a": 1} == snapshot

@pytest.mark.isolation_process
def test_marked(snapshot):
    assert [1, 2] == snapshot
"""


def test_syrupy_snapshots_used_in_tests_own_processes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_snap=SNAPSHOT_SUITE)
    made = run(pytester, "-p", "no:isolation", "-p", "syrupy", "--snapshot-update")
    made.assert_outcomes(passed=2)
    plain = run(pytester, *PLAIN, "-p", "syrupy")  # the marked test uses its snapshot elsewhere
    plain.assert_outcomes(passed=2)
    assert plain.ret == 0
    plain.stdout.fnmatch_lines(
        [
            "isolation: syrupy: unused snapshots are not looked for (--snapshot-disable-unused): "
            "tests in processes of their own use their snapshots there"
        ]
    )
    test_mode = run(pytester, *TEST_MODE, "-p", "syrupy")
    test_mode.assert_outcomes(passed=2)
    assert test_mode.ret == 0
    test_mode.stdout.fnmatch_lines(
        [
            "isolation: syrupy: unused snapshots are not looked for (--snapshot-disable-unused): "
            "each test uses its snapshots in a process of its own"
        ]
    )
    refused = run(pytester, *TEST_MODE, "-p", "syrupy", "--snapshot-update")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(
        ["ERROR: --isolation-mode=test cannot combine syrupy's --snapshot-update*"]
    )
    marked = run(pytester, *PLAIN, "-p", "syrupy", "--snapshot-update")
    assert marked.ret == pytest.ExitCode.USAGE_ERROR
    marked.stderr.fnmatch_lines(
        ["ERROR: test_snap.py::test_marked runs in a process of its own and uses syrupy's*"]
    )


def test_pytest_benchmark_in_test_mode_and_in_a_marked_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_bench="""
        import pytest

        @pytest.mark.isolation_process
        def test_fast(benchmark):
            benchmark(sum, range(10))
        """
    )
    result = run(pytester, *TEST_MODE, "-p", "pytest_benchmark.plugin")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["isolation: pytest-benchmark: benchmarks run once, unmeasured (--benchmark-disable)*"]
    )
    refused = run(pytester, *PLAIN, "-p", "pytest_benchmark.plugin")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(
        ["ERROR: test_bench.py::test_fast runs in a process of its own and uses pytest-bench*"]
    )
    json = run(pytester, *TEST_MODE, "-p", "pytest_benchmark.plugin", "--benchmark-json=b.json")
    assert json.ret == pytest.ExitCode.USAGE_ERROR
    json.stderr.fnmatch_lines(["ERROR: --isolation-mode=test cannot combine pytest-benchmark's*"])


def test_a_test_runs_as_deep_in_the_stack_as_in_a_plain_run(pytester: pytest.Pytester) -> None:
    """Recursion headroom is the same (structlog's own suite measures it)."""
    pytester.makepyfile(
        test_depth="""
        import pytest

        def headroom(calls=0):
            try:
                return headroom(calls + 1)
            except RecursionError:
                return calls

        @pytest.fixture
        def in_fixture():
            return headroom()

        def test_depth(in_fixture):
            with open("depth", "a") as out:
                out.write(f"{headroom()} {in_fixture}\\n")
        """
    )
    run(pytester, *PLAIN).assert_outcomes(passed=1)
    run(pytester, *TEST_MODE).assert_outcomes(passed=1)
    plain, test_mode = (pytester.path / "depth").read_text().splitlines()
    assert test_mode == plain


def test_plugins_that_keep_state_between_a_tests_phases_see_them_in_its_process(
    pytester: pytest.Pytester,
) -> None:
    # pytest-rerunfailures keeps each test's phases' errors on the test (set
    # up in the test's process); the module fixture's teardown, done in the
    # forking process after the test's process ended, read them there
    # (INTERNALERROR: no attribute '_terminal_errors').
    pytester.makepyfile(
        test_a="""
        import pytest

        @pytest.fixture(scope="module")
        def resource():
            yield 1

        @pytest.fixture(scope="module")
        def broken():
            yield 2
            raise RuntimeError("module teardown failed")

        def test_one(resource):
            pass

        def test_two(resource):
            pass

        @pytest.mark.xfail(reason="known")
        def test_three(broken):
            pass
        """
    )
    args = ("-p", "rerunfailures", "-rA")
    plain = run(pytester, *PLAIN, *args)
    result = run(pytester, *TEST_MODE, *args)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    plain.assert_outcomes(passed=2, xpassed=1, xfailed=1)
    result.assert_outcomes(passed=2, xpassed=1, xfailed=1)
    assert result.ret == plain.ret == 0
