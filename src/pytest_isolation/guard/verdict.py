"""The guard's verdict on each change it found: the window's leak, routine
state, or not the window's at all (what a higher-scoped fixture set, what a
library's import put in place, a patch's stand-in replaced by the real
value, pytest's own ``sys.path`` entries, an allowed leak)."""

from __future__ import annotations

import dataclasses
import sys
import types

from pytest_isolation.guard import allow
from pytest_isolation.guard import bindings
from pytest_isolation.guard.deep import Containers
from pytest_isolation.guard.deep import Content
from pytest_isolation.guard.interpreter import SysModules
from pytest_isolation.guard.loggers import module_logger
from pytest_isolation.guard.messages import subject
from pytest_isolation.guard.mocks import stand_in
from pytest_isolation.guard.routine import classify
from pytest_isolation.guard.routine import private
from pytest_isolation.guard.sites import Sites
from pytest_isolation.guard.state import MISSING
from pytest_isolation.guard.state import Category
from pytest_isolation.guard.watchlist import COMMON_STDLIB
from pytest_isolation.guard.watchlist import Watchlist
from pytest_isolation.guard.windows import Diffs
from pytest_isolation.guard.windows import Found
from pytest_isolation.guard.windows import Tier
from pytest_isolation.guard.windows import Window
from pytest_isolation.guard.windows import changes
from pytest_isolation.guard.windows import pytest_package_insert


@dataclasses.dataclass(eq=False)  # a part, compared by identity
class Verdict:
    """Decides, for each change a window's tiers show, whose it is and what
    kind: the rules in one place, so a new kind of state needs no hook."""

    watch: Watchlist
    containers: Containers
    sys_modules: SysModules
    sites: Sites
    #: Keys a library's import set in the current file (the recorders' set).
    imported: set[tuple[str, str]]

    def library_set(self, item: Found) -> bool:
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

    def found(self, window: Window, tier: Tier, saved: dict[Category, object]) -> list[Found]:
        """What changed in ``tier`` (categories known to differ from ``saved``)
        since ``saved`` that is the window's own leak."""
        found = changes(tier, saved, diffs=Diffs(tier.categories), owned=window.owned)
        keys = {item.key for item in found if item.category.name == "attribute"}
        imported = self.sys_modules.added_since(saved.get(self.sys_modules))
        return [
            window.rebased(item)
            for item in found
            if not window.excused((item.category, item.key), item.old, item.new)
            and not self._toward_real_value(item, keys)
            and not self._set_by_a_library_import(item, imported)
            and not pytest_package_insert(item, window.item)
            and not (first_import(item) and window.kind != "test")
            and (item.category.name, item.key) not in self.imported
            and not allow.allowed(window.allowances, item.category.name, subject(item))
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

    def routine(self, item: Found) -> str:
        if holds_stand_ins(item.new):
            return ""  # a cache filled with a test's mocks is the test's leak
        if isinstance(item.old, Content) and isinstance(item.new, Content):
            if self.containers.constant_of_a_test_module(item.key):
                return ""
            grew = item.new.grew_from(item.old)
            # A registry given a test's own function or class is the test's
            # leak: a later test sees what only this test defined.
            known = {id(value) for value in item.old.items}
            added = [value for value in item.new.items if id(value) not in known]
            if any(self.watch.holds_test_code(value) for value in added):
                return ""
            if grew:
                return "filled"
            if self.containers.held_by_an_object(item.key):
                # An object's own bookkeeping (a pool's free list), unless public.
                return "" if not private(item.key.rpartition(".")[2]) else "bookkeeping"
            return ""
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
        kind = classify(item.category.name, item.key, item.old, item.new, owner)
        if kind in ("created", "filled") and self.watch.holds_test_code(item.new):
            return ""
        return kind


def holds_stand_ins(value: object) -> bool:
    """A patcher's stand-in, or a tuple, list or dict that holds one (a
    cache a test filled with mocks)."""
    if stand_in(value):
        return True
    if isinstance(value, dict):
        value = list(value.values())
    return isinstance(value, (tuple, list)) and any(stand_in(item) for item in value[:64])


def first_import(item: Found) -> bool:
    """A module first imported in the window (kept; routine only in a test's window)."""
    return (
        item.category.name == "sys.modules"
        and item.old is MISSING
        and isinstance(item.new, types.ModuleType)
    )


def package_logger(item: Found) -> bool:
    """At import: a logger named after an imported package, created and set
    up by that package's import."""
    return (
        item.category.name in ("logging", "logger")
        and item.old is MISSING
        and (module_logger(item.key))
    )
