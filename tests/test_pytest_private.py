"""The fence of :mod:`pytest_isolation.core.pytest_private`: one test per
private detail of pytest or pytest-xdist the plugin relies on, each through
the real function on a real session where it can, each failing with the
detail's name and what to adapt when a release changes it.  CI runs them on
the oldest (8.0) and the newest supported pytest."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import types
import warnings
from collections.abc import Callable
from collections.abc import Generator
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import TIMEOUT
from pytest_isolation.core import pytest_private

#: A module whose test function uses a session fixture.
USES_A_SESSION_FIXTURE = """
import pytest

@pytest.fixture(scope="session")
def data():
    return ["a value"]

def test_func(data):
    pass
"""
#: A module whose test function uses nothing.
PLAIN = "def test_func():\n    pass\n"


def changed(detail: str, function: str) -> str:
    """What a fence that broke says."""
    return (
        f"pytest (or pytest-xdist) changed {detail}: adapt "
        f"pytest_isolation.core.pytest_private.{function} to the new release "
        "(its docstring names what it relies on and why)"
    )


@contextlib.contextmanager
def fence(detail: str, function: str) -> Iterator[None]:
    """Whatever fails in the body (an assertion, a missing attribute, a
    changed signature) fails with the detail and the function to adapt."""
    try:
        yield
    except Exception as error:
        what = f"{type(error).__name__}: {error}"
        raise AssertionError(f"{changed(detail, function)}\n{what}") from error


def run_inner(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """An inner run in a process of its own, without this plugin."""
    return pytester.runpytest_subprocess("-p", "no:isolation", *args, timeout=TIMEOUT)


def inner_passed(result: pytest.RunResult) -> None:
    """The inner run's tests (which call the function) passed."""
    output = "\n".join([*result.outlines, *result.errlines])
    assert result.ret == 0, output
    assert result.parseoutcomes().get("passed"), output


def function_item(pytester: pytest.Pytester, source: str = USES_A_SESSION_FIXTURE) -> Any:
    """The test function ``test_func`` of ``source``, collected in this process."""
    item = pytester.getitem(source)
    assert isinstance(item, pytest.Function)
    return item


def set_up_for(item: pytest.Function, name: str) -> tuple[object, list[Callable[[], object]]]:
    """Set ``name`` up for ``item`` outside its set-up, as the shared fixtures
    are; its value, and the finalizers the set-up registered."""
    pushed = pytest_private.push_nodes(item.session, item.listchain())
    try:
        value = pytest_private.item_request(item).getfixturevalue(name)
    finally:
        finalizers = pytest_private.pop_nodes(item.session, pushed)
    return value, finalizers


def tear_down(finalizers: list[Callable[[], object]]) -> None:
    for finalizer in reversed(finalizers):
        finalizer()


def definition_of(item: pytest.Function, name: str) -> Any:
    with fence("Function._fixtureinfo.name2fixturedefs", "fixture_definitions"):
        (definition,) = pytest_private.fixture_definitions(item)[name]
    return definition


# pytest's runner


def test_setup_state(pytester: pytest.Pytester) -> None:
    item = function_item(pytester, PLAIN)
    with fence("Session._setupstate (a SetupState: setup(), stack)", "setup_state"):
        state = pytest_private.setup_state(item.session)
        state.setup(item)
        assert item in state.stack
    state.teardown_exact(None)


def test_teardown_exact(pytester: pytest.Pytester) -> None:
    item = function_item(pytester, PLAIN)
    torn_down: list[str] = []
    pytest_private.setup_state(item.session).setup(item)
    item.addfinalizer(lambda: torn_down.append(item.nodeid))
    with fence("SetupState.teardown_exact(nextitem)", "teardown_exact"):
        pytest_private.teardown_exact(item.session, None)
        assert torn_down == [item.nodeid]
        assert not pytest_private.setup_state(item.session).stack


def test_push_nodes_and_pop_nodes(pytester: pytest.Pytester) -> None:
    item = function_item(pytester, PLAIN)

    def finalizer() -> None:
        """Registered on the session through pytest's public API."""

    with fence("SetupState.stack ({node: (finalizers, exception)})", "push_nodes/pop_nodes"):
        pushed = pytest_private.push_nodes(item.session, item.listchain())
        assert pushed == item.listchain()
        item.session.addfinalizer(finalizer)  # raises unless the session is active
        assert pytest_private.pop_nodes(item.session, pushed) == [finalizer]
        assert not pytest_private.setup_state(item.session).stack


def test_call_and_report(pytester: pytest.Pytester) -> None:
    item = function_item(pytester, "def test_func():\n    assert 1 == 2\n")
    with fence("_pytest.runner.call_and_report(item, when, log, **kwds)", "call_and_report"):
        reports = [
            pytest_private.call_and_report(item, when, False, None)
            for when in ("setup", "call", "teardown")
        ]
        outcomes = [(report.when, report.outcome) for report in reports]
        assert outcomes == [("setup", "passed"), ("call", "failed"), ("teardown", "passed")]


# A test function's fixture request, fixture closure and stash


def test_item_request(pytester: pytest.Pytester) -> None:
    item = function_item(pytester)
    with fence("Function._request", "item_request"):
        request = pytest_private.item_request(item)
        assert isinstance(request, pytest.FixtureRequest)
        assert request.node is item


def test_release_request_and_renew_request(pytester: pytest.Pytester) -> None:
    item = function_item(pytester)
    first = pytest_private.item_request(item)
    with fence("Function._request / Function._initrequest()", "release_request/renew_request"):
        pytest_private.renew_request(item)
        assert pytest_private.item_request(item) is first  # kept while the test runs
        pytest_private.release_request(item)
        pytest_private.renew_request(item)
        second = pytest_private.item_request(item)
        assert isinstance(second, pytest.FixtureRequest)
        assert second is not first


def test_fixture_info(pytester: pytest.Pytester) -> None:
    item = function_item(pytester)
    with fence("Function._fixtureinfo (FuncFixtureInfo) or Function(fixtureinfo=)", "fixture_info"):
        info = pytest_private.fixture_info(item)
        assert "data" in info.names_closure
        twin = pytest.Function.from_parent(item.parent, name=item.name, fixtureinfo=info)
        assert twin.fixturenames == item.fixturenames


def test_fixture_definitions(pytester: pytest.Pytester) -> None:
    item = function_item(pytester)
    with fence("Function._fixtureinfo.name2fixturedefs", "fixture_definitions"):
        definitions = pytest_private.fixture_definitions(item)
        assert [d.argname for d in definitions["data"]] == ["data"]
        assert definitions["data"][-1].scope == "session"


def test_cached_result(pytester: pytest.Pytester) -> None:
    item = function_item(pytester)
    definition = definition_of(item, "data")
    with fence("FixtureDef.cached_result ((value, cache key, exception))", "cached_result"):
        assert pytest_private.cached_result(definition) is None
        value, finalizers = set_up_for(item, "data")
        cached = pytest_private.cached_result(definition)
        assert cached is not None
        assert cached[0] is value
    tear_down(finalizers)


def test_forget_cached_value(pytester: pytest.Pytester) -> None:
    item = function_item(pytester)
    definition = definition_of(item, "data")
    first, _ = set_up_for(item, "data")
    with fence("FixtureDef.cached_result / FixtureDef._finalizers", "forget_cached_value"):
        pytest_private.forget_cached_value(definition)
        assert definition.cached_result is None
        assert not definition._finalizers
        pytest_private.release_request(item)  # a request keeps the definitions it used
        pytest_private.renew_request(item)
        second, finalizers = set_up_for(item, "data")
        assert second == first
        assert second is not first  # set up again
    tear_down(finalizers)


def test_fixture_definitions_finished_by(pytester: pytest.Pytester) -> None:
    item = function_item(pytester)
    definition = definition_of(item, "data")
    _, finalizers = set_up_for(item, "data")
    detail = "the teardown pytest registers (functools.partial(definition.finish, request=...))"
    with fence(detail, "fixture_definitions_finished_by"):
        assert pytest_private.fixture_definitions_finished_by(finalizers) == [definition]
    tear_down(finalizers)
    assert pytest_private.cached_result(definition) is None


def test_replace_finish_and_restore_finish(pytester: pytest.Pytester) -> None:
    item = function_item(pytester)
    definition = definition_of(item, "data")
    finished: list[object] = []

    def finish(request: object) -> None:
        finished.append(request)

    detail = "the teardown pytest registers (definition.finish, looked up on the definition)"
    with fence(detail, "replace_finish/restore_finish"):
        pytest_private.replace_finish(definition, finish)
        _, finalizers = set_up_for(item, "data")
        tear_down(finalizers)
        assert len(finished) == 1
        pytest_private.restore_finish(definition)
        assert definition.finish.__func__ is type(definition).finish


SKIP_MARKS = """
import pytest

@pytest.mark.skipif("1 == 1", reason="skipped")
def test_skipped():
    pass

@pytest.mark.xfail(run=False, reason="not run")
def test_not_run():
    pass

@pytest.mark.xfail(reason="run")
def test_run():
    pass

def test_plain():
    pass
"""


def test_skip_marks_apply(pytester: pytest.Pytester) -> None:
    items = pytester.getitems(SKIP_MARKS)
    with fence("_pytest.skipping.evaluate_skip_marks", "skip_marks_apply"):
        applies = {item.name: pytest_private.skip_marks_apply(item) for item in items}
        assert applies == {
            "test_skipped": True,
            "test_not_run": False,
            "test_run": False,
            "test_plain": False,
        }


def test_xfail_mark_stops_run(pytester: pytest.Pytester) -> None:
    items = pytester.getitems(SKIP_MARKS)
    with fence("_pytest.skipping.evaluate_xfail_marks (Xfail.run)", "xfail_mark_stops_run"):
        stops = {item.name: pytest_private.xfail_mark_stops_run(item) for item in items}
        assert stops == {
            "test_skipped": False,
            "test_not_run": True,
            "test_run": False,
            "test_plain": False,
        }


def test_catch_warnings_for_item(pytester: pytest.Pytester) -> None:
    item = function_item(pytester, PLAIN)
    recorded: list[tuple[str, str, str]] = []

    class Recorder:
        def pytest_warning_recorded(
            self, warning_message: warnings.WarningMessage, when: str, nodeid: str
        ) -> None:
            recorded.append((str(warning_message.message), when, nodeid))

    item.config.pluginmanager.register(Recorder())
    detail = "_pytest.warnings.catch_warnings_for_item(config, ihook, when, item)"
    with fence(detail, "catch_warnings_for_item"):
        with pytest_private.catch_warnings_for_item(item):
            warnings.warn("from the fence", DeprecationWarning, stacklevel=1)
        assert recorded == [("from the fence", "runtest", item.nodeid)]


def test_copy_stash(pytester: pytest.Pytester) -> None:
    item = function_item(pytester)
    key = pytest.StashKey[str]()
    item.stash[key] = "kept"
    target = pytest.Stash()
    with fence("Stash._storage", "copy_stash"):
        pytest_private.copy_stash(item.stash, target)
        assert target.get(key, None) == "kept"


# The terminal reporter and its writer


def test_terminal_writer(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfigure()
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    assert reporter is not None
    with fence("TerminalReporter._tw", "terminal_writer"):
        assert pytest_private.terminal_writer(reporter) is config.get_terminal_writer()


def test_set_terminal_writer(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfigure()
    manager = config.pluginmanager
    manager.unregister(manager.get_plugin("terminalreporter"))

    class StandIn:
        """Holds a writer, as a child's stand-in for the terminal reporter does."""

    writer = object()
    stand_in = StandIn()
    detail = "Config.get_terminal_writer() (the _tw of the plugin named 'terminalreporter')"
    with fence(detail, "set_terminal_writer"):
        pytest_private.set_terminal_writer(stand_in, writer)
        manager.register(stand_in, "terminalreporter")
        assert config.get_terminal_writer() is writer


def test_writer_file_and_set_writer_file(pytester: pytest.Pytester) -> None:
    writer = pytester.parseconfigure().get_terminal_writer()
    stream = io.StringIO()
    with fence("TerminalWriter._file", "writer_file/set_writer_file"):
        original = pytest_private.writer_file(writer)
        pytest_private.set_writer_file(writer, stream)
        try:
            writer.write("written by the fence", flush=True)
        finally:
            pytest_private.set_writer_file(writer, original)
        assert stream.getvalue() == "written by the fence"
        assert pytest_private.writer_file(writer) is original


def progress_counted(pytester: pytest.Pytester) -> Any:
    """What ``progress_reported`` found at the end of an inner run of two tests."""
    pytester.makeconftest(
        """
        import json
        from pathlib import Path
        from pytest_isolation.core.pytest_private import progress_holds
        from pytest_isolation.core.pytest_private import progress_reported

        def pytest_sessionfinish(session):
            reporter = session.config.pluginmanager.get_plugin("terminalreporter")
            counted = progress_reported(reporter)
            found = None if counted is None else {
                "ids": sorted(str(nodeid) for nodeid in counted),
                "by_string": progress_holds(counted, "test_a.py::test_1"),
                "not_run": progress_holds(counted, "test_a.py::test_3"),
            }
            Path("counted.json").write_text(json.dumps(found))
        """
    )
    pytester.makepyfile(test_a="def test_1():\n    pass\n\ndef test_2():\n    pass\n")
    inner_passed(run_inner(pytester))
    return json.loads((pytester.path / "counted.json").read_text())


def test_progress_reported(pytester: pytest.Pytester) -> None:
    counted = progress_counted(pytester)
    with fence("TerminalReporter._progress_nodeids_reported", "progress_reported"):
        assert counted is not None
        assert counted["ids"] == ["test_a.py::test_1", "test_a.py::test_2"]


def test_progress_reported_holds_node_id_strings(pytester: pytest.Pytester) -> None:
    """What ``progress._settle`` relies on: whether a test's node id string
    is counted (node id strings, or ``NodeId`` objects since pytest 9.2)."""
    counted = progress_counted(pytester)
    detail = "what TerminalReporter._progress_nodeids_reported holds (node ids)"
    with fence(detail, "progress_holds (and progress._settle)"):
        assert counted is not None
        assert counted["by_string"]
        assert not counted["not_run"]


def test_write_progress_filling_space(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import pytest
        from pytest_isolation.core.pytest_private import write_progress_filling_space

        CONFIGS = []

        def pytest_configure(config):
            CONFIGS.append(config)

        @pytest.hookimpl(trylast=True)  # after the terminal wrote the test's letter
        def pytest_runtest_logreport(report):
            if report.when == "call":
                reporter = CONFIGS[0].pluginmanager.get_plugin("terminalreporter")
                write_progress_filling_space(reporter)
                reporter.write_line("after the percentage")
        """
    )
    pytester.makepyfile(test_a="def test_1():\n    pass\n")
    result = run_inner(pytester)
    inner_passed(result)
    lines = result.outlines
    detail = "TerminalReporter._write_progress_information_filling_space / _show_progress_info"
    with fence(detail, "write_progress_filling_space"):
        before = lines[lines.index("after the percentage") - 1]
        assert before.startswith("test_a.py .")
        assert before.endswith("%]")


# pytest's capture


def test_global_capture(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_fence="""
        from pytest_isolation.core.pytest_private import global_capture

        def test_running(pytestconfig):
            capture = global_capture(pytestconfig)
            assert capture is not None
            assert hasattr(capture, "out") and hasattr(capture, "err")
        """
    )
    with fence("CaptureManager._global_capturing", "global_capture"):
        inner_passed(run_inner(pytester))


def test_fd_capture_files(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_fence="""
        import sys
        from pytest_isolation.core.pytest_private import fd_capture_files

        def test_found(pytestconfig):
            found = fd_capture_files(pytestconfig)
            assert [target for _, target, _ in found] == [1, 2]
            assert found[0][0] == sys.stdout.fileno()
            assert found[1][0] == sys.stderr.fileno()
        """
    )
    detail = "the global capture's out/err (FDCapture: tmpfile, targetfd, targetfd_save)"
    with fence(detail, "fd_capture_files"):
        inner_passed(run_inner(pytester, "--capture=fd"))


# The state of pytest's other plugins


def test_set_report_status(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfigure("--lf")
    plugin = config.pluginmanager.get_plugin("lfplugin")
    assert plugin is not None
    with fence("LFPlugin._report_status", "set_report_status"):
        pytest_private.set_report_status(plugin, "the fence's status")
        assert plugin.pytest_report_collectionfinish() == "run-last-failure: the fence's status"


def test_tmp_path_factory(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfigure(f"--basetemp={pytester.path / 'base'}")
    with fence("Config._tmp_path_factory", "tmp_path_factory"):
        factory = pytest_private.tmp_path_factory(config)
        assert isinstance(factory, pytest.TempPathFactory)
        assert factory.getbasetemp() == (pytester.path / "base").resolve()


def test_junit_xml_key(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfigure(f"--junitxml={pytester.path / 'out.xml'}")
    detail = "_pytest.junitxml.xml_key or LogXML (add_global_property, node_reporter, family)"
    with fence(detail, "junit_xml_key"):
        writer = config.stash.get(pytest_private.junit_xml_key(), None)
        assert writer is not None
        assert config.pluginmanager.is_registered(writer)
        assert callable(writer.add_global_property)
        assert callable(writer.node_reporter("test_a.py::test_x").add_attribute)
        assert writer.family in ("xunit1", "xunit2", "legacy")


def test_cache_for_config(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfig()  # not configured: no config.cache yet
    with fence("Cache.for_config(config, _ispytest=True)", "cache_for_config"):
        pytest_private.cache_for_config(config).set("isolation/fence", [1])
        assert pytest_private.cache_for_config(config).get("isolation/fence", None) == [1]


#: Records the root logger's handlers during each test, and compares them at the end.
LOGGING_SEEN = """
import json
import logging
from pathlib import Path
from pytest_isolation.core.pytest_private import logging_plugin_handlers

SEEN = []

def pytest_runtest_call(item):
    SEEN.extend(handler for handler in logging.root.handlers if handler not in SEEN)

def pytest_sessionfinish(session):
    owned = logging_plugin_handlers(session.config)
    found = {
        "seen": len(SEEN),
        "owned": sum(1 for handler in SEEN if any(handler is own for own in owned)),
        "modules": sorted({type(handler).__module__ for handler in SEEN}),
    }
    Path("handlers.json").write_text(json.dumps(found))
"""


def handlers_seen(pytester: pytest.Pytester) -> Any:
    pytester.makeconftest(LOGGING_SEEN)
    pytester.makepyfile(test_a="def test_1():\n    pass\n")
    inner_passed(run_inner(pytester))
    return json.loads((pytester.path / "handlers.json").read_text())


def test_logging_plugin_handlers(pytester: pytest.Pytester) -> None:
    found = handlers_seen(pytester)
    assert found["seen"] >= 2  # caplog's and the report's capture at least
    detail = "the logging plugin's handlers, kept as its attributes"
    with fence(detail, "logging_plugin_handlers"):
        assert found["owned"] == found["seen"]


def test_logging_module(pytester: pytest.Pytester) -> None:
    found = handlers_seen(pytester)
    with fence("the module of the logging plugin's handler classes", "LOGGING_MODULE"):
        assert found["modules"] == [pytest_private.LOGGING_MODULE]


# Collection and hook calls


def test_not_initial_paths(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(check_me=PLAIN)  # not a python_files name
    path = str(pytester.path / "check_me.py")

    class NotGiven:
        @pytest.hookimpl(wrapper=True)
        def pytest_collection(self, session: pytest.Session) -> Generator[None, object, object]:
            with pytest_private.not_initial_paths(session, {path}):
                return (yield)

    given = pytester.inline_run("--collect-only", "check_me.py")
    assert len(given.getcalls("pytest_itemcollected")) == 1
    detail = "the Python collector's Session.isinitpath call before python_files"
    with fence(detail, "not_initial_paths"):
        not_given = pytester.inline_run("--collect-only", "check_me.py", plugins=[NotGiven()])
        assert not not_given.getcalls("pytest_itemcollected")


def test_set_hook_caller(pytester: pytest.Pytester) -> None:
    called: list[int] = []

    class Counting:
        """Counts the items of each call, and calls pytest's caller."""

        def __init__(self, original: Any) -> None:
            self.original = original

        def __call__(self, **kwargs: Any) -> Any:
            called.append(len(kwargs["items"]))
            return self.original(**kwargs)

        def __getattr__(self, name: str) -> Any:  # the rest of pluggy's caller interface
            return getattr(self.original, name)

    class Replace:
        @pytest.hookimpl(wrapper=True)
        def pytest_collection(self, session: pytest.Session) -> Generator[None, object, object]:
            hook = "pytest_collection_modifyitems"
            original = getattr(session.config.hook, hook)
            pytest_private.set_hook_caller(session.config, hook, Counting(original))
            try:
                return (yield)
            finally:
                pytest_private.set_hook_caller(session.config, hook, original)

    pytester.makepyfile(test_a="def test_1():\n    pass\n\ndef test_2():\n    pass\n")
    detail = "how the session calls pytest_collection_modifyitems (config.hook's attribute)"
    with fence(detail, "set_hook_caller"):
        pytester.inline_run("--collect-only", plugins=[Replace()])
        assert called == [2]


# pytest.MonkeyPatch's undo lists


def test_monkeypatch_setattrs() -> None:
    target = types.SimpleNamespace(old="before")
    unset = object()
    patcher = pytest.MonkeyPatch()
    with fence("MonkeyPatch._setattr (and its NOTSET/notset marker)", "monkeypatch_setattrs"):
        try:
            patcher.setattr(target, "old", "after")
            patcher.setattr(target, "new", "added", raising=False)
            found = pytest_private.monkeypatch_setattrs(patcher, unset)
        finally:
            patcher.undo()
        assert found == [(target, "old", "before"), (target, "new", unset)]


def test_monkeypatch_setitems(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ISOLATION_FENCE", raising=False)
    mapping = {"old": "before"}
    unset = object()
    patcher = pytest.MonkeyPatch()
    with fence("MonkeyPatch._setitem (setenv among them)", "monkeypatch_setitems"):
        try:
            patcher.setitem(mapping, "old", "after")
            patcher.setenv("ISOLATION_FENCE", "1")
            found = pytest_private.monkeypatch_setitems(patcher, unset)
        finally:
            patcher.undo()
        assert found == [(mapping, "old", "before"), (os.environ, "ISOLATION_FENCE", unset)]


def test_monkeypatch_cwd(tmp_path: Path) -> None:
    before = os.getcwd()
    patcher = pytest.MonkeyPatch()
    with fence("MonkeyPatch._cwd", "monkeypatch_cwd"):
        try:
            assert pytest_private.monkeypatch_cwd(patcher) is None
            patcher.chdir(tmp_path)
            found = pytest_private.monkeypatch_cwd(patcher)
        finally:
            patcher.undo()
        assert found == before


def test_monkeypatch_saved_syspath(tmp_path: Path) -> None:
    patcher = pytest.MonkeyPatch()
    with fence("MonkeyPatch._savesyspath", "monkeypatch_saved_syspath"):
        try:
            assert not pytest_private.monkeypatch_saved_syspath(patcher)
            patcher.syspath_prepend(str(tmp_path))
            found = pytest_private.monkeypatch_saved_syspath(patcher)
        finally:
            patcher.undo()
        assert found


def test_monkeypatch_file() -> None:
    filename = pytest.MonkeyPatch.setattr.__code__.co_filename
    with fence(f"the file that defines MonkeyPatch ({filename})", "MONKEYPATCH_FILE"):
        assert filename.endswith(pytest_private.MONKEYPATCH_FILE)


# pytest's own modules


def test_pytest_package() -> None:
    package = pytest_private.PYTEST_PACKAGE
    modules = sorted({cls.__module__ for cls in (pytest.Session, pytest.Config, pytest.Item)})
    with fence(f"the package of pytest's code (modules {modules})", "PYTEST_PACKAGE"):
        assert all(module.startswith(f"{package}.") for module in modules)
        assert Path(sys.modules[package].__file__ or "").parent.name == package


def test_imported_by_assertion_rewriting(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_fence="""
        import os
        import sys
        from pytest_isolation.core.pytest_private import imported_by_assertion_rewriting

        def test_rewritten():
            assert imported_by_assertion_rewriting(sys.modules[__name__])
            assert not imported_by_assertion_rewriting(os)
        """
    )
    detail = "the loader of a rewritten module (a class of _pytest.assertion.rewrite)"
    with fence(detail, "imported_by_assertion_rewriting"):
        inner_passed(run_inner(pytester))


# pytest-xdist's worker


def test_worker_interactor(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makepyfile(
        test_fence="""
        from pytest_isolation.core.pytest_private import worker_interactor

        def test_found(request):
            assert worker_interactor(request.config) is not None
        """
    )
    with fence("its worker plugin (class WorkerInteractor, with sendevent)", "worker_interactor"):
        inner_passed(run_inner(pytester, "-p", "xdist", "-n", "1"))


def test_worker_running(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makepyfile(
        test_fence="""
        from pytest_isolation.core.pytest_private import worker_running

        def test_found(request):
            items, index = worker_running(request.config)
            assert items[index].nodeid == request.node.nodeid
        """
    )
    with fence("WorkerInteractor.session.items / item_index", "worker_running"):
        inner_passed(run_inner(pytester, "-p", "xdist", "-n", "1"))


# A test in a process of its own (pertest)


def test_set_up_collectors_and_needs_teardown(pytester: pytest.Pytester) -> None:
    item = function_item(pytester, PLAIN)
    parent = item.parent
    assert parent is not None
    with fence("SetupState.setup(node) and SetupState.stack", "set_up_collectors/needs_teardown"):
        pytest_private.set_up_collectors(item.session, parent)
        stack = pytest_private.setup_state(item.session).stack
        assert list(stack) == parent.listchain()
        assert not pytest_private.needs_teardown(item.session, item)
        assert pytest_private.needs_teardown(item.session, None)
    pytest_private.teardown_exact(item.session, None)


def test_capturing_and_read_capture(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_fence="""
        import os, sys
        from pytest_isolation.core.pytest_private import capturing, read_capture

        def test_captured(pytestconfig):
            with capturing(pytestconfig) as captured:
                print("to stdout")
                os.write(2, b"to fd 2\\n")
            assert captured == ["to stdout\\n", "to fd 2\\n"]
            assert read_capture(pytestconfig) == ("", "")
        """
    )
    detail = "CaptureManager.resume_global_capture/suspend_global_capture/read_global_capture"
    with fence(detail, "capturing/read_capture"):
        inner_passed(run_inner(pytester, "--capture=fd"))


def test_phase_log_handlers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_fence="""
        import logging
        from pytest_isolation.core.pytest_private import phase_log_handlers

        def test_handlers(pytestconfig, caplog):
            handlers = phase_log_handlers(pytestconfig)
            assert len(handlers) == 2  # the report's and caplog's
            record = logging.LogRecord("x", logging.WARNING, __file__, 1, "handed", None, None)
            for handler in handlers:
                handler.handle(record)
            assert [r.getMessage() for r in caplog.records] == ["handed"]
        """
    )
    with fence("the logging plugin's LogCaptureHandler on the root logger", "phase_log_handlers"):
        inner_passed(run_inner(pytester))


def test_remember_xfail_mark(pytester: pytest.Pytester) -> None:
    item = function_item(
        pytester, "import pytest\n@pytest.mark.xfail(reason='known')\ndef test_func():\n    pass\n"
    )
    with fence("_pytest.skipping.xfailed_key / evaluate_xfail_marks", "remember_xfail_mark"):
        pytest_private.remember_xfail_mark(item)
        from _pytest import skipping

        assert item.stash[skipping.xfailed_key].reason == "known"


def test_pytest_s_own_makereport(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        def pytest_runtest_makereport(item, call):
            raise AssertionError("a conftest's implementation ran")
        """
    )
    item = function_item(
        pytester, "import pytest\n@pytest.mark.xfail(reason='known')\ndef test_func():\n    pass\n"
    )
    call = pytest.CallInfo.from_call(lambda: 1 / 0, when="teardown")
    with pytest.raises(AssertionError, match="a conftest's implementation ran"):
        item.ihook.pytest_runtest_makereport(item=item, call=call)
    with fence("pytest's makereport plugins are modules of _pytest", "pytest_s_own_makereport"):
        report = pytest_private.pytest_s_own_makereport(item, call)
        assert (report.outcome, report.when) == ("skipped", "teardown")  # the xfail mark's
        assert getattr(report, "wasxfail", None) == "known"


def test_take_hooks(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_fence="""
        import pytest
        from pytest_isolation.core.pytest_private import take_hooks

        SEEN = []

        class Reporter:
            def pytest_runtest_logreport(self, report):
                SEEN.append(("before", report.when))

        class Forwarder:
            def pytest_runtest_logreport(self, report):
                SEEN.append(("after", report.when))

        def test_taken(pytestconfig, request):
            pytestconfig.pluginmanager.register(Reporter(), "reporter")
            forwarder = Forwarder()
            pytestconfig.pluginmanager.register(forwarder, "forwarder")
            take_hooks(pytestconfig, frozenset({"pytest_runtest_logreport"}), keep=forwarder)
            report = pytest.TestReport("x", ("x", 0, "x"), {}, "passed", None, "call")
            request.node.ihook.pytest_runtest_logreport(report=report)  # an FSHookProxy
            pytestconfig.hook.pytest_runtest_logreport(report=report)
            assert SEEN == [("after", "call")] * 2
            assert pytestconfig.hook.pytest_runtest_logstart.get_hookimpls()  # others kept
        """
    )
    with fence("pluggy's HookCaller._hookimpls (HookImpl.plugin)", "take_hooks"):
        result = run_inner(pytester)
        assert result.ret == 0, "\n".join(result.outlines)


def test_hand_over_set_up(pytester: pytest.Pytester) -> None:
    item = function_item(pytester, PLAIN)
    parent = item.parent
    assert parent is not None
    torn_down: list[str] = []
    pytest_private.set_up_collectors(item.session, parent)
    item.session.addfinalizer(lambda: torn_down.append("session"))
    with fence("SetupState.stack ({node: (finalizers, exception)})", "hand_over_set_up"):
        pytest_private.hand_over_set_up(item.session)
        pytest_private.teardown_exact(item.session, None)
        assert torn_down == []
        assert not pytest_private.setup_state(item.session).stack
