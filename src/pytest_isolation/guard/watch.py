"""The leak guard: snapshot around each test and each higher-scoped fixture,
report what changed, and put it back.

Window of a test: from before its first function-scoped fixture is set up to
after its last one is torn down.  State set by a class/module/package/session
fixture set up during that window belongs to the fixture, checked from its
setup to its finalization, and is not the test's leak.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Generator
from typing import Any

import pytest

from pytest_isolation import LeakedStateWarning
from pytest_isolation.guard.categories import CATEGORIES
from pytest_isolation.guard.categories import MISSING
from pytest_isolation.guard.categories import Category
from pytest_isolation.guard.categories import MockPatches
from pytest_isolation.guard.categories import Snapshot
from pytest_isolation.guard.categories import stop_patches

State = dict[str, Snapshot]
Key = tuple[str, str]


@dataclasses.dataclass(frozen=True)
class Leak:
    owner: str
    category: Category
    key: str
    old: object
    new: object

    def message(self) -> str:
        if isinstance(self.category, MockPatches):
            what = f"an unstopped mock patch of {MockPatches.describe(self.new)}"
            return f"{self.owner} leaked {what}; {self.category.hint}"
        label = self.category.label(self.key)
        show = getattr(self.category, "show", repr)
        was = "unset" if self.old is MISSING else show(self.old)
        now = "unset" if self.new is MISSING else show(self.new)
        return f"{self.owner} leaked {label} (was {was}, now {now}); {self.category.hint}"


def snapshot() -> State:
    return {category.name: category.snapshot() for category in CATEGORIES}


def _same(a: object, b: object) -> bool:
    """Identity, or equality of plain values (tuples compare item by item)."""
    return a is b or (isinstance(a, (str, int, float, tuple, frozenset)) and a == b)


def changes(before: State, after: State) -> list[tuple[Category, str, object, object]]:
    """Every key whose value differs between two snapshots."""
    found = []
    for category in CATEGORIES:
        old_values, new_values = before[category.name], after[category.name]
        if old_values == new_values:  # the common case, compared in C
            continue
        for key in old_values.keys() | new_values.keys():
            old, new = old_values.get(key, MISSING), new_values.get(key, MISSING)
            if not _same(old, new):
                found.append((category, key, old, new))
    return found


@dataclasses.dataclass
class Window:
    """One test's window, with the keys fixtures set or put back inside it."""

    baseline: State
    owned: dict[Key, object] = dataclasses.field(default_factory=dict)
    released: dict[Key, object] = dataclasses.field(default_factory=dict)

    def excused(self, key: Key, new: object) -> bool:
        return any(key in table and _same(table[key], new) for table in (self.owned, self.released))


class LeakGuard:
    """Registered as ``isolation-guard`` unless ``--isolation-leaks=off``."""

    def __init__(self, policy: str) -> None:
        self.policy = policy
        self.window: Window | None = None
        #: Higher-scoped fixtures alive: their state before setup and what they set.
        self.fixtures: dict[int, tuple[State, dict[Key, object]]] = {}
        self.reported: dict[str, list[str]] = defaultdict(list)
        self.pending: list[str] = []

    @pytest.hookimpl(wrapper=True, tryfirst=True)  # before any fixture of the test
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None]:
        self.window = Window(snapshot())
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any) -> Generator[None, object, object]:
        if fixturedef.scope == "function":
            return (yield)
        before = snapshot()
        try:
            return (yield)
        finally:
            owned = {(c.name, key): new for c, key, _, new in changes(before, snapshot())}
            self.fixtures[id(fixturedef)] = (before, owned)
            if self.window is not None:
                self.window.owned.update(owned)

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_post_finalizer(
        self, fixturedef: Any, request: pytest.FixtureRequest
    ) -> Generator[None, object, object]:
        result = yield
        entry = self.fixtures.pop(id(fixturedef), None)
        if entry is None:
            return result
        before, owned = entry
        # Only what the fixture itself set counts: other fixtures set up or
        # finalized in its lifetime, and tests (already restored), are not it.
        after = snapshot()
        owner = f"fixture {fixturedef.argname!r} (scope={fixturedef.scope})"
        by_name = {category.name: category for category in CATEGORIES}
        leaks = []
        for name, key in owned:
            category = by_name[name]
            old, new = before[name].get(key, MISSING), after[name].get(key, MISSING)
            if not _same(old, new) and category.is_leak(key, old, new):
                leaks.append(Leak(owner, category, key, old, new))
        self._settle(leaks, request.node)
        if self.window is not None:  # what the test's window will see put back
            now = snapshot()
            for name, key in owned.keys() | {(leak.category.name, leak.key) for leak in leaks}:
                self.window.released[(name, key)] = now[name].get(key, MISSING)
        return result

    @pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: after the last finalizer
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, object, object]:
        result = yield
        window, self.window = self.window, None
        if window is not None:
            leaks = [
                Leak(item.nodeid, c, key, old, new)
                for c, key, old, new in changes(window.baseline, snapshot())
                if c.is_leak(key, old, new) and not window.excused((c.name, key), new)
            ]
            self._settle(leaks, item)
        pending, self.pending = self.pending, []
        if pending and self.policy == "error":
            pytest.fail("\n".join(pending), pytrace=False)
        return result

    def _settle(self, leaks: list[Leak], node: pytest.Item | pytest.Collector) -> None:
        """Put the state back, then report as the policy says."""
        stop_patches([leak.new for leak in leaks if isinstance(leak.category, MockPatches)])
        for leak in leaks:
            leak.category.restore(leak.key, leak.old)
        for leak in leaks:
            message = leak.message()
            self.reported[leak.owner].append(message)
            if self.policy == "warn":
                node.warn(LeakedStateWarning(message))
            elif self.policy == "error":
                self.pending.append(message)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.reported:
            return
        count = len(self.reported)
        noun = "test or fixture" if count == 1 else "tests or fixtures"
        terminalreporter.write_sep("=", f"isolation: {count} {noun} leaked state")
        for owner, messages in self.reported.items():
            for message in messages:
                terminalreporter.write_line(message.replace(f"{owner} leaked", f"{owner}:", 1))
