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
import sys
import types
import warnings
from collections.abc import Generator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from pytest_isolation.core.keys import FIRST_RUN_LEFT
from pytest_isolation.core.keys import IN_CHILD
from pytest_isolation.core.keys import REPEAT
from pytest_isolation.core.keys import SHARED_CHILD
from pytest_isolation.core.records import Leak
from pytest_isolation.core.warnings import LeakedStateWarning
from pytest_isolation.core.warnings import blanket_error
from pytest_isolation.guard import allow
from pytest_isolation.guard import bindings
from pytest_isolation.guard import imports
from pytest_isolation.guard import tracked
from pytest_isolation.guard.attributes import COMMON_STDLIB
from pytest_isolation.guard.attributes import Attributes
from pytest_isolation.guard.attributes import Watchlist
from pytest_isolation.guard.deep import CONTAINERS
from pytest_isolation.guard.deep import Containers
from pytest_isolation.guard.deep import Content
from pytest_isolation.guard.deep import LoggerConfig
from pytest_isolation.guard.deep import restore_content
from pytest_isolation.guard.leftovers import Leftovers
from pytest_isolation.guard.mocks import FakeFilesystem
from pytest_isolation.guard.mocks import MockPatches
from pytest_isolation.guard.mocks import active_patches
from pytest_isolation.guard.mocks import forgotten_monkeypatches
from pytest_isolation.guard.mocks import monkeypatch_records
from pytest_isolation.guard.mocks import patched_by
from pytest_isolation.guard.mocks import record_start_sites
from pytest_isolation.guard.mocks import resume_pyfakefs
from pytest_isolation.guard.mocks import stand_in
from pytest_isolation.guard.mocks import start_site
from pytest_isolation.guard.mocks import stop_patches
from pytest_isolation.guard.mocks import target_of
from pytest_isolation.guard.mocks import time_patched
from pytest_isolation.guard.newmodules import NewModules
from pytest_isolation.guard.process import IMPORT_SYSTEM
from pytest_isolation.guard.process import INTERPRETER
from pytest_isolation.guard.process import PROCESS
from pytest_isolation.guard.process import ROOT_LOGGER
from pytest_isolation.guard.process import Environ
from pytest_isolation.guard.process import Loggers
from pytest_isolation.guard.process import SysModules
from pytest_isolation.guard.process import WorkingDirectory
from pytest_isolation.guard.process import module_logger
from pytest_isolation.guard.process import text
from pytest_isolation.guard.report import LeakLog
from pytest_isolation.guard.routine import KINDS
from pytest_isolation.guard.routine import classify
from pytest_isolation.guard.routine import holds_resource
from pytest_isolation.guard.sites import BY_MONKEYPATCH
from pytest_isolation.guard.sites import CWD_EVENTS
from pytest_isolation.guard.sites import ENV_EVENTS
from pytest_isolation.guard.sites import PROCESS_EVENTS
from pytest_isolation.guard.sites import Sites
from pytest_isolation.guard.sites import listen
from pytest_isolation.guard.state import MISSING
from pytest_isolation.guard.state import Category
from pytest_isolation.guard.state import ListState
from pytest_isolation.guard.state import difference
from pytest_isolation.guard.state import equal
from pytest_isolation.guard.state import is_closed
from pytest_isolation.guard.state import redefined
from pytest_isolation.guard.windows import Found
from pytest_isolation.guard.windows import Owned
from pytest_isolation.guard.windows import Seen
from pytest_isolation.guard.windows import Tier
from pytest_isolation.guard.windows import Window
from pytest_isolation.guard.windows import attribute_id
from pytest_isolation.guard.windows import changes
from pytest_isolation.guard.windows import pytest_package_insert
from pytest_isolation.guard.windows import pytest_path_insert
from pytest_isolation.guard.windows import raw_changes
from pytest_isolation.guard.windows import same_items

#: Categories whose leaks a forgotten ``pytest.MonkeyPatch`` can explain.
MONKEYPATCHABLE = frozenset({"env", "attribute", "cwd", "import", "sys.modules"})
#: Patchers are stopped first: that puts back everything they changed.
PATCHERS = ("mock", "fakefs")
IMPORT_HINT = "run with --isolation-mode=file to keep it in this file, or move it into a fixture"
REIMPORT_HINT = (
    "import it once; a test of an import can use monkeypatch.delitem(sys.modules, ...), "
    "which puts the module back"
)
MONKEYPATCH_HINT = "call its undo(), or use the monkeypatch fixture or MonkeyPatch.context()"
_CURRENT_TEST = (b"PYTEST_CURRENT_TEST", "PYTEST_CURRENT_TEST")
#: The run's guard, for the parts that hand it leaks found elsewhere.
GUARD_KEY = pytest.StashKey["LeakGuard"]()


#: Bound at import: a test may replace ``os.getpid`` (this suite's own tests do).
_getpid = os.getpid


class LeakGuard:
    """Registered as ``isolation-guard``, and kept under :data:`GUARD_KEY`,
    unless ``--isolation-leaks=off``.

    Its many attributes are the open windows (test, higher-scoped fixtures,
    file, import) and their snapshots: they share one tier of categories, the
    sites and the log, and each hook moves state from one window to the next,
    so they are one plugin object.
    """

    def __init__(self, config: pytest.Config, policy: str, deep: bool) -> None:
        self.config = config
        #: warn, error or quiet; or ``watch`` (the guard is off, but ``--isolation-twice``
        #: asks what a test's first run left changed): finds, never restores nor reports.
        self.policy = policy
        self.restores = policy != "watch"
        self.deep = deep
        self.allowances = allow.parse(
            config.getini("isolation_allow_leaks"), "isolation_allow_leaks (ini)"
        )
        self.log = LeakLog(policy, self._announce)
        self.sites = Sites(config.rootpath)
        self.watch = Watchlist(config.rootpath, self.sites.roots)
        self.attributes = Attributes(self.sites)
        self.containers = Containers()
        self.sys_modules = SysModules(NewModules(self.watch.project_module))
        categories: list[Category] = [
            MockPatches(),
            FakeFilesystem(),
            Environ(),
            WorkingDirectory(),
            self.sys_modules,
            IMPORT_SYSTEM,
            INTERPRETER,
            ROOT_LOGGER,
            Loggers(self.watch.library_logger),
            LoggerConfig(self.watch.library_logger),
            PROCESS,
            self.attributes,
            self.containers,
        ]
        self.tier = Tier(categories)
        self.library_attributes = Attributes(self.sites, replaced_only=True)
        self.file_tier = Tier([self.library_attributes])
        basetemp = config.option.basetemp
        self.leftovers = Leftovers((str(basetemp),) if basetemp else ())
        self.window: Window | None = None
        self.file_window: Window | None = None
        self.file_path: Path | None = None
        #: Higher-scoped fixtures alive: their snapshot before setup, what they set, sites.
        self.fixtures: dict[int, tuple[dict[Category, object], Owned, Seen]] = {}
        self.pre_teardown: dict[int, dict[Category, object]] = {}
        self.scoped_values: dict[str, tuple[str, object]] = {}
        self.values_saved: dict[str, tuple[str, Content]] = {}
        self.pending: list[str] = []
        #: Sites of environment writes and chdir seen in the open window.
        self.seen: Seen = {}
        #: Keys a library's import set during the current file (import-time state).
        self.imported: set[tuple[str, str]] = set()
        self.listening = False
        #: In the teardown of the last test (of the run, or of a file's process).
        self.last_teardown = False
        self.imports = imports.ImportWatch(self.watch.project_origin)
        self._outer: tuple[Any, Any, Any, Any] | None = None
        #: The process whose state the snapshots are of.
        self.pid = _getpid()

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
        tracked.start()
        self._outer = (
            listen(self._heard),
            record_start_sites(self.sites.caller),
            tracked.on_write,
            imports.install(self.imports, self._module_loaded),
        )
        tracked.on_write = self._module_written

    def pytest_unconfigure(self) -> None:
        if self._outer is not None:
            listen(self._outer[0])
            record_start_sites(self._outer[1])
            tracked.on_write = self._outer[2]
            imports.uninstall(self.imports, self._outer[3])
            tracked.stop()

    def _module_loaded(self, module: types.ModuleType) -> None:
        """A project module imported inside a test: its state as its import
        left it is the test's starting point."""
        if self.window is None or not self.listening:
            return
        spaces = self.watch.spaces_of(module.__name__, module)
        if self._under_patch(self.window, module):
            self.window.patched_imports.add(module.__name__)
        self.attributes.adopt(self.tier.saved.get(self.attributes), spaces)
        self.containers.adopt(self.tier.saved.get(self.containers), spaces)

    def _under_patch(self, window: Window, module: types.ModuleType) -> bool:
        """Whether a module's import ended while a patch was in effect: a
        time patcher, a mock patch started in the window, or a name it bound
        by ``from x import y`` where ``x.y`` is not what it was when the
        window opened (a ``with mock.patch(...)``, a hand-made patch).  Such
        a module holds stand-ins; the test that imported it may rely on it
        staying (freezegun puts the real values into it when it stops)."""
        if time_patched():
            return True
        if any(not any(p is q for q in window.patches) for p in active_patches()):
            return True
        saved = self.tier.saved.get(self.attributes)
        before = {space.prefix: space.copy for space in saved} if isinstance(saved, list) else {}
        for source, name in bindings.from_imports(module).values():
            was = before.get(source, {}).get(name, MISSING)
            if was is not MISSING and was is not getattr(sys.modules.get(source), name, was):
                return True
        return False

    def _module_written(self, module: types.ModuleType, name: str) -> None:
        if not self.listening:
            return
        key = ("attribute", f"{module.__name__}.{name}")
        try:  # inside the test's own setattr: never raise into it
            site, importing = self.sites.locate()
        except Exception:
            return
        if importing:
            self.imported.add(key)
        elif site:
            self.seen[key] = site

    def _heard(self, event: str, args: tuple[Any, ...]) -> None:
        if event in PROCESS_EVENTS:
            self.leftovers.spawned = True
        elif not self.listening:
            return
        elif event in ENV_EVENTS:
            if args and args[0] not in _CURRENT_TEST:
                key = ("env", text(args[0]))
                site, importing = self.sites.locate()
                if importing:
                    self.imported.add(key)
                elif site:
                    self.seen[key] = site
        elif event in CWD_EVENTS:
            site = self.sites.caller()
            if site:
                self.seen[("cwd", "cwd")] = site

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
        if self.contained or not self.restores:
            report = yield
            if report.passed:  # imported: ``obj`` is the module, no import again
                self._watch_test_module(collector)
            return report
        self._refresh_watch()
        before = self.tier.take()
        self.imported.clear()
        self.listening = True
        try:
            report = yield
        finally:
            self.listening = False
        if report.passed:
            self._watch_test_module(collector)
        found = [
            item
            for item in changes(self.tier, before)
            if not pytest_path_insert(item, collector.path)
            and not self._library_set(item)
            and not _first_import(item)
            and not _package_logger(item)
        ]
        self.tier.rebase()  # the tests of this file start from what the import left
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
            if item.category is not self.attributes
            or attribute_id(self.attributes.where[item.key]) not in patched
        ]
        # A patch started while the first module to import unittest.mock was
        # imported has no recorded line: the module is the site.
        module_site = self.sites.relative(str(collector.path))
        leaks = fold_reimports(
            [
                (item, self._leak(owner, "file", item, IMPORT_HINT, site, routine=routine))
                for item in found
                if not allow.allowed(allowances, item.category.name, self._subject(item))
                for site in (start_site(item.new) or module_site,)
                for routine in (self._routine(item),)
            ]
        )
        self.seen.clear()
        escalated = False
        for leak in leaks:
            first = self.log.add(leak)
            if self.policy == "warn" and first and not leak.routine:
                try:
                    warn_on(collector, LeakedStateWarning(leak.message()))
                except Warning:  # -W error: the file's collection fails instead
                    escalated = True
        leaked = [leak for leak in leaks if not leak.routine]
        if leaked and (self.policy == "error" or escalated) and report.passed:
            report.outcome = "failed"
            report.longrepr = "\n".join(leak.message() for leak in leaked)
        return report

    def _library_set(self, item: Found) -> bool:
        """At import: a function or class of an installed library put in
        place, or a key a library's module code set (werkzeug's debugger sets
        ``sys.displayhook`` when imported): that library's import-time setup,
        not the test module's."""
        if (item.category.name, item.key) in self.imported:
            return True
        if item.category.name == "import" and item.key in ("sys.meta_path", "sys.path_hooks"):
            # six appends its importer to sys.meta_path when it is imported
            old, new = getattr(item.old, "items", ()), getattr(item.new, "items", ())
            added = [x for x in new if not any(x is y for y in old)]
            kept = all(any(x is y for y in new) for x in old)
            return kept and bool(added) and all(self._library_object(x) for x in added)
        code = getattr(item.new, "__code__", None)
        filename = getattr(code, "co_filename", None)
        return isinstance(filename, str) and self.sites.library(filename)

    def _library_object(self, value: object) -> bool:
        """An object (or class) defined by an installed library."""
        kind = value if isinstance(value, type) else type(value)
        filename = getattr(sys.modules.get(kind.__module__), "__file__", None)
        return isinstance(filename, str) and self.sites.library(filename)

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

    def _refresh_watch(self) -> None:
        if self.watch.refresh():
            self.attributes.spaces = self.watch.per_test()
            # Class-level containers only in the deep tier: comparing every
            # class's dicts after every test cost pygments' suite minutes.
            classes = self.watch.classes if self.deep else []
            self.containers.spaces = [*self.watch.project.values(), *classes]
            self.containers.constants = list(self.watch.test_modules.values())
            self.tier.renew(self.attributes)  # reuses what is still current
            self.tier.forget(self.containers)

    @pytest.hookimpl(wrapper=True, tryfirst=True)  # before any fixture of the test
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, None, None]:
        if item.stash.get(REPEAT, "") == "again" and self.window is not None:
            # --isolation-twice: the repeat starts from what the first run left, in its window.
            self.leftovers.start()
            self.listening = True
            self.imports.listening = True
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
            self.tier.saved.clear()
            self.file_tier.saved.clear()
        if resume_pyfakefs():
            self.tier.saved.clear()
        self._refresh_watch()
        self.tier.ensure()
        if not self.contained and item.path is not self.file_path and item.path != self.file_path:
            self._start_file(item)
        self.leftovers.start()
        self.seen.clear()
        self.window = Window(item.nodeid, "test", allowances, item=item, patches=active_patches())
        self.listening = True
        self.imports.listening = True
        result = yield
        if bad_marker is not None:
            pytest.fail(bad_marker, pytrace=False)
        if self.deep:
            self._remember_fixture_values(item)
        return result

    def _start_file(self, item: pytest.Item) -> None:
        """Open the file window: every module dict, snapshotted (new modules
        only: the last file's end left the rest of the snapshot current)."""
        self.file_path = item.path
        self.library_attributes.spaces = self.watch.every_module()
        previous = self.file_tier.saved.get(self.library_attributes)
        self.file_tier.saved[self.library_attributes] = (
            self.library_attributes.snapshot()
            if previous is None
            else self.library_attributes.extend(previous)
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
        if self.deep and self.window is not None:
            value_leaks = self._fixture_value_leaks(self.window, restore=repeat != "first")
        result = yield
        if repeat == "first" and self.window is not None:
            self._first_run_ended(item, self.window, value_leaks)
            return result
        window, self.window = self.window, None
        self.listening = False
        self.imports.listening = False
        escalated = []
        if window is not None:
            leaks = value_leaks + self._close(window, self.tier) + self._leftovers(window)
            if repeat != "again":  # a repeat's are restored; the first run's were reported
                escalated += self._settle(leaks, item)
        if self.file_window is not None and (
            nextitem is None or (nextitem.path is not item.path and nextitem.path != item.path)
        ):
            file_window, self.file_window = self.file_window, None
            leaks = self._close(file_window, self.file_tier)
            self.imported.clear()
            for leak in leaks:
                owner = self.library_attributes.where.get(leak.key, (None,))[0]
                self.watch.add_patched(owner)
            escalated += self._settle(leaks, item)
        self._fail_test(escalated)
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

    def _fail_test(self, escalated: list[Warning]) -> None:
        """Fail the test's teardown: with the first warning ``-W error``
        escalated, or under ``--isolation-leaks=error`` with every leak."""
        __tracebackhide__ = True
        if escalated:
            raise escalated[0]
        pending, self.pending = self.pending, []
        if pending and self.policy == "error":
            pytest.fail("\n".join(pending), pytrace=False)

    def _first_run_ended(self, item: pytest.Item, window: Window, value_leaks: list[Leak]) -> None:
        """``--isolation-twice``: the first of a test's two runs has ended.
        What it left changed is reported as a single run's leaks would be, and
        kept for the repeat's report; nothing is put back, so the repeat starts
        from it, and the window stays open until the repeat's teardown."""
        __tracebackhide__ = True
        self.listening = False
        self.imports.listening = False
        leaks = value_leaks + self._peek(window) + self._leftovers(window)
        item.stash[FIRST_RUN_LEFT] = leaks
        self._fail_test(self._settle(leaks, item))

    def _peek(self, window: Window) -> list[Leak]:
        """The window's leaks so far, as :meth:`_close` would find them, with
        nothing restored and the snapshots left as they were."""
        changed = self.tier.changed()
        found = self._found(window, Tier(changed), self.tier.saved)
        return fold_reimports(
            [
                (
                    item,
                    self._leak(
                        window.owner,
                        window.kind,
                        item,
                        item.category.hint,
                        start_site(item.new) if item.category.name == "mock" else None,
                        routine=self._routine(item),
                    ),
                )
                for item in found
            ]
        )

    # -- higher-scoped fixtures ---------------------------------------------

    def _all_tiers(self) -> list[Tier]:
        return [self.tier, self.file_tier] if self.file_window is not None else [self.tier]

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any) -> Generator[None, object, object]:
        if fixturedef.scope == "function":
            return (yield)
        before = {key: value for tier in self._all_tiers() for key, value in tier.take().items()}
        try:
            result = yield
        finally:
            owned: Owned = {}
            for tier in self._all_tiers():
                for found in changes(tier, before, leaks=False):
                    owned[(found.category, found.key)] = (found.old, found.new)
            self.fixtures[id(fixturedef)] = (before, owned, dict(self.seen))
            # Runs first among the fixture's finalizers: the state before its teardown.
            fixturedef.addfinalizer(partial(self._before_teardown, fixturedef))
            for window in (self.window, self.file_window):
                if window is not None:
                    window.owned.update(owned)
            self.leftovers.rebase()  # what the fixture started is the fixture's
        self.scoped_values[fixturedef.argname] = (fixturedef.scope, result)
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_post_finalizer(
        self, fixturedef: Any, request: pytest.FixtureRequest
    ) -> Generator[None, object, object]:
        __tracebackhide__ = True
        result = yield
        self.scoped_values.pop(fixturedef.argname, None)
        entry = self.fixtures.pop(id(fixturedef), None)
        if entry is None:
            return result
        before, owned, seen = entry
        owner = f"fixture {fixturedef.argname!r} (scope={fixturedef.scope})"
        since_setup = [item for tier in self._all_tiers() for item in changes(tier, before)]
        found = [item for item in since_setup if (item.category, item.key) in owned]
        # What its teardown changed that was not the fixture's and is not back
        # to how it was before the fixture (a teardown cleaning up is fine).
        pre_teardown = self.pre_teardown.pop(id(fixturedef), None)
        if pre_teardown is not None:
            changed_since_setup = {(item.category, item.key) for item in since_setup}
            found += [
                item
                for tier in self._all_tiers()
                for item in changes(tier, pre_teardown)
                if (item.category, item.key) in changed_since_setup
                and (item.category, item.key) not in owned
            ]
        found = [
            item
            for item in found
            if not allow.allowed(self.allowances, item.category.name, self._subject(item))
            and not _first_import(item)
        ]
        leaks = self._restore(owner, "fixture", found, {**seen, **self.seen})
        if self.last_teardown:
            # Finalized after the last test (of the run, or of the file's
            # process): no test can see what it left; put back, not warned.
            leaks = [dataclasses.replace(leak, routine=leak.routine or "ended") for leak in leaks]
        escalated = self._settle(leaks, request.node)
        if pre_teardown is not None:
            released = {
                key: delta
                for tier in self._all_tiers()
                for key, delta in raw_changes(tier, pre_teardown).items()
                if key in owned
            }
            for window in (self.window, self.file_window):
                if window is not None:
                    window.released.update(released)
        if escalated:
            raise escalated[0]
        return result

    def _before_teardown(self, fixturedef: Any) -> None:
        self.pre_teardown[id(fixturedef)] = {
            key: value for tier in self._all_tiers() for key, value in tier.take().items()
        }

    # -- deep tier: values of higher-scoped fixtures ---------------------------

    def _remember_fixture_values(self, item: pytest.Item) -> None:
        self.values_saved = {}
        for name, value in getattr(item, "funcargs", {}).items():
            scoped = self.scoped_values.get(name)
            if scoped is not None and scoped[1] is value and issubclass(type(value), CONTAINERS):
                self.values_saved[name] = (scoped[0], Content(value))

    def _fixture_value_leaks(self, window: Window, restore: bool = True) -> list[Leak]:
        """Higher-scoped fixture values the test mutated in place, put back
        unless ``restore`` is false (then kept for the window's end)."""
        leaks = []
        saved = self.values_saved
        if restore:
            self.values_saved = {}
        for name, (scope, content) in saved.items():
            now = Content(content.container)
            if now == content or allow.allowed(window.allowances, "fixture-value", name):
                continue
            if restore and self.restores:
                restore_content(content.container, content.items)
            what = (
                f"the value of fixture {name!r} (scope={scope}), mutated in place "
                f"(was {content!r}, now {now!r})"
            )
            leaks.append(
                Leak(
                    window.owner,
                    "test",
                    "fixture-value",
                    name,
                    what,
                    hint="copy the value in the test, or make the fixture function-scoped",
                )
            )
        return leaks

    # -- finding, restoring and reporting ------------------------------------

    def _close(self, window: Window, tier: Tier) -> list[Leak]:
        """A window's leaks, restored; the tier's snapshots then match the state."""
        changed = tier.changed()
        if not changed:
            return []
        leaks: list[Leak] = []
        for first in (True, False):
            group = [c for c in changed if (c.name in PATCHERS) == first]
            found = self._found(window, Tier(group), tier.saved)
            leaks += self._restore(window.owner, window.kind, found)
        for category in changed:
            tier.renew(category)
        return leaks

    def _found(self, window: Window, tier: Tier, saved: dict[Category, object]) -> list[Found]:
        """What changed in ``tier`` since ``saved`` that is the window's own leak."""
        found = changes(tier, saved)
        keys = {item.key for item in found if item.category.name == "attribute"}
        imported = self.sys_modules.added_since(saved.get(self.sys_modules))
        return [
            item
            for item in found
            if not window.excused((item.category, item.key), item.old, item.new)
            and not self._toward_real_value(item, keys)
            and not self._set_by_a_library_import(item, imported)
            and not pytest_package_insert(item, window.item)
            and not (
                _first_import(item)
                and (window.kind != "test" or item.key in window.patched_imports)
            )
            and (item.category.name, item.key) not in self.imported
            and not allow.allowed(window.allowances, item.category.name, self._subject(item))
        ]

    def _set_by_a_library_import(self, item: Found, imported: set[str]) -> bool:
        """A function, class or object of an installed library that the
        library's own import, inside the window, put in place (a package
        that sets ``sys.displayhook`` when imported): import-time state, as
        when a test module's import brings the library in.  Found by the
        value, so the verdict is the same whichever file imports it first,
        in a plain run and in file mode."""
        if not imported or item.category.name != "attribute":
            return False
        value = item.new
        home = getattr(value, "__module__", None)
        if not isinstance(value, (type, types.FunctionType)):
            home = type(value).__module__
        if home not in imported:
            return False
        filename = getattr(sys.modules.get(home), "__file__", None)
        return isinstance(filename, str) and self.sites.library(filename)

    def _toward_real_value(self, item: Found, changed: set[str]) -> bool:
        """A patch's stand-in replaced by the real value: never put back
        (see :mod:`pytest_isolation.guard.bindings`).  Either the old value
        is a mock or a time patcher's fake and the new one is not, or the
        name was bound by ``from x import y`` and now holds ``x.y`` again,
        where ``x.y`` itself did not change in the window."""
        if stand_in(item.old) and not stand_in(item.new):
            return True
        where = getattr(item.category, "where", {}).get(item.key)
        if item.category.name != "attribute" or where is None:
            return False
        owner, name = where
        source = (
            bindings.from_imports(owner).get(name) if isinstance(owner, types.ModuleType) else None
        )
        return (
            source is not None
            and ".".join(source) not in changed
            and bindings.holds_real_value(owner, name, item.new)
        )

    def _restore(
        self,
        owner: str,
        kind: str,
        found: list[Found],
        seen: Seen | None = None,
    ) -> list[Leak]:
        """Put leaked state back: patchers stopped, forgotten MonkeyPatches
        undone, the rest key by key."""
        if not found or not self.restores:
            return []  # the watch policy reports nothing: no message to build
        leaks = []
        sites = {
            id(item.new): start_site(item.new) for item in found if item.category.name == "mock"
        }
        stop_patches([item.new for item in found if item.category.name == "mock"])
        undone = set()
        routines = [self._routine(item) for item in found]
        candidates = [  # a heap scan: only for what could be a MonkeyPatch's leak
            (item.category.name, item.key, item.old)
            for item, routine in zip(found, routines, strict=True)
            if item.category.name in MONKEYPATCHABLE and not routine
        ]
        if candidates:
            for patcher in forgotten_monkeypatches(candidates):
                undone |= {(category, key) for category, key, _ in monkeypatch_records(patcher)}
                patcher.undo()
        reimported = _reimported_modules(found)
        for item, routine in zip(found, routines, strict=True):
            hint = item.category.hint
            via = (item.category.name, item.key) in undone
            keep = routine == "created" and holds_resource(item.new)
            # A re-import is reported, never undone: code elsewhere already
            # holds the new classes (Django REST framework's api_settings
            # resolved its filter backends to them), and old and new would mix.
            reimport = _part_of_reimport(item, reimported)
            put_back = not via and not keep and not reimport and item.category.name != "mock"
            closed = put_back and is_closed(item.old)
            if put_back and not closed:
                try:
                    item.category.restore(item.key, item.old)
                except Exception as error:
                    hint = f"could not be restored ({error!r}); {hint}"
            leak = self._leak(owner, kind, item, hint, sites.get(id(item.new)), seen, routine)
            if keep:
                what = f"{leak.what}, kept: it holds a resource"
                leak = dataclasses.replace(leak, what=what, restored=False)
            elif reimport:
                leak = dataclasses.replace(leak, restored=False)
            elif closed:
                what = f"{leak.what}; the old value is closed, so it was not put back"
                leak = dataclasses.replace(leak, what=what, restored=False)
            if via or leak.site.endswith(BY_MONKEYPATCH):
                site = leak.site.removesuffix(BY_MONKEYPATCH)
                what = f"{leak.what} through a pytest.MonkeyPatch never undone"
                leak = dataclasses.replace(leak, what=what, site=site, hint=MONKEYPATCH_HINT)
            leaks.append((item, leak))
        return fold_reimports(leaks)

    def _routine(self, item: Found) -> str:
        if isinstance(item.old, Content) and isinstance(item.new, Content):
            if self.containers.constant_of_a_test_module(item.key):
                return ""
            return "filled" if item.new.grew_from(item.old) else ""
        if item.category.name in ("logging", "logger") and item.old is MISSING:
            # A project logger created in the window and set up (a level, a
            # handler): the project's own setup.  Disabling it is not.
            new = item.new
            disabled = item.category.name == "logging" and isinstance(new, tuple) and bool(new[1])
            return "created" if self.watch.project_logger(item.key) and not disabled else ""
        owner, name = getattr(item.category, "where", {}).get(item.key, (None, ""))
        if isinstance(owner, types.ModuleType) and owner.__name__ in COMMON_STDLIB:
            return ""  # os.SEEK_SET = 5 is no counter
        if owner is not None and self.watch.assigned_by_a_test(owner, name):
            return ""  # a test module's own code sets it: ``Base.extra = 1``
        return classify(item.category.name, item.key, item.old, item.new, owner)

    def _subject(self, item: Found) -> str:
        subject = getattr(item.category, "subject", None)
        return str(subject(item.key, item.old, item.new)) if subject else item.key

    def _leak(
        self,
        owner: str,
        kind: str,
        item: Found,
        hint: str,
        started: str | None = None,
        seen: Seen | None = None,
        routine: str = "",
    ) -> Leak:
        category = item.category
        if category.name == "mock":
            subject = self._subject(item)
            what = f"an unstopped mock patch of {subject}"
            return Leak(owner, kind, "mock", subject, what, site=started or "", hint=hint)
        site = (self.seen if seen is None else seen).get((category.name, item.key), "")
        show_key = getattr(category, "show_key", None)
        if show_key is not None:
            old, new = show_key(item.key, item.old), show_key(item.key, item.new)
        else:
            old, new = category.show(item.old), category.show(item.new)
        label = category.label(item.key)
        what = f"{label} (was {old}, now {new})"
        if routine == "counter":
            what = f"{label}, a counter (was {old}, now {new})"
        elif routine == "created":
            what = f"{label}, created lazily (now {new})"
        elif same_items(item.old, item.new):
            what = f"{label} (rebound to a new list with the same items)"
        elif isinstance(item.old, ListState) and isinstance(item.new, ListState):
            # Long lists (sys.path, sys.meta_path) shorten to the same text: say what differs.
            change = difference(item.old.items, item.new.items)
            shortened = old == new or "..." in old or "..." in new
            kept = any(x is y for x in item.old.items for y in item.new.items)
            what = f"{label} ({change})" if change and shortened and kept else what
        elif isinstance(item.old, Content) and isinstance(item.new, Content):
            change = difference(item.old.plain(), item.new.plain())
            what = f"{label} ({change})" if change else what
            if routine:
                what = f"{label}, {KINDS[routine]} ({change})"
        elif item.old is not MISSING and equal(item.old, item.new):
            what = f"{label} (rebound to a new, equal {type(item.new).__name__}: {new})"
        elif isinstance(item.old, (dict, list, set)) and type(item.old) is type(item.new):
            change = difference(item.old, item.new)
            what = f"{label} (rebound to a new {type(item.new).__name__}: {change})"
        return Leak(
            owner,
            kind,
            category.name,
            self._subject(item),
            what,
            site=site,
            hint=hint,
            routine=routine,
        )

    def _settle(self, leaks: list[Leak], node: pytest.Item | pytest.Collector) -> list[Warning]:
        """Record and report; returns the warnings ``-W error`` escalated, to raise
        once the guard's own work is done."""
        __tracebackhide__ = True
        if not leaks or not self.restores:
            return []
        leaks = sorted(leaks, key=lambda leak: (leak.category, leak.what))
        first = [self.log.add(leak) for leak in leaks]
        escalated: list[Warning] = []
        for leak, new_key in zip(leaks, first, strict=True):
            if leak.routine:
                continue
            if self.policy == "warn" and new_key:  # one warning per key, the summary counts
                try:
                    warn_on(node, LeakedStateWarning(leak.message()))
                except Warning as error:  # -W error: every leak is still recorded
                    escalated.append(error)
            elif self.policy == "error":
                self.pending.append(leak.message())
        return escalated

    def record(self, leak: Leak) -> bool:
        """A leak found in a file-mode child, for this (the parent's) summary;
        whether it is the run's first of its key (the one to warn about)."""
        return self.log.add(leak)

    def pytest_isolation_workeroutput(self, output: dict[str, Any]) -> None:
        leaks = self.log.by_owner.values()
        output["leaks"] = [leak.to_wire() for found in leaks for leak in found]

    def pytest_isolation_merge_workeroutput(self, output: dict[str, Any]) -> None:
        for fields in output.get("leaks", ()):
            self.log.add(Leak(**fields))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        self.log.summarize(terminalreporter)


_LEFTOVER_HINT = {
    "threads": "join or stop it before the test ends (or in a fixture's teardown)",
    "processes": "wait for it or terminate it before the test ends",
    "files": "write to tmp_path, or remove it in the test",
}


def warn_on(node: pytest.Item | pytest.Collector, warning: Warning) -> None:
    """``node.warn(warning)``, also for an item without a line number (a
    non-Python collector's, such as pygments' snippet files), which pytest's
    ``Node.warn`` refuses with an ``AssertionError``.

    A blanket ``error`` filter (``filterwarnings = error``, ``-W error``)
    does not make a leak an error: the guard is on wherever the plugin is
    installed, and a suite that turns all warnings into errors did not ask
    for its leaks to fail.  The warning is still shown.  A filter that names
    ``LeakedStateWarning`` or ``IsolationWarning`` is obeyed, and
    ``--isolation-leaks=error`` fails the test."""
    __tracebackhide__ = True
    with warnings.catch_warnings():
        if blanket_error(warning):
            warnings.simplefilter("always", type(warning))
        if isinstance(node, pytest.Item) and node.location[1] is None:
            warnings.warn_explicit(warning, type(warning), str(node.path), 0)
        else:
            node.warn(warning)


def fold_reimports(leaks: list[tuple[Found, Leak]]) -> list[Leak]:
    """One leak per re-imported module instead of one per name in it: a test
    that re-imports a module rebinds every function and class to a new object
    of the same definition (and makes its module-level objects anew), and
    replaces the module in ``sys.modules``."""
    reimported = _reimported_modules([item for item, _ in leaks])
    kept: list[Leak] = []
    modules: dict[str, list[tuple[str, Leak]]] = {}
    for item, leak in leaks:
        if isinstance(item.old, types.ModuleType) and redefined(item.old, item.new):
            # in sys.modules, or on its package
            modules.setdefault("", []).append((item.old.__name__, leak))
        elif _part_of_reimport(item, reimported):
            modules.setdefault(_module_of(item), []).append((item.key.rpartition(".")[2], leak))
        else:
            kept.append(leak)
    for module, found in modules.items():
        first = found[0][1]
        names = sorted({name for name, _ in found})
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        if module:
            what = (
                f"{module} re-imported: {len(names)} of its names are new objects of the "
                f"same definitions ({shown})"
            )
            key = module
        else:
            count = f"{len(names)} module{'s' if len(names) != 1 else ''}"
            what = f"sys.modules: {count} re-imported ({shown})"
            key = "re-imported"
        category = first.category if module else "sys.modules"
        kept.append(
            dataclasses.replace(first, category=category, key=key, what=what, hint=REIMPORT_HINT)
        )
    return kept


def _reimported_modules(found: list[Found]) -> set[str]:
    """Modules of which a function or class is a new object of the same definition."""
    return {
        _module_of(item)
        for item in found
        if item.category.name == "attribute"
        and not isinstance(item.old, types.ModuleType)
        and redefined(item.old, item.new)
    }


def _part_of_reimport(item: Found, reimported: set[str]) -> bool:
    """A module re-imported (in ``sys.modules`` or on its package), or a name
    of a re-imported module that its re-import made anew."""
    if isinstance(item.old, types.ModuleType):
        return redefined(item.old, item.new)
    return (
        item.category.name == "attribute"
        and _module_of(item) in reimported
        and (redefined(item.old, item.new) or _same_kind(item.old, item.new))
    )


def _same_kind(old: object, new: object) -> bool:
    """Objects of one class, or of a class and its re-definition (not plain
    values: an int that differs after a re-import was set to differ)."""
    if isinstance(old, (str, bytes, int, float, complex, tuple, frozenset, type(None))):
        return False
    a, b = type(old), type(new)
    return a is b or (a.__module__, a.__qualname__) == (b.__module__, b.__qualname__)


def _first_import(item: Found) -> bool:
    """A module first imported in the window (taken out again only after a test)."""
    return (
        item.category.name == "sys.modules"
        and item.old is MISSING
        and isinstance(item.new, types.ModuleType)
    )


def _package_logger(item: Found) -> bool:
    """At import: a logger named after an imported package, created and set
    up by that package's import."""
    return (
        item.category.name in ("logging", "logger")
        and item.old is MISSING
        and (module_logger(item.key))
    )


def _module_of(item: Found) -> str:
    """The name of the module whose namespace (or whose class's) a key is in."""
    where = getattr(item.category, "where", {}).get(item.key, (None, ""))[0]
    if isinstance(where, types.ModuleType):
        return where.__name__
    return str(getattr(where, "__module__", "") or item.key.rpartition(".")[0])
