"""The forkserver start method (issue 17): each file's child is forked from
one fresh interpreter, so a pytest process with threads of its own no longer
makes every file pay a whole interpreter's start."""

from __future__ import annotations

import sys

import pytest

from conftest import FILE_MODE
from conftest import TIMEOUT
from conftest import run_file_mode
from conftest import run_plain

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="auto forks only on Linux")

#: A conftest whose pytest_configure starts a thread that the tests use.
SERVING_CONFTEST = """
import queue, threading

REQUESTS, ANSWERS = queue.Queue(), queue.Queue()

def _serve():
    while True:
        ANSWERS.put(REQUESTS.get() * 2)

def pytest_configure(config):
    threading.Thread(target=_serve, name="served", daemon=True).start()
"""

ASKS_THE_THREAD = """
import conftest

def test_the_thread_answers():
    conftest.REQUESTS.put(21)
    assert conftest.ANSWERS.get(timeout=5) == 42
"""


def test_auto_forks_from_a_fresh_interpreter_when_configure_starts_a_thread(
    pytester: pytest.Pytester,
) -> None:
    """The thread a conftest starts at configure runs in every child (each
    child configures pytest itself), which forking the parent cannot give:
    the forked child has no such thread, and its test times out."""
    pytester.makeconftest(SERVING_CONFTEST)
    pytester.makepyfile(test_a=ASKS_THE_THREAD, test_b=ASKS_THE_THREAD, test_c=ASKS_THE_THREAD)
    result = pytester.runpytest_subprocess(*FILE_MODE, timeout=TIMEOUT)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        ["isolation: file mode, * (start method forkserver: auto: other threads are running*"]
    )
    forked = run_file_mode(pytester, "fork", "test_a.py")
    forked.assert_outcomes(failed=1)
    forked.stdout.fnmatch_lines(["*queue.Empty*"])


def test_a_thread_started_after_configure_switches_the_rest_of_the_run(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(
        """
        import threading, time

        def pytest_collection_finish(session):
            threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
        """
    )
    pytester.makepyfile(test_a="def test_1(): pass", test_b="def test_2(): assert False")
    result = pytester.runpytest_subprocess(*FILE_MODE, timeout=TIMEOUT)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["isolation: threads are running, forking children from a fresh interpreter"]
    )


#: A plugin module that records the process that imported it, a list its
#: tests fill, and an assert of its own.
RECORDING_PLUGIN = """
import os
IMPORTED_IN = os.getpid()
SEEN = []

def check(value):
    assert value == 1
"""

USES_THE_PLUGIN = """
import os
import recorder

def test_fresh():
    recorder.SEEN.append(__name__)
    assert recorder.SEEN == [__name__]  # no other file's entry: a pristine copy

def test_imported_by_the_server():
    assert recorder.IMPORTED_IN == os.getppid() != os.getpid()
"""

NOT_REWRITTEN = '"""A plugin. PYTEST_DONT_REWRITE"""\n'


@pytest.mark.parametrize(
    ("header", "args"),
    [(NOT_REWRITTEN, ()), ("", ("--assert=plain",))],
    ids=["dont-rewrite", "assert-plain"],
)
def test_the_server_imports_the_plugins_and_each_child_starts_from_its_state(
    pytester: pytest.Pytester, header: str, args: tuple[str, ...]
) -> None:
    pytester.makepyfile(
        recorder=header + RECORDING_PLUGIN, test_a=USES_THE_PLUGIN, test_b=USES_THE_PLUGIN
    )
    result = run_file_mode(pytester, "forkserver", "-p", "recorder", *args)
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["* (start method forkserver: requested)"])
    result.stdout.no_fnmatch_line("*preloads no plugin*")


def test_a_plugin_whose_asserts_pytest_rewrites_is_rewritten_once_in_the_zygote(
    pytester: pytest.Pytester,
) -> None:
    """The zygote runs pytest's start-up, so pytest itself imports and
    rewrites the plugins there, once, as a plain run does (and does not warn
    about a module imported before it could rewrite it)."""
    pytester.makepyfile(
        recorder=RECORDING_PLUGIN,
        test_a="""
        import os
        import pytest
        import recorder

        def test_imported_by_the_zygote():
            assert recorder.IMPORTED_IN == os.getppid() != os.getpid()

        def test_rewritten():
            with pytest.raises(AssertionError, match="assert 2 == 1"):
                recorder.check(2)
        """,
    )
    result = run_file_mode(pytester, "forkserver", "-p", "recorder", "-W", "error")
    result.assert_outcomes(passed=2)
    result.stdout.no_fnmatch_line("*cannot be rewritten*")
    result.stdout.no_fnmatch_line("*each child runs pytest's start-up*")


#: A conftest that starts a thread as it is imported.
TICKING_CONFTEST = """
import threading, time
threading.Thread(target=time.sleep, args=(600,), name="ticker", daemon=True).start()
"""


def test_a_thread_started_during_the_start_up_makes_each_child_run_pytest_itself(
    pytester: pytest.Pytester,
) -> None:
    """A zygote with a thread after pytest's start-up is not forked (the
    thread would be missing in its children): each child then runs all of
    pytest, and the thread runs in it, as in a spawned child."""
    pytester.makeconftest(TICKING_CONFTEST)
    pytester.makepyfile(
        test_a="""
        import threading

        def test_the_conftest_s_thread_runs_here():
            assert "ticker" in [t.name for t in threading.enumerate()]
        """
    )
    result = run_file_mode(pytester, "forkserver")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "isolation: each child runs pytest's start-up (a thread runs after pytest's "
            "start-up (ticker))"
        ]
    )


def test_a_plugin_whose_import_warns_is_imported_by_each_child_itself(
    pytester: pytest.Pytester,
) -> None:
    """Without the zygote, the fork server imports what a child would import
    before its pytest; a server in which a refused import ran is not used:
    the run goes on with one that imports pytest only, and the header says why."""
    pytester.makeconftest(TICKING_CONFTEST)
    pytester.makepyfile(
        recorder=NOT_REWRITTEN
        + "import warnings\nwarnings.warn(UserWarning('old'))\n"
        + RECORDING_PLUGIN,
        test_a="""
        import os
        import recorder

        def test_imported_by_the_child():
            assert recorder.IMPORTED_IN == os.getpid()
        """,
    )
    result = run_file_mode(pytester, "forkserver", "-p", "recorder")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "isolation: each child runs pytest's start-up (*ticker*",
            "isolation: the fork server preloads no plugin (recorder: its import warns (*: old))",
        ]
    )


def test_a_start_up_that_fails_in_the_zygote_leaves_it_to_each_child(
    pytester: pytest.Pytester,
) -> None:
    """When pytest's start-up fails in the zygote, the run goes on with
    children that run it themselves, and the header says why."""
    pytester.makeconftest(
        """
        import sys
        if "pytest_isolation.filemode.server.zygote" in sys.modules:
            raise ImportError("not in the zygote")
        """
    )
    pytester.makepyfile(test_a="def test_1(): pass", test_b="def test_2(): pass")
    result = run_file_mode(pytester, "forkserver")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["isolation: each child runs pytest's start-up (*not in the zygote*"]
    )


def test_the_zygote_imports_what_each_child_s_configure_would(pytester: pytest.Pytester) -> None:
    """``names.CHILD_CONFIGURE_IMPORTS`` holds what this plugin's configure
    imports in a child (and pytest's debugger): they are loaded before the
    first configure hook, and no module of this plugin is imported between
    that hook and the session's start."""
    pytester.makeconftest(
        """
        import sys
        import pytest
        from pytest_isolation.core.names import CHILD_CONFIGURE_IMPORTS

        AT_CONFIGURE = set()

        @pytest.hookimpl(tryfirst=True)
        def pytest_configure(config):
            AT_CONFIGURE.update(sys.modules)

        def pytest_sessionstart(session):
            missing = set(CHILD_CONFIGURE_IMPORTS) - AT_CONFIGURE
            later = {m for m in set(sys.modules) - AT_CONFIGURE if m.startswith("pytest_isolation")}
            with open("imports.txt", "a") as out:
                out.write(f"{sorted(missing)} {sorted(later)}\\n")
        """
    )
    pytester.makepyfile(test_a="def test_1(): pass", test_b="def test_2(): pass")
    result = run_file_mode(pytester, "forkserver")
    result.assert_outcomes(passed=2)
    lines = (pytester.path / "imports.txt").read_text().splitlines()
    # The parent's line first (it is no child), then one line per child.
    assert lines[1:] == ["[] []", "[] []"]


def test_what_the_start_up_printed_is_captured_in_each_child_as_in_a_plain_run(
    pytester: pytest.Pytester,
) -> None:
    """A conftest that prints as it is imported, under capture: a plain run
    shows nothing of it (the first collection's capture holds it); the
    zygote's children hold it the same way instead of printing it."""
    pytester.makeconftest("print('printed by the conftest')")
    pytester.makepyfile(test_a="def test_1(): pass", test_b="def test_2(): pass")
    for result in (run_plain(pytester), run_file_mode(pytester, "forkserver")):
        result.assert_outcomes(passed=2)
        assert "printed by the conftest" not in result.stdout.str() + result.stderr.str()


def test_a_plugin_a_conftest_names_is_imported_after_the_conftest(
    pytester: pytest.Pytester,
) -> None:
    """``pytest_plugins`` of a conftest is imported once the conftest's own
    code ran (which may set what the plugin reads at import): the server
    does not import it first."""
    pytester.makepyfile(
        setting="VALUE = 'default'\n",
        late="import setting\nSEEN = setting.VALUE\n",
        conftest=(
            "import setting\nsetting.VALUE = 'set by the conftest'\npytest_plugins = ['late']\n"
        ),
        test_a="import late\n\ndef test_seen():\n    assert late.SEEN == 'set by the conftest'\n",
    )
    run_file_mode(pytester, "forkserver").assert_outcomes(passed=1)


def test_pytester_s_assertions_are_rewritten_in_the_child(pytester: pytest.Pytester) -> None:
    """pytester names ``_pytest.pytester_assertions``, which pytest rewrites:
    the server must not import it first (anyio's suite failed at every file
    under ``filterwarnings = error``)."""
    pytester.makepyfile(
        test_a="""
        import sys

        def test_rewritten():
            module = sys.modules["_pytest.pytester_assertions"]
            assert type(module.__loader__).__module__ == "_pytest.assertion.rewrite"
        """
    )
    result = run_file_mode(pytester, "forkserver", "-p", "pytester", "-W", "error")
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*cannot be rewritten*")
