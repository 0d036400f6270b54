"""File mode under pytest-xdist reports what a plain xdist run reports, and
crashes, retries, quarantine, leaks, shards and the run report still work."""

from __future__ import annotations

import json
import re

import pytest

from conftest import literal
from conftest import run_file_mode
from conftest import run_guard
from conftest import run_plain
from conftest import warned
from test_parity import junit_cases
from test_parity import mixed  # noqa: F401 - the fixture
from test_parity import short_summary

pytest.importorskip("xdist")

XDIST = ("-p", "xdist", "-p", "no:randomly")


def xdist_lines(result: pytest.RunResult) -> list[str]:
    """``[gw0] [ 20%] PASSED path::test`` lines, as sorted ``path::test PASSED``."""
    pattern = re.compile(r"^\[gw\d+\] \[\s*\d+%\] (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)")
    found = (pattern.match(line) for line in result.outlines)
    return sorted(f"{m[2]} {m[1]}" for m in found if m)


@pytest.mark.parametrize("dist", ["load", "loadfile", "worksteal"])
def test_parity_with_a_plain_xdist_run(mixed: pytest.Pytester, start: str, dist: str) -> None:  # noqa: F811
    args = (*XDIST, "-n", "2", f"--dist={dist}", "-v", "-rA")
    plain = run_plain(mixed, *args)
    isolated = run_file_mode(mixed, start, *args)
    assert isolated.parseoutcomes() == plain.parseoutcomes()
    assert isolated.parseoutcomes()["passed"] == 7
    assert xdist_lines(isolated) == xdist_lines(plain)
    assert len(xdist_lines(plain)) == 15
    assert short_summary(isolated) == short_summary(plain)
    assert isolated.ret == plain.ret == pytest.ExitCode.TESTS_FAILED
    isolated.stdout.fnmatch_lines(["isolation: file mode under pytest-xdist: *"])


def test_junit_and_tx_gateways(mixed: pytest.Pytester) -> None:  # noqa: F811
    plain = run_plain(mixed, "--junitxml=plain.xml")
    isolated = run_file_mode(
        mixed, "fork", *XDIST, "--tx", "2*popen", "--dist", "load", "--junitxml=isolated.xml"
    )
    assert isolated.ret == plain.ret == 1
    assert junit_cases(str(mixed.path / "isolated.xml")) == junit_cases(
        str(mixed.path / "plain.xml")
    )


CI_SUITE = {
    "test_crash": """
        import os, signal

        def test_before(): pass

        def test_segv():
            os.kill(os.getpid(), signal.SIGSEGV)
    """,
    "test_flaky": """
        import os, pathlib

        def test_once():
            mark = pathlib.Path(os.environ["FLAKY_MARK"])
            if not mark.exists():
                mark.write_text("")
                assert False
    """,
    "test_leak": """
        import os

        def test_env():
            os.environ["LEAKED_UNDER_XDIST"] = "1"
    """,
    "test_known": "def test_known(): assert 0\n",
    "test_fine": "def test_a(): pass\ndef test_b(): pass\n",
}


def test_crash_retry_quarantine_leaks_and_report_under_xdist(
    pytester: pytest.Pytester, start: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(**CI_SUITE)
    pytester.path.joinpath("q.txt").write_text("test_known.py  # bug 9\n")
    monkeypatch.setenv("FLAKY_MARK", str(pytester.path.parent / f"{pytester.path.name}.mark"))
    result = run_file_mode(
        pytester,
        start,
        *XDIST,
        "-n",
        "2",
        "--isolation-retries=1",
        "--isolation-quarantine=q.txt",
        "--isolation-report=run.json",
    )
    assert result.ret == 1
    result.assert_outcomes(passed=5, failed=1)
    assert result.parseoutcomes()["quarantined"] == 1
    result.stdout.fnmatch_lines(
        [
            "test_flaky.py::test_once: attempt 1 failed, attempt 2 passed",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "test_crash.py: attempt 1: crashed (SIGSEGV) in test_segv; "
            "attempt 2: crashed (SIGSEGV) in test_segv",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*= isolation: * by 1 test =*",
            literal("[env] os.environ['LEAKED_UNDER_XDIST'] (was unset, now '1')*"),
            "  by test_leak.py::test_env",
        ]
    )
    result.stdout.fnmatch_lines(["QUARANTINED test_known.py::test_known - bug 9 (q.txt:1)"])
    report = json.loads((pytester.path / "run.json").read_text())
    files = {entry["path"]: entry for entry in report["files"]}
    assert set(files) == {f"{name}.py" for name in CI_SUITE}
    assert (files["test_crash.py"]["outcome"], files["test_crash.py"]["attempts"]) == ("crashed", 2)
    assert files["test_flaky.py"]["outcome"] == "flaky"
    assert files["test_leak.py"]["leaks"] == 1
    assert report["totals"]["tests"]["quarantined"] == 1
    assert report["start_method"] == start


def test_the_guard_in_plain_xdist_workers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_clean="import os\ndef test_reads(): assert os.getcwd()\n",
        test_more="def test_a(): pass\ndef test_b(): pass\n",
        test_leak="import os\ndef test_env(): os.environ['LEAKED_BY_A_WORKER'] = '1'\n",
    )
    result = run_guard(pytester, *XDIST, "-n", "2")
    result.assert_outcomes(passed=4)
    assert warned(result) == 1
    result.stdout.fnmatch_lines(
        ["*= isolation: * by 1 test =*", "*", "  by test_leak.py::test_env"]
    )
    result.stdout.no_fnmatch_line("*test_clean.py::test_reads leaked*")
    clean = run_guard(pytester, *XDIST, "-n", "2", "test_clean.py", "test_more.py")
    clean.assert_outcomes(passed=3)
    clean.stdout.no_fnmatch_line("*leaked*")


def test_shard_first_then_distribute(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(**{f"test_{n}": f"def test_{n}(): pass\n" for n in range(7)})
    ran = []
    for index in (1, 2):
        result = run_file_mode(
            pytester,
            "fork",
            *XDIST,
            "-n",
            "2",
            "-v",
            f"--isolation-shard={index}/2",
            "--isolation-shard-strategy=round-robin",
        )
        assert result.ret == 0
        mine = 4 if index == 1 else 3  # round-robin over the 7 files, sorted
        result.stdout.fnmatch_lines(
            [
                f"isolation: shard {index}/2 (round-robin, from --isolation-shard): "
                f"{mine} test files, split in each worker",
                f"2 workers [{mine} items]",
            ]
        )
        ran.append({line.split()[-1] for line in result.outlines if " PASSED " in line})
    assert ran[0].isdisjoint(ran[1])
    assert ran[0] | ran[1] == {f"test_{n}.py::test_{n}" for n in range(7)}


def test_the_xdist_worker_plugin_is_still_found(pytester: pytest.Pytester) -> None:
    """The fence of ``core.xdist.worker_interactor``: fails loudly if
    pytest-xdist renames its worker plugin, its ``sendevent`` or its
    ``item_index``."""
    pytester.makepyfile(
        test_fence="""
        from pytest_isolation.core.pytest_private import worker_interactor

        def test_found(request):
            interactor = worker_interactor(request.config)
            assert interactor is not None
            items = interactor.session.items
            assert items[interactor.item_index].nodeid == request.node.nodeid
        """
    )
    result = run_guard(pytester, *XDIST, "-n", "1")
    result.assert_outcomes(passed=1)
