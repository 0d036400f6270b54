"""A file-mode child ends its session like a pytest-xdist worker, and plugins
that work at the session's end or outside reports give the plain run's
results (issue 14), each in every start method."""

from __future__ import annotations

import importlib.util
import re

import pytest

from conftest import run_file_mode
from conftest import run_plain

PYTEST_9 = int(pytest.__version__.split(".")[0]) >= 9


def needs(module: str) -> None:
    pytest.importorskip(module)


# -- subtests -------------------------------------------------------------------------

SUBTESTS = """
def test_sub(subtests):
    with subtests.test(i=1):
        assert 0
    with subtests.test(i=2):
        pass


def test_ok():
    pass
"""


def test_a_failed_subtest_fails_its_test(pytester: pytest.Pytester, start: str) -> None:
    """pytest's subtests fail a test with failed subtests when its status is
    asked for, from state of the process that ran it."""
    if not PYTEST_9:
        pytest.skip("pytest 9 has subtests built in")
    pytester.makepyfile(test_s=SUBTESTS)
    for result in (run_plain(pytester), run_file_mode(pytester, start)):
        result.assert_outcomes(failed=2, passed=1)
        result.stdout.fnmatch_lines(["FAILED test_s.py::test_sub - contains 1 failed subtest"])
        assert result.ret == 1


def summary(result: pytest.RunResult) -> list[str]:
    lines = result.outlines
    return lines[lines.index(next(x for x in lines if "short test summary" in x)) :][:-1]


def test_pytest_subtests_reports_as_in_a_plain_run(pytester: pytest.Pytester, start: str) -> None:
    needs("pytest_subtests")
    pytester.makepyfile(test_s=SUBTESTS)
    args = ("-p", "pytest_subtests.plugin", "-W", "ignore::DeprecationWarning")
    plain = run_plain(pytester, *args)
    isolated = run_file_mode(pytester, start, *args)
    assert plain.ret == isolated.ret == 1
    assert isolated.parseoutcomes() == plain.parseoutcomes()
    assert summary(isolated) == summary(plain)


# -- the session's end in the child ---------------------------------------------------


def test_the_child_s_plugins_finish_their_session(pytester: pytest.Pytester, start: str) -> None:
    """A conftest's sessionfinish and unconfigure run in each file's process
    (as in a worker) and once in the parent; the parent alone writes junit."""
    pytester.makeconftest(
        """
        import os

        def pytest_sessionfinish(session, exitstatus):
            with open("finished.txt", "a") as out:
                out.write(f"{os.getpid()} {int(exitstatus)}\\n")

        def pytest_unconfigure(config):
            with open("unconfigured.txt", "a") as out:
                out.write(f"{os.getpid()}\\n")
        """
    )
    pytester.makepyfile(test_a="def test_a(): pass\n", test_b="def test_b(): assert 0\n")
    result = run_file_mode(pytester, start, "--junitxml=out.xml")
    result.assert_outcomes(passed=1, failed=1)
    finished = (pytester.path / "finished.txt").read_text().split("\n")[:-1]
    statuses = sorted(line.split()[1] for line in finished)
    assert statuses == ["0", "1", "1"]  # test_a's child, test_b's child, the parent
    assert len({line.split()[0] for line in finished}) == 3
    assert len((pytester.path / "unconfigured.txt").read_text().split()) == 3
    assert (pytester.path / "out.xml").read_text().count("<testcase ") == 2


def test_a_child_s_unconfigure_runs_while_the_next_file_does_and_counts(
    pytester: pytest.Pytester, start: str
) -> None:
    """The child tells the parent it finished before its unconfigure (pytest's
    whole-heap garbage collection): what it prints there still shows, all
    children have ended before the parent's session does, and an unconfigure
    that raises fails the run, naming the file."""
    pytester.makeconftest(
        """
        import os, sys

        def pytest_unconfigure(config):
            if not config.pluginmanager.has_plugin("isolation-child"):
                ended = open("ended.txt").read().split() if os.path.exists("ended.txt") else []
                print(f"parent sees {len(ended)} children ended", file=sys.stderr)
                return
            print(f"unconfigure of {os.getpid()}", file=sys.stderr)
            with open("ended.txt", "a") as out:
                out.write(f"{os.getpid()}\\n")
            if config.stash.get(FAIL, False):
                raise RuntimeError("unconfigure broke")

        import pytest
        FAIL = pytest.StashKey[bool]()

        def pytest_collection_finish(session):
            if any(item.name == "test_b" for item in session.items):
                session.config.stash[FAIL] = True
        """
    )
    pytester.makepyfile(
        test_a="def test_a(): pass\n", test_b="def test_b(): pass\n", test_c="def test_c(): pass\n"
    )
    result = run_file_mode(pytester, start)
    result.assert_outcomes(passed=3)
    assert result.stderr.str().count("unconfigure of ") == 3
    result.stderr.fnmatch_lines(
        ["*RuntimeError: unconfigure broke*", "parent sees 3 children ended"]
    )
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    result.stdout.fnmatch_lines(
        [
            "isolation: the process of test_b.py exited with status 3 after its last test (a "
            "plugin's or conftest's pytest_unconfigure raised; see its traceback above); the run "
            "exits with status 3"
        ]
    )
    result.stdout.no_fnmatch_line("*pytest_sessionfinish*")


def test_a_child_whose_unconfigure_hangs_is_ended_after_the_timeout(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(
        """
        import time

        def pytest_unconfigure(config):
            if config.pluginmanager.has_plugin("isolation-child"):
                time.sleep(60)
        """
    )
    pytester.makepyfile(test_a="def test_a(): pass\n")
    # Not recording: a recording child runs its conftests' unconfigure before
    # it finishes (what they run is the file's; tests/test_recorded_windows.py).
    result = run_file_mode(
        pytester,
        "fork",
        "--isolation-timeout=2",
        "--isolation-kill-grace=1",
        "--isolation-record=off",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "isolation: the process of test_a.py did not end within 2 s after its last test "
            "(its plugins' unconfigure); its process tree was ended"
        ]
    )
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    assert result.duration < 30


def test_a_plugin_that_fails_the_session_at_its_end_fails_the_run(
    pytester: pytest.Pytester, start: str
) -> None:
    pytester.makeconftest(
        """
        def pytest_sessionfinish(session):
            # Real tests (not the parent's placeholders) are in the child only.
            names = [getattr(item, "function", len).__name__ for item in session.items]
            if "test_b" in names:
                session.exitstatus = 3
        """
    )
    pytester.makepyfile(test_a="def test_a(): pass\n", test_b="def test_b(): pass\n")
    result = run_file_mode(pytester, start)
    result.assert_outcomes(passed=2)
    assert result.ret == 3
    result.stdout.fnmatch_lines(
        ["isolation: the process of test_b.py ended its session with exit status 3 *"]
    )
    if importlib.util.find_spec("xdist") is not None:  # through the worker to the controller
        distributed = run_file_mode(pytester, start, "-p", "xdist", "-n", "2")
        distributed.assert_outcomes(passed=2)
        assert distributed.ret == 3


# -- syrupy and pytest-benchmark ----------------------------------------------------


def test_syrupy_writes_and_checks_snapshots(pytester: pytest.Pytester, start: str) -> None:
    needs("syrupy")
    pytester.makepyfile(
        test_a="def test_a(snapshot):\n    assert {'a': 1} == snapshot\n",
        test_b="def test_b(snapshot):\n    assert [1, 2] == snapshot\n",
    )
    update = run_file_mode(pytester, start, "-p", "syrupy", "--snapshot-update")
    update.assert_outcomes(passed=2)
    update.stdout.fnmatch_lines(
        [
            "isolation: syrupy compares and writes snapshots in each file's process, and its "
            "summary is not shown; unused snapshots are not looked for (--snapshot-disable-unused)*"
        ]
    )
    written = sorted(p.name for p in pytester.path.glob("__snapshots__/*.ambr"))
    assert written == ["test_a.ambr", "test_b.ambr"]
    run_file_mode(pytester, start, "-p", "syrupy").assert_outcomes(passed=2)
    pytester.makepyfile(test_b="def test_b(snapshot):\n    assert [1, 3] == snapshot\n")
    changed = run_file_mode(pytester, start, "-p", "syrupy")
    changed.assert_outcomes(passed=1, failed=1)


def test_syrupy_keeps_the_other_files_snapshots(
    pytester: pytest.Pytester, start: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each child sees one file's tests: an unused-snapshot check there would
    take the others' for unused and, under --snapshot-update, delete them."""
    needs("syrupy")
    if importlib.util.find_spec("xdist") is None:
        pytest.skip("needs pytest-xdist")
    # Inside an xdist worker of this suite syrupy would think the inner run a worker too.
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    pytester.makepyfile(
        test_a="def test_a(snapshot):\n    assert 1 == snapshot\n",
        test_b="def test_b(snapshot):\n    assert 2 == snapshot\n",
    )
    assert run_plain(pytester, "-p", "syrupy", "--snapshot-update").ret == 0
    for workers in ((), ("-p", "xdist", "-n", "2")):
        update = run_file_mode(pytester, start, "-p", "syrupy", "--snapshot-update", *workers)
        update.assert_outcomes(passed=2)
        assert update.ret == 0
        assert len(list(pytester.path.glob("__snapshots__/*.ambr"))) == 2


def test_pytest_benchmark_runs_unmeasured(pytester: pytest.Pytester, start: str) -> None:
    """As pytest-benchmark does itself under pytest-xdist, and says so."""
    needs("pytest_benchmark")
    pytester.makepyfile(test_b="def test_b(benchmark):\n    assert benchmark(sum, [1, 2]) == 3\n")
    result = run_file_mode(pytester, start, "-p", "pytest_benchmark.plugin")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["isolation: pytest-benchmark: benchmarks run once, unmeasured*"])
    result.stdout.no_fnmatch_line("*benchmark: 1 tests*")


def test_pytest_benchmark_s_results_are_refused_at_start(
    pytester: pytest.Pytester, start: str
) -> None:
    needs("pytest_benchmark")
    pytester.makepyfile(test_b="def test_b(benchmark):\n    benchmark(sum, range(10))\n")
    args = ("-p", "pytest_benchmark.plugin")
    refused = run_file_mode(pytester, start, *args, "--benchmark-json=b.json")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*cannot combine pytest-benchmark's results (--benchmark-json)*"])
    written = pytester.path / "b.json"  # pytest-benchmark 5.0 opens it when parsing options
    assert not written.exists() or written.read_bytes() == b""
    disabled = run_file_mode(pytester, start, *args, "--benchmark-disable")
    disabled.assert_outcomes(passed=1)
    disabled.stdout.no_fnmatch_line("isolation: pytest-benchmark*")


# -- logging ------------------------------------------------------------------------

LOGS = """
import logging


def test_one():
    logging.getLogger("app").warning("MARK-1")


def test_two():
    logging.getLogger("app").warning("MARK-2")
"""


def test_log_file_gets_every_record(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(test_log=LOGS)
    run_file_mode(pytester, start, "--log-file=run.log").assert_outcomes(passed=2)
    text = (pytester.path / "run.log").read_text()
    assert re.findall(r"MARK-\d", text) == ["MARK-1", "MARK-2"]


def test_live_logs_are_shown(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(test_log=LOGS)
    result = run_file_mode(pytester, start, "-o", "log_cli=true")
    result.stdout.fnmatch_lines(
        ["*- live log call -*", "WARNING *MARK-1", "*- live log call -*", "WARNING *MARK-2"]
    )


# -- junit XML ----------------------------------------------------------------------


def test_junit_gets_suite_properties_and_attributes(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(
        test_j="""
        def test_p(record_testsuite_property, record_xml_attribute, record_property):
            record_testsuite_property("ARCH", "x86")
            record_xml_attribute("owner", "team-a")
            record_property("k", "v")
        """
    )
    args = ("-o", "junit_family=xunit1", "-W", "ignore::pytest.PytestExperimentalApiWarning")
    run_plain(pytester, *args, "--junitxml=plain.xml").assert_outcomes(passed=1)
    run_file_mode(pytester, start, *args, "--junitxml=file.xml").assert_outcomes(passed=1)

    def recorded(name: str) -> list[str]:
        text = (pytester.path / name).read_text()
        return re.findall(r'<property name="\w+" value="\w+" />|owner="[\w-]+"', text)

    assert recorded("plain.xml") == [
        '<property name="ARCH" value="x86" />',
        'owner="team-a"',
        '<property name="k" value="v" />',
    ]
    assert recorded("file.xml") == recorded("plain.xml")


def test_an_unpicklable_recorded_property_is_sent_as_its_text(
    pytester: pytest.Pytester, start: str
) -> None:
    """Issue 46, item 8: ``record_property`` with a lock or a generator made
    the child exit 3 and the test fail; a plain run passes and its JUnit XML
    report writes the value's text.  File mode sends the text, and says so."""
    pytester.makepyfile(
        test_j="""
        import threading

        def test_p(record_property):
            record_property("lock", threading.Lock())
            record_property("numbers", (n for n in range(3)))
            record_property("k", "v")
        """
    )
    run_plain(pytester, "--junitxml=plain.xml").assert_outcomes(passed=1)
    result = run_file_mode(pytester, start, "-rA", "--junitxml=file.xml")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "record_property 'lock': its value could not be sent from the test's process "
            "(TypeError: cannot pickle '_thread.lock' object); sent as its text, *",
            "record_property 'numbers': *",
        ]
    )

    def recorded(name: str) -> list[str]:
        text = (pytester.path / name).read_text()
        return re.findall(r'<property name="(\w+)" value="([^" ]+)', text)

    assert recorded("file.xml") == recorded("plain.xml")
    assert [name for name, _ in recorded("plain.xml")] == ["lock", "numbers", "k"]


# -- pytest-instafail ---------------------------------------------------------------


def test_pytest_instafail_shows_failures_at_once(pytester: pytest.Pytester, start: str) -> None:
    needs("pytest_instafail")
    pytester.makepyfile(test_i="def test_f():\n    assert 0\n\ndef test_ok():\n    pass\n")
    args = ("-p", "pytest_instafail", "--instafail")
    for result in (run_plain(pytester, *args), run_file_mode(pytester, start, *args)):
        result.assert_outcomes(failed=1, passed=1)
        # The failure is shown before the next test's progress, not in a summary.
        result.stdout.fnmatch_lines(["*_ test_f _*", "*test_i.py:2: AssertionError", "*.*[[]100%]"])
        result.stdout.no_fnmatch_line("*= FAILURES =*")
        assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


# -- pytest-xdist -------------------------------------------------------------------


def test_a_child_of_an_xdist_worker_is_that_worker(pytester: pytest.Pytester, start: str) -> None:
    needs("xdist")
    test = """
        import os

        def test_w(worker_id, testrun_uid, request):
            with open(f"{worker_id}-{os.getpid()}.txt", "w") as out:
                out.write(f"{os.environ['PYTEST_XDIST_WORKER']} {testrun_uid} "
                          f"{request.config.workerinput['workerid']}")
        """
    pytester.makepyfile(test_a=test, test_b=test, test_c=test)
    run_file_mode(pytester, start, "-p", "xdist", "-n", "2").assert_outcomes(passed=3)
    found = sorted(pytester.path.glob("gw*.txt"))
    assert len(found) == 3
    uids = set()
    for path in found:
        env, uid, workerid = path.read_text().split()
        assert path.name.startswith(f"{env}-")
        assert workerid == env
        uids.add(uid)
    assert len(uids) == 1


# -- conftest hooks -----------------------------------------------------------------


def test_a_conftest_s_collection_hook_gets_the_real_tests(
    pytester: pytest.Pytester, start: str
) -> None:
    pytester.makeconftest(
        """
        import pytest

        def pytest_collection_modifyitems(items):
            for item in items:
                if item.function.__name__.endswith("_slow"):
                    item.add_marker(pytest.mark.skip(reason="slow"))
            items.sort(key=lambda item: item.name, reverse=True)
        """
    )
    pytester.makepyfile(
        test_1="def test_a(): pass\ndef test_b_slow(): pass\n", test_2="def test_c(): pass\n"
    )
    result = run_file_mode(pytester, start, "-v")
    result.assert_outcomes(passed=2, skipped=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "isolation: conftest.py: pytest_collection_modifyitems runs in each file's process, "
            "on that file's tests (it cannot reorder tests across files)",
            "test_1.py::test_b_slow SKIPPED*",
            "test_1.py::test_a PASSED*",
            "test_2.py::test_c PASSED*",
        ]
    )


# -- crashes and forks ----------------------------------------------------------------


def test_exitfirst_counts_a_crash(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(
        test_c="""
        import os, signal

        def test_crash():
            os.kill(os.getpid(), signal.SIGKILL)

        def test_f1():
            assert 0
        """
    )
    result = run_file_mode(pytester, start, "-x")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*stopping after 1 failures*"])
    assert "test_f1" not in result.stdout.str()


def test_a_test_s_fork_that_returns_into_pytest_ends_there(
    pytester: pytest.Pytester, start: str
) -> None:
    pytester.makepyfile(
        test_fk="""
        import os

        def test_fork():
            if os.fork() == 0:
                return
            os.wait()

        def test_after():
            pass

        def test_fail():
            assert 0
        """
    )
    result = run_file_mode(pytester, start, "-v")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        ["test_fk.py::test_fork PASSED*", "test_fk.py::test_after PASSED*", "*test_fail FAILED*"]
    )
    result.stderr.fnmatch_lines(["isolation: process *, forked by a test in process *, returned*"])
    assert result.stdout.str().count("test_after PASSED") == 1


@pytest.mark.parametrize("collect_only", [True, False])
def test_a_module_level_skip_is_located_in_its_file(
    pytester: pytest.Pytester, start: str, collect_only: bool
) -> None:
    """Issue 46, item 9: under ``--co -rA`` a module-level skip was located
    in the plugin's controller (where the parent raised it again), not at
    the test file's line, as the plain run shows it."""
    pytester.makepyfile(
        test_s="""
        import pytest
        pytest.skip("not here", allow_module_level=True)

        def test_a():
            pass
        """,
        test_t="def test_b():\n    pass\n",
    )
    args = ("-rA", "-p", "no:randomly", *(["--co"] if collect_only else []))
    plain = run_plain(pytester, "-p", "no:isolation", *args)
    line = "SKIPPED [[]1[]] test_s.py:2: not here"
    plain.stdout.fnmatch_lines([line])
    result = run_file_mode(pytester, start, *args)
    result.stdout.fnmatch_lines([line])
    result.stdout.no_fnmatch_line("*controller.py*")
