"""Windows of checking and the snapshots they compare against.

A tier is a set of categories checked together (per test, or per file) with
each category's last snapshot; a window is one test's, fixture's or file's
span, with the keys higher-scoped fixtures set or put back inside it, which
are theirs and not the window's leaks.
"""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path
from typing import Any

import pytest

from pytest_isolation.core.kinds import WindowKind
from pytest_isolation.core.warnings import IsolationWarning
from pytest_isolation.guard import allow
from pytest_isolation.guard.deep import Content
from pytest_isolation.guard.mocks import made_by_pyfakefs
from pytest_isolation.guard.mocks import pyfakefs_alive
from pytest_isolation.guard.state import MISSING
from pytest_isolation.guard.state import Category
from pytest_isolation.guard.state import ListState
from pytest_isolation.guard.state import same

#: Sites seen in a window: (category name, key) -> file:line.
Seen = dict[tuple[str, str], str]
#: A key of one category: (the category, key).
Key = tuple[Category, str]
#: What a fixture did to one key: (value before, value after).
Delta = tuple[object, object]
#: Keys a fixture set: (value before, value it set).
Owned = dict[Key, Delta]


class Tier:
    """Categories checked together, each with its last snapshot."""

    def __init__(self, categories: list[Category]) -> None:
        self.categories = categories
        self.saved: dict[Category, object] = {}
        #: The last snapshot :meth:`take` made that is not the saved one:
        #: the fixtures set up one after another inside a test that changed
        #: the state each take the state as it is now, which is that one.
        self.taken: dict[Category, object] = {}

    def changed(self) -> list[Category]:
        """The categories whose live state no longer matches their snapshot.

        This runs after every test, so the common case (nothing changed) is
        one loop over the categories' fast checks inside one ``try``; only
        when a comparison raises does it check again one by one."""
        saved = self.saved
        try:
            return [c for c in self.categories if c in saved and not c.unchanged(saved[c])]
        except Exception:
            return [c for c in self.categories if c in saved and not safe_unchanged(c, saved[c])]

    def ensure(self) -> None:
        if len(self.saved) == len(self.categories):
            return
        for category in self.categories:
            if category not in self.saved:
                self.saved[category] = category.snapshot()

    def take(self) -> dict[Category, object]:
        """A snapshot of every category as the state is now, for a window
        that opens inside another: the saved snapshot where the state still
        matches it, otherwise a new one reusing what is still current.  The
        saved snapshots (the open window's baseline) are left as they are."""
        now: dict[Category, object] = {}
        for category in self.categories:
            saved = self.saved.get(category)
            if saved is not None and safe_unchanged(category, saved):
                now[category] = saved
                continue
            taken = self.taken.get(category)
            if taken is not None and safe_unchanged(category, taken):
                now[category] = taken
                continue
            base = taken if taken is not None else saved
            resnapshot = getattr(category, "resnapshot", None)
            if base is not None and resnapshot is not None:
                now[category] = resnapshot(base)
            else:
                now[category] = category.snapshot()
            self.taken[category] = now[category]
        return now

    def rebase(self) -> None:
        """Make the saved snapshots match the state now (after an import)."""
        self.saved = self.take()

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
        self.taken.pop(category, None)


@dataclasses.dataclass(slots=True)
class Window:
    owner: str
    kind: WindowKind
    allowances: tuple[allow.Allowance, ...]
    #: Keys higher-scoped fixtures set up inside the window: what their setup did.
    owned: dict[Key, Delta] = dataclasses.field(default_factory=dict)
    #: Keys finalized fixtures put back inside the window: what their teardown did.
    released: dict[Key, Delta] = dataclasses.field(default_factory=dict)
    #: The test, whose packages' set-up may add to ``sys.path`` (see
    #: :func:`pytest_package_insert`).
    item: pytest.Item | None = None

    def excused(self, key: Key, old: object, new: object) -> bool:
        """Whether ``old -> new`` is what a fixture's setup or teardown did.

        A fixture's change is a delta, not a value: pytest adds and removes
        its own logging handlers around each phase, so the root logger's
        handlers after a test are not those the fixture saw, but they are the
        window's plus the one the fixture added."""
        return any(
            delta is not None and follows(key[0], key[1], old, delta, new)
            for delta in (self.owned.get(key), self.released.get(key))
        )

    def rebased(self, item: Found) -> Found:
        """``item`` measured from what a higher-scoped fixture set up inside
        the window left: the test changed the fixture's value, so its leak
        is from that value, and that value is what is put back (from the
        window's start, the next test using the fixture would find it gone)."""
        delta = self.owned.get((item.category, item.key))
        if delta is not None and same(item.old, delta[0]):
            return dataclasses.replace(item, old=delta[1])
        return item


@dataclasses.dataclass
class FixtureWindows:
    """The windows of the higher-scoped fixtures alive, by ``id`` of their
    fixturedef: the snapshot before their setup, what the setup set and the
    sites seen then; and the snapshot before their teardown."""

    open: dict[int, tuple[dict[Category, object], Owned, Seen]] = dataclasses.field(
        default_factory=dict
    )
    pre_teardown: dict[int, dict[Category, object]] = dataclasses.field(default_factory=dict)
    #: The alive higher-scoped fixtures each one requested, by ``id``.
    requested: dict[int, list[int]] = dataclasses.field(default_factory=dict)
    #: The newest alive fixture of each name, by name: its ``id``.
    by_name: dict[str, int] = dataclasses.field(default_factory=dict)

    def opened(self, fixturedef: Any) -> None:
        """Note a fixture set up, and the alive fixtures it requested."""
        key = id(fixturedef)
        self.requested[key] = [
            self.by_name[name] for name in fixturedef.argnames if name in self.by_name
        ]
        self.by_name[fixturedef.argname] = key

    def heir(self, fixturedef: Any) -> int | None:
        """A fixture this one requested that is still alive, and whose own
        teardown may undo what this one did through it (``class_mocker``
        stops the patches a class fixture started with it): what this one
        left is judged when that one ends."""
        key = id(fixturedef)
        if self.by_name.get(fixturedef.argname) == key:
            del self.by_name[fixturedef.argname]
        alive = [other for other in self.requested.pop(key, []) if other in self.open]
        return alive[0] if alive else None


@dataclasses.dataclass
class OpenWindows:
    """The windows open now and where they are: a test's, the file's it is
    in (and that file), whether the teardown running is the last test's (of
    the run, or of a file's process), and the process whose state the
    snapshots are of."""

    pid: int
    window: Window | None = None
    file_window: Window | None = None
    file_path: Path | None = None
    #: In the teardown of the last test (of the run, or of a file's process).
    last_teardown: bool = False


def follows(category: Category, key: str, old: object, delta: Delta, new: object) -> bool:
    """Whether applying ``delta`` to ``old`` gives ``new``: the same value,
    a value the category does not count as changed from it (a named logger
    back to its defaults), or, for a list, the same items added and removed."""
    before, after = delta
    if same(after, new) or equal_content(after, new):
        return True
    if not category.is_leak(key, after, new):
        return True
    old_items, new_items = _items(old), _items(new)
    before_items, after_items = _items(before), _items(after)
    if old_items is None or new_items is None or before_items is None or after_items is None:
        return False
    removed = [x for x in before_items if not _contains(after_items, x)]
    added = [x for x in after_items if not _contains(before_items, x)]
    expected = [x for x in old_items if not _contains(removed, x)] + added
    return sorted(map(id, expected)) == sorted(map(id, new_items))


def _items(value: object) -> tuple[object, ...] | None:
    if isinstance(value, ListState):
        return value.items
    if type(value) is tuple:
        return value
    return None


def _contains(items: list[object] | tuple[object, ...], value: object) -> bool:
    return any(item is value for item in items)


def equal_content(a: object, b: object) -> bool:
    """Snapshots of the same container with equal content (the deep tier's)."""
    return isinstance(a, Content) and a == b


@dataclasses.dataclass
class Found:
    category: Category
    key: str
    old: object
    new: object


class Diffs:
    """Each snapshot's differences from the state now, found once: a
    fixture's finalization compares the state with its set-up's snapshot
    and with its pre-teardown one, which are often the same objects (the
    tier's saved snapshot, reused while nothing changed).  Valid only
    while the state does not change (make a new one after putting back)."""

    def __init__(self, changed: list[Category] | None = None) -> None:
        # By identity, not ``id()``: each ``id()`` call is an audit event.
        self._found: list[tuple[object, list[tuple[str, object, object]]]] = []
        #: Categories known to differ from their snapshot (the fast check ran).
        self._changed = changed or []

    def of(self, category: Category, saved: object) -> list[tuple[str, object, object]]:
        for snapshot, found in self._found:
            if snapshot is saved:
                return found
        known = any(category is changed for changed in self._changed)
        found = safe_diff(category, saved, known_changed=known)
        self._found.append((saved, found))
        return found


def changes(
    tier: Tier,
    saved: dict[Category, object],
    leaks: bool = True,
    diffs: Diffs | None = None,
    owned: Owned | None = None,
) -> list[Found]:
    """What changed since ``saved``; for ``leaks``, without pyfakefs's own churn.

    A key that was unset in ``saved`` and that a higher-scoped fixture set
    inside the window (``owned``) is judged from the fixture's value: a
    module a session fixture put into ``sys.modules`` and a test replaced is
    a leak, where a module first imported in the window may not be."""
    found = []
    fake_filesystem = leaks and pyfakefs_alive()
    diffs = Diffs() if diffs is None else diffs
    owned = owned or {}
    for category in tier.categories:
        before = saved.get(category)
        if before is None:
            continue
        for key, old, new in diffs.of(category, before):
            if fake_filesystem and category.name != "fakefs" and made_by_pyfakefs(old, new):
                continue
            delta = owned.get((category, key)) if old is MISSING else None
            if delta is not None and delta[0] is MISSING and delta[1] is not MISSING:
                if same(delta[1], new):
                    continue  # what the fixture set, untouched
                old = delta[1]
            if category.is_leak(key, old, new):
                found.append(Found(category, key, old, new))
    return found


def raw_changes(
    tier: Tier, saved: dict[Category, object], diffs: Diffs | None = None
) -> dict[Key, Delta]:
    """Every key that differs from ``saved``, leak or not: what a fixture's
    teardown did."""
    found: dict[Key, Delta] = {}
    diffs = Diffs() if diffs is None else diffs
    for category in tier.categories:
        before = saved.get(category)
        if before is not None:
            for key, old, new in diffs.of(category, before):
                found[(category, key)] = (old, new)
    return found


def safe_unchanged(category: Category, saved: object) -> bool:
    """``category.unchanged(saved)``; a comparison that fails counts as changed
    (the diff then reports or skips it, see :func:`safe_diff`)."""
    try:
        return category.unchanged(saved)
    except Exception:
        return False


def safe_diff(
    category: Category, saved: object, known_changed: bool = False
) -> list[tuple[str, object, object]]:
    """The category's changes; never an error in the test's teardown or an
    internal error: state that cannot be compared (an object whose attribute
    lookup raises, say) is skipped with an ``IsolationWarning``."""
    try:
        if not known_changed and category.unchanged(saved):
            return []
        return category.diff(saved)
    except Exception as error:
        warnings.warn(
            IsolationWarning(
                f"the leak guard could not compare {category.name!r} state and skipped it "
                f"this time: {error!r}"
            ),
            stacklevel=2,
        )
        return []


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


def pytest_package_insert(found: Found, item: pytest.Item | None) -> bool:
    """Whether ``sys.path`` changed only by the entry pytest adds when the
    set-up of ``item``'s packages imports their ``__init__.py``
    (``pytest.Package``'s set-up, at the first test of the package; in file
    mode, in every file's process): the directory above a package's
    outermost package, at the front (import mode ``prepend``) or the end
    (``append``).  The packages are looked at only for such a change."""
    if item is None or found.category.name != "import" or found.key != "sys.path":
        return False
    old, new = getattr(found.old, "items", None), getattr(found.new, "items", None)
    if old is None or new is None or len(new) != len(old) + 1:
        return False
    if new[1:] == old:
        added = new[0]
    elif new[:-1] == old:
        added = new[-1]
    else:
        return False
    packages = [node for node in item.listchain() if isinstance(node, pytest.Package)]
    return any(str(_package_root(node.path)) == added for node in packages)


def _package_root(directory: Path) -> Path:
    """The directory above the outermost package that holds ``directory``."""
    while (directory / "__init__.py").is_file() and directory.parent != directory:
        directory = directory.parent
    return directory
