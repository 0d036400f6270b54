"""The leak guard's hooks: windows around tests, higher-scoped fixtures, test
files and test module imports; settle what leaked (restore, then report).

Window of a test: from before its first function-scoped fixture is set up to
after its last one is torn down.  State a class/module/package/session
fixture sets up inside that window belongs to the fixture, checked from its
setup to its finalization, and is not the test's leak (see
:mod:`pytest_isolation.guard.scoped`).  What a window leaked is found, put
back and described by :mod:`pytest_isolation.guard.findings`.

The guard keeps each category's last snapshot between windows (see
:mod:`pytest_isolation.guard.windows`): a test that changed nothing costs one
fast comparison per category and no copy.
"""

from __future__ import annotations

import os
import types
from collections.abc import Generator
from typing import Any

import pytest

from pytest_isolation.core.keys import FIRST_RUN_LEFT
from pytest_isolation.core.keys import IN_CHILD
from pytest_isolation.core.keys import IN_TEST_PROCESS
from pytest_isolation.core.keys import REPEAT
from pytest_isolation.core.keys import SHARED_CHILD
from pytest_isolation.core.kinds import GuardPolicy
from pytest_isolation.core.records import Leak
from pytest_isolation.guard import allow
from pytest_isolation.guard.findings import Findings
from pytest_isolation.guard.held import HeldState
from pytest_isolation.guard.leftovers import Leftovers
from pytest_isolation.guard.mocks import active_patches
from pytest_isolation.guard.mocks import resume_pyfakefs
from pytest_isolation.guard.mocks import target_of
from pytest_isolation.guard.recorders import Recorders
from pytest_isolation.guard.report import LeakLog
from pytest_isolation.guard.report import Settler
from pytest_isolation.guard.report import leaks_in_summary
from pytest_isolation.guard.restore import Restorer
from pytest_isolation.guard.scoped import ScopedFixtures
from pytest_isolation.guard.sites import Sites
from pytest_isolation.guard.snapshots import Snapshots
from pytest_isolation.guard.values import FixtureValues
from pytest_isolation.guard.verdict import Verdict
from pytest_isolation.guard.watchlist import Watchlist
from pytest_isolation.guard.windows import OpenWindows
from pytest_isolation.guard.windows import Window

#: Patchers are stopped first: that puts back everything they changed.
PATCHERS = ("mock", "fakefs")
IMPORT_HINT = "run with --isolation-mode=file to keep it in this file, or move it into a fixture"

#: Bound at import: a test may replace ``os.getpid`` (this suite's own tests do).
_getpid = os.getpid


class LeakGuard:
    """Registered as ``isolation-guard``, and kept under ``core.keys.GUARD_KEY``,
    unless ``--isolation-leaks=off``.

    Its steps are parts with one job each: the snapshots (what is watched),
    the recorders (what is heard while a window is open), the findings
    (whose change, leak or routine, put back and described), the
    higher-scoped fixtures' part, the settler (record and report).  The
    guard itself moves state from one window to the next as pytest's hooks
    come: the windows open now (a test's, its file's) and the process they
    belong to are one object, shared with the fixtures' part.
    """

    def __init__(self, config: pytest.Config, policy: GuardPolicy, deep: bool) -> None:
        self.config = config
        self.allowances = allow.parse(
            config.getini("isolation_allow_leaks"), "isolation_allow_leaks (ini)"
        )
        #: ``policy``: warn, error or quiet; or ``watch`` (the guard is off, but
        #: ``--isolation-twice`` asks what a test's first run left changed):
        #: finds, never restores nor reports.
        self.settler = Settler(policy, LeakLog(policy, self._announce))
        sites = Sites(config.rootpath)
        self.watch = Watchlist(config.rootpath, sites.roots, sites.installed)
        self.snapshots = Snapshots(sites, self.watch, deep)
        basetemp = config.option.basetemp
        self.leftovers = Leftovers((str(basetemp),) if basetemp else ())
        self.open = OpenWindows(pid=_getpid())
        values = FixtureValues(policy != "watch") if deep else None
        held = HeldState(self.watch.project_object, self.watch.holds_test_code)
        self.recorders = Recorders(
            sites, self.leftovers, self.watch.project_origin, self._module_loaded
        )
        verdict = Verdict(
            self.watch,
            self.snapshots.containers,
            self.snapshots.sys_modules,
            sites,
            self.recorders.imported,
        )
        self.restorer = Restorer(verdict, self.recorders, policy != "watch")
        self.findings = Findings(
            self.snapshots, verdict, self.restorer, self.recorders, self.leftovers
        )
        self.scoped = ScopedFixtures(
            self.open,
            self.snapshots,
            self.recorders,
            self.restorer,
            self.settler,
            self.leftovers,
            self.allowances,
            held,
            values,
        )

    @property
    def contained(self) -> bool:
        """In a file-mode child of one file, or a test's own process: the
        process contains what imports and files change."""
        stash = self.config.stash
        one_file = stash.get(IN_CHILD, False) and not stash.get(SHARED_CHILD, False)
        return one_file or stash.get(IN_TEST_PROCESS, False)

    def _announce(self, leak: Leak) -> None:
        self.config.hook.pytest_isolation_leak(config=self.config, leak=leak)

    # -- process-wide recorders --------------------------------------------

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        for plugin in self.config.pluginmanager.get_plugins():
            name = getattr(plugin, "__name__", "") if hasattr(plugin, "__file__") else ""
            if name and os.path.basename(str(plugin.__file__)) != "conftest.py":
                self.watch.add_plugin(name)
        self.recorders.install()

    def pytest_unconfigure(self) -> None:
        self.recorders.uninstall()

    def _module_loaded(self, module: types.ModuleType) -> None:
        """A project module imported inside a test: its state as its import
        left it is the test's starting point."""
        if self.open.window is None or not self.recorders.listening:
            return
        self.snapshots.adopt(self.watch.spaces_of(module.__name__, module))

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Unknown categories in markers stop the run before any test runs.

        In a file-mode child the test's setup reports it instead (a usage
        error there would end the child, not the run)."""
        if self.config.stash.get(IN_CHILD, False):
            return
        for item in items:
            if allow.MARKER in item.keywords:
                allow.of_node(item)

    # -- import time ---------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(
        self, collector: pytest.Collector
    ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
        if not isinstance(collector, pytest.Module):
            return (yield)
        self.watch.add_test_file(collector.path)
        if self.contained or not self.restorer.restores:
            report = yield
            if report.passed:  # imported: ``obj`` is the module, no import again
                self._watch_test_module(collector)
            return report
        self.snapshots.refresh()
        before = self.snapshots.tier.take()
        self.recorders.imported.clear()
        self.recorders.start(imports_too=False)
        try:
            report = yield
        finally:
            self.recorders.stop()
        if report.passed:
            self._watch_test_module(collector)
        leaks = self.findings.at_import(collector, before, self.allowances)
        self.settler.settle_import(leaks, collector, report)
        return report

    def _watch_test_module(self, collector: pytest.Module) -> None:
        """Watch an imported test module's constants and what it assigns.
        Never an error: a ``pytest.Module`` subclass's ``obj`` may be anything
        (pygments' snippet collectors)."""
        try:
            module = collector.obj
            if not isinstance(module, types.ModuleType):
                return
            self.watch.add_test_module(module)
            source = collector.path.read_text(encoding="utf-8")
            self.watch.watch_assigned(module, source)
        except Exception:
            return

    # -- per test ------------------------------------------------------------

    @pytest.hookimpl(wrapper=True, tryfirst=True)  # before any fixture of the test
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, None, None]:
        if item.stash.get(REPEAT, "") == "again" and self.open.window is not None:
            # --isolation-twice: the repeat starts from what the first run left, in its window.
            self.leftovers.start()
            self.recorders.start()
            return (yield)
        allowances, bad_marker = self.allowances, None
        if allow.MARKER in item.keywords:
            try:
                allowances = (*allowances, *allow.of_node(item))
            except pytest.UsageError as error:  # a file-mode child reports it here
                bad_marker = str(error)
        if self.open.pid != _getpid():
            # A file-mode child inherits the parent's snapshots, taken before
            # the child's own start (its capture, its signal handlers): the
            # child's first test starts from the child's state instead (a
            # test's own process too: its start changed signals and logging).
            self.open.pid = os.getpid()
            self.snapshots.tier.saved.clear()
            self.snapshots.file_tier.saved.clear()
        if resume_pyfakefs():
            self.snapshots.tier.saved.clear()
        self.snapshots.refresh()
        self.snapshots.tier.ensure()
        file_path = self.open.file_path
        if not self.contained and item.path is not file_path and item.path != file_path:
            self._start_file(item)
        self.leftovers.start()
        self.recorders.seen.clear()
        self.open.window = Window(item.nodeid, "test", allowances, item=item)
        self.recorders.start()
        result = yield
        if bad_marker is not None:
            pytest.fail(bad_marker, pytrace=False)
        self.scoped.remember(item)
        return result

    def _start_file(self, item: pytest.Item) -> None:
        """Open the file window: every module dict, snapshotted (new modules
        only: the last file's end left the rest of the snapshot current)."""
        self.open.file_path = item.path
        self.snapshots.library_attributes.spaces = self.watch.every_module()
        previous = self.snapshots.file_tier.saved.get(self.snapshots.library_attributes)
        self.snapshots.file_tier.saved[self.snapshots.library_attributes] = (
            self.snapshots.library_attributes.snapshot()
            if previous is None
            else self.snapshots.library_attributes.extend(previous)
        )
        module = item.getparent(pytest.Module)
        try:
            file_allowances = allow.of_node(module) if module is not None else ()
        except pytest.UsageError:
            file_allowances = ()  # reported at the test's setup
        self.open.file_window = Window(
            f"{item.nodeid.split('::')[0]} (one of its tests)",
            "file",
            (*self.allowances, *file_allowances),
        )

    @pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: after the last finalizer
    def pytest_runtest_teardown(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, None, None]:
        __tracebackhide__ = True  # a leak error shows the test, not the guard
        repeat = item.stash.get(REPEAT, "")
        self.open.last_teardown = nextitem is None
        for patch in active_patches():  # what the test patched is watched per test from now on
            self.watch.add_patched(target_of(patch))
        value_leaks = []  # before the fixtures' own teardown, which may change them
        if self.open.window is not None:
            value_leaks = self.scoped.changed_by(self.open.window, restore=repeat != "first")
        raised: BaseException | None = None
        result = None
        try:
            result = yield
        except BaseException as error:  # an inner teardown failed: still close the window
            raised = error
        if repeat == "first" and self.open.window is not None:
            self._first_run_ended(item, self.open.window, value_leaks)
            if raised is not None:
                raise raised
            return result
        window, self.open.window = self.open.window, None
        self.recorders.stop()
        escalated = []
        if window is not None:
            leaks = [
                *value_leaks,
                *self.findings.close(window, self.snapshots.tier),
                *self.findings.left_behind(window),
                *self.scoped.files_changed(window),
            ]
            if repeat != "again":  # a repeat's are restored; the first run's were reported
                escalated += self.settler.settle(leaks, item)
        if self.open.file_window is not None and (
            nextitem is None or (nextitem.path is not item.path and nextitem.path != item.path)
        ):
            file_window, self.open.file_window = self.open.file_window, None
            leaks = self.findings.close(file_window, self.snapshots.file_tier)
            self.recorders.imported.clear()
            for leak in leaks:
                owner = self.snapshots.library_attributes.where.get(leak.key, (None,))[0]
                self.watch.add_patched(owner)
            escalated += self.settler.settle(leaks, item)
        if raised is not None:
            raise raised
        self.settler.fail_test(escalated)
        return result

    def _first_run_ended(self, item: pytest.Item, window: Window, value_leaks: list[Leak]) -> None:
        """``--isolation-twice``: the first of a test's two runs has ended.
        What it left changed is reported as a single run's leaks would be, and
        kept for the repeat's report; nothing is put back, so the repeat starts
        from it, and the window stays open until the repeat's teardown."""
        __tracebackhide__ = True
        self.recorders.stop()
        leaks = value_leaks + self.findings.peek(window) + self.findings.left_behind(window)
        item.stash[FIRST_RUN_LEFT] = leaks
        self.settler.fail_test(self.settler.settle(leaks, item))

    # -- higher-scoped fixtures (see :mod:`.scoped`) ---------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any) -> Generator[None, object, object]:
        return (yield from self.scoped.setup(fixturedef))

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_post_finalizer(
        self, fixturedef: Any, request: pytest.FixtureRequest
    ) -> Generator[None, object, object]:
        __tracebackhide__ = True
        return (yield from self.scoped.finalized(fixturedef, request))

    # -- reporting -------------------------------------------------------------

    def before_fork(self) -> None:
        """Right before a test's own process is forked: note here, once, the
        modules imported since the last test, which that process would
        otherwise classify anew, each test's process over again."""
        self.snapshots.refresh()

    def record(self, leak: Leak) -> bool:
        """A leak found in a file-mode child, for this (the parent's) summary;
        whether it is the run's first of its key (the one to warn about)."""
        return self.settler.log.add(leak)

    def pytest_isolation_workeroutput(self, output: dict[str, Any]) -> None:
        leaks = self.settler.log.by_owner.values()
        output["leaks"] = [leak.to_wire() for found in leaks for leak in found]

    def pytest_isolation_merge_workeroutput(self, output: dict[str, Any]) -> None:
        for fields in output.get("leaks", ()):
            self.settler.log.add(Leak(**fields))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        # Before the terminal reporter's summary (in its sessionfinish wrapper).
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            leaks_in_summary(reporter, self.settler.log)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        self.settler.log.summarize(terminalreporter)
