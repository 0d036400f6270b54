"""The steps that turn what a window's tiers show into leaks: whose each
change is (the verdict), putting it back (the restorer), and what the report
says of it (where it was made, whether it is routine).  The leak guard's
hooks (:mod:`.watch`) decide when a window closes; this decides what it
leaked."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from pytest_isolation.core.records import Leak
from pytest_isolation.guard import allow
from pytest_isolation.guard.leftovers import Leftovers
from pytest_isolation.guard.located import Scope
from pytest_isolation.guard.located import Sources
from pytest_isolation.guard.located import located
from pytest_isolation.guard.located import scopes_of
from pytest_isolation.guard.messages import describe
from pytest_isolation.guard.messages import fold_reimports
from pytest_isolation.guard.messages import subject
from pytest_isolation.guard.mocks import patched_by
from pytest_isolation.guard.mocks import start_site
from pytest_isolation.guard.recorders import Recorders
from pytest_isolation.guard.restore import Restorer
from pytest_isolation.guard.snapshots import Snapshots
from pytest_isolation.guard.state import Category
from pytest_isolation.guard.verdict import Verdict
from pytest_isolation.guard.verdict import first_import
from pytest_isolation.guard.verdict import package_logger
from pytest_isolation.guard.windows import Tier
from pytest_isolation.guard.windows import Window
from pytest_isolation.guard.windows import attribute_id
from pytest_isolation.guard.windows import changes
from pytest_isolation.guard.windows import pytest_path_insert
from pytest_isolation.guard.windows import safe_unchanged

#: Patchers are stopped first: that puts back everything they changed.
PATCHERS = ("mock", "fakefs")
IMPORT_HINT = "run with --isolation-mode=file to keep it in this file, or move it into a fixture"


@dataclasses.dataclass(eq=False)  # a part, compared by identity
class Findings:
    """A window's leaks, from the snapshots the guard keeps: found, put back
    and described; and what its test left running or on disk."""

    snapshots: Snapshots
    verdict: Verdict
    restorer: Restorer
    recorders: Recorders
    leftovers: Leftovers
    #: The test files read for the sites of writes that no hook saw.
    sources: Sources = dataclasses.field(default_factory=Sources)

    def close(self, window: Window, tier: Tier) -> list[Leak]:
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
        return self._located(leaks, lambda: scopes_of(window.item))

    def peek(self, window: Window) -> list[Leak]:
        """The window's leaks so far, as :meth:`close` would find them, with
        nothing restored and the snapshots left as they were."""
        changed = self.snapshots.tier.changed()
        found = self.verdict.found(window, Tier(changed), self.snapshots.tier.saved)
        leaks = fold_reimports(
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
        return self._located(leaks, lambda: scopes_of(window.item))

    def left_behind(self, window: Window) -> list[Leak]:
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

    def at_import(
        self,
        collector: pytest.Module,
        before: dict[Category, object],
        allowances: tuple[allow.Allowance, ...],
    ) -> list[Leak]:
        """What a test module's import changed that is a leak, never put back
        (the file's own tests may depend on it); the per-test tier then starts
        from what the import left, as the tests of the file do."""
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
            allowed = (*allowances, *allow.of_node(collector))
        except pytest.UsageError:
            allowed = allowances  # reported at the test's setup
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
                if not allow.allowed(allowed, item.category.name, subject(item))
            ]
        )
        self.recorders.seen.clear()
        leaks = self._located(leaks, lambda: [Scope(collector.path)])
        # Never put back: the file's own tests may depend on it.
        return [dataclasses.replace(leak, restored=False) for leak in leaks]

    def _located(self, leaks: list[Leak], scopes: Callable[[], list[Scope]]) -> list[Leak]:
        return located(leaks, self.sources, scopes, self.recorders.sites.relative)


_LEFTOVER_HINT = {
    "threads": "join or stop it before the test ends (or in a fixture's teardown)",
    "processes": "wait for it or terminate it before the test ends",
    "files": "write to tmp_path, or remove it in the test",
}
