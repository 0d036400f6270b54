"""``--isolation-twice``: each passing test runs again at once; a failed repeat is reported."""

from __future__ import annotations

import inspect
import xml.etree.ElementTree as ET

import pytest
from _pytest import runner

from conftest import FILE_MODE
from conftest import TIMEOUT
from conftest import literal

APP = """
    class Service:
        started = False
"""

SELF_POLLUTING = """
    import os

    from app import Service

    def test_idempotent(tmp_path):
        path = tmp_path / "out.txt"
        assert not path.exists()
        path.write_text("x")

    def test_env_once():
        assert "TWICE_FLAG" not in os.environ
        os.environ["TWICE_FLAG"] = "1"

    def test_class_attribute_once():
        assert not Service.started
        Service.started = True

    def test_after_them():
        assert True
"""

#: How to run the plugin in each of the three places the tests run.
PLACES = {
    "plain": ("-p", "isolation"),
    "file": (*FILE_MODE, "--isolation-start=fork"),
    "spawn": (*FILE_MODE, "--isolation-start=spawn"),
    "xdist": ("-p", "isolation", "-p", "xdist", "-n", "2"),
}


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "no:randomly", "--isolation-twice", *args, timeout=TIMEOUT
    )


@pytest.mark.parametrize("place", sorted(PLACES))
def test_a_test_that_breaks_its_own_state_fails_its_repeat(
    pytester: pytest.Pytester, place: str
) -> None:
    pytester.makepyfile(test_state=SELF_POLLUTING, app=APP)
    junit = pytester.path / "junit.xml"
    result = run(pytester, *PLACES[place], "-rA", f"--junitxml={junit}")
    # The normal run's four passes, plus the two repeats that failed.
    result.assert_outcomes(passed=4, failed=2)
    # In any order: xdist's workers finish in theirs.
    for line in (
        "*= isolation: 2 tests pass once and fail when repeated =*",
        "FAILED WHEN REPEATED test_state.py::test_env_once - *",
        "FAILED WHEN REPEATED test_state.py::test_class_attribute_once - assert not True*",
    ):
        result.stdout.fnmatch_lines([line])
    # What the first run left changed, though the guard puts it back after each test.
    output = result.stdout.str()
    assert (
        "test_state.py::test_env_once\n"
        "  [env] os.environ['TWICE_FLAG'] (was unset, now '1'), at test_state.py:12\n"
    ) in output
    assert (
        "test_state.py::test_class_attribute_once\n"
        "  [attribute] app.Service.started (was False, now True)"
    ) in output
    assert "test_idempotent - " not in result.stdout.str()
    cases = ET.parse(junit).getroot().iter("testcase")
    names = [case.get("name") for case in cases]
    assert sorted(names) == sorted(
        [
            "test_idempotent",
            "test_env_once",
            "test_env_once",
            "test_class_attribute_once",
            "test_class_attribute_once",
            "test_after_them",
        ]
    )
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("6", "2", "0")
    repeated = [
        case
        for case in ET.parse(junit).getroot().iter("testcase")
        if case.find("failure") is not None
    ]
    assert {case.get("name") for case in repeated} == {"test_env_once", "test_class_attribute_once"}
    for case in repeated:
        prop = case.find("properties/property")
        assert prop is not None
        assert (prop.get("name"), prop.get("value")) == (
            "isolation",
            "passes once, fails when repeated",
        )


def test_idempotent_tests_are_reported_once(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_fine="""
        import pytest
        from hypothesis import given, strategies as st

        @pytest.mark.parametrize("n", [1, 2])
        def test_param(n, tmp_path):
            assert not (tmp_path / "f").exists()
            (tmp_path / "f").write_text("x")

        class TestMethods:
            def test_fresh_instance(self):
                assert not hasattr(self, "seen")
                self.seen = True

        def test_monkeypatched(monkeypatch):
            import os
            assert "X_TWICE" not in os.environ
            monkeypatch.setenv("X_TWICE", "1")

        class TestHypothesis:
            # Hypothesis refuses a @given method called on another instance.
            @given(st.integers())
            def test_given(self, n):
                assert isinstance(n, int)
        """
    )
    junit = pytester.path / "junit.xml"
    result = run(pytester, "-p", "isolation", "-v", f"--junitxml={junit}")
    result.assert_outcomes(passed=5)
    assert result.ret == 0
    assert "WHEN REPEATED" not in result.stdout.str()
    assert "pass once" not in result.stdout.str()
    assert len(list(ET.parse(junit).getroot().iter("testcase"))) == 5
    result.stdout.fnmatch_lines(["isolation: --isolation-twice: each test that passes runs again*"])


def test_fixtures_are_fresh_per_run_and_shared_above(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_fixtures="""
        import pytest

        EVENTS = []

        @pytest.fixture(scope="module")
        def shared():
            EVENTS.append("module setup")
            yield
            EVENTS.append("module teardown")

        @pytest.fixture
        def fresh():
            EVENTS.append("function setup")
            yield
            EVENTS.append("function teardown")

        def test_one(shared, fresh):
            EVENTS.append("call")

        def test_two():
            assert EVENTS == [
                "module setup",
                "function setup", "call", "function teardown",
                "function setup", "call", "function teardown",
            ], EVENTS
        """
    )
    result = run(pytester, "-p", "isolation")
    result.assert_outcomes(passed=2)


def test_the_repeat_starts_from_what_the_first_run_left(pytester: pytest.Pytester) -> None:
    """The guard restores after the repeat, not between the runs, and still
    restores: the next test sees the state from before the test."""
    pytester.makepyfile(
        test_guarded="""
        import os

        def test_leaks():
            assert os.environ.get("SEEN_BY_REPEAT") is None
            os.environ["SEEN_BY_REPEAT"] = "1"

        def test_next_is_clean():
            assert "SEEN_BY_REPEAT" not in os.environ
        """
    )
    result = run(pytester, "-p", "isolation", "-p", "leakwarnings")
    # test_leaks twice (1 passed + 1 failed repeat), test_next_is_clean once.
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*LeakedStateWarning: test_guarded.py::test_leaks leaked*"])
    # One warning for the pair: the repeat's leak is put back without a second report.
    assert result.stdout.str().count("LeakedStateWarning:") == 1


def test_with_the_guard_off_the_first_run_is_still_described(pytester: pytest.Pytester) -> None:
    """``--isolation-leaks=off``: nothing is restored or warned about, as in a
    plain run, but the failed repeat says what the first run left."""
    pytester.makepyfile(
        test_off="""
        import os

        def test_leaks():
            assert os.environ.get("OFF_TWICE") is None
            os.environ["OFF_TWICE"] = "1"

        def test_next_sees_the_leak():
            assert os.environ["OFF_TWICE"] == "1"
        """
    )
    result = run(pytester, "-p", "isolation", "--isolation-leaks=off")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([literal("  [env] os.environ['OFF_TWICE'] (was unset, now '1')*")])
    assert "LeakedStateWarning" not in result.stdout.str()
    result.stdout.no_fnmatch_line("*= isolation: * leak* by * =*")


def test_a_leak_error_is_the_first_runs_teardown_error(pytester: pytest.Pytester) -> None:
    """``--isolation-leaks=error`` fails the test's teardown, as in a run
    without ``--isolation-twice``; the failed repeat comes on top."""
    pytester.makepyfile(
        test_error="""
        import os

        def test_leaks():
            assert "ERR_TWICE" not in os.environ
            os.environ["ERR_TWICE"] = "1"
        """
    )
    result = run(pytester, "-p", "isolation", "--isolation-leaks=error")
    result.assert_outcomes(passed=1, failed=1, errors=1)
    result.stdout.fnmatch_lines(["FAILED WHEN REPEATED test_error.py::test_leaks - *"])
    result.stdout.fnmatch_lines(["ERROR test_error.py::test_leaks - Failed: leaked*"])
    result.stdout.fnmatch_lines(["*= isolation: 1 test passes once and fails when repeated =*"])


def test_a_failing_test_runs_once(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_failing="""
        import pytest

        RUNS = []

        def test_fails():
            RUNS.append(1)
            assert False

        @pytest.mark.xfail(strict=True)
        def test_xfails():
            RUNS.append(1)
            assert False

        def test_skips():
            pytest.skip("no")

        def test_count():
            assert len(RUNS) == 2
        """
    )
    result = run(pytester, "-p", "isolation")
    result.assert_outcomes(passed=1, failed=1, xfailed=1, skipped=1)


def test_teardown_errors_of_shared_fixtures_stay_the_tests(pytester: pytest.Pytester) -> None:
    """A module fixture's teardown error, torn down after the repeat, is the
    test's teardown error as in a plain run: no failure of the repeat."""
    pytester.makepyfile(
        test_teardown="""
        import pytest

        @pytest.fixture(scope="module")
        def broken():
            yield
            raise RuntimeError("module teardown")

        def test_uses(broken):
            pass
        """
    )
    result = run(pytester, "-p", "isolation", "-rA")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["ERROR test_teardown.py::test_uses - RuntimeError: module*"])
    assert "WHEN REPEATED" not in result.stdout.str()


def test_exitfirst_stops_at_a_failed_repeat(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_x="""
        SEEN = []

        def test_once():
            assert not SEEN
            SEEN.append(1)

        def test_never_runs():
            pass
        """
    )
    result = run(pytester, "-p", "isolation", "-x")
    result.assert_outcomes(passed=1, failed=1)
    assert "test_never_runs" not in result.stdout.str()


def test_other_items_run_once_and_are_counted(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_docs='''
        import unittest
        from hypothesis import given, strategies as st

        class TestCase(unittest.TestCase):
            @given(st.integers())
            def test_given(self, n):
                pass

        def add(a, b):
            """
            >>> add(1, 2)
            3
            """
            return a + b

        def test_add():
            assert add(1, 1) == 2
        '''
    )
    result = run(pytester, "-p", "isolation", "--doctest-modules")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "isolation: 2 tests ran once, not twice (DoctestItem: 1, Hypothesis test in a "
            "unittest.TestCase: 1): --isolation-twice repeats Python test functions"
        ]
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--setup-show",), "*--isolation-twice cannot run with --setup-show*"),
        (("--setup-only",), "*--isolation-twice cannot run with --setup-only*"),
        (
            ("-p", "rerunfailures", "--reruns", "2"),
            "*--isolation-twice cannot run with --reruns (pytest-rerunfailures)*",
        ),
    ],
)
def test_options_it_would_change_are_refused(
    pytester: pytest.Pytester, args: tuple[str, ...], message: str
) -> None:
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    result = run(pytester, "-p", "isolation", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([literal(message)])


def test_the_fenced_pytest_details_exist() -> None:
    """``diagnose/phases.py`` relies on these private pytest details: this
    fails loudly when pytest changes one of them."""
    parameters = list(inspect.signature(runner.call_and_report).parameters)
    assert parameters[:3] == ["item", "when", "log"]
    assert inspect.signature(runner.call_and_report).parameters[parameters[-1]].kind is (
        inspect.Parameter.VAR_KEYWORD
    )
    init = inspect.signature(pytest.Function.__init__).parameters
    assert {"callspec", "callobj", "fixtureinfo", "keywords", "originalname"} <= set(init)
    assert callable(pytest.Function._initrequest)
    assert "_fixtureinfo" in pytest.Function.__init__.__code__.co_names
    key = pytest.StashKey[int]()
    stash = pytest.Stash()
    stash[key] = 1
    assert stash._storage == {key: 1}  # phases._copy_stash
    from _pytest.fixtures import FuncFixtureInfo  # phases.higher_scoped

    assert "name2fixturedefs" in FuncFixtureInfo.__dataclass_fields__


def test_a_copy_of_a_test_has_its_node_id_and_markers(pytester: pytest.Pytester) -> None:
    from pytest_isolation.diagnose.phases import twin_of

    pytester.makepyfile(
        test_copy="""
        import pytest

        @pytest.mark.parametrize("x", [1])
        def test_p(x):
            pass
        """
    )
    items, _ = pytester.inline_genitems("-p", "no:randomly")
    item = items[0]
    item.add_marker(pytest.mark.skip(reason="added late"))
    assert isinstance(item, pytest.Function)
    twin = twin_of(item)
    assert twin is not item
    assert twin.nodeid == item.nodeid == "test_copy.py::test_p[1]"
    assert twin.parent is item.parent
    assert [m.name for m in twin.iter_markers()] == [m.name for m in item.iter_markers()]
    assert twin.get_closest_marker("skip") is not None


CARRIED = {
    "conftest": """
        import pytest

        TENANT = pytest.StashKey[str]()

        def pytest_collection_modifyitems(items):
            for item in items:
                item.stash[TENANT] = "acme"
                item.tenant_id = 7
                item.user_properties.append(("team", "core"))

        @pytest.fixture
        def tenant(request):
            return request.node.stash[TENANT], request.node.tenant_id
    """,
    "test_carried": """
        def test_reads_what_the_item_carries(tenant, request):
            assert tenant == ("acme", 7)
            assert ("team", "core") in request.node.user_properties
    """,
}


@pytest.mark.parametrize("place", sorted(PLACES))
def test_the_repeat_sees_what_the_item_carried(pytester: pytest.Pytester, place: str) -> None:
    """Issue 31, item 5: a conftest's ``pytest_collection_modifyitems`` that
    sets ``item.stash[KEY]`` and ``item.tenant_id``; the repeat of an
    idempotent test that reads them was ``ERROR WHEN REPEATED``
    (``KeyError``, ``AttributeError``)."""
    pytester.makepyfile(**CARRIED)
    result = run(pytester, *PLACES[place])
    result.assert_outcomes(passed=1)
    assert "WHEN REPEATED" not in result.stdout.str()


DIES_WHEN_REPEATED = """
    import os, signal

    RUNS = []

    def test_dies_the_second_time():
        RUNS.append(1)
        if len(RUNS) == 2:
            os.kill(os.getpid(), signal.SIGKILL)

    def test_after():
        pass
"""


@pytest.mark.parametrize("place", ["file", "spawn"])
def test_a_crash_in_the_repeat_fails_when_repeated(pytester: pytest.Pytester, place: str) -> None:
    """Issue 31, item 5: a child that died in the repeat was reported as a
    teardown error of the test, not as a failure when repeated."""
    pytester.makepyfile(test_dies=DIES_WHEN_REPEATED)
    result = run(pytester, *PLACES[place])
    result.stdout.fnmatch_lines(
        [
            "*killed by signal 9 (SIGKILL) while repeating test_dies_the_second_time (call), "
            "the process of test_dies.py*",
        ]
    )
    result.stdout.fnmatch_lines(["FAILED WHEN REPEATED test_dies.py::test_dies_the_second_time*"])
    assert "ERROR at teardown" not in result.stdout.str()


CONSUMED = {
    "conftest": """
        import pytest

        @pytest.fixture(scope="module")
        def licenses():
            return ["a", "b", "c"]
    """,
    "test_consume": """
        def test_takes_one(licenses):
            assert licenses.pop()

        def test_after_it(licenses):
            assert len(licenses) == 2
    """,
}


@pytest.mark.parametrize("place", ["plain", "file"])
def test_what_a_repeat_takes_from_a_module_fixture_is_put_back(
    pytester: pytest.Pytester, place: str
) -> None:
    """Issue 31, item 5: a repeat that consumed a module-scoped fixture's list
    (``licenses.pop()``) made the *next* test fail as an ordinary failure,
    with no hint that a repeat caused it.  The value is put back after the
    repeat, and the summary says so."""
    pytester.makepyfile(**CONSUMED)
    assert pytester.runpytest_subprocess("-p", "no:isolation", timeout=TIMEOUT).ret == 0
    result = run(pytester, *PLACES[place])
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "isolation: --isolation-twice put back 'licenses' after the repeat of "
            "test_consume.py::test_takes_one, which changed it*"
        ]
    )
