"""The record of what each test file executed, and the selector's ``recorded`` scope.

Every run is a real pytest subprocess: file mode records in its children,
the selector reads pytest's cache (or a run report) in a later run.  On
Python 3.12+ a record names the functions that ran; before, the modules
loaded (every function of each counts), so the expectations differ there.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import FILE_MODE
from conftest import TIMEOUT
from pytest_isolation.record.sourcefacts import SourceFacts
from pytest_isolation.record.sourcefacts import facts_of
from pytest_isolation.record.store import Record

FUNCTIONS = sys.version_info >= (3, 12)
by_functions = pytest.mark.skipif(not FUNCTIONS, reason="functions are recorded on 3.12+")

MOD = """\
LIMIT = 3


def used():
    return helper() + 1


def helper():
    return 1


def unused():
    return 0
"""

#: test_a runs used() and helper(); test_b reads a constant only; test_c
#: never loads the module.
TESTS = {
    "tests/test_a.py": "from pkg import mod\n\ndef test_a():\n    assert mod.used() == 2\n",
    "tests/test_b.py": "from pkg import mod\n\ndef test_b():\n    assert mod.LIMIT == 3\n",
    "tests/test_c.py": "def test_c():\n    assert True\n",
}
SELECT = ("-p", "isolation", "-p", "no:randomly", "--isolation-dry-run", "--isolation-explain")


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\npythonpath = src\n")
    (pytester.path / "src" / "pkg").mkdir(parents=True)
    (pytester.path / "src" / "pkg" / "__init__.py").write_text("")
    (pytester.path / "src" / "pkg" / "mod.py").write_text(MOD)
    (pytester.path / "tests").mkdir()
    for name, text in TESTS.items():
        (pytester.path / name).write_text(text)
    return pytester


def record(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    result = pytester.runpytest_subprocess(*FILE_MODE, "-p", "no:randomly", *args, timeout=TIMEOUT)
    return result


def stored(pytester: pytest.Pytester) -> dict[str, Any]:
    """The record in pytest's cache, each entry's dependencies read out of
    the shared table (``{key: content hash}``)."""
    data: dict[str, Any] = json.loads(
        (pytester.path / ".pytest_cache" / "v" / "isolation" / "recorded").read_text()
    )
    record = Record.from_json(data)
    assert record is not None, data
    data["tests"] = {
        test: {"digest": e.digest, "deps": record.deps(e), "ran": e.ran, "every": e.every}
        for test, e in record.tests.items()
    }
    return data


def select(pytester: pytest.Pytester, *args: str) -> tuple[list[str], pytest.RunResult]:
    """The test files the selector picks, and the run."""
    result = pytester.runpytest_subprocess(*SELECT, *args, timeout=TIMEOUT)
    files = [line for line in result.stdout.lines if line.startswith("tests/")]
    return files, result


def edit(pytester: pytest.Pytester, old: str, new: str, key: str = "src/pkg/mod.py") -> None:
    path = pytester.path / key
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def git(pytester: pytest.Pytester, *args: str) -> None:
    # pytester keeps each run's output beside the project
    (pytester.path / ".gitignore").write_text("stdout\nstderr\n.pytest_cache/\n")
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=pytester.path,
        check=True,
        capture_output=True,
    )


# -- recording ----------------------------------------------------------------


def test_file_mode_records_what_each_file_ran(project: pytest.Pytester) -> None:
    record(project).assert_outcomes(passed=3)
    data = stored(project)
    assert data["environment"]["python"] == f"cpython {sys.version_info[0]}.{sys.version_info[1]}"
    tests = data["tests"]
    assert sorted(tests) == sorted(TESTS)
    assert set(tests["tests/test_a.py"]["deps"]) == {"src/pkg/__init__.py", "src/pkg/mod.py"}
    assert tests["tests/test_c.py"]["deps"] == {}
    if FUNCTIONS:
        assert data["how"] == "monitoring"
        assert tests["tests/test_a.py"]["ran"] == {"src/pkg/mod.py": ["helper", "used"]}
        assert tests["tests/test_b.py"]["ran"] == {}  # loaded, no function run
    else:
        assert data["how"] == "modules"
        assert tests["tests/test_b.py"]["every"] is True


def test_a_file_whose_tests_did_not_all_run_is_not_recorded(project: pytest.Pytester) -> None:
    (project.path / "tests" / "test_d.py").write_text(
        "def test_one():\n    pass\n\ndef test_two():\n    pass\n"
    )
    (project.path / "tests" / "test_e.py").write_text("import no_such_module\n")
    record(project, "-k", "not test_two").assert_outcomes(passed=4, deselected=1, errors=1)
    tests = stored(project)["tests"]
    assert "tests/test_d.py" not in tests  # a test deselected
    assert "tests/test_e.py" not in tests  # failed to collect
    assert "tests/test_a.py" in tests


def test_record_off_records_nothing(project: pytest.Pytester) -> None:
    record(project, "--isolation-record=off").assert_outcomes(passed=3)
    assert not (project.path / ".pytest_cache" / "v" / "isolation" / "recorded").exists()


def test_a_plain_run_records_when_asked(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess(
        "-p", "isolation", "-p", "no:randomly", "--isolation-record=on", timeout=TIMEOUT
    )
    result.assert_outcomes(passed=3)
    assert result.ret == 0, result.stderr.str()
    tests = stored(project)["tests"]
    assert sorted(tests) == sorted(TESTS)
    if FUNCTIONS:
        assert tests["tests/test_a.py"]["ran"] == {"src/pkg/mod.py": ["helper", "used"]}
        assert tests["tests/test_c.py"]["ran"] == {}


def test_a_plain_run_does_not_record_by_default(project: pytest.Pytester) -> None:
    project.runpytest_subprocess("-p", "isolation", timeout=TIMEOUT).assert_outcomes(passed=3)
    assert not (project.path / ".pytest_cache" / "v" / "isolation" / "recorded").exists()


def test_the_run_report_holds_the_record(project: pytest.Pytester) -> None:
    result = record(project, "--isolation-report=run.json", "-vv")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "isolation: recorded what 3 test files executed (3 test files in the record, "
            "cache key isolation/recorded)"
        ]
    )
    report = json.loads((project.path / "run.json").read_text())
    assert sorted(report["recorded"]["tests"]) == sorted(TESTS)


def test_no_record_is_made_that_nothing_could_keep(project: pytest.Pytester) -> None:
    """Issue 46, item 12: under ``-p no:cacheprovider`` without a run report
    the record was made (about 15 % of a large suite's time) and thrown away."""
    result = record(project, "-p", "no:cacheprovider", "-vv")
    result.assert_outcomes(passed=3)
    result.stdout.no_fnmatch_line("isolation: recorded what *")
    kept = record(project, "-p", "no:cacheprovider", "--isolation-report=run.json", "-vv")
    kept.assert_outcomes(passed=3)
    report = json.loads((project.path / "run.json").read_text())
    assert sorted(report["recorded"]["tests"]) == sorted(TESTS)
    asked = record(project, "-p", "no:cacheprovider", "--isolation-record=on", "-vv")
    asked.stdout.fnmatch_lines(["isolation: recorded what 3 test files executed *"])


def test_under_xdist_every_worker_s_files_are_recorded(project: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    result = record(project, "-p", "xdist", "-n", "2")
    result.assert_outcomes(passed=3)
    assert sorted(stored(project)["tests"]) == sorted(TESTS)


def test_the_record_keeps_each_file_version_once() -> None:
    """Test files share most of their dependencies: each (file, content
    hash) pair is stored once; an entry is a bit mask over them, which
    survives a JSON round trip, taking another record's entries and pruning."""
    record = Record({"python": "cpython 3.12", "packages": "x"}, "monitoring")
    shared = {f"src/m{n}.py": f"d{n}" for n in range(50)}
    record.add("tests/test_a.py", "a", {**shared, "src/only_a.py": "oa"}, {"src/m1.py": ["f"]})
    record.add("tests/test_b.py", "b", shared, {})
    assert len(record.files) == 51
    data = json.loads(json.dumps(record.to_json()))
    assert len(data["files"]) == 51
    back = Record.from_json(data)
    assert back is not None
    assert back.deps(back.tests["tests/test_a.py"]) == {**shared, "src/only_a.py": "oa"}
    assert back.seen(back.tests["tests/test_b.py"], "src/m7.py") == "d7"
    assert back.seen(back.tests["tests/test_b.py"], "src/only_a.py") is None
    newer = Record(record.environment, record.how)
    newer.add("tests/test_b.py", "b2", {"src/m1.py": "d1-new", "src/m2.py": "d2"}, {}, every=True)
    back.update(newer)
    back.prune(lambda test: test != "tests/test_a.py")  # test_a.py deleted
    assert back.files == [("src/m1.py", "d1-new"), ("src/m2.py", "d2")]
    entry = back.tests["tests/test_b.py"]
    assert (entry.digest, entry.every, entry.ran_in("src/m2.py")) == ("b2", True, ["*"])
    assert back.deps(entry) == {"src/m1.py": "d1-new", "src/m2.py": "d2"}


def test_a_file_s_facts_survive_the_record() -> None:
    """The next recording takes an unchanged file's facts from the record
    (size and time as kept) instead of parsing it again."""
    source = b"import os\n\n\nclass A:\n    @property\n    def x(self):\n        return 1\n"
    facts = facts_of(source)
    back = SourceFacts.from_json(facts.digest, json.loads(json.dumps(facts.to_json())))
    assert back == facts
    assert back is not None
    assert back.function_at(7) == "A.x"
    assert SourceFacts.from_json(facts.digest, {"functions": {}, "module": "m"}) is None


def test_a_record_whose_bits_point_past_its_files_is_not_read() -> None:
    record = Record({"python": "cpython 3.12", "packages": "x"}, "modules")
    record.add("tests/test_a.py", "a", {"src/m.py": "d"}, {})
    data = record.to_json()
    data["tests"]["tests/test_a.py"]["deps"] = "ff"
    assert Record.from_json(data) is None


@pytest.mark.parametrize("stat", [[1, 2], ["1", 2, "d"], None, [1, 2, 3]])
def test_a_record_with_a_broken_stat_is_not_read(stat: object) -> None:
    """A hand-broken cache is no record (the selector says so), not an error."""
    record = Record({"python": "cpython 3.12", "packages": "x"}, "modules")
    record.add("tests/test_a.py", "a", {"src/m.py": "d"}, {})
    record.stats["src/m.py"] = [1, 2, "d"]
    data = json.loads(json.dumps(record.to_json()))
    assert Record.from_json(data) is not None
    data["stats"]["src/m.py"] = stat
    assert Record.from_json(data) is None


# -- selecting ------------------------------------------------------------------


@by_functions
def test_a_changed_function_selects_the_files_that_ran_it(project: pytest.Pytester) -> None:
    record(project).assert_outcomes(passed=3)
    edit(project, "return 1\n", "return 2 - 1\n")  # helper()
    files, result = select(project, "--isolation-for", "src/pkg/mod.py")
    assert files == ["tests/test_a.py"]
    result.stdout.fnmatch_lines(
        [
            "isolation: scope=recorded sources=1 test_files=1/50 via recorded:1 "
            "(record: 3 test files, 0 stale, 0 unrecorded, * ms)",
            "isolation: tests/test_a.py: its tests ran src/pkg/mod.py: helper",
        ]
    )


@by_functions
def test_a_function_no_test_ran_selects_nothing(project: pytest.Pytester) -> None:
    record(project).assert_outcomes(passed=3)
    edit(project, "return 0\n", "return 5\n")  # unused()
    files, result = select(project, "--isolation-for", "src/pkg/mod.py")
    assert files == []
    assert result.ret == 5
    result.stderr.fnmatch_lines(
        ["*src/pkg/mod.py: no recorded test file ran code of it that changed"]
    )


def test_import_time_code_selects_every_file_that_loaded_it(project: pytest.Pytester) -> None:
    record(project).assert_outcomes(passed=3)
    edit(project, "LIMIT = 3", "LIMIT = 4")
    files, result = select(project, "--isolation-for", "src/pkg/mod.py")
    assert files == ["tests/test_a.py", "tests/test_b.py"]
    if FUNCTIONS:
        result.stdout.fnmatch_lines(
            ["*tests/test_b.py: it loaded src/pkg/mod.py, whose import-time code changed"]
        )


@by_functions
def test_comments_and_moved_code_change_nothing(project: pytest.Pytester) -> None:
    record(project).assert_outcomes(passed=3)
    edit(project, "LIMIT = 3\n", "# a comment\n\n\nLIMIT = 3  # the limit\n")
    files, result = select(project, "--isolation-for", "src/pkg/mod.py")
    assert files == []
    assert result.ret == 5


def test_a_changed_test_file_selects_itself(project: pytest.Pytester) -> None:
    record(project).assert_outcomes(passed=3)
    edit(project, "assert True", "assert 1", key="tests/test_c.py")
    files, _ = select(project, "--isolation-for", "tests/test_c.py")
    assert files == ["tests/test_c.py"]


def test_new_and_renamed_test_files_are_always_selected(project: pytest.Pytester) -> None:
    record(project).assert_outcomes(passed=3)
    (project.path / "tests" / "test_c.py").rename(project.path / "tests" / "test_renamed.py")
    (project.path / "tests" / "test_new.py").write_text("def test_new():\n    pass\n")
    edit(project, "LIMIT = 3", "LIMIT = 4")
    files, result = select(project, "--isolation-for", "src/pkg/mod.py")
    assert "tests/test_new.py" in files
    assert "tests/test_renamed.py" in files
    result.stdout.fnmatch_lines(["*tests/test_new.py: not in the record*"])


def test_a_stale_entry_is_selected_by_impact_and_said(project: pytest.Pytester) -> None:
    record(project).assert_outcomes(passed=3)
    (project.path / "src" / "pkg" / "__init__.py").write_text("# changed\nVERSION = 2\n")
    edit(project, "LIMIT = 3", "LIMIT = 4")
    files, result = select(project, "--isolation-for", "src/pkg/mod.py")
    assert files == ["tests/test_a.py", "tests/test_b.py"]
    result.stdout.fnmatch_lines(
        [
            "isolation: scope=recorded * via stale:2 (record: 3 test files, 2 stale, *",
            "isolation: the record of 2 test files is stale (src/pkg/__init__.py changed, not "
            "among the changed files given): scope impact decides for them",
        ]
    )


def test_a_record_of_another_environment_is_not_used(project: pytest.Pytester) -> None:
    record(project).assert_outcomes(passed=3)
    path = project.path / ".pytest_cache" / "v" / "isolation" / "recorded"
    data = json.loads(path.read_text())
    data["environment"]["python"] = "cpython 3.99"
    path.write_text(json.dumps(data))
    edit(project, "return 1\n", "return 2 - 1\n")
    files, result = select(
        project, "--isolation-for", "src/pkg/mod.py", "--isolation-scope=recorded"
    )
    assert files == ["tests/test_a.py", "tests/test_b.py"]  # impact: both import it
    result.stdout.fnmatch_lines(
        [
            "isolation: scope=impact *",
            "isolation: scope=recorded: the record of what each test file executed in pytest's "
            "cache was made with cpython 3.99, not cpython *; scope impact selects instead",
        ]
    )


def test_auto_without_a_record_is_impact(project: pytest.Pytester) -> None:
    edit(project, "return 1\n", "return 2 - 1\n")
    result = project.runpytest_subprocess(
        "-p", "isolation", "--isolation-for", "src/pkg/mod.py", "--isolation-dry-run",
        timeout=TIMEOUT,
    )  # fmt: skip
    assert result.stdout.lines[0].startswith("isolation: scope=impact sources=1 test_files=2/50")


@by_functions
def test_git_lines_say_what_changed_when_the_record_saw_the_change(
    project: pytest.Pytester,
) -> None:
    """Recorded after the change: the fingerprints see nothing new, git's
    changed lines (--isolation-since) tell which function changed."""
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "base")
    edit(project, "return 1\n", "return 2 - 1\n")  # helper(), uncommitted
    record(project).assert_outcomes(passed=3)
    files, result = select(project, "--isolation-since", "HEAD")
    assert files == ["tests/test_a.py"]
    result.stdout.fnmatch_lines(["*tests/test_a.py: its tests ran src/pkg/mod.py: helper"])
    # without lines, any function the file's tests ran counts
    files, _ = select(project, "--isolation-for", "src/pkg/mod.py")
    assert files == ["tests/test_a.py"]


@by_functions
def test_git_since_a_recorded_base_selects_by_changed_functions(
    project: pytest.Pytester,
) -> None:
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "base")
    record(project).assert_outcomes(passed=3)
    edit(project, "    return helper() + 1\n", "    x = helper()\n    return x + 1\n")
    files, _ = select(project, "--isolation-since", "HEAD")
    assert files == ["tests/test_a.py"]


def test_a_deleted_source_selects_the_files_that_loaded_it(project: pytest.Pytester) -> None:
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "base")
    record(project).assert_outcomes(passed=3)
    (project.path / "src" / "pkg" / "mod.py").unlink()
    files, _ = select(project, "--isolation-since", "HEAD")
    assert files == ["tests/test_a.py", "tests/test_b.py"]


# -- shards ----------------------------------------------------------------------


def merge_shards(project: pytest.Pytester) -> subprocess.CompletedProcess[str]:
    """``python -m pytest_isolation.merge s1.json s2.json -o run.json``."""
    return subprocess.run(
        [sys.executable, "-m", "pytest_isolation.merge", "s1.json", "s2.json", "-o", "run.json"],
        cwd=project.path,
        capture_output=True,
        text=True,
        check=False,
    )


def test_shards_records_merge_and_select(project: pytest.Pytester) -> None:
    for index in (1, 2):
        result = record(
            project, f"--isolation-shard={index}/2", f"--isolation-report=s{index}.json"
        )
        assert result.ret == 0, result.stdout.str()
    (project.path / ".pytest_cache").rename(project.path / "old-cache")  # only the reports
    merged = merge_shards(project)
    assert merged.returncode == 0, merged.stderr
    report = json.loads((project.path / "run.json").read_text())
    assert sorted(report["recorded"]["tests"]) == sorted(TESTS)
    edit(project, "LIMIT = 3", "LIMIT = 4")
    files, result = select(
        project, "--isolation-for", "src/pkg/mod.py", "--isolation-record-from", "run.json"
    )
    assert files == ["tests/test_a.py", "tests/test_b.py"]
    result.stdout.fnmatch_lines(["isolation: scope=recorded *(record: 3 test files, 0 stale*"])


def test_merge_refuses_records_of_different_environments(project: pytest.Pytester) -> None:
    for index in (1, 2):
        record(project, f"--isolation-shard={index}/2", f"--isolation-report=s{index}.json")
    path = project.path / "s2.json"
    report = json.loads(path.read_text())
    report["recorded"]["environment"]["python"] = "cpython 3.99"
    path.write_text(json.dumps(report))
    merged = merge_shards(project)
    assert merged.returncode != 0
    assert "s2.json: its record of what each test file executed was made with cpython 3.99" in (
        merged.stderr
    )
    assert not (project.path / "run.json").exists()


def test_record_from_a_file_that_is_no_report_is_an_error(project: pytest.Pytester) -> None:
    (project.path / "other.json").write_text("{}")
    _, result = select(
        project, "--isolation-for", "src/pkg/mod.py", "--isolation-record-from", "other.json"
    )
    assert result.ret == 4
    result.stderr.fnmatch_lines(
        [
            "isolation: invalid_input: --isolation-record-from: *other.json': "
            "not a pytest-isolation run report"
        ]
    )


# -- the recorder itself ------------------------------------------------------------


@by_functions
def test_the_recorder_sees_each_function_once_and_gives_its_tool_id_back(
    tmp_path: Path,
) -> None:
    from pytest_isolation.record.executed import Recorder

    module = tmp_path / "m.py"
    module.write_text("def f():\n    return 1\n\ndef g():\n    return 2\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import m  # type: ignore[import-not-found]

        recorder = Recorder(str(tmp_path))
        recorder.start()
        for _ in range(3):
            m.f()
        first = recorder.restart()
        m.f()
        m.g()
        taken = recorder.take()
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("m", None)
    assert first["lines"] == {str(module): [1]}
    assert taken["lines"] == {str(module): [1, 4]}  # restart sees f again
    assert str(module) in taken["modules"]
    monitoring: Any = getattr(sys, "monitoring")  # noqa: B009
    assert monitoring.get_tool(4) is None
    assert monitoring.get_tool(3) is None


@by_functions
def test_what_runs_while_left_out_is_forgotten_and_seen_again(tmp_path: Path) -> None:
    """The parent's recorder leaves out what a test item it runs itself
    executes: a function first seen there is seen again at its next start."""
    from pytest_isolation.record.executed import Recorder

    module = tmp_path / "m_left.py"
    module.write_text("def f():\n    return 1\n\ndef g():\n    return 2\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import m_left  # type: ignore[import-not-found]

        recorder = Recorder(str(tmp_path))
        recorder.start()
        m_left.g()
        with recorder.left_out():
            m_left.f()
            m_left.g()
        before = recorder.so_far()["lines"]
        m_left.f()
        taken = recorder.take()["lines"]
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("m_left", None)
    assert before == {str(module): [4]}
    assert taken == {str(module): [1, 4]}


HAND_OVER = """\
import os
import sys

sys.path.insert(0, ROOT)
import m
from pytest_isolation.record.executed import Recorder

monitoring = sys.monitoring
parent = Recorder(ROOT)
parent.start()
m.f()
assert parent.hand_over()["lines"] == {M: [1]}
assert monitoring.get_tool(4) == "pytest-isolation"  # held, with its events
m.f()  # no callback while held: nothing is seen, nothing disabled
set_events = monitoring.set_local_events
calls = []
monitoring.set_local_events = lambda *args: (calls.append(args), set_events(*args))[1]
pid = os.fork()
if pid == 0:
    child = Recorder(ROOT)
    child.start()
    m.f()
    m.g()
    seen = child.finish()["lines"]
    set_in_child = len(calls)
    claimed = []
    try:
        monitoring.use_tool_id(4, "mine")  # a later tool gets the id, events cleared
        m.f()
        claimed.append(monitoring.get_tool(4))
        monitoring.free_tool_id(4)
    except Exception as error:
        claimed.append(repr(error))
    print("child", seen, set_in_child, claimed, flush=True)
    os._exit(0)
os.waitpid(pid, 0)
parent = Recorder(ROOT)
parent.start()
m.g()
taken = parent.take()["lines"]
print("parent", taken, monitoring.get_tool(4), monitoring.get_tool(3))
"""


@by_functions
def test_a_forked_child_takes_the_tool_over_with_its_events_set(tmp_path: Path) -> None:
    """The parent marks the project's code once and hands its tool id on:
    a forked child's recorder sets no event (each set copies pages the child
    shares with its parent), yet sees what ran, ``f`` too, which the parent
    ran before; a tool that claims the id later gets it; the last recorder
    gives it back."""
    module = tmp_path / "m.py"
    module.write_text("def f():\n    return 1\n\ndef g():\n    return 2\n")
    script = tmp_path / "hand_over.py"
    script.write_text(f"ROOT = {str(tmp_path)!r}\nM = {str(module)!r}\n" + HAND_OVER)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=TIMEOUT
    )
    assert done.returncode == 0, done.stderr
    path = str(module)
    assert done.stdout.splitlines() == [
        f"child {{{path!r}: [1, 4]}} 0 ['mine']",
        f"parent {{{path!r}: [4]}} None None",
    ]


def test_an_installed_copy_of_the_project_counts_as_its_source(
    pytester: pytest.Pytester,
) -> None:
    """tox installs the project (not editable): its tests run the copy in
    site-packages, which the record names by the project's own file."""
    import shutil
    import sysconfig
    import uuid

    name = f"isolrec_{uuid.uuid4().hex[:8]}"
    source = pytester.path / "src" / name
    source.mkdir(parents=True)
    (source / "__init__.py").write_text("")
    (source / "mod.py").write_text(MOD)
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "test_a.py").write_text(
        TESTS["tests/test_a.py"].replace("from pkg", f"from {name}")
    )
    installed = Path(sysconfig.get_paths()["purelib"]) / name
    shutil.copytree(source, installed)
    try:
        record(pytester).assert_outcomes(passed=1)
    finally:
        shutil.rmtree(installed)
    entry = stored(pytester)["tests"]["tests/test_a.py"]
    assert f"src/{name}/mod.py" in entry["deps"]
    if FUNCTIONS:
        assert entry["ran"] == {f"src/{name}/mod.py": ["helper", "used"]}


@by_functions
def test_a_test_that_claims_the_recorder_s_tool_id_gets_it(project: pytest.Pytester) -> None:
    """The outcome is a plain run's: the recorder moves to another id."""
    (project.path / "tests" / "test_tool.py").write_text(
        "import sys\n\n"
        "from pkg import mod\n\n\n"
        "def test_tool():\n"
        "    sys.monitoring.use_tool_id(4, 'mine')\n"
        "    try:\n"
        "        assert sys.monitoring.get_tool(4) == 'mine'\n"
        "        assert mod.used() == 2\n"
        "    finally:\n"
        "        sys.monitoring.free_tool_id(4)\n"
    )
    record(project).assert_outcomes(passed=4)
    entry = stored(project)["tests"]["tests/test_tool.py"]
    assert entry["ran"] == {"src/pkg/mod.py": ["helper", "used"]}


@by_functions
def test_coverage_s_own_monitoring_tool_measures_the_same_beside_the_recorder(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """coverage.py on its ``sys.monitoring`` core (a second tool, with its
    own DISABLEs) reports the same lines with the recorder as without it,
    and the record is what it is without coverage: ``used`` and ``helper``,
    which the conftest's import ran in the parent before, count for
    ``test_a`` too."""
    pytest.importorskip("pytest_cov")
    monkeypatch.setenv("COVERAGE_CORE", "sysmon")
    project.makeconftest("from pkg import mod\n\nmod.used()\n")
    reports = []
    for extra in ((), ("--isolation-record=off",)):
        result = record(
            project, "-p", "pytest_cov", "--cov=pkg", "--cov-report=term-missing", *extra
        )
        result.assert_outcomes(passed=3)
        lines = [line.split() for line in result.stdout.lines if "mod.py" in line]
        assert lines, result.stdout.str()
        reports.append(lines)
    assert reports[0] == reports[1]
    assert reports[0][0][-2:] == ["86%", "13"]  # unused()'s body: the one line never run
    tests = stored(project)["tests"]
    assert tests["tests/test_a.py"]["ran"] == {"src/pkg/mod.py": ["helper", "used"]}
    assert tests["tests/test_b.py"]["ran"] == {}


CHECKS = """\
def build():
    return {"limit": 3}


RULES = build()


def later():
    return 0
"""


@by_functions
@pytest.mark.parametrize("xdist", [False, True], ids=["one-process", "xdist"])
def test_a_function_the_parent_ran_at_import_counts_for_every_file_that_loaded_it(
    project: pytest.Pytester, xdist: bool
) -> None:
    """The conftest imports ``pkg.checks``, whose import calls ``build()``,
    in the parent: no file's process runs it, but each inherits what it
    made, and a broken ``build()`` fails them all."""
    (project.path / "src" / "pkg" / "checks.py").write_text(CHECKS)
    (project.path / "tests" / "conftest.py").write_text("from pkg import checks\n")
    if xdist:
        pytest.importorskip("xdist")
    record(project, *(["-p", "xdist", "-n", "2"] if xdist else [])).assert_outcomes(passed=3)
    assert stored(project)["inherited"]["src/pkg/checks.py"] == ["build"]
    edit(project, '"limit": 3', '"limit": 4', key="src/pkg/checks.py")
    files, result = select(project, "--isolation-for", "src/pkg/checks.py")
    assert files == sorted(TESTS)
    result.stdout.fnmatch_lines(["*build (run by the parent process, for every test file)*"])
    edit(project, '"limit": 4', '"limit": 3', key="src/pkg/checks.py")
    edit(project, "return 0", "return 1", key="src/pkg/checks.py")  # later(): never ran
    files, _ = select(project, "--isolation-for", "src/pkg/checks.py")
    assert files == []


def test_a_run_that_makes_no_record_stops_recording_the_parent_at_configure(
    project: pytest.Pytester,
) -> None:
    """A plain run (no record by default) leaves no ``sys.monitoring`` tool
    of the plugin's behind for its tests."""
    (project.path / "tests" / "test_tools.py").write_text(
        "import sys\n\n"
        "def test_no_tool():\n"
        "    if sys.version_info >= (3, 12):\n"
        "        tools = [sys.monitoring.get_tool(i) for i in range(6)]\n"
        "        assert 'pytest-isolation' not in tools\n"
    )
    result = project.runpytest_subprocess("-p", "isolation", "-p", "no:randomly", timeout=TIMEOUT)
    result.assert_outcomes(passed=4)


def test_a_file_a_conftest_keeps_out_is_selected_only_when_it_or_the_conftest_changes(
    project: pytest.Pytester,
) -> None:
    (project.path / "tests" / "conftest.py").write_text('collect_ignore = ["test_later.py"]\n')
    (project.path / "tests" / "test_later.py").write_text("from pkg import mod\n")
    record(project).assert_outcomes(passed=3)
    edit(project, "LIMIT = 3", "LIMIT = 4")
    files, _ = select(project, "--isolation-for", "src/pkg/mod.py")
    assert files == ["tests/test_a.py", "tests/test_b.py"]  # not tests/test_later.py
    (project.path / "tests" / "conftest.py").write_text("collect_ignore = []\n")
    files, result = select(project, "--isolation-for", "src/pkg/mod.py")
    assert "tests/test_later.py" in files  # its conftest changed: stale, by impact
    result.stdout.fnmatch_lines(["*tests/test_later.py: its record is stale (tests/conftest.py*"])


def test_a_module_a_test_imports_counts_though_the_guard_takes_it_out(
    project: pytest.Pytester,
) -> None:
    """A module first imported inside a test is taken out of sys.modules
    again by the leak guard; the record still knows it was loaded."""
    (project.path / "src" / "pkg" / "late.py").write_text("GREETING = 'hi'\n")
    (project.path / "tests" / "test_late.py").write_text(
        "def test_late():\n    from pkg import late\n\n    assert late.GREETING == 'hi'\n"
    )
    record(project).assert_outcomes(passed=4)
    assert "src/pkg/late.py" in stored(project)["tests"]["tests/test_late.py"]["deps"]
    edit(project, "'hi'", "'hello'", key="src/pkg/late.py")
    files, _ = select(project, "--isolation-for", "src/pkg/late.py")
    assert files == ["tests/test_late.py"]


def test_a_changed_decorator_is_import_time_code(project: pytest.Pytester) -> None:
    """Decorators and signatures run at import: a change there selects
    every file that loaded the module, not only those that ran the function."""
    edit(project, "def unused():", "@staticmethod\ndef unused():")
    record(project).assert_outcomes(passed=3)
    edit(project, "@staticmethod\n", "@classmethod\n")
    files, _ = select(project, "--isolation-for", "src/pkg/mod.py")
    assert files == ["tests/test_a.py", "tests/test_b.py"]
    edit(project, "def unused():", "def unused(x=1):")
    files, _ = select(project, "--isolation-for", "src/pkg/mod.py")
    assert files == ["tests/test_a.py", "tests/test_b.py"]
