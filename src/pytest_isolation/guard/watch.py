"""The leak guard's hooks: windows around tests, higher-scoped fixtures, test
files and test module imports; settle what leaked (restore, then report).

Window of a test: from before its first function-scoped fixture is set up to
after its last one is torn down.  State a class/module/package/session
fixture sets up inside that window belongs to the fixture, checked from its
setup to its finalization, and is not the test's leak.

The guard keeps each category's last snapshot between windows (see
:mod:`pytest_isolation.guard.windows`): a test that changed nothing costs one
fast comparison per category and no copy.
"""

from __future__ import annotations

import dataclasses
import os
import types
from collections.abc import Generator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from pytest_isolation.core.keys import FIRST_RUN_LEFT
from pytest_isolation.core.keys import IN_CHILD
from pytest_isolation.core.keys import REPEAT
from pytest_isolation.core.keys import SHARED_CHILD
from pytest_isolation.core.kinds import GuardPolicy
from pytest_isolation.core.records import Leak
from pytest_isolation.guard import allow
from pytest_isolation.guard.attributes import Watchlist
from pytest_isolation.guard.held import HeldState
from pytest_isolation.guard.held import SharedFiles
from pytest_isolation.guard.held import as_path
from pytest_isolation.guard.held import fixture_folders
from pytest_isolation.guard.held import fixture_label
from pytest_isolation.guard.held import regular_files
from pytest_isolation.guard.leftovers import Leftovers
from pytest_isolation.guard.messages import describe
from pytest_isolation.guard.messages import fold_reimports
from pytest_isolation.guard.messages import subject
from pytest_isolation.guard.mocks import active_patches
from pytest_isolation.guard.mocks import known_patcher
from pytest_isolation.guard.mocks import patched_by
from pytest_isolation.guard.mocks import resume_pyfakefs
from pytest_isolation.guard.mocks import start_site
from pytest_isolation.guard.mocks import target_of
from pytest_isolation.guard.recorders import Recorders
from pytest_isolation.guard.report import IN_TEARDOWN
from pytest_isolation.guard.report import LeakLog
from pytest_isolation.guard.report import Settler
from pytest_isolation.guard.report import leaks_in_summary
from pytest_isolation.guard.restore import Restorer
from pytest_isolation.guard.sites import Sites
from pytest_isolation.guard.snapshots import Snapshots
from pytest_isolation.guard.state import MISSING
from pytest_isolation.guard.values import FixtureValues
from pytest_isolation.guard.verdict import Verdict
from pytest_isolation.guard.verdict import first_import
from pytest_isolation.guard.verdict import package_logger
from pytest_isolation.guard.windows import Diffs
from pytest_isolation.guard.windows import FixtureWindows
from pytest_isolation.guard.windows import Owned
from pytest_isolation.guard.windows import Tier
from pytest_isolation.guard.windows import Window
from pytest_isolation.guard.windows import attribute_id
from pytest_isolation.guard.windows import changes
from pytest_isolation.guard.windows import pytest_path_insert
from pytest_isolation.guard.windows import raw_changes
from pytest_isolation.guard.windows import safe_unchanged

#: Patchers are stopped first: that puts back everything they changed.
PATCHERS = ("mock", "fakefs")
IMPORT_HINT = "run with --isolation-mode=file to keep it in this file, or move it into a fixture"
#: The run's guard, for the parts that hand it leaks found elsewhere.
GUARD_KEY = pytest.StashKey["LeakGuard"]()


#: Bound at import: a test may replace ``os.getpid`` (this suite's own tests do).
_getpid = os.getpid


class LeakGuard:
    """Registered as ``isolation-guard``, and kept under :data:`GUARD_KEY`,
    unless ``--isolation-leaks=off``.

    Its steps are parts with one job each: the snapshots (what is watched),
    the recorders (what is heard while a window is open), the verdict (whose
    change, leak or routine), the restorer (put back), the settler (record
    and report).  The guard itself holds only the windows open now (a test,
    its file, higher-scoped fixtures) and the process they belong to: each
    hook moves state from one window to the next, so they stay on the one
    plugin object (16 attributes, most of them those parts).
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
        self.window: Window | None = None
        self.file_window: Window | None = None
        self.file_path: Path | None = None
        self.fixtures = FixtureWindows()
        #: The deep tier's higher-scoped fixture values (None without it).
        self.values = FixtureValues(policy != "watch") if deep else None
        #: What the test shares through higher-scoped fixtures and its unittest class.
        self.held = HeldState(self.watch.project_object, self.watch.holds_test_code)
        if self.values is not None:  # one record of the higher-scoped fixtures alive
            self.values.scoped = self.held.scoped
        #: The files and folders of higher-scoped fixtures.
        self.shared_files = SharedFiles()
        self.recorders = Recorders(
            sites, self.leftovers, self.watch.project_origin, self._module_loaded
        )
        self.verdict = Verdict(
            self.watch,
            self.snapshots.containers,
            self.snapshots.sys_modules,
            sites,
            self.recorders.imported,
        )
        self.restorer = Restorer(self.verdict, self.recorders, policy != "watch")
        #: In the teardown of the last test (of the run, or of a file's process).
        self.last_teardown = False
        #: The process whose state the snapshots are of.
        self.pid = _getpid()

    def _tiers(self, fixturedef: Any = None) -> list[Tier]:
        """The tiers open now: the file's too while a test file runs, except
        for a class-scoped fixture, which is checked like a test (the
        library modules' functions and classes once per file: comparing
        them at each of a Django suite's class set-ups and teardowns
        doubled its run time)."""
        file_open = self.file_window is not None
        if fixturedef is not None and fixturedef.scope == "class":
            file_open = False
        return self.snapshots.tiers(file_open)

    @property
    def contained(self) -> bool:
        """In a file-mode child of one file: the process contains what imports
        and files change."""
        stash = self.config.stash
        return stash.get(IN_CHILD, False) and not stash.get(SHARED_CHILD, False)

    def _announce(self, leak: Leak) -> None:
        self.config.hook.pytest_isolation_leak(config=self.config, leak=leak)

    # -- process-wide recorders --------------------------------------------

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        for plugin in self.config.pluginmanager.get_plugins():
            name = getattr(plugin, "__name__", "") if hasattr(plugin, "__file__") else ""
            if name and os.path.basename(str(plugin.__file__)) != "conftest.py":
                self.watch.plugin_packages.add(name.partition(".")[0])
                self.watch.plugin_modules.add(name)
        self.recorders.install()

    def pytest_unconfigure(self) -> None:
        self.recorders.uninstall()

    def _module_loaded(self, module: types.ModuleType) -> None:
        """A project module imported inside a test: its state as its import
        left it is the test's starting point."""
        if self.window is None or not self.recorders.listening:
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
        found = [
            item
            for item in changes(self.snapshots.tier, before)
            if not pytest_path_insert(item, collector.path)
            and not self.verdict.library_set(item)
            and not first_import(item)
            and not package_logger(item)
        ]
        self.snapshots.tier.rebase()  # the tests of this file start from what the import left
        owner = f"{collector.nodeid} (at import)"
        try:
            allowances = (*self.allowances, *allow.of_node(collector))
        except pytest.UsageError:
            allowances = self.allowances  # reported at the test's setup
        patched = {
            target
            for item in found
            if item.category.name == "mock"
            for target in patched_by(item.new)
        }
        found = [
            item
            for item in found
            if item.category is not self.snapshots.attributes
            or attribute_id(self.snapshots.attributes.where[item.key]) not in patched
        ]
        # A patch started while the first module to import unittest.mock was
        # imported has no recorded line: the module is the site.
        module_site = self.recorders.sites.relative(str(collector.path))
        leaks = fold_reimports(
            [
                (
                    item,
                    describe(
                        owner,
                        "file",
                        item,
                        IMPORT_HINT,
                        self.recorders.site_of(item, start_site(item.new) or module_site),
                        self.verdict.routine(item),
                    ),
                )
                for item in found
                if not allow.allowed(allowances, item.category.name, subject(item))
            ]
        )
        self.recorders.seen.clear()
        # Never put back: the file's own tests may depend on it.
        leaks = [dataclasses.replace(leak, restored=False) for leak in leaks]
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
        if item.stash.get(REPEAT, "") == "again" and self.window is not None:
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
        if self.pid != _getpid():
            # A file-mode child inherits the parent's snapshots, taken before
            # the child's own start (its capture, its signal handlers): the
            # child's first test starts from the child's state instead.
            self.pid = os.getpid()
            self.snapshots.tier.saved.clear()
            self.snapshots.file_tier.saved.clear()
        if resume_pyfakefs():
            self.snapshots.tier.saved.clear()
        self.snapshots.refresh()
        self.snapshots.tier.ensure()
        if not self.contained and item.path is not self.file_path and item.path != self.file_path:
            self._start_file(item)
        self.leftovers.start()
        self.recorders.seen.clear()
        self.window = Window(item.nodeid, "test", allowances, item=item)
        self.recorders.start()
        result = yield
        if bad_marker is not None:
            pytest.fail(bad_marker, pytrace=False)
        self.held.remember(item)
        self.shared_files.remember()
        if self.values is not None:
            self.values.remember(item)
        return result

    def _start_file(self, item: pytest.Item) -> None:
        """Open the file window: every module dict, snapshotted (new modules
        only: the last file's end left the rest of the snapshot current)."""
        self.file_path = item.path
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
        self.file_window = Window(
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
        self.last_teardown = nextitem is None
        for patch in active_patches():  # what the test patched is watched per test from now on
            self.watch.add_patched(target_of(patch))
        value_leaks = []  # before the fixtures' own teardown, which may change them
        if self.values is not None and self.window is not None:
            value_leaks = self.values.leaks(self.window, restore=repeat != "first")
        if self.window is not None:
            value_leaks += self.held.leaks(self.window)
        raised: BaseException | None = None
        result = None
        try:
            result = yield
        except BaseException as error:  # an inner teardown failed: still close the window
            raised = error
        if repeat == "first" and self.window is not None:
            self._first_run_ended(item, self.window, value_leaks)
            if raised is not None:
                raise raised
            return result
        window, self.window = self.window, None
        self.recorders.stop()
        escalated = []
        if window is not None:
            leaks = [
                *value_leaks,
                *self._close(window, self.snapshots.tier),
                *self._leftovers(window),
                *self.shared_files.leaks(window),
            ]
            if repeat != "again":  # a repeat's are restored; the first run's were reported
                escalated += self.settler.settle(leaks, item)
        if self.file_window is not None and (
            nextitem is None or (nextitem.path is not item.path and nextitem.path != item.path)
        ):
            file_window, self.file_window = self.file_window, None
            leaks = self._close(file_window, self.snapshots.file_tier)
            self.recorders.imported.clear()
            for leak in leaks:
                owner = self.snapshots.library_attributes.where.get(leak.key, (None,))[0]
                self.watch.add_patched(owner)
            escalated += self.settler.settle(leaks, item)
        if raised is not None:
            raise raised
        self.settler.fail_test(escalated)
        return result

    def _leftovers(self, window: Window) -> list[Leak]:
        """Threads, processes and files the window's test left behind (reported, not undone)."""
        return [
            Leak(
                window.owner,
                "test",
                category,
                key,
                what,
                hint=_LEFTOVER_HINT[category],
                restored=False,
            )
            for category, key, what in self.leftovers.check()
            if not allow.allowed(window.allowances, category, key)
        ]

    def _first_run_ended(self, item: pytest.Item, window: Window, value_leaks: list[Leak]) -> None:
        """``--isolation-twice``: the first of a test's two runs has ended.
        What it left changed is reported as a single run's leaks would be, and
        kept for the repeat's report; nothing is put back, so the repeat starts
        from it, and the window stays open until the repeat's teardown."""
        __tracebackhide__ = True
        self.recorders.stop()
        leaks = value_leaks + self._peek(window) + self._leftovers(window)
        item.stash[FIRST_RUN_LEFT] = leaks
        self.settler.fail_test(self.settler.settle(leaks, item))

    def _peek(self, window: Window) -> list[Leak]:
        """The window's leaks so far, as :meth:`_close` would find them, with
        nothing restored and the snapshots left as they were."""
        changed = self.snapshots.tier.changed()
        found = self.verdict.found(window, Tier(changed), self.snapshots.tier.saved)
        return fold_reimports(
            [
                (
                    item,
                    describe(
                        window.owner,
                        window.kind,
                        item,
                        item.category.hint,
                        self.recorders.site_of(item, start_site(item.new)),
                        self.verdict.routine(item),
                    ),
                )
                for item in found
            ]
        )

    # -- higher-scoped fixtures ---------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any) -> Generator[None, object, object]:
        if fixturedef.scope == "function":
            result = yield
            if type(result) is pytest.MonkeyPatch:
                known_patcher(result)  # alive until the test's end, undone by its fixture
            return result
        before = {
            key: value for tier in self._tiers(fixturedef) for key, value in tier.take().items()
        }
        already_open = set(self.fixtures.open)
        folders = fixture_folders(self.file_path)
        files_before = set().union(*map(regular_files, folders))
        try:
            result = yield
        finally:
            # What the fixture changed that is a leak, and each key it added
            # even when adding it is none (a module it put into sys.modules):
            # a test that then replaces it leaks, measured from the fixture's value.
            owned: Owned = {
                key: (old, new)
                for tier in self._tiers(fixturedef)
                for key, (old, new) in raw_changes(tier, before).items()
                if key[0].is_leak(key[1], old, new) or (old is MISSING and new is not MISSING)
            }
            # A fixture set up from inside this one's set-up (never a
            # shorter-lived one) owns what it set: this one's teardown must
            # neither put it back nor be blamed for it.
            for key, (_, inner, _) in self.fixtures.open.items():
                if key not in already_open:
                    for inner_key in inner:
                        owned.pop(inner_key, None)
            self.fixtures.open[id(fixturedef)] = (before, owned, dict(self.recorders.seen))
            self.fixtures.opened(fixturedef)
            # Runs first among the fixture's finalizers: the state before its teardown.
            fixturedef.addfinalizer(partial(self._before_teardown, fixturedef))
            for window in (self.window, self.file_window):
                if window is not None:
                    window.owned.update(owned)
            self.leftovers.rebase()  # what the fixture started is the fixture's
        self.held.scoped[fixturedef.argname] = (fixturedef.scope, result)
        who = fixture_label(fixturedef)
        for path in set().union(*map(regular_files, folders)) - files_before:
            self.shared_files.add(path, who)  # setup_module's data file, a fixture's sqlite file
        returned = as_path(result)
        if returned is not None:
            self.shared_files.add(returned, who)
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_post_finalizer(
        self, fixturedef: Any, request: pytest.FixtureRequest
    ) -> Generator[None, object, object]:
        __tracebackhide__ = True
        result = yield
        self.held.scoped.pop(fixturedef.argname, None)
        self.shared_files.drop(fixture_label(fixturedef))
        entry = self.fixtures.open.pop(id(fixturedef), None)
        if entry is None:
            return result
        before, owned, seen = entry
        owner = f"fixture {fixturedef.argname!r} (scope={fixturedef.scope})"
        if self.window is not None:  # the test whose teardown finalizes it
            owner = f"{owner}{IN_TEARDOWN}{self.window.owner}"
        diffs = Diffs()
        tiers = self._tiers(fixturedef)
        since_setup = [item for tier in tiers for item in changes(tier, before, diffs=diffs)]
        found = [item for item in since_setup if (item.category, item.key) in owned]
        # What its teardown changed that was not the fixture's and is not back
        # to how it was before the fixture (a teardown cleaning up is fine).
        pre_teardown = self.fixtures.pre_teardown.pop(id(fixturedef), None)
        if pre_teardown is not None:
            changed_since_setup = {(item.category, item.key) for item in since_setup}
            found += [
                item
                for tier in tiers
                for item in changes(tier, pre_teardown, diffs=diffs)
                if (item.category, item.key) in changed_since_setup
                and (item.category, item.key) not in owned
            ]
        found = [
            item
            for item in found
            if not allow.allowed(self.allowances, item.category.name, subject(item))
            and not first_import(item)
        ]
        heir = self.fixtures.heir(fixturedef)
        if heir is not None and found:
            # Judged when the fixture it requested ends, which may undo it.
            heir_owned = self.fixtures.open[heir][1]
            for item in found:
                heir_owned.setdefault((item.category, item.key), (item.old, item.new))
            found = []
        leaks = self.restorer.restore(
            owner, "fixture", found, {**seen, **self.recorders.seen}, saved=before
        )
        if self.last_teardown:
            # Finalized after the last test (of the run, or of the file's
            # process): no test can see what it left; put back, not warned.
            leaks = [dataclasses.replace(leak, routine=leak.routine or "ended") for leak in leaks]
        escalated = self.settler.settle(leaks, request.node)
        if pre_teardown is not None:
            diffs = diffs if not found else Diffs()  # what was found is put back now
            released = {
                key: delta
                for tier in tiers
                for key, delta in raw_changes(tier, pre_teardown, diffs).items()
                if key in owned
            }
            for window in (self.window, self.file_window):
                if window is not None:
                    window.released.update(released)
        self.settler.fail_test(escalated)  # -W error, or --isolation-leaks=error: now
        return result

    def _before_teardown(self, fixturedef: Any) -> None:
        self.fixtures.pre_teardown[id(fixturedef)] = {
            key: value for tier in self._tiers(fixturedef) for key, value in tier.take().items()
        }

    # -- deep tier: values of higher-scoped fixtures ---------------------------

    # -- finding, restoring and reporting ------------------------------------

    def _close(self, window: Window, tier: Tier) -> list[Leak]:
        """A window's leaks, restored; the tier's snapshots then match the state."""
        changed = tier.changed()
        if not changed:
            return []
        leaks: list[Leak] = []
        for first in (True, False):
            group = [c for c in changed if (c.name in PATCHERS) == first]
            found = self.verdict.found(window, Tier(group), tier.saved)
            leaks += self.restorer.restore(window.owner, window.kind, found, saved=tier.saved)
        for category in changed:
            # Everything put back: the snapshot is current again, and a new one
            # (a copy of every watched namespace) would cost more than the test.
            if not safe_unchanged(category, tier.saved[category]):
                tier.renew(category)
        return leaks

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


_LEFTOVER_HINT = {
    "threads": "join or stop it before the test ends (or in a fixture's teardown)",
    "processes": "wait for it or terminate it before the test ends",
    "files": "write to tmp_path, or remove it in the test",
}
