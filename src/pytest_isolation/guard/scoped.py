"""The leak guard's part for higher-scoped fixtures (class, module, package,
session): each one's window, from its setup to its finalization, and what
they hold that a test may change (their values, the project objects they
return, their files).

State such a fixture sets up inside a test's window belongs to the fixture,
checked from its setup to its finalization, and is not the test's leak.
The hooks that call this are the guard's (:mod:`.watch`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from functools import partial
from typing import Any

import pytest

from pytest_isolation.core.records import Leak
from pytest_isolation.guard import allow
from pytest_isolation.guard.held import HeldState
from pytest_isolation.guard.held import SharedFiles
from pytest_isolation.guard.held import as_path
from pytest_isolation.guard.held import fixture_folders
from pytest_isolation.guard.held import fixture_label
from pytest_isolation.guard.held import regular_files
from pytest_isolation.guard.leftovers import Leftovers
from pytest_isolation.guard.messages import subject
from pytest_isolation.guard.mocks import known_patcher
from pytest_isolation.guard.recorders import Recorders
from pytest_isolation.guard.report import IN_TEARDOWN
from pytest_isolation.guard.report import Settler
from pytest_isolation.guard.restore import Restorer
from pytest_isolation.guard.snapshots import Snapshots
from pytest_isolation.guard.state import MISSING
from pytest_isolation.guard.values import FixtureValues
from pytest_isolation.guard.verdict import first_import
from pytest_isolation.guard.windows import Diffs
from pytest_isolation.guard.windows import FixtureWindows
from pytest_isolation.guard.windows import OpenWindows
from pytest_isolation.guard.windows import Owned
from pytest_isolation.guard.windows import Tier
from pytest_isolation.guard.windows import Window
from pytest_isolation.guard.windows import changes
from pytest_isolation.guard.windows import raw_changes


@dataclasses.dataclass(eq=False)  # a part, compared by identity
class ScopedFixtures:
    """The higher-scoped fixtures alive: their windows (what each one's
    setup set, checked at its finalization), their values, the project
    objects they hold and their files; with the guard's parts that find,
    put back and report what a fixture leaked."""

    #: The test's and the file's windows, shared with the guard.
    open: OpenWindows
    snapshots: Snapshots
    recorders: Recorders
    restorer: Restorer
    settler: Settler
    leftovers: Leftovers
    allowances: tuple[allow.Allowance, ...]
    #: What the test shares through higher-scoped fixtures and its unittest class.
    held: HeldState
    #: The deep tier's higher-scoped fixture values (None without it).
    values: FixtureValues | None
    fixtures: FixtureWindows = dataclasses.field(default_factory=FixtureWindows)
    #: The files and folders of higher-scoped fixtures.
    shared_files: SharedFiles = dataclasses.field(default_factory=SharedFiles)

    def __post_init__(self) -> None:
        if self.values is not None:  # one record of the higher-scoped fixtures alive
            self.values.scoped = self.held.scoped

    def tiers(self, fixturedef: Any) -> list[Tier]:
        """The tiers open now: the file's too while a test file runs, except
        for a class-scoped fixture, which is checked like a test (the
        library modules' functions and classes once per file: there are too
        many to compare at every class's set-up and teardown)."""
        file_open = self.open.file_window is not None
        if fixturedef is not None and fixturedef.scope == "class":
            file_open = False
        return self.snapshots.tiers(file_open)

    # -- a test's view of them -------------------------------------------------

    def remember(self, item: pytest.Item) -> None:
        """What the test is given through them, as its setup left it."""
        self.held.remember(item)
        self.shared_files.remember()
        if self.values is not None:
            self.values.remember(item)

    def changed_by(self, window: Window, restore: bool) -> list[Leak]:
        """What the window's test changed in their values and the objects
        they hold (read before the test's own fixtures' teardown, which may
        change them)."""
        value_leaks = []
        if self.values is not None:
            value_leaks = self.values.leaks(window, restore=restore)
        value_leaks += self.held.leaks(window)
        return value_leaks

    def files_changed(self, window: Window) -> list[Leak]:
        """Their files the window's test changed."""
        return self.shared_files.leaks(window)

    # -- their own windows -------------------------------------------------------

    def setup(self, fixturedef: Any) -> Generator[None, object, object]:
        """Around a fixture's setup (the guard's ``pytest_fixture_setup``)."""
        if fixturedef.scope == "function":
            result = yield
            if type(result) is pytest.MonkeyPatch:
                known_patcher(result)  # alive until the test's end, undone by its fixture
            return result
        before = {
            key: value for tier in self.tiers(fixturedef) for key, value in tier.take().items()
        }
        already_open = set(self.fixtures.open)
        folders = fixture_folders(self.open.file_path)
        files_before = set().union(*map(regular_files, folders))
        try:
            result = yield
        finally:
            # What the fixture changed that is a leak, and each key it added
            # even when adding it is none (a module it put into sys.modules):
            # a test that then replaces it leaks, measured from the fixture's value.
            owned: Owned = {
                key: (old, new)
                for tier in self.tiers(fixturedef)
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
            for window in (self.open.window, self.open.file_window):
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

    def finalized(
        self, fixturedef: Any, request: pytest.FixtureRequest
    ) -> Generator[None, object, object]:
        """Around a fixture's finalization (the guard's ``pytest_fixture_post_finalizer``)."""
        __tracebackhide__ = True
        result = yield
        self.held.scoped.pop(fixturedef.argname, None)
        self.shared_files.drop(fixture_label(fixturedef))
        entry = self.fixtures.open.pop(id(fixturedef), None)
        if entry is None:
            return result
        before, owned, seen = entry
        owner = f"fixture {fixturedef.argname!r} (scope={fixturedef.scope})"
        if self.open.window is not None:  # the test whose teardown finalizes it
            owner = f"{owner}{IN_TEARDOWN}{self.open.window.owner}"
        diffs = Diffs()
        tiers = self.tiers(fixturedef)
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
        if self.open.last_teardown:
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
            for window in (self.open.window, self.open.file_window):
                if window is not None:
                    window.released.update(released)
        self.settler.fail_test(escalated)  # -W error, or --isolation-leaks=error: now
        return result

    def _before_teardown(self, fixturedef: Any) -> None:
        self.fixtures.pre_teardown[id(fixturedef)] = {
            key: value for tier in self.tiers(fixturedef) for key, value in tier.take().items()
        }
