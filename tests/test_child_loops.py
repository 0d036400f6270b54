"""A conftest's ``pytest_collection`` and ``pytest_runtestloop`` run in each
file's process, as in ``pytest FILE`` (issue 46 item 1): under every start
method and under pytest-xdist, compared with the per-file loop."""

from __future__ import annotations

import pytest

from conftest import FILE_MODE
from conftest import TIMEOUT

START_METHODS = ["fork", "forkserver", "spawn"]

SUITE = {
    "conftest": """
        import os
        import helper

        def pytest_collection(session):
            helper.STATE["collection"] = "conftest"

        def pytest_runtestloop(session):
            os.environ["LOOP_RAN"] = "1"
            helper.STATE["items"] = len(session.items)
            if helper.STATE.get("loop_calls", 0):
                raise AssertionError("the loop hook ran twice in this process")
            helper.STATE["loop_calls"] = 1
    """,
    "helper": "STATE = {}\n",
    "test_a": """
        import os
        import helper

        AT_IMPORT = dict(helper.STATE)

        def test_collection_hook_ran_before_import():
            assert AT_IMPORT == {"collection": "conftest"}

        def test_environment_of_the_loop_hook():
            assert os.environ.get("LOOP_RAN") == "1"

        def test_loop_hook_saw_this_file_s_items():
            assert helper.STATE["items"] == 3
    """,
}


def _suite(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(**SUITE)
    pytester.makepyfile(test_b=SUITE["test_a"])


def _loop_oracle(pytester: pytest.Pytester) -> None:
    for name in ("test_a.py", "test_b.py"):
        result = pytester.runpytest_subprocess("-p", "no:isolation", name, timeout=TIMEOUT)
        result.assert_outcomes(passed=3)


@pytest.mark.parametrize("start", START_METHODS)
def test_a_conftest_s_loop_and_collection_hooks_run_in_each_file_s_process(
    pytester: pytest.Pytester, start: str
) -> None:
    _suite(pytester)
    _loop_oracle(pytester)
    result = pytester.runpytest_subprocess(
        *FILE_MODE, f"--isolation-start={start}", timeout=TIMEOUT
    )
    result.assert_outcomes(passed=6)


def test_they_run_in_each_file_s_process_under_xdist(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    _suite(pytester)
    _loop_oracle(pytester)
    result = pytester.runpytest_subprocess(*FILE_MODE, "-p", "xdist", "-n", "2", timeout=TIMEOUT)
    result.assert_outcomes(passed=6)


REPLACING = """
    def pytest_runtestloop(session):
        if session.config.getoption("verbose") > 5:
            return True
"""


@pytest.mark.parametrize("where", ["rootdir", "subdirectory"])
def test_a_conftest_that_replaces_the_loop_is_refused_before_any_test_runs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    folder = pytester.path if where == "rootdir" else pytester.mkdir("sub")
    (folder / "conftest.py").write_text(REPLACING.replace("\n    ", "\n"))
    (folder / "test_x.py").write_text(
        "import os\n\ndef test_x():\n    open(os.environ['MARK'], 'w').close()\n"
    )
    mark = pytester.path / "ran"
    monkeypatch.setenv("MARK", str(mark))
    result = pytester.runpytest_subprocess(*FILE_MODE, timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    conftest = folder / "conftest.py"
    result.stdout.fnmatch_lines(
        [
            "*isolation: --isolation-mode=file cannot run a suite whose pytest_runtestloop "
            f"replaces pytest's run loop ({conftest} returns a value from it)*"
        ]
    )
    assert not mark.exists()


def test_a_replacing_loop_is_refused_under_xdist(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makeconftest(REPLACING)
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess(*FILE_MODE, "-p", "xdist", "-n", "2", timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["*replaces pytest's run loop (*conftest.py returns a value*"])
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


def test_a_loop_hook_that_returns_none_explicitly_is_not_refused(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(
        """
        def pytest_runtestloop(session):
            def inner():
                return True
            if inner():
                return None
        """
    )
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess(*FILE_MODE, timeout=TIMEOUT)
    result.assert_outcomes(passed=1)
