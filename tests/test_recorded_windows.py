"""Code a run executes outside every test file's process, and the record
(issue 46, items 10 and 11: the selector must never miss a file).

Each test records a project whose code runs only where no test file's
process used to see it (a conftest's ``pytest_unconfigure`` or cleanup, a
shared fixture's teardown, the terminal summary, a plain run's session end,
an xdist controller's session end), breaks that code, and compares the
selection since the commit with the full run, which fails.  The broken module is
imported only there, so that a record of modules loaded (Python 3.10 and
3.11) misses it too.
"""

from __future__ import annotations

import shutil

import pytest

from conftest import FILE_MODE
from conftest import TIMEOUT
from test_recorded import FUNCTIONS
from test_recorded import MOD
from test_recorded import TESTS
from test_recorded import by_functions
from test_recorded import edit
from test_recorded import git
from test_recorded import select

#: Imported only by the code outside the files' windows.
CLOSING = """\
def close():
    return None


def never():
    return None
"""
BROKEN = ("    return None\n\n\ndef never", "    raise RuntimeError('broken')\n\n\ndef never")
EVERY_FILE = sorted(TESTS)
#: How the runs run: file mode (which records by default), or a plain run asked to record.
FILE = (*FILE_MODE, "-p", "no:randomly")
PLAIN = ("-p", "isolation", "-p", "no:randomly", "--isolation-record=on")
XDIST = (*FILE, "-p", "xdist", "-n", "2")

#: In every process's pytest_unconfigure, the parent's and each file's.
UNCONFIGURE = """\
def pytest_unconfigure(config):
    from pkg import closing

    closing.close()
"""
#: Only the process of a file whose tests opened something closes it.
UNCONFIGURE_WHAT_WAS_OPENED = """\
import pytest

OPENED = pytest.StashKey[bool]()


@pytest.fixture
def opened(request):
    request.config.stash[OPENED] = True


def pytest_unconfigure(config):
    if config.stash.get(OPENED, False):
        from pkg import closing

        closing.close()
"""
#: Only the parent writes the terminal summary.
TERMINAL_SUMMARY = """\
def pytest_terminal_summary(terminalreporter):
    from pkg import closing

    closing.close()
"""
#: A cleanup a conftest adds: the run's cleanups come after every unconfigure.
CLEANUP = """\
def pytest_configure(config):
    # Imported here: pytest before 8.1 takes the ``pythonpath`` entries off
    # sys.path before the cleanups run.
    from pkg import closing

    config.add_cleanup(closing.close)
"""
#: A session fixture, shared: set up once, before the first file.
SESSION_FIXTURE = """\
import pytest


@pytest.fixture(scope="session")
def resource():
    yield 1
    from pkg import closing

    closing.close()


@pytest.fixture(autouse=True)
def uses_resource(resource):
    return resource
"""
#: At the session's end: a plain run's is after its last file's tests.
SESSIONFINISH = """\
def pytest_sessionfinish(session):
    from pkg import closing

    closing.close()
"""
#: pytest-xdist's way of running code once, in the controller.
CONTROLLER_SESSIONFINISH = """\
def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput"):
        from pkg import closing

        closing.close()
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\npythonpath = src\n")
    (pytester.path / "src" / "pkg").mkdir(parents=True)
    (pytester.path / "src" / "pkg" / "__init__.py").write_text("")
    (pytester.path / "src" / "pkg" / "mod.py").write_text(MOD)
    (pytester.path / "src" / "pkg" / "closing.py").write_text(CLOSING)
    (pytester.path / "tests").mkdir()
    for name, text in TESTS.items():
        (pytester.path / name).write_text(text)
    return pytester


def recorded_at_a_commit(
    project: pytest.Pytester, conftest: str, run: tuple[str, ...], passed: int = len(TESTS)
) -> None:
    """Commit the project with ``conftest``, and record it with the run ``run``."""
    (project.path / "tests" / "conftest.py").write_text(conftest)
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "base")
    result = project.runpytest_subprocess(*run, timeout=TIMEOUT)
    result.assert_outcomes(passed=passed)
    assert result.ret == 0, result.stdout.str()


def broken(project: pytest.Pytester, run: tuple[str, ...]) -> tuple[list[str], pytest.RunResult]:
    """Break ``closing.close()``: the test files selected since the commit,
    and the full run ``run`` (without the record), which fails."""
    edit(project, *BROKEN, key="src/pkg/closing.py")
    files, _ = select(project, "--isolation-since", "HEAD", "--isolation-allow-empty")
    full = project.runpytest_subprocess(*run, "-p", "no:cacheprovider", timeout=TIMEOUT)
    assert full.ret != 0, full.stdout.str()
    assert "RuntimeError: broken" in full.stdout.str() + full.stderr.str()
    return files, full


def test_code_run_in_every_process_s_unconfigure_selects_every_file(
    project: pytest.Pytester,
) -> None:
    """Item 10: the parent's and each file's ``pytest_unconfigure`` ran
    after the record of what ran was taken."""
    recorded_at_a_commit(project, UNCONFIGURE, FILE)
    files, _ = broken(project, FILE)
    assert files == EVERY_FILE


def test_code_only_a_file_s_process_runs_at_unconfigure_selects_that_file(
    project: pytest.Pytester,
) -> None:
    """Item 10: what a file's own process runs at its end (its conftest's
    ``pytest_unconfigure``) is that file's; the parent never runs it."""
    (project.path / "tests" / "test_a.py").write_text("def test_a(opened):\n    pass\n")
    recorded_at_a_commit(project, UNCONFIGURE_WHAT_WAS_OPENED, FILE)
    files, full = broken(project, FILE)
    assert files == ["tests/test_a.py"]
    full.stdout.fnmatch_lines(["isolation: the process of tests/test_a.py * status 3 *"])


def test_a_shared_fixture_s_teardown_selects_every_file(project: pytest.Pytester) -> None:
    """Item 11: the parent tears the shared fixtures down after the last file."""
    project.makeini("[pytest]\npythonpath = src\nisolation_shared_fixtures = resource\n")
    recorded_at_a_commit(project, SESSION_FIXTURE, FILE)
    files, full = broken(project, FILE)
    assert files == EVERY_FILE
    full.assert_outcomes(passed=3, errors=1)  # at the teardown of the run's last test


def test_the_parent_s_terminal_summary_selects_every_file(project: pytest.Pytester) -> None:
    """Run by the parent only, after the record is written at the session's end."""
    recorded_at_a_commit(project, TERMINAL_SUMMARY, FILE)
    files, _ = broken(project, FILE)
    assert files == EVERY_FILE


def test_a_conftest_s_cleanup_selects_every_file(project: pytest.Pytester) -> None:
    """``config.add_cleanup`` in a conftest: run after every plugin's
    ``pytest_unconfigure``, in the parent only."""
    recorded_at_a_commit(project, CLEANUP, FILE)
    files, _ = broken(project, FILE)
    assert files == EVERY_FILE


def test_the_run_report_holds_what_the_parent_ran_after_it_was_written(
    project: pytest.Pytester,
) -> None:
    """The run report is written at the session's end, before the terminal
    summary: it is written again with what the parent ran after."""
    recorded_at_a_commit(project, TERMINAL_SUMMARY, (*FILE, "--isolation-report=run.json"))
    shutil.rmtree(project.path / ".pytest_cache")
    edit(project, *BROKEN, key="src/pkg/closing.py")
    since = ("--isolation-since", "HEAD", "--isolation-unmapped=ignore")  # run.json is new
    files, _ = select(project, *since, "--isolation-record-from", "run.json")
    assert files == EVERY_FILE


def test_a_plain_run_s_session_end_selects_every_file(project: pytest.Pytester) -> None:
    """``--isolation-record=on``: a plain run's session ends after the last
    file's tests, whose record has been taken by then."""
    recorded_at_a_commit(project, SESSIONFINISH, PLAIN)
    files, _ = broken(project, PLAIN)
    assert files == EVERY_FILE


def test_an_xdist_controller_s_session_end_selects_every_file(project: pytest.Pytester) -> None:
    """Code a conftest runs in pytest-xdist's controller only, at the end."""
    pytest.importorskip("xdist")
    recorded_at_a_commit(project, CONTROLLER_SESSIONFINISH, XDIST)
    files, _ = broken(project, XDIST)
    assert files == EVERY_FILE


@by_functions
def test_a_function_the_end_of_the_run_never_ran_selects_nothing(
    project: pytest.Pytester,
) -> None:
    """What the parent runs counts by function, as a file's does: a change
    of a function it loaded and never ran selects no test file."""
    recorded_at_a_commit(project, TERMINAL_SUMMARY, FILE)
    edit(
        project, "def never():\n    return None", "def never():\n    return 1", "src/pkg/closing.py"
    )
    files, result = select(project, "--isolation-since", "HEAD")
    assert files == []
    assert result.ret == 5


def test_the_record_says_what_the_parent_ran(project: pytest.Pytester) -> None:
    """``--isolation-explain`` names the function the parent ran."""
    recorded_at_a_commit(project, TERMINAL_SUMMARY, FILE)
    edit(project, *BROKEN, key="src/pkg/closing.py")
    _, result = select(project, "--isolation-since", "HEAD")
    what = (
        "close (run by the parent process, for every test file)" if FUNCTIONS else "the whole file"
    )
    result.stdout.fnmatch_lines(
        [f"isolation: tests/test_c.py: its tests ran src/pkg/closing.py: {what}"]
    )


#: A non-Python test file: its items run in the parent, as without file mode.
CHECK_FILES = """\
import pytest


def pytest_collect_file(parent, file_path):
    if file_path.suffix == ".check":
        return CheckFile.from_parent(parent, path=file_path)


class CheckFile(pytest.File):
    def collect(self):
        yield CheckItem.from_parent(self, name="check")


class CheckItem(pytest.Item):
    def runtest(self):
        from pkg import closing

        closing.close()
"""


@by_functions
def test_what_a_test_item_run_by_the_parent_executes_is_not_every_file_s(
    project: pytest.Pytester,
) -> None:
    """A non-Python test file's items run in the parent, whose own code
    counts for every test file; what such an item runs is its own (it is no
    test file of the record)."""
    (project.path / "tests" / "z_last.check").write_text("")  # after the first test file
    recorded_at_a_commit(project, CHECK_FILES, FILE, passed=4)
    edit(project, *BROKEN, key="src/pkg/closing.py")
    files, result = select(project, "--isolation-since", "HEAD", "--isolation-allow-empty")
    assert files == [], result.stdout.str()
