"""Per-file and per-directory control of file mode: files alone, in a named
group's process, or together (``off``), set by marker, conftest, ini pattern,
the environment and the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import TIMEOUT
from conftest import literal
from conftest import run_file_mode
from conftest import warned

#: Each test records its file's name and its process id.
RECORD = """\
import os
from pathlib import Path

{mark}

def test_record(pytestconfig):
    with open(pytestconfig.rootpath / "pids.txt", "a") as out:
        out.write(f"{{Path(__file__).stem}} {{os.getpid()}}\\n")
"""


def _file(pytester: pytest.Pytester, name: str, mark: str = "", sub: str = "") -> None:
    directory = pytester.path / sub
    directory.mkdir(exist_ok=True)
    (directory / f"{name}.py").write_text(RECORD.format(mark=mark))


def _pids(pytester: pytest.Pytester) -> dict[str, str]:
    lines = (pytester.path / "pids.txt").read_text().splitlines()
    return dict(line.split() for line in lines)


def _processes(pids: dict[str, str]) -> list[set[str]]:
    """The files of each process, as sets."""
    by_pid: dict[str, set[str]] = {}
    for name, pid in pids.items():
        by_pid.setdefault(pid, set()).add(name)
    return sorted(by_pid.values(), key=sorted)


def test_groups_off_files_and_alone_files_run_where_they_are_placed(
    pytester: pytest.Pytester, start: str
) -> None:
    pytester.makeini(
        """
        [pytest]
        isolation_paths =
            db: group=db
            test_legacy_*: off
        """
    )
    _file(pytester, "test_alone_1")
    _file(pytester, "test_alone_2")
    _file(pytester, "test_legacy_1")
    _file(pytester, "test_legacy_2")
    _file(
        pytester, "test_marked_off", "import pytest\npytestmark = pytest.mark.isolation(mode='off')"
    )
    _file(pytester, "test_db_1", sub="db")
    _file(pytester, "test_db_2", sub="db")
    _file(pytester, "test_api_1", "import pytest\npytestmark = pytest.mark.isolation(group='api')")
    _file(pytester, "test_api_2", "import pytest\npytestmark = pytest.mark.isolation(group='api')")
    result = run_file_mode(pytester, start, "-v")
    result.assert_outcomes(passed=9)
    result.stdout.fnmatch_lines(
        [
            "isolation: 9 test files: 2 each in its own process, 4 in 2 groups, a process per "
            "group (api: 2, db: 2), 3 together in one process (mode off)"
        ]
    )
    processes = _processes(_pids(pytester))
    assert processes == [
        {"test_alone_1"},
        {"test_alone_2"},
        {"test_api_1", "test_api_2"},
        {"test_db_1", "test_db_2"},
        {"test_legacy_1", "test_legacy_2", "test_marked_off"},
    ]


def test_a_group_runs_as_a_plain_run_of_its_files(pytester: pytest.Pytester, start: str) -> None:
    """Session fixtures once per process, module state seen by later files in
    collection order, and the other files moved after the group's first."""
    pytester.makeconftest(
        """
        import pytest
        isolation_group = "shared"
        SETUPS = []

        @pytest.fixture(scope="session")
        def session_value():
            SETUPS.append(1)
            return len(SETUPS)
        """
    )
    pytester.makepyfile(
        test_a="""
            import builtins
            def test_first(session_value):
                builtins.seen_by_a = True
                assert session_value == 1
        """,
        test_b="""
            import pytest
            pytestmark = pytest.mark.isolation(mode="file")
            import builtins
            def test_alone():
                assert not hasattr(builtins, "seen_by_a")
        """,
        test_c="""
            import builtins
            def test_later(session_value):
                assert builtins.seen_by_a
                assert session_value == 1
        """,
    )
    result = run_file_mode(pytester, start, "-v", "--isolation-leaks=off")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*test_a.py::test_first PASSED*",
            "*test_c.py::test_later PASSED*",
            "*test_b.py::test_alone PASSED*",
        ]
    )


def test_the_guard_watches_imports_and_files_in_a_shared_process(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\nisolation_paths = *: off\n")
    pytester.makepyfile(
        test_a="""
            import os
            os.environ["LEAKED_AT_IMPORT"] = "1"
            def test_a():
                pass
        """,
        test_b="""
            import os
            def test_b():
                os.environ["LEAKED_BY_TEST"] = "1"
        """,
    )
    result = run_file_mode(pytester, "fork")
    result.assert_outcomes(passed=2)
    assert warned(result) == 2
    result.stdout.fnmatch_lines(
        [
            literal("*test_a.py (at import) leaked os.environ['LEAKED_AT_IMPORT']*"),
            literal("*test_b.py::test_b leaked os.environ['LEAKED_BY_TEST']*"),
        ]
    )


def test_a_crash_in_a_group_resumes_the_file_and_the_group(
    pytester: pytest.Pytester, start: str
) -> None:
    pytester.makeconftest("isolation_group = 'g'")
    pytester.makepyfile(
        test_a="""
            import os
            def test_before():
                pass
            def test_crash():
                os._exit(3)
            def test_after():
                pass
        """,
        test_b="""
            def test_next_file():
                pass
        """,
    )
    result = run_file_mode(pytester, start, "-v")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_a.py::test_before PASSED*",
            "*test_a.py::test_crash FAILED*",
            "*test_a.py::test_after PASSED*",
            "*test_b.py::test_next_file PASSED*",
        ]
    )


def test_exitfirst_stops_inside_a_group(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("isolation_group = 'g'")
    pytester.makepyfile(
        test_a="def test_fails():\n    assert False\n",
        test_b="def test_never():\n    pass\n",
    )
    result = run_file_mode(pytester, "fork", "-x")
    result.assert_outcomes(failed=1)
    assert "test_never" not in result.stdout.str()


def test_node_arguments_select_inside_a_group(pytester: pytest.Pytester, start: str) -> None:
    pytester.makeconftest("isolation_group = 'g'")
    pytester.makepyfile(
        test_a="def test_one():\n    pass\n\ndef test_two():\n    pass\n",
        test_b="def test_three():\n    pass\n\ndef test_four():\n    pass\n",
    )
    result = run_file_mode(
        pytester, start, "-v", "test_a.py::test_two", "test_b.py", "-k", "not four"
    )
    result.assert_outcomes(passed=2, deselected=1)
    result.stdout.fnmatch_lines(["*test_a.py::test_two PASSED*", "*test_b.py::test_three PASSED*"])


def test_the_marker_beats_the_conftest_which_beats_the_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nisolation_paths = sub: group=from_ini\n")
    sub = pytester.mkdir("sub")
    deeper = sub / "deeper"
    deeper.mkdir()
    (deeper / "conftest.py").write_text("isolation_group = 'from_conftest'\n")
    for name, text in {
        sub / "test_ini_1.py": "",
        sub / "test_ini_2.py": "",
        deeper / "test_conftest_1.py": "",
        deeper / "test_conftest_2.py": "",
        deeper
        / "test_marked.py": "import pytest\npytestmark = pytest.mark.isolation(mode='file')\n",
    }.items():
        name.write_text(text + "import os\ndef test_pid():\n    print('PID', os.getpid())\n")
    result = run_file_mode(pytester, "fork", "-s", "-v")
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(
        [
            "isolation: 5 test files: 1 each in its own process, 4 in 2 groups, a process per "
            "group (from_conftest: 2, from_ini: 2)"
        ]
    )


def test_conflicting_patterns_fail_the_file_naming_both(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nisolation_paths =\n    test_a*: off\n    test_*b.py: group=x\n")
    pytester.makepyfile(test_ab="def test_x():\n    pass\n", test_c="def test_y():\n    pass\n")
    result = run_file_mode(pytester, "fork")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        [
            "*ERROR collecting test_ab.py*",
            "*isolation: isolation_paths (ini): 'test_a*: off' and 'test_*b.py: group=x' both "
            "match 'test_ab.py' and disagree*",
        ]
    )


def test_a_bad_pattern_line_stops_the_run_before_anything_runs(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nisolation_paths = tests/legacy\n")
    pytester.makepyfile(test_a="def test_x():\n    pass\n")
    result = run_file_mode(pytester, "fork")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: isolation_paths (ini) line 'tests/legacy': expected 'GLOB: MODE'*"]
    )


def test_a_marker_built_at_import_time_fails_the_file(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_a="""
            import pytest
            pytestmark = [pytest.mark.isolation(**{"mode": "off"})]
            def test_x():
                pass
        """
    )
    result = run_file_mode(pytester, "fork")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*test_a.py: its pytestmark places it 'off' once imported*"])


def test_mode_on_a_test_function_is_refused(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_a="""
            import pytest
            @pytest.mark.isolation(mode="off")
            def test_x():
                pass
        """
    )
    result = run_file_mode(pytester, "fork")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*isolation(mode=...) places a whole file; give it in the module*"]
    )


def test_isolation_paths_opt_files_in_from_a_plain_run(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nisolation_paths = test_own*: file\n")
    _file(pytester, "test_own_1")
    _file(pytester, "test_own_2")
    _file(pytester, "test_rest_1")
    _file(pytester, "test_rest_2")
    result = pytester.runpytest_subprocess("-p", "isolation", "-v", timeout=TIMEOUT)
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "isolation: file mode, set by isolation_paths (ini) line 'test_own*: file': *",
            "isolation: 4 test files: 2 each in its own process, 2 together in one process*",
        ]
    )
    assert _processes(_pids(pytester)) == [
        {"test_own_1"},
        {"test_own_2"},
        {"test_rest_1", "test_rest_2"},
    ]


def test_a_late_opt_in_in_a_plain_run_is_said(pytester: pytest.Pytester) -> None:
    """A marker (or a conftest collected late) cannot turn file mode on: the
    run stays plain, and says so."""
    _file(pytester, "test_a", "import pytest\npytestmark = pytest.mark.isolation(group='db')")
    _file(pytester, "test_b", "import pytest\npytestmark = pytest.mark.isolation(mode='file')")
    _file(pytester, "test_c")
    result = pytester.runpytest_subprocess("-p", "isolation", timeout=TIMEOUT)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "isolation: *test_a.py: pytestmark asks for a process of its own (group=db) (and 1 "
            "more), but this run is not in file mode, which starts before the files are "
            "collected: every file runs in this process; *"
        ]
    )
    assert len(set(_pids(pytester).values())) == 1
    quiet = pytester.runpytest_subprocess(
        "-p", "isolation", "--isolation-mode=off", timeout=TIMEOUT
    )
    assert "asks for a process" not in quiet.stdout.str()


@pytest.mark.parametrize(
    ("environ", "args", "file_mode"),
    [
        ("file", (), True),
        ("off", (), False),
        ("file", ("--isolation-mode=off",), False),
        ("off", ("--isolation-mode=file",), True),
        ("", (), False),
    ],
)
def test_the_environment_sets_the_mode_between_ini_and_command_line(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    environ: str,
    args: tuple[str, ...],
    file_mode: bool,
) -> None:
    pytester.makeini("[pytest]\nisolation_mode = off\n")
    pytester.makepyfile(test_a="def test_x():\n    pass\n")
    monkeypatch.setenv("PYTEST_ISOLATION_MODE", environ)
    result = pytester.runpytest_subprocess("-p", "isolation", *args, timeout=TIMEOUT)
    result.assert_outcomes(passed=1)
    assert ("isolation: file mode" in result.stdout.str()) is file_mode


def test_off_from_the_environment_runs_plain_despite_opt_ins(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\nisolation_paths = *: file\n")
    _file(pytester, "test_a", "import pytest\npytestmark = pytest.mark.isolation(group='db')")
    monkeypatch.setenv("PYTEST_ISOLATION_MODE", "off")
    result = pytester.runpytest_subprocess("-p", "isolation", timeout=TIMEOUT)
    result.assert_outcomes(passed=1)
    assert "isolation: file mode" not in result.stdout.str()


def test_a_bad_environment_value_is_a_usage_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_a="def test_x():\n    pass\n")
    monkeypatch.setenv("PYTEST_ISOLATION_MODE", "files")
    result = pytester.runpytest_subprocess("-p", "isolation", timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: PYTEST_ISOLATION_MODE: invalid value 'files'; choose from 'off', 'file', 'test'"]
    )


def test_placement_is_read_relative_to_the_ini_file(pytester: pytest.Pytester) -> None:
    pytester.mkdir("conf")
    Path(pytester.path / "conf" / "pytest.ini").write_text(
        "[pytest]\nisolation_mode = file\nisolation_paths = ../x: off\n"
    )
    pytester.makepyfile(test_a="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess(
        "-p", "isolation", "-c", "conf/pytest.ini", "--rootdir", str(pytester.path), timeout=TIMEOUT
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*line '../x: off': the pattern must be relative to the ini file"])
