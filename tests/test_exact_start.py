"""File mode is exact whatever the start method (issue 30): each file's
child sees what a fresh ``pytest FILE`` would, for what a conftest does at
import and for the program's own name."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

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


KILLERS = {
    "its fork server": """
        import os, signal

        def test_kills_its_parent():
            os.kill(os.getppid(), signal.SIGKILL)

        def test_after():
            pass
    """,
    "the origin": """
        import os, signal

        def test_kills_its_grandparent():
            with open(f"/proc/{os.getppid()}/stat") as stat:
                grandparent = int(stat.read().rsplit(")", 1)[1].split()[1])
            os.kill(grandparent, signal.SIGKILL)

        def test_after():
            pass
    """,
}


@pytest.mark.parametrize("killed", sorted(KILLERS))
@pytest.mark.parametrize("start", ["fork", "forkserver"])
def test_a_test_that_kills_a_server_gets_the_same_outcome_every_time(
    pytester: pytest.Pytester, start: str, killed: str
) -> None:
    """Issue 46 item 7: a test that kills its fork server (the OOM killer
    does the same) or the origin of the servers.  Its process carries on, as
    pytest's process does when a plain run's test kills pytest's parent; the
    files after it run in children of a new server (the one forked ahead from
    the killed server was killed "while collecting"), and a child still in
    its unconfigure is not killed (the run exited 3, blaming the session's
    end).  Three runs, one outcome."""
    if start == "forkserver" and killed == "the origin":
        pytest.skip("forkserver children come from one spawned server: no origin")
    outcomes = []
    for _ in range(3):
        result = _run_after_a_killer(pytester, KILLERS[killed], start)
        outcomes.append((result.ret, result.parseoutcomes()))
        result.stdout.no_fnmatch_line("*killed by signal*")
    assert outcomes == [(0, {"passed": 4})] * 3


def _run_after_a_killer(pytester: pytest.Pytester, killer: str, start: str) -> pytest.RunResult:
    """Run ``test_a.py`` (``killer``), then two files that pass; no internal error."""
    pytester.makepyfile(
        test_a=killer, test_b="def test_b():\n    pass\n", test_c="def test_c():\n    pass\n"
    )
    result = pytester.runpytest_subprocess(
        *FILE_MODE, f"--isolation-start={start}", "-p", "no:randomly", timeout=TIMEOUT
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    return result


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


DEPTHS = """
    import os, sys

    def frames():
        frame, count = sys._getframe(1), 0
        while frame is not None:
            frame, count = frame.f_back, count + 1
        return count

    def record(what, depth):
        with open(os.environ["DEPTHS"], "a") as out:
            out.write(f"{what}={depth}\\n")

    def test_depth(request):
        record(request.node.name, frames())

    def test_headroom():
        # structlog's test_recursive: how far a test can recurse is the
        # limit less the frames below it
        def down(n):
            try:
                return down(n + 1)
            except RecursionError:
                return n
        record("headroom", down(0))
"""


def _depths(pytester: pytest.Pytester, run: Callable[[], object]) -> dict[str, str]:
    out = pytester.path / "depths.txt"
    out.unlink(missing_ok=True)
    run()
    return dict(line.split("=") for line in out.read_text().splitlines())


@pytest.mark.parametrize("entry", ["python -m pytest", "pytest"])
@pytest.mark.parametrize("start", START_METHODS)
def test_a_test_runs_as_deep_in_the_stack_as_in_a_plain_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, start: str, entry: str
) -> None:
    """Item 9: a forked child ran its tests 21 frames deeper than a plain
    run, so a test of its recursion headroom failed under ``fork`` only.
    Each start method now gives a test the same headroom, started either
    way; a forked one runs on the very frames of the run (a spawned one may
    count one frame more where ``python -m``'s ``exec`` counts as one)."""
    pytester.makepyfile(test_depth=DEPTHS)
    monkeypatch.setenv("DEPTHS", str(pytester.path / "depths.txt"))
    script = Path(sys.executable).parent / "pytest"
    if entry == "pytest" and not script.exists():
        pytest.skip(f"no pytest script beside {sys.executable}")

    def run(*args: str) -> Callable[[], object]:
        if entry == "pytest":
            return lambda: pytester.run(script, "-p", "no:randomly", *args, timeout=TIMEOUT)
        return lambda: pytester.runpytest_subprocess("-p", "no:randomly", *args, timeout=TIMEOUT)

    plain = _depths(pytester, run("-p", "no:isolation", "test_depth.py"))
    file_mode = _depths(pytester, run(*FILE_MODE, f"--isolation-start={start}"))
    assert file_mode["headroom"] == plain["headroom"]
    if start == "fork":
        assert file_mode == plain


def test_a_killed_origin_of_the_fork_servers_is_contained(pytester: pytest.Pytester) -> None:
    """A test that kills the process its fork server was forked from (the
    origin, which forks a new server when one dies) and the server: its
    process carries on, the header says the other children are spawned, and
    they run."""
    killer = """
        import os, signal

        def test_kills_the_origin():
            with open(f"/proc/{os.getppid()}/stat") as stat:
                origin = int(stat.read().rpartition(")")[2].split()[1])
            os.kill(origin, signal.SIGKILL)
            os.kill(os.getppid(), signal.SIGKILL)
    """
    result = _run_after_a_killer(pytester, killer, "fork")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        ["*the origin of the fork servers has ended; each child is spawned instead"]
    )
    result.stdout.fnmatch_lines(["test_b.py .*", "test_c.py .*"])


def _run(cwd: Path, *args: str) -> str:
    """``python -m pytest ARGS`` as a person runs it: pytester's own runs put
    the working directory on ``PYTHONPATH``, which hides what ``sys.path[0]``
    does."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    return done.stdout + done.stderr


@pytest.mark.parametrize("start", START_METHODS)
def test_a_package_in_the_working_directory_is_found_beside_a_tests_conftest(
    pytester: pytest.Pytester, start: str
) -> None:
    """Issue 46, item 2: ``python -m pytest tests/test_pkg.py`` finds a
    package in the working directory (``sys.path[0]``); a spawned or
    forkserver child took the ``tests/`` folder pytest had put in front of
    ``sys.path`` for its conftest as its ``sys.path[0]``, and the import
    failed."""
    pytester.mkpydir("mypkg").joinpath("__init__.py").write_text("X = 1\n")
    tests = pytester.mkdir("tests")
    (tests / "conftest.py").write_text("")
    (tests / "test_pkg.py").write_text("import mypkg\n\ndef test_pkg():\n    assert mypkg.X == 1\n")
    assert "1 passed" in _run(pytester.path, "-p", "no:isolation", "tests/test_pkg.py")
    file_mode = ("-p", "isolation", "--isolation-mode=file", f"--isolation-start={start}")
    output = _run(pytester.path, *file_mode, "tests/test_pkg.py")
    assert "1 passed" in output, output


SIGNAL_FROM_CONFTEST = {
    "conftest": """
        import signal

        RECEIVED = []

        def pytest_configure(config):
            signal.signal(signal.SIGUSR1, lambda number, frame: RECEIVED.append(number))
    """,
    "test_signal": """
        import os
        import signal

        import conftest

        def test_the_suite_s_handler_runs():
            os.kill(os.getpid(), signal.SIGUSR1)
            assert conftest.RECEIVED == [signal.SIGUSR1]
    """,
}


@pytest.mark.parametrize("start", START_METHODS)
def test_a_signal_handler_a_conftest_sets_stays_the_suite_s(
    pytester: pytest.Pytester, start: str
) -> None:
    """Issue 46, item 3: a ``SIGUSR1`` handler set in ``pytest_configure``
    was taken over in a child by the traceback dump a timed-out child gets
    (faulthandler), so the test's own signal dumped tracebacks instead."""
    pytester.makepyfile(**SIGNAL_FROM_CONFTEST)
    oracle = pytester.runpytest_subprocess("-p", "no:isolation", "test_signal.py", timeout=TIMEOUT)
    oracle.assert_outcomes(passed=1)
    result = pytester.runpytest_subprocess(
        *FILE_MODE, f"--isolation-start={start}", timeout=TIMEOUT
    )
    result.assert_outcomes(passed=1)


SIGCHLD_IGNORED = {
    "conftest": """
        import signal

        def pytest_configure(config):
            signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    """,
    "test_exits": """
        import os

        def test_exits():
            os._exit(3)
    """,
    "test_ignored": """
        import signal

        def test_the_suite_s_setting():
            assert signal.getsignal(signal.SIGCHLD) == signal.SIG_IGN
    """,
}


@pytest.mark.parametrize("start", START_METHODS)
def test_a_conftest_that_ignores_sigchld_keeps_each_child_s_exit_status(
    pytester: pytest.Pytester, start: str
) -> None:
    """Issue 46, item 9: with ``SIGCHLD`` ignored the kernel reaped every
    child at once, and ``os._exit(3)`` was reported as "killed by signal 9"
    or "exited with code 0".  The children still see the suite's setting."""
    pytester.makepyfile(**SIGCHLD_IGNORED)
    result = pytester.runpytest_subprocess(
        *FILE_MODE, f"--isolation-start={start}", "-p", "no:randomly", timeout=TIMEOUT
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*exited with code 3 while running test_exits (call)*"])
    result.stdout.no_fnmatch_line("*SIGKILL*")
