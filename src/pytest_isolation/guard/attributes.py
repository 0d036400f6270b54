"""Module globals and class attributes rebound by a test: the ``attribute``
category (what is a leak, how it is put back, how it reads).

Per test the guard watches the project's own modules (under the rootdir, not
test modules or conftests) and the classes defined in them, the stdlib
modules tests patch most, and any module a test was seen patching (which
ones: :mod:`.watchlist`).  At each file boundary it scans every module dict,
reporting only functions and classes replaced there (library data changes
lazily and is not a test's doing).  The namespaces' snapshots and their fast
check are :mod:`.namespaces`'.
"""

from __future__ import annotations

import logging
import types

from pytest_isolation.guard.interpreter import SYS_COVERED
from pytest_isolation.guard.namespaces import NamespaceSnapshot
from pytest_isolation.guard.namespaces import SavedNamespace
from pytest_isolation.guard.namespaces import Space
from pytest_isolation.guard.routine import hides_a_default
from pytest_isolation.guard.sites import Sites
from pytest_isolation.guard.state import BEHAVIOUR
from pytest_isolation.guard.state import MISSING
from pytest_isolation.guard.state import Change
from pytest_isolation.guard.state import describe
from pytest_isolation.guard.state import same

#: Attributes that change legitimately, or that another category watches.
SKIPPED = {
    "sys": SYS_COVERED | {"last_type", "last_value", "last_traceback", "last_exc", "ps1", "ps2"},
    "builtins": frozenset({"_"}),
}

#: A logger's state that the ``logging`` and ``logger`` categories compare
#: (and the logging plugin changes around every phase), not attributes.
LOGGER_COVERED = frozenset({"handlers", "filters", "level", "disabled", "propagate", "_cache"})


class _Other:
    """An object nothing is equal to, but an ``__eq__`` that always says yes."""


def equal_for_real(old: object, new: object) -> bool:
    """``new`` equals ``old`` and is no object equal to anything: a config
    reloaded into equal objects is no change; an object whose ``__eq__``
    always answers ``True`` is compared by identity."""
    if old is MISSING or new is MISSING:
        return False
    try:
        return bool(old == new) and not bool(new == _Other()) and not bool(old == _Other())
    except Exception:  # an ``__eq__`` that fails: compared by identity
        return False


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


#: The values of a flag: what a test sets as ``Plugin.__configured__ = True``.
_FLAG_TYPES = (bool, int, float, type(None))


def _flag(old: object, new: object) -> bool:
    """A dunder-named flag set or changed (``__configured__``, ``__initialised__``):
    the interpreter's own dunders of a module or class hold no such values
    after its creation."""
    return (old is MISSING or isinstance(old, _FLAG_TYPES)) and isinstance(new, _FLAG_TYPES)


def _replaceable(value: object) -> bool:
    """Functions and classes: what a hand-made patch replaces."""
    return isinstance(value, BEHAVIOUR) and not isinstance(value, property)


class Attributes:
    """Rebinding of names in a set of module and class namespaces."""

    name = "attribute"
    hint = "use monkeypatch.setattr or mock.patch.object, which undo themselves"

    def __init__(self, sites: Sites, *, replaced_only: bool = False) -> None:
        self.sites = sites
        #: Only functions and classes replaced (the file-boundary scan of library modules).
        self.replaced_only = replaced_only
        self.spaces: list[Space] = []
        self.where: dict[str, tuple[object, str]] = {}
        #: Each namespace as first seen (after its import): by id, (owner, copy).
        self.origin: dict[int, tuple[object, dict[str, object]]] = {}

    def _saved(self, prefix: str, owner: object) -> SavedNamespace:
        # The file scan compares tracked modules in full: it is there for
        # the writes the tracking cannot see.
        saved = SavedNamespace(prefix, owner, by_version=not self.replaced_only)
        first = self.origin.get(saved.owner_id)
        if first is None or first[0] is not owner:
            self.origin[saved.owner_id] = (owner, saved.copy)
        return saved

    def cleaned_up(self, owner: object, name: str, new: object) -> bool:
        """A name set back to its value at import (or removed again): a
        clean-up, never a leak (``_pool.shutdown(); _pool = None``)."""
        first = self.origin.get(id(owner))
        return first is not None and first[0] is owner and same(first[1].get(name, MISSING), new)

    def snapshot(self) -> object:
        snapshot = NamespaceSnapshot(self._saved(prefix, owner) for prefix, owner in self.spaces)
        snapshot.over = self.spaces
        return snapshot

    def adopt(self, saved: object, spaces: list[Space]) -> None:
        """Add namespaces to a snapshot taken before they existed (a module
        imported inside the test, as its import completes)."""
        if isinstance(saved, NamespaceSnapshot):
            saved.extend(self._saved(prefix, owner) for prefix, owner in spaces)

    def resnapshot(self, previous: object) -> object:
        """A snapshot that reuses the parts of ``previous`` still current."""
        assert isinstance(previous, list)
        if not isinstance(previous, NamespaceSnapshot):
            return self._reusing([saved for saved in previous if saved.unchanged()])
        moved = previous.changed_at()
        if previous.over is self.spaces:
            # Taken of these same spaces: a copy (in C) with the changed ones replaced.
            renewed = NamespaceSnapshot(previous)
            for index in moved:
                prefix, owner = self.spaces[index]
                renewed[index] = self._saved(prefix, owner)
            renewed.over = self.spaces
            return renewed
        gone = set(moved)
        return self._reusing([saved for index, saved in enumerate(previous) if index not in gone])

    def extend(self, previous: object) -> object:
        """``previous`` (known to be current) plus namespaces added since."""
        assert isinstance(previous, list)
        return self._reusing(previous)

    def _reusing(self, known: list[SavedNamespace]) -> list[SavedNamespace]:
        """A snapshot of the spaces, taking each namespace's part from
        ``known`` where it is there.  Matched by prefix and identity, not by
        ``id()``: each ``id()`` call raises an audit event, which the guard's
        own audit hook makes a Python call, for every module at every file."""
        by_prefix = {saved.prefix: saved for saved in known}
        snapshot = NamespaceSnapshot()
        for prefix, owner in self.spaces:
            saved = by_prefix.get(prefix)
            snapshot.append(
                saved if saved is not None and saved.owner is owner else self._saved(prefix, owner)
            )
        snapshot.over = self.spaces
        return snapshot

    def unchanged(self, saved: object) -> bool:
        assert isinstance(saved, NamespaceSnapshot)
        return saved.unchanged()

    def changed_spaces(self, saved: object) -> list[SavedNamespace]:
        """The namespaces of a snapshot that changed since it was taken."""
        return saved.changed() if isinstance(saved, NamespaceSnapshot) else []

    def diff(self, saved: object) -> list[Change]:
        assert isinstance(saved, list)
        found: list[Change] = []
        spaces = saved.changed() if isinstance(saved, NamespaceSnapshot) else saved
        for space in spaces:
            if space.unchanged():
                continue
            skipped = SKIPPED.get(space.prefix, frozenset())
            if isinstance(space.owner, logging.Logger):
                skipped = LOGGER_COVERED
            live = dict(space.live)
            # An object's attribute appearing or going away is a cache filled
            # or dropped (Django's settings, DRF's api_settings, which lists
            # what it cached, a cached_property), not a leak; a module's or
            # class's is.
            instance = not isinstance(space.owner, (type, types.ModuleType))
            for name in space.copy.keys() | live.keys():
                # A module's or class's dunders are the interpreter's; an
                # object's (``self.__initialised__``) are its own state.
                old, new = space.copy.get(name, MISSING), live.get(name, MISSING)
                if name in skipped or (not instance and _dunder(name) and not _flag(old, new)):
                    continue
                appeared = instance and (new is MISSING or old is MISSING)
                if appeared and not hides_a_default(
                    space.owner, name, new if old is MISSING else old
                ):
                    continue
                if (
                    not same(old, new)
                    and not equal_for_real(old, new)
                    and not self.cleaned_up(space.owner, name, new)
                ):
                    key = f"{space.prefix}.{name}"
                    self.where[key] = (space.owner, name)
                    found.append((key, old, new))
        return found

    def label(self, key: str) -> str:
        return key

    def show(self, value: object) -> str:
        return describe(value, self.sites.defined)

    def is_leak(self, key: str, old: object, new: object) -> bool:
        if old is MISSING and (new is None or isinstance(new, types.ModuleType)):
            # A submodule imported (its package gains the name), or
            # ``getattr(x, name, None)`` written back (freezegun's time.clock).
            return False
        return not self.replaced_only or _replaceable(old)

    def restore(self, key: str, old: object) -> None:
        owner, name = self.where[key]
        if not isinstance(owner, (type, types.ModuleType)):
            # An object: its own __dict__, never its __setattr__/__delattr__
            # (Django's LazySettings would delete the setting itself).
            namespace = vars(owner)
            if old is MISSING:
                namespace.pop(name, None)
            else:
                namespace[name] = old
        elif old is MISSING:
            if name in vars(owner):
                delattr(owner, name)
        else:
            setattr(owner, name, old)
