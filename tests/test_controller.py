"""File mode behaviour: one process per file, run control, crashes, interrupts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FILE_MODE
from conftest import TIMEOUT
from conftest import run_file_mode
from conftest import run_plain
from pytest_isolation.filemode.parent.collecting import _CHILD_SELECTION_OPTIONS
from pytest_isolation.filemode.parent.collecting import selection_deferred_to_children
from pytest_isolation.filemode.parent.starting import shared_basetemp

RECORD_PIDS = """
    import os
    from pathlib import Path

    def test_record():
        with open(Path(__file__).parent / "pids.txt", "a") as out:
            out.write(f"{__name__} {os.getpid()}\\n")
"""


def test_each_file_runs_in_its_own_process(pytester: pytest.Pytester, start: str) -> None:
    for name in ("test_one", "test_two", "test_three"):
        pytester.makepyfile(**{name: RECORD_PIDS})
    pytester.makeconftest(
        """
        import os, sys
        from pathlib import Path

        def pytest_sessionfinish(session):
            if os.environ.get("PYTEST_ISOLATION_CHILD") is None:
                imported = sorted(m for m in sys.modules if m.startswith("test_"))
                Path("parent.txt").write_text(f"{os.getpid()} {imported}")
        """
    )
    result = run_file_mode(pytester, start)
    result.assert_outcomes(passed=3)
    pids = dict(line.split() for line in (pytester.path / "pids.txt").read_text().splitlines())
    assert sorted(pids) == ["test_one", "test_three", "test_two"]
    assert len(set(pids.values())) == 3
    parent_pid, imported = (pytester.path / "parent.txt").read_text().split(" ", 1)
    assert parent_pid not in pids.values()
    assert imported == "[]"


POLLUTER = """
    import sys
    from unittest import mock

    sys.modules["json"] = mock.MagicMock(name="fake json")
    mock.patch("os.getcwd", return_value="/nowhere").start()

    def test_polluter_sees_its_mocks():
        import json, os
        assert isinstance(json, mock.MagicMock)
        assert os.getcwd() == "/nowhere"
"""

VICTIM = """
    import json
    import os
    from unittest import mock

    def test_victim_sees_real_modules():
        assert not isinstance(json, mock.MagicMock)
        assert json.loads("[1]") == [1]
        assert os.getcwd() != "/nowhere"
"""


def test_module_level_mocks_do_not_reach_other_files(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(test_a_polluter=POLLUTER, test_b_victim=VICTIM)
    assert run_plain(pytester, "-p", "no:randomly").ret == pytest.ExitCode.TESTS_FAILED
    result = run_file_mode(pytester, start, "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK


def test_header_names_start_method(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(test_one="def test_a(): pass\n")
    result = run_file_mode(pytester, start)
    result.stdout.fnmatch_lines(
        [f"isolation: file mode, each test file in its own process (start method {start}:*"]
    )


def test_collected_line_is_explained(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_one="def test_a(): pass\ndef test_b(): pass\n")
    result = pytester.runpytest_subprocess(*FILE_MODE, timeout=TIMEOUT)
    result.stdout.fnmatch_lines(
        [
            "collected 1 item",
            "isolation: the item is a test file, collected and run in its own process; "
            "its tests are counted as they run",
        ]
    )
    quiet = pytester.runpytest_subprocess(*FILE_MODE, "-q", timeout=TIMEOUT)
    quiet.stdout.no_fnmatch_line("isolation: *")


def test_auto_uses_fork_on_linux(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_one="def test_a(): pass\n")
    result = pytester.runpytest_subprocess(*FILE_MODE, timeout=TIMEOUT)
    expected = "fork: auto" if sys.platform == "linux" else "spawn: auto*"
    result.stdout.fnmatch_lines([f"isolation: *(start method {expected})"])


def test_auto_forks_from_a_fresh_interpreter_when_threads_run(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import threading
        stop = threading.Event()
        threading.Thread(target=stop.wait, daemon=True).start()
        """
    )
    pytester.makepyfile(test_one="def test_a(): pass\n")
    result = pytester.runpytest_subprocess(*FILE_MODE, timeout=TIMEOUT)
    result.stdout.fnmatch_lines(["isolation: *(start method forkserver: auto: other threads*"])
    result.assert_outcomes(passed=1)


def test_exitfirst_starts_no_new_file(pytester: pytest.Pytester, start: str) -> None:
    marker = 'open("started.txt", "a").write(__name__ + "\\n")\n'
    pytester.makepyfile(
        test_a=marker + "def test_1(): assert False\ndef test_2(): pass\n",
        test_b=marker + "def test_3(): pass\n",
    )
    result = run_file_mode(pytester, start, "-x", "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*stopping after 1 failures*"])
    assert (pytester.path / "started.txt").read_text().split() == ["test_a"]
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_maxfail_counts_across_files(pytester: pytest.Pytester, start: str) -> None:
    failing = "def test_1(): assert False\ndef test_2(): assert False\ndef test_3(): pass\n"
    pytester.makepyfile(test_a=failing, test_b=failing, test_c=failing)
    result = run_file_mode(pytester, start, "--maxfail=3", "-p", "no:randomly")
    result.assert_outcomes(failed=3, passed=1)
    result.stdout.fnmatch_lines(["*stopping after 3 failures*"])


def test_teardown_runs_when_maxfail_stops_a_file(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(
        test_a="""
        import pytest

        @pytest.fixture(scope="module")
        def resource():
            yield
            open("torn_down.txt", "w").write("yes")

        def test_1(resource): assert False
        def test_2(resource): pass
        """
    )
    result = run_file_mode(pytester, start, "-x")
    result.assert_outcomes(failed=1)
    assert (pytester.path / "torn_down.txt").read_text() == "yes"


def test_last_failed_across_runs(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(
        test_a="def test_ok(): pass\ndef test_bad(): assert False\n",
        test_b="def test_fine(): pass\n",
    )
    first = run_file_mode(pytester, start)
    first.assert_outcomes(passed=2, failed=1)
    second = run_file_mode(pytester, start, "--lf", "-v")
    second.assert_outcomes(failed=1)  # as plain: nothing deselected, in every start method
    second.stdout.fnmatch_lines(["test_a.py::test_bad FAILED*"])
    second.stdout.no_fnmatch_line("*test_fine*")
    second.stdout.no_fnmatch_line("*test_ok*")
    third = run_file_mode(pytester, start, "--ff", "-v", "-p", "no:randomly")
    third.stdout.fnmatch_lines(["test_a.py::test_bad FAILED*", "test_a.py::test_ok PASSED*"])


def test_runs_without_the_cache_plugin(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(test_a="def test_1(): pass\n")
    run_file_mode(pytester, start, "-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_collection_error_is_reported_and_other_files_run(
    pytester: pytest.Pytester, start: str
) -> None:
    pytester.makepyfile(
        test_a="import does_not_exist\ndef test_1(): pass\n",
        test_b="def test_2(): pass\n",
        test_c="def test_3(:\n",
    )
    plain = run_plain(pytester, "--continue-on-collection-errors")
    isolated = run_file_mode(pytester, start)
    assert isolated.parseoutcomes() == plain.parseoutcomes() == {"passed": 1, "errors": 2}
    isolated.stdout.fnmatch_lines(["*ERROR collecting test_a.py*", "*No module named*"])
    isolated.stdout.fnmatch_lines(["*ERROR collecting test_c.py*", "*SyntaxError*"])
    assert isolated.ret == plain.ret == pytest.ExitCode.TESTS_FAILED


def test_module_level_skip(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(
        test_a="import pytest\npytest.skip('no', allow_module_level=True)\n",
        test_b="def test_2(): pass\n",
    )
    plain = run_plain(pytester)
    isolated = run_file_mode(pytester, start)
    assert isolated.parseoutcomes() == plain.parseoutcomes() == {"passed": 1, "skipped": 1}


def test_progress_never_exceeds_100_and_ends_at_100(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(
        test_a="def test_1(): pass\n",
        test_b="\n".join(f"def test_{i}(): pass" for i in range(12)),
        test_c="import pytest\n@pytest.mark.parametrize('x', range(7))\ndef test_p(x): pass\n",
    )
    result = run_file_mode(pytester, start, "-v", "-p", "no:randomly")
    percents = [int(p) for p in _percentages(result.outlines)]
    assert len(percents) == 20
    assert max(percents) <= 100
    assert percents[-1] == 100
    quiet = run_file_mode(pytester, start, "-p", "no:randomly")
    quiet_percents = [int(p) for p in _percentages(quiet.outlines)]
    assert max(quiet_percents) <= 100
    assert quiet_percents[-1] == 100


def _percentages(lines: list[str]) -> list[str]:
    import re

    return [m[1] for line in lines if (m := re.search(r"\[\s*(\d+)%\]$", line))]


def test_no_capture_passes_output_through(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(
        test_a="""
        import sys
        def test_talk():
            print("hello from the child")
            sys.stderr.write("complaint from the child\\n")
        """
    )
    result = run_file_mode(pytester, start, "-s")
    result.stdout.fnmatch_lines(["*hello from the child*"])
    result.stderr.fnmatch_lines(["*complaint from the child*"])
    result.assert_outcomes(passed=1)


def test_session_fixture_runs_once_per_file(pytester: pytest.Pytester, start: str) -> None:
    pytester.makeconftest(
        """
        import os, pytest

        @pytest.fixture(scope="session")
        def setup_count():
            with open("setups.txt", "a") as out:
                out.write(f"{os.getpid()}\\n")
        """
    )
    for name in ("test_a", "test_b"):
        pytester.makepyfile(
            **{name: "def test_1(setup_count): pass\ndef test_2(setup_count): pass"}
        )
    run_file_mode(pytester, start).assert_outcomes(passed=4)
    assert len((pytester.path / "setups.txt").read_text().split()) == 2


@pytest.mark.parametrize("import_mode", ["prepend", "importlib"])
def test_import_modes_and_nested_conftests(
    pytester: pytest.Pytester, start: str, import_mode: str
) -> None:
    pytester.makeini(
        """
        [pytest]
        testpaths = suite
        python_files = check_*.py
        markers = known: a declared marker
        """
    )
    pytester.makepyfile(
        **{
            "suite/conftest.py": "pytest_plugins = ['helpers']\n",
            "helpers.py": "import pytest\n@pytest.fixture\ndef helper(): return 'h'\n",
            "suite/deep/er/conftest.py": "import pytest\n@pytest.fixture\ndef deep(): return 'd'\n",
            "suite/deep/er/check_deep.py": (
                "import pytest\n@pytest.mark.known\ndef test_deep(helper, deep):\n"
                "    assert helper + deep == 'hd'\n"
            ),
            "suite/check_top.py": "def test_top(helper): assert helper == 'h'\n",
            "suite/test_ignored.py": "def test_never(): assert False\n",
        }
    )
    args = (f"--import-mode={import_mode}", "--strict-markers")
    plain = run_plain(pytester, *args)
    isolated = run_file_mode(pytester, start, *args)
    assert isolated.parseoutcomes() == plain.parseoutcomes() == {"passed": 2}


def test_doctest_modules_run_in_children(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(
        mod='def double(x):\n    """\n    >>> double(2)\n    4\n    >>> double(3)\n    7\n    """\n'
        "    return 2 * x\n",
        test_a='def test_1():\n    """\n    >>> 1 + 1\n    2\n    """\n',
    )
    plain = run_plain(pytester, "--doctest-modules")
    isolated = run_file_mode(pytester, start, "--doctest-modules", "-v")
    assert isolated.parseoutcomes() == plain.parseoutcomes() == {"passed": 2, "failed": 1}
    isolated.stdout.fnmatch_lines(["mod.py::mod.double FAILED*"])


def test_strict_markers_error_matches_plain(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(test_a="import pytest\n@pytest.mark.undeclared\ndef test_1(): pass\n")
    plain = run_plain(pytester, "--strict-markers")
    isolated = run_file_mode(pytester, start, "--strict-markers")
    assert isolated.parseoutcomes() == plain.parseoutcomes() == {"errors": 1}
    isolated.stdout.fnmatch_lines(["*'undeclared' not found in `markers`*"])


def test_node_id_not_found_is_a_usage_error(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(test_a="def test_1(): pass\n", test_b="def test_2(): pass\n")
    result = run_file_mode(pytester, start, "test_a.py::test_nope", "test_b.py")
    result.stdout.fnmatch_lines(["ERROR: not found: test_a.py::test_nope"])
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_pytest_exit_in_a_child_ends_the_run(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(
        test_a="import pytest\ndef test_1(): pytest.exit('enough', returncode=3)\n",
        test_b="def test_2(): pass\n",
    )
    plain = run_plain(pytester, "-p", "no:randomly")
    isolated = run_file_mode(pytester, start, "-p", "no:randomly")
    assert isolated.ret == plain.ret == 3
    isolated.stdout.fnmatch_lines(["*_pytest.outcomes.Exit: enough*"])
    isolated.stdout.no_fnmatch_line("*test_b*")


def test_keyboard_interrupt_in_a_test_interrupts_the_run(
    pytester: pytest.Pytester, start: str
) -> None:
    pytester.makepyfile(test_a="def test_1(): raise KeyboardInterrupt\n")
    result = run_file_mode(pytester, start)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*KeyboardInterrupt*"])


def test_tmp_path_shares_one_basetemp(pytester: pytest.Pytester, start: str) -> None:
    test = "def test_{0}(tmp_path):\n    (tmp_path / 'made').write_text('{0}')\n"
    pytester.makepyfile(test_a=test.format("a"), test_b=test.format("b"))
    basetemp = pytester.path / "base"
    result = run_file_mode(pytester, start, f"--basetemp={basetemp}", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    made = sorted(p.read_text() for p in basetemp.rglob("made"))
    assert made == ["a", "b"]


def test_basetemp_fence(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfigure(f"--basetemp={pytester.path / 'bt'}")
    assert shared_basetemp(config) == (pytester.path / "bt").resolve()


def test_disabled_plugin_gives_a_plain_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a_polluter=POLLUTER, test_b_victim=VICTIM)
    result = pytester.runpytest_subprocess(
        "-p", "no:isolation", "-p", "no:randomly", timeout=TIMEOUT
    )
    result.stdout.no_fnmatch_line("isolation: *")
    result.assert_outcomes(passed=1, failed=1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--isolation-mode=bogus",), "--isolation-mode: invalid value 'bogus'; choose from*"),
        (("--isolation-mode=file", "--isolation-start=clone"), "--isolation-start: invalid*"),
        (("-o", "isolation_mode=sometimes"), "isolation_mode (ini): invalid value 'sometimes'*"),
        (("--isolation-mode=file", "--pdb"), "*cannot be combined with --pdb*"),
    ],
)
def test_bad_values_are_usage_errors(
    pytester: pytest.Pytester, args: tuple[str, ...], message: str
) -> None:
    pytester.makepyfile(test_a="def test_1(): pass\n")
    result = pytester.runpytest_subprocess("-p", "isolation", *args, timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])


def test_selection_options_fence(pytester: pytest.Pytester) -> None:
    """Breaks loudly if pytest renames the option dests file mode defers to children."""
    config = pytester.parseconfig("-k", "k-expr", "-m", "m-expr", "--deselect", "x.py")
    for dest in _CHILD_SELECTION_OPTIONS:
        assert hasattr(config.option, dest), f"pytest no longer has option dest {dest!r}"
    with selection_deferred_to_children(config):
        assert (config.option.keyword, config.option.markexpr) == ("", "")
        assert config.option.deselect is None
    assert (config.option.keyword, config.option.markexpr) == ("k-expr", "m-expr")
    assert config.option.deselect == ["x.py"]


def wait_for(path: Path, deadline: float) -> None:
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_ctrl_c_ends_children_and_reports_interrupted(
    pytester: pytest.Pytester, start: str
) -> None:
    pytester.makepyfile(
        test_a="def test_fast(): pass\n",
        test_b="""
        import os, subprocess, sys, time
        from pathlib import Path

        def test_hangs():
            sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            Path("pids.txt").write_text(f"{os.getpid()} {sleeper.pid}")
            time.sleep(600)
        """,
    )
    command = [sys.executable, "-m", "pytest", *FILE_MODE, f"--isolation-start={start}"]
    command += ["-p", "no:randomly"]
    # The run takes SIGINT with its default handler: a shell's background job
    # (``cmd &`` without job control, as CI may run) ignores SIGINT, and a
    # Python started with it ignored never raises KeyboardInterrupt.
    before = signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        process = subprocess.Popen(
            command, cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
    finally:
        signal.signal(signal.SIGINT, before)
    try:
        wait_for(pytester.path / "pids.txt", time.monotonic() + TIMEOUT)
        time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=TIMEOUT)
    finally:
        process.kill()
    assert process.returncode == pytest.ExitCode.INTERRUPTED
    assert "KeyboardInterrupt" in output
    assert "1 passed" in output
    for pid in map(int, (pytester.path / "pids.txt").read_text().split()):
        assert not _alive(pid), f"process {pid} survived the interrupt"
    assert _survivors(str(pytester.path)) == []


def _survivors(marker: str) -> list[str]:
    """Command lines of live processes started in ``marker`` (children, fork server)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if proc.name.isdigit() and int(proc.name) != os.getpid() and cwd.startswith(marker):
            found.append(cmdline)
    return found


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_no_process_outlives_the_run(pytester: pytest.Pytester, start: str) -> None:
    for name in ("test_a", "test_b", "test_c"):
        pytester.makepyfile(**{name: "def test_1(): pass\n"})
    command = [sys.executable, "-m", "pytest", *FILE_MODE, f"--isolation-start={start}"]
    subprocess.run(command, cwd=pytester.path, capture_output=True, timeout=TIMEOUT, check=True)
    time.sleep(0.2)
    assert _survivors(str(pytester.path)) == []


def _alive(pid: int) -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        time.sleep(0.05)
    return True


def test_an_item_run_in_the_parent_after_a_file_finds_its_setup_torn_down(
    pytester: pytest.Pytester, start: str
) -> None:
    """Items of non-Python collectors run in the parent; between two of them
    in different directories, with a test file's placeholder in between, the
    first one's directory is torn down (pygments' snippet files)."""
    pytester.makeconftest(
        """
        import pytest

        class TxtItem(pytest.Item):
            def runtest(self):
                pass

        class TxtFile(pytest.File):
            def collect(self):
                yield TxtItem.from_parent(self, name="case")

        def pytest_collect_file(file_path, parent):
            if file_path.suffix == ".txt":
                return TxtFile.from_parent(parent, path=file_path)
        """
    )
    first = pytester.mkdir("a")
    first.joinpath("one.txt").write_text("")
    first.joinpath("test_x.py").write_text("def test_x(): pass\n")  # after one.txt
    pytester.mkdir("c").joinpath("two.txt").write_text("")
    result = run_file_mode(pytester, start, "-p", "no:randomly")
    result.assert_outcomes(passed=3)


def test_session_setupstate_tears_down_towards_an_item(pytester: pytest.Pytester) -> None:
    """``tear_down_towards`` needs ``session._setupstate.teardown_exact(nextitem)``."""
    items, _ = pytester.inline_genitems(pytester.makepyfile("def test_1(): pass\n"))
    assert callable(items[0].session._setupstate.teardown_exact)
