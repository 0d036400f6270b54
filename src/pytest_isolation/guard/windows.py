"""Windows of checking and the snapshots they compare against.

A tier is a set of categories checked together (per test, or per file) with
each category's last snapshot; a window is one test's, fixture's or file's
span, with the keys higher-scoped fixtures set or put back inside it, which
are theirs and not the window's leaks.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pytest_isolation.guard import allow
from pytest_isolation.guard.mocks import made_by_pyfakefs
from pytest_isolation.guard.mocks import pyfakefs_alive
from pytest_isolation.guard.state import Category
from pytest_isolation.guard.state import ListState
from pytest_isolation.guard.state import same

#: Sites seen in a window: (category name, key) -> file:line.
Seen = dict[tuple[str, str], str]
#: A key of one category: (the category, key).
Key = tuple[Category, str]
#: Keys a fixture set: (value before, value it set).
Owned = dict[Key, tuple[object, object]]


class Tier:
    """Categories checked together, each with its last snapshot."""

    def __init__(self, categories: list[Category]) -> None:
        self.categories = categories
        self.saved: dict[Category, object] = {}

    def ensure(self) -> None:
        if len(self.saved) == len(self.categories):
            return
        for category in self.categories:
            if category not in self.saved:
                self.saved[category] = category.snapshot()

    def take(self) -> dict[Category, object]:
        return {category: category.snapshot() for category in self.categories}

    def renew(self, category: Category) -> None:
        """Snapshot again, reusing what is still current where the category can."""
        previous = self.saved.get(category)
        resnapshot = getattr(category, "resnapshot", None)
        if previous is not None and resnapshot is not None:
            self.saved[category] = resnapshot(previous)
        else:
            self.saved[category] = category.snapshot()

    def forget(self, category: Category) -> None:
        self.saved.pop(category, None)


@dataclasses.dataclass
class Window:
    owner: str
    kind: str
    allowances: tuple[allow.Allowance, ...]
    #: Keys higher-scoped fixtures set inside the window: (old, new).
    owned: dict[Key, tuple[object, object]] = dataclasses.field(default_factory=dict)
    #: Keys finalized fixtures put back inside the window: the value put back.
    released: dict[Key, object] = dataclasses.field(default_factory=dict)

    def excused(self, key: Key, new: object) -> bool:
        if key in self.owned and same(self.owned[key][1], new):
            return True
        return key in self.released and same(self.released[key], new)


@dataclasses.dataclass
class Found:
    category: Category
    key: str
    old: object
    new: object


def changes(tier: Tier, saved: dict[Category, object], leaks: bool = True) -> list[Found]:
    """What changed since ``saved``; for ``leaks``, without pyfakefs's own churn."""
    found = []
    fake_filesystem = leaks and pyfakefs_alive()
    for category in tier.categories:
        before = saved.get(category)
        if before is None or category.unchanged(before):
            continue
        for key, old, new in category.diff(before):
            if fake_filesystem and category.name != "fakefs" and made_by_pyfakefs(old, new):
                continue
            if category.is_leak(key, old, new):
                found.append(Found(category, key, old, new))
    return found


def same_items(old: object, new: object) -> bool:
    """Two snapshots of a list attribute with the same items (so it was rebound)."""
    return isinstance(old, ListState) and isinstance(new, ListState) and old.items == new.items


def attribute_id(where: tuple[object, str]) -> tuple[int, str]:
    return id(where[0]), where[1]


def pytest_path_insert(item: Found, path: Path) -> bool:
    """``sys.path`` entries pytest's prepend/append import modes add for a test module."""
    if item.category.name != "import" or item.key != "sys.path":
        return False
    old_items = set(getattr(item.old, "items", ()))
    added = [entry for entry in getattr(item.new, "items", ()) if entry not in old_items]
    removed = old_items - set(getattr(item.new, "items", ()))
    ancestors = {str(parent) for parent in path.parents}
    return not removed and all(str(entry) in ancestors for entry in added)
