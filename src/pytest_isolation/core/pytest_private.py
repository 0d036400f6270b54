"""Every private detail of pytest, pluggy and pytest-xdist the plugin relies on.

Each function touches one detail that no public API offers, names it, and
says why the plugin cannot do without it; nothing else in the package
touches them.  A release that changes one breaks one function here, and
``tests/test_pytest_private.py`` (one test per detail, run on the oldest
and the newest supported pytest) says which, and what to change.  The
module is longer than most on purpose: the details are in one place.

Imports: the standard library and pytest only, so a child starts light.
``_pytest`` modules are imported inside the functions that need them, and
pytest-xdist never is (its worker plugin is found by its class's name).
"""

# Length: every private detail the package relies on is here, one short fenced
# function each; splitting them would scatter what a pytest release can break.

from __future__ import annotations

import contextlib
import logging
import os
import sys
import types
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Any
from typing import Final
from typing import cast

import pytest

if TYPE_CHECKING:  # pytest's private types, for annotations only: nothing is imported at run time
    from _pytest._io import TerminalWriter
    from _pytest.capture import MultiCapture
    from _pytest.fixtures import FixtureDef
    from _pytest.fixtures import FuncFixtureInfo
    from _pytest.nodes import Node
    from _pytest.runner import SetupState

#: The package that holds pytest's code (``pytest`` re-exports its public
#: names): a module, frame or hook implementation under it is pytest's own,
#: never the suite's or another plugin's.
PYTEST_PACKAGE: Final = "_pytest"
#: The module of pytest's logging plugin, whose handler classes (``caplog``'s,
#: the reports' capture, live logs, ``--log-file``) are defined there: a
#: handler of one of them on the root logger belongs to the run.
LOGGING_MODULE: Final = f"{PYTEST_PACKAGE}.logging"
#: The end of the path of the file that defines ``pytest.MonkeyPatch``: a
#: frame in it is a change made through a ``MonkeyPatch``.
MONKEYPATCH_FILE: Final = os.path.join(PYTEST_PACKAGE, "monkeypatch.py")
#: The module of pytest's assertion rewriting, whose import hook is the loader
#: of every module it rewrote.
_REWRITE_MODULE = f"{PYTEST_PACKAGE}.assertion.rewrite"


# pytest's runner: its stack of set-up nodes, and one phase of a test.


def setup_state(session: pytest.Session) -> SetupState:
    """pytest's stack of set-up nodes and their finalizers,
    ``session._setupstate``: a fixture set up outside a test registers its
    teardown there, and only it tears down what an item set up."""
    return session._setupstate


def teardown_exact(session: pytest.Session, nextitem: pytest.Item | None) -> None:
    """Tear down what is set up and ``nextitem`` does not share, as pytest's
    runner does after each item (``SetupState.teardown_exact``)."""
    setup_state(session).teardown_exact(nextitem)


def push_nodes(session: pytest.Session, nodes: Iterable[Node]) -> list[Node]:
    """Make ``nodes`` active on pytest's set-up stack without setting any up
    (no ``setup_module``, no autouse fixture runs), so that fixtures can be
    set up for them; return those it added.  The stack is
    ``SetupState.stack``, ``{node: (finalizers, exception)}``."""
    stack = setup_state(session).stack
    pushed = [node for node in nodes if node not in stack]
    for node in pushed:
        stack[node] = ([], None)
    return pushed


def pop_nodes(session: pytest.Session, pushed: Iterable[Node]) -> list[Callable[[], object]]:
    """Take the nodes :func:`push_nodes` added back off pytest's set-up
    stack, and with them the finalizers registered on them since (the
    teardown of what was set up for them): neither pytest nor a forked child
    runs those; the caller does."""
    stack = setup_state(session).stack
    taken: list[Callable[[], object]] = []
    for node in pushed:
        finalizers, _ = stack.pop(node)
        taken += finalizers
    return taken


def call_and_report(
    item: pytest.Item, when: str, log: bool, nextitem: pytest.Item | None = None
) -> pytest.TestReport:
    """One phase (``setup``, ``call`` or ``teardown``) of ``item`` as pytest
    runs it: its hook, its report made by ``pytest_runtest_makereport``,
    logged if ``log``, and ``--pdb`` on its exception
    (``_pytest.runner.call_and_report``).  ``runtestprotocol`` runs the
    three in one go and fixes the teardown's next item before the call's
    outcome is known, which ``--isolation-twice`` must choose after it;
    pytest-rerunfailures and pytest-xdist use the same function."""
    from _pytest.runner import call_and_report as call

    kwds: dict[str, Any] = {"nextitem": nextitem} if when == "teardown" else {}
    return call(item, when, log, **kwds)  # type: ignore[arg-type]


def set_up_collectors(session: pytest.Session, node: pytest.Collector) -> None:
    """Set up ``node`` and the collectors above it that are not set up yet,
    as pytest's runner does for an item's collectors before its own set-up
    (``SetupState.setup``, which takes any node with a ``listchain``); raises
    what a collector's set-up raised, now or before (pytest keeps it)."""
    setup_state(session).setup(node)  # type: ignore[arg-type]


def needs_teardown(session: pytest.Session, nextitem: pytest.Item | None) -> bool:
    """Whether :func:`teardown_exact` would tear anything down: the set-up
    nodes are not the first of ``nextitem``'s chain (``SetupState.stack``)."""
    stack = list(setup_state(session).stack)
    needed = nextitem.listchain() if nextitem is not None else []
    return stack != needed[: len(stack)]


# A test function's fixture request, fixture closure and stash.


def item_request(item: pytest.Function) -> pytest.FixtureRequest:
    """The test function's fixture request, ``item._request``: the only way
    to set up its fixtures outside its own set-up."""
    request: pytest.FixtureRequest = item._request
    return request


def renew_request(item: pytest.Function) -> None:
    """Give a test function that ran a new fixture request, as pytest's
    ``runtestprotocol`` does before its set-up (``item._initrequest()``
    when ``item._request`` was let go): a test runs again with one."""
    if not item._request:
        item._initrequest()


def release_request(item: pytest.Function) -> None:
    """Let the test function's fixture request go after its teardown, as
    pytest's ``runtestprotocol`` does (``item._request = False``)."""
    item._request = False  # type: ignore[assignment]


def fixture_info(item: pytest.Function) -> FuncFixtureInfo:
    """The test function's fixture closure, ``item._fixtureinfo`` (its
    fixture names and the definitions of each): a copy of the test made
    with it resolves its fixtures, direct parameters included, the same way."""
    return item._fixtureinfo


def fixture_definitions(item: pytest.Item) -> Mapping[str, Sequence[FixtureDef[Any]]]:
    """The fixture definitions the item sees, by name, the closest last
    (``item._fixtureinfo.name2fixturedefs``); none for an item that is not a
    test function.  pytest offers them only to its own fixture lookup."""
    info = getattr(item, "_fixtureinfo", None)
    found: Mapping[str, Sequence[FixtureDef[Any]]] = (
        getattr(info, "name2fixturedefs", {}) if info is not None else {}
    )
    return found


def cached_result(definition: object) -> tuple[Any, ...] | None:
    """A fixture definition's cached ``(value, cache key, exception)``, or
    None when it is not set up (``FixtureDef.cached_result``)."""
    cached: tuple[Any, ...] | None = getattr(definition, "cached_result", None)
    return cached


def forget_cached_value(definition: FixtureDef[Any]) -> None:
    """Make pytest set a fixture up again at its next request, without
    tearing the current value down: its value is ``cached_result`` and its
    teardown steps ``_finalizers``."""
    definition.cached_result = None
    definition._finalizers.clear()


def fixture_definitions_finished_by(finalizers: Iterable[Callable[[], object]]) -> list[object]:
    """The fixture definitions whose teardown the finalizers are: pytest
    registers ``functools.partial(definition.finish, request=...)``."""
    found = []
    for finalizer in finalizers:
        method = getattr(finalizer, "func", None)
        owner = getattr(method, "__self__", None)
        if owner is not None and getattr(method, "__name__", "") == "finish":
            found.append(owner)
    return found


def replace_finish(definition: object, finish: Callable[[object], None]) -> None:
    """Make ``finish(request)`` the teardown pytest registers for this fixture
    definition from now on: it registers ``definition.finish`` as it finds
    it on the definition, so an attribute of the instance takes the method's
    place."""
    cast(Any, definition).finish = finish


def restore_finish(definition: object) -> None:
    """Undo :func:`replace_finish`: pytest's own ``finish`` again."""
    vars(definition).pop("finish", None)


def skip_marks_apply(item: pytest.Item) -> bool:
    """Whether a ``skip`` or ``skipif`` mark (its condition evaluated now)
    skips ``item``, as pytest's set-up evaluates them
    (``_pytest.skipping.evaluate_skip_marks``); raises what a condition
    raises."""
    from _pytest import skipping

    return skipping.evaluate_skip_marks(item) is not None


def xfail_mark_stops_run(item: pytest.Item) -> bool:
    """Whether an ``xfail(run=False)`` mark (its condition evaluated now)
    keeps ``item`` from running, as pytest's set-up evaluates it
    (``_pytest.skipping.evaluate_xfail_marks``), ``--runxfail`` aside;
    raises what a condition raises."""
    from _pytest import skipping

    xfail = skipping.evaluate_xfail_marks(item)
    return xfail is not None and not xfail.run


def remember_xfail_mark(item: pytest.Item) -> None:
    """Evaluate ``item``'s ``xfail`` mark and keep it where pytest's report of
    a phase reads it (``_pytest.skipping.xfailed_key``, set by pytest's own
    set-up, which ran in another process), unless ``--runxfail``."""
    from _pytest import skipping

    if not item.config.option.runxfail:
        item.stash[skipping.xfailed_key] = skipping.evaluate_xfail_marks(item)


def pytest_s_own_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    """``item``'s report of ``call`` made by pytest's own
    ``pytest_runtest_makereport`` implementations only (the runner's, an
    ``xfail`` mark's): made in a process where the test's earlier phases did
    not run, a plugin's implementation may miss what it kept from them
    (pytest-rerunfailures' ``item._terminal_errors``).  pytest's own plugins
    are those of its package."""
    manager = item.config.pluginmanager
    others = [plugin for plugin in manager.get_plugins() if not _of_pytest(plugin)]
    remember_xfail_mark(item)
    made = manager.subset_hook_caller("pytest_runtest_makereport", others)
    report: pytest.TestReport = made(item=item, call=call)
    return report


def _of_pytest(plugin: object) -> bool:
    module = plugin.__name__ if isinstance(plugin, types.ModuleType) else type(plugin).__module__
    return module == PYTEST_PACKAGE or module.startswith(f"{PYTEST_PACKAGE}.")


def catch_warnings_for_item(item: pytest.Item) -> contextlib.AbstractContextManager[None]:
    """pytest's own handling of the warnings of a test's phase
    (``_pytest.warnings.catch_warnings_for_item``): the run's filters (``-W``,
    ``filterwarnings``, ``error`` included) apply, and what is caught goes to
    the warnings summary."""
    from _pytest.warnings import catch_warnings_for_item as catching

    manager: contextlib.AbstractContextManager[None] = catching(
        item.config, item.ihook, "runtest", item
    )
    return manager


def copy_stash(source: pytest.Stash, target: pytest.Stash) -> None:
    """Copy every entry of ``source`` into ``target``: a stash's keys can
    only be listed through ``Stash._storage``."""
    target._storage.update(source._storage)


# The terminal reporter and its writer.


def terminal_writer(reporter: pytest.TerminalReporter) -> TerminalWriter:
    """The terminal reporter's writer, ``reporter._tw``, which is what
    ``config.get_terminal_writer()`` returns."""
    return reporter._tw


def set_terminal_writer(holder: object, writer: object) -> None:
    """Make ``writer`` what ``config.get_terminal_writer()`` returns while
    ``holder`` is registered as ``"terminalreporter"``: it returns that
    plugin's ``_tw``."""
    cast(Any, holder)._tw = writer


def writer_file(writer: TerminalWriter) -> object:
    """The stream a terminal writer writes to, ``writer._file``."""
    stream: object = writer._file
    return stream


def set_writer_file(writer: TerminalWriter, stream: object) -> None:
    """Make the terminal writer write to ``stream`` (``writer._file``); it
    needs ``write``, ``flush`` and ``encoding``."""
    cast(Any, writer)._file = stream


def progress_reported(reporter: object) -> set[object] | None:
    """The node ids the terminal's percentage counts so far
    (``_progress_nodeids_reported``, filled at a test's report or at its
    end, depending on pytest's version and verbosity; strings before pytest
    9.2, ``NodeId`` objects since), or None without it: only that count says
    what the terminal shows."""
    counted = getattr(reporter, "_progress_nodeids_reported", None)
    return counted if isinstance(counted, set) else None


def progress_holds(counted: set[object], nodeid: str) -> bool:
    """Whether the terminal's count (:func:`progress_reported`) holds the
    test ``nodeid``: a node id string before pytest 9.2, a structured
    ``_pytest.nodeid.NodeId`` (equal when its path, names and parameters
    are) since."""
    if nodeid in counted:
        return True
    node_id = sys.modules.get("_pytest.nodeid")
    parse = getattr(getattr(node_id, "NodeId", None), "parse", None)
    return parse is not None and parse(nodeid) in counted


def write_progress_filling_space(reporter: pytest.TerminalReporter) -> None:
    """End the terminal's current line with its ``[NN%]``, as pytest does
    when the next file begins (``_write_progress_information_filling_space``,
    when ``_show_progress_info`` says it shows one)."""
    if getattr(reporter, "_show_progress_info", False):
        reporter._write_progress_information_filling_space()


# pytest's capture.


def global_capture(config: pytest.Config) -> MultiCapture[str] | None:
    """pytest's global capture while it is running, else None
    (``CaptureManager._global_capturing``; ``is_globally_capturing()`` only
    says it was asked for: pytest stops it on Ctrl-C)."""
    capman = config.pluginmanager.get_plugin("capturemanager")
    capturing: MultiCapture[str] | None = getattr(capman, "_global_capturing", None)
    return capturing


def fd_capture_files(config: pytest.Config) -> list[tuple[int, int, int]]:
    """The descriptors of the global fd capture's files of stdout and stderr,
    each with the descriptor it captures and the one it saved to put back
    when suspended (none under ``--capture=sys``, ``tee-sys`` or ``no``,
    whose streams are the process's own memory).  The global capture's
    ``out`` and ``err`` are, under ``--capture=fd``, ``FDCapture`` objects
    with ``tmpfile``, ``targetfd`` and ``targetfd_save``."""
    multi = global_capture(config)
    found = []
    for capture in (getattr(multi, "out", None), getattr(multi, "err", None)):
        target = getattr(capture, "targetfd", None)
        saved = getattr(capture, "targetfd_save", None)
        tmpfile = getattr(capture, "tmpfile", None)
        if isinstance(target, int) and isinstance(saved, int) and tmpfile is not None:
            found.append((tmpfile.fileno(), target, saved))
    return found


# The state of pytest's other plugins.


def set_report_status(lfplugin: object, status: str) -> None:
    """Put ``status`` in pytest's "run-last-failure: ..." header line, which
    the last-failed plugin makes from its ``_report_status``."""
    if hasattr(lfplugin, "_report_status"):
        cast(Any, lfplugin)._report_status = status


def tmp_path_factory(config: pytest.Config) -> pytest.TempPathFactory | None:
    """The run's temporary path factory, None without pytest's tmpdir
    plugin: outside a test it is only reachable as ``config._tmp_path_factory``."""
    factory: pytest.TempPathFactory | None = getattr(config, "_tmp_path_factory", None)
    return factory


def junit_xml_key() -> pytest.StashKey[Any]:
    """The stash key of junit's XML writer (``LogXML``), which
    ``record_testsuite_property`` and ``record_xml_attribute`` reach and
    which has no public handle: ``_pytest.junitxml.xml_key``.  The writer
    offers ``add_global_property``, ``node_reporter(nodeid).add_attribute``
    and ``family``."""
    from _pytest.junitxml import xml_key

    key: pytest.StashKey[Any] = xml_key
    return key


def cache_for_config(config: pytest.Config) -> pytest.Cache:
    """pytest's cache before ``pytest_configure`` made ``config.cache``
    (which the selector needs in ``pytest_cmdline_main``, so that a refusal
    runs nothing): ``Cache.for_config(config, _ispytest=True)``, what the
    cache provider's configure calls (clearing it under ``--cache-clear``)."""
    return pytest.Cache.for_config(config, _ispytest=True)


def logging_plugin_handlers(config: pytest.Config) -> list[logging.Handler]:
    """The handlers pytest's logging plugin (``"logging-plugin"``) keeps as
    its attributes, which it puts on the root logger around the run loop, the
    collection and each phase."""
    plugin = config.pluginmanager.get_plugin("logging-plugin")
    values = vars(plugin).values() if plugin is not None else ()
    return [value for value in values if isinstance(value, logging.Handler)]


# pytest's capture manager.


def read_capture(config: pytest.Config) -> tuple[str, str]:
    """What the global capture holds and no phase has read yet, as pytest
    reads it at the end of a phase (``CaptureManager.read_global_capture``);
    empty when nothing captures.  Under ``--capture=fd`` a forked test's
    process writes to the same files as the process it was forked from."""
    capman = config.pluginmanager.get_plugin("capturemanager")
    if capman is None or global_capture(config) is None:
        return "", ""
    out, err = capman.read_global_capture()
    return str(out or ""), str(err or "")


@contextlib.contextmanager
def capturing(config: pytest.Config, read: bool = True) -> Iterator[list[str]]:
    """Capture stdout and stderr as a phase of a test does
    (``CaptureManager.resume_global_capture`` / ``suspend_global_capture``),
    and give them, once the body is done, in the list yielded; unless
    ``read`` is False: then what was written stays for the next reader."""
    capman = config.pluginmanager.get_plugin("capturemanager")
    captured: list[str] = []
    if capman is None or global_capture(config) is None:
        yield captured
        return
    capman.resume_global_capture()
    try:
        yield captured
    finally:
        capman.suspend_global_capture(in_=False)
        if read:
            captured.extend(read_capture(config))


def take_hooks(config: pytest.Config, names: frozenset[str], keep: object) -> None:
    """From now on, the hooks in ``names`` have no implementation in this
    process but ``keep``'s (a registered plugin), however they are called
    (``config.hook``, ``item.ihook``, historic): pluggy keeps a hook's
    implementations, wrappers included, in ``HookCaller._hookimpls`` (each
    with its ``plugin``), which ``item.ihook``'s subset callers filter, and
    no public API keeps an implementation out of the calls pytest makes.
    Nothing is added to any other hook's calls."""
    for name in names:
        caller = getattr(config.hook, name)
        caller._hookimpls[:] = [impl for impl in caller._hookimpls if impl.plugin is keep]


def hand_over_set_up(session: pytest.Session) -> None:
    """Leave what is set up now to the process this one was forked from:
    the nodes on pytest's set-up stack stay set up here (a test's set-up
    finds them), but their finalizers (collectors' teardown, their fixtures'
    finish) are taken off, so that this process's teardown of a test runs
    only the test's own (``SetupState.stack``: ``{node: (finalizers,
    exception)}``)."""
    stack = setup_state(session).stack
    for node, (_, exception) in list(stack.items()):
        stack[node] = ([], exception)


def phase_log_handlers(config: pytest.Config) -> list[logging.Handler]:
    """The handlers pytest's logging plugin has on the root logger for the
    phase running now: the report's and ``caplog``'s, both
    ``_pytest.logging.LogCaptureHandler`` (not public), which only that
    plugin puts there."""
    return [
        handler
        for handler in logging.getLogger().handlers
        if type(handler).__name__ == "LogCaptureHandler"
        and type(handler).__module__ == LOGGING_MODULE
    ]


# Collection and hook calls.


@contextlib.contextmanager
def not_initial_paths(session: pytest.Session, paths: set[str]) -> Iterator[None]:
    """While collecting, take the files of ``paths`` for ones reached
    through a directory, not given as arguments: pytest's Python collector
    (``_pytest.python.pytest_collect_file``) collects an argument whatever
    ``python_files`` says, and asks ``Session.isinitpath`` first."""
    original = session.isinitpath

    def isinitpath(path: str | os.PathLike[str], *, with_parents: bool = False) -> bool:
        if not with_parents and str(path) in paths:
            return False
        return original(path, with_parents=with_parents)

    session.isinitpath = isinitpath  # type: ignore[method-assign]
    try:
        yield
    finally:
        del session.isinitpath


def set_hook_caller(config: pytest.Config, name: str, caller: object) -> None:
    """Make ``caller`` what pytest calls for the hook ``name``: pytest calls
    hooks as attributes of ``config.hook`` (a ``pluggy.HookRelay``), and no
    public API leaves implementations out of the calls pytest makes."""
    setattr(config.hook, name, caller)


# pytest.MonkeyPatch's undo lists.


def monkeypatch_setattrs(
    patcher: pytest.MonkeyPatch, unset: object
) -> list[tuple[object, str, object]]:
    """The ``setattr`` calls a ``MonkeyPatch`` would undo, as (object, name,
    old value), ``unset`` for an attribute that was not set.  ``MonkeyPatch``
    keeps its undo lists in ``_setattr``, ``_setitem``, ``_cwd`` and
    ``_savesyspath`` and offers no public way to read them."""
    notset = _monkeypatch_notset()
    return [
        (target, name, unset if old is notset else old)
        for target, name, old in getattr(patcher, "_setattr", ())
    ]


def monkeypatch_setitems(
    patcher: pytest.MonkeyPatch, unset: object
) -> list[tuple[object, object, object]]:
    """The ``setitem`` calls (``setenv`` among them) a ``MonkeyPatch`` would
    undo, as (mapping, key, old value), ``unset`` for a key that was not set
    (``_setitem``)."""
    notset = _monkeypatch_notset()
    return [
        (mapping, key, unset if old is notset else old)
        for mapping, key, old in getattr(patcher, "_setitem", ())
    ]


def monkeypatch_cwd(patcher: pytest.MonkeyPatch) -> str | None:
    """The working directory a ``MonkeyPatch`` would go back to, None when it
    did not change it (``_cwd``)."""
    cwd: str | None = getattr(patcher, "_cwd", None)
    return cwd


def monkeypatch_saved_syspath(patcher: pytest.MonkeyPatch) -> bool:
    """Whether a ``MonkeyPatch`` would put ``sys.path`` back (``_savesyspath``)."""
    return getattr(patcher, "_savesyspath", None) is not None


def _monkeypatch_notset() -> object:
    """MonkeyPatch's "was not set" marker (``NOTSET`` since pytest 8.1,
    ``notset`` before), read from the module that defines ``MonkeyPatch``."""
    module = sys.modules[pytest.MonkeyPatch.__module__]
    return getattr(module, "NOTSET", getattr(module, "notset", object()))


# Modules pytest imported.


def imported_by_assertion_rewriting(module: object) -> bool:
    """Whether pytest's assertion rewriting imported ``module`` (its loader
    is the rewriting hook, a class of ``_pytest.assertion.rewrite``); pytest
    has no public way to ask."""
    loader = getattr(module, "__loader__", None)
    return type(loader).__module__ == _REWRITE_MODULE


# pytest-xdist's worker.


def worker_interactor(config: pytest.Config) -> Any:
    """pytest-xdist's plugin in a worker that sends reports to the
    controller, or None: it is registered without a name, so it is found by
    its class's name, ``WorkerInteractor``, and its ``sendevent``."""
    for plugin in config.pluginmanager.get_plugins():
        if type(plugin).__name__ == "WorkerInteractor" and hasattr(plugin, "sendevent"):
            return plugin
    return None


def worker_running(config: pytest.Config) -> tuple[list[pytest.Item], int] | None:
    """In a pytest-xdist worker running an item, the worker's items and the
    index of the one it runs (``WorkerInteractor.session.items`` and
    ``item_index``, set once it runs one), else None.  The worker asserts
    that a report's node id is that item's, which a file's placeholder's
    real tests' reports are not."""
    interactor = worker_interactor(config)
    items: list[pytest.Item] | None = getattr(getattr(interactor, "session", None), "items", None)
    index: int | None = getattr(interactor, "item_index", None)
    return None if items is None or index is None else (items, index)
