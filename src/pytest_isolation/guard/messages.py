"""A change in words: the leak records the guard reports, and a module
re-imported folded into one record instead of one per name in it."""

from __future__ import annotations

import dataclasses
import types

from pytest_isolation.core.kinds import WindowKind
from pytest_isolation.core.records import Leak
from pytest_isolation.core.words import counted
from pytest_isolation.guard.deep import Content
from pytest_isolation.guard.routine import KINDS
from pytest_isolation.guard.state import MISSING
from pytest_isolation.guard.state import ListState
from pytest_isolation.guard.state import difference
from pytest_isolation.guard.state import equal
from pytest_isolation.guard.state import redefined
from pytest_isolation.guard.windows import Found
from pytest_isolation.guard.windows import same_items

REIMPORT_HINT = (
    "import it once; a test of an import can use monkeypatch.delitem(sys.modules, ...), "
    "which puts the module back"
)


def subject(item: Found) -> str:
    """The key ``allow_leaks`` patterns match (a patch's target, ...)."""
    subject = getattr(item.category, "subject", None)
    return str(subject(item.key, item.old, item.new)) if subject else item.key


def describe(
    owner: str,
    kind: WindowKind,
    item: Found,
    hint: str,
    site: str = "",
    routine: str = "",
) -> Leak:
    """The leak record of one change: what changed in words (a counter, a
    value created lazily, a list rebound with the same items, what a
    container gained and lost, ...), where, and how to avoid it."""
    category = item.category
    if category.name == "mock":
        what = f"an unstopped mock patch of {subject(item)}"
        return Leak(owner, kind, "mock", subject(item), what, site=site, hint=hint)
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
    elif routine == "imported":
        what = f"{label}, first imported"
    elif same_items(item.old, item.new):
        what = f"{label} (rebound to a new list with the same items)"
    elif isinstance(item.old, ListState) and isinstance(item.new, ListState):
        # Say what differs (``sys.path`` (added '/x')), not two long lists,
        # unless the list was replaced by one with nothing of the old.
        change = difference(item.old.items, item.new.items)
        kept = any(x is y or x == y for x in item.old.items for y in item.new.items)
        what = f"{label} ({change})" if change and kept else what
    elif isinstance(item.old, Content) and isinstance(item.new, Content):
        change = difference(item.old.plain(), item.new.plain())
        what = f"{label} ({change})" if change else what
        if routine:
            what = f"{label}, {KINDS[routine]} ({change})"
    elif isinstance(item.old, types.ModuleType) and isinstance(item.new, types.ModuleType):
        # Two copies of one module read the same: say where each came from.
        where = getattr(item.new, "__file__", None) or "no file"
        was = getattr(item.old, "__file__", None) or "no file"
        what = f"{label} (another module object: from {where}, was from {was})"
        if where == was:  # made in code, both: their ids tell them apart
            what = f"{label} (another module object, made in code: was {old}, now {new})"
    elif item.old is not MISSING and equal(item.old, item.new):
        what = f"{label} (rebound to a new, equal {type(item.new).__name__}: {new})"
    elif isinstance(item.old, (dict, list, set)) and type(item.old) is type(item.new):
        change = difference(item.old, item.new)
        what = f"{label} (rebound to a new {type(item.new).__name__}: {change})"
    return Leak(
        owner,
        kind,
        category.name,
        subject(item),
        what,
        site=site,
        hint=hint,
        routine=routine,
    )


def fold_reimports(leaks: list[tuple[Found, Leak]]) -> list[Leak]:
    """One leak per re-imported module instead of one per name in it: a test
    that re-imports a module rebinds every function and class to a new object
    of the same definition (and makes its module-level objects anew), and
    replaces the module in ``sys.modules``."""
    reimported = reimported_modules([item for item, _ in leaks])
    kept: list[Leak] = []
    modules: dict[str, list[tuple[str, Leak]]] = {}
    for item, leak in leaks:
        if isinstance(item.old, types.ModuleType) and redefined(item.old, item.new):
            # in sys.modules, or on its package
            modules.setdefault("", []).append((item.old.__name__, leak))
        elif part_of_reimport(item, reimported):
            modules.setdefault(module_of(item), []).append((item.key.rpartition(".")[2], leak))
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
            count = counted(len(names), "module")
            what = f"sys.modules: {count} re-imported ({shown})"
            key = "re-imported"
        category = first.category if module else "sys.modules"
        kept.append(
            dataclasses.replace(first, category=category, key=key, what=what, hint=REIMPORT_HINT)
        )
    return kept


def reimported_modules(found: list[Found]) -> set[str]:
    """Modules of which a function or class is a new object of the same definition."""
    return {
        module_of(item)
        for item in found
        if item.category.name == "attribute"
        and not isinstance(item.old, types.ModuleType)
        and redefined(item.old, item.new)
    }


def part_of_reimport(item: Found, reimported: set[str]) -> bool:
    """A module re-imported (in ``sys.modules`` or on its package), or a name
    of a re-imported module that its re-import made anew."""
    if isinstance(item.old, types.ModuleType):
        return redefined(item.old, item.new)
    return (
        item.category.name == "attribute"
        and module_of(item) in reimported
        and (redefined(item.old, item.new) or _same_kind(item.old, item.new))
    )


def _same_kind(old: object, new: object) -> bool:
    """Objects of one class, or of a class and its re-definition (not plain
    values: an int that differs after a re-import was set to differ)."""
    if isinstance(old, (str, bytes, int, float, complex, tuple, frozenset, type(None))):
        return False
    a, b = type(old), type(new)
    return a is b or (a.__module__, a.__qualname__) == (b.__module__, b.__qualname__)


def module_of(item: Found) -> str:
    """The name of the module whose namespace (or whose class's) a key is in."""
    where = getattr(item.category, "where", {}).get(item.key, (None, ""))[0]
    if isinstance(where, types.ModuleType):
        return where.__name__
    return str(getattr(where, "__module__", "") or item.key.rpartition(".")[0])
