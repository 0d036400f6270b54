"""What every kind of watched state has in common.

A category takes a snapshot (an opaque object), answers quickly whether the
live state still matches it, and only when it does not, lists the keys that
changed.  The guard keeps one snapshot per category between tests, so the
common case per test is one fast comparison and no copy.
"""

from __future__ import annotations

import reprlib
import types
from collections.abc import Callable
from typing import Protocol


class _Missing:
    def __repr__(self) -> str:
        return "<unset>"


#: The value of a key that did not exist.
MISSING = _Missing()

#: One changed key: (key, value in the snapshot, value now).
Change = tuple[str, object, object]


class Category(Protocol):
    #: The name used in messages and in ``allow_leaks`` entries.
    name: str
    #: How to avoid the leak, appended to messages.
    hint: str

    def snapshot(self) -> object: ...

    def unchanged(self, saved: object) -> bool:
        """Fast check, no copy: does the live state still match ``saved``?"""
        ...

    def diff(self, saved: object) -> list[Change]:
        """Every key whose live value differs from ``saved``."""
        ...

    def label(self, key: str) -> str: ...

    def show(self, value: object) -> str: ...

    def is_leak(self, key: str, old: object, new: object) -> bool: ...

    def restore(self, key: str, old: object) -> None: ...


#: Values whose state is their value: compared, and kept whole, as they are.
PLAIN = (str, bytes, int, float, complex, bool, type(None), tuple, frozenset)


def same(a: object, b: object) -> bool:
    """Identity, or equality of plain values (tuples compare item by item)."""
    return a is b or (isinstance(a, (str, bytes, int, float, tuple, frozenset)) and a == b)


def equal(a: object, b: object) -> bool:
    """``a == b`` for snapshots; a value whose ``==`` fails counts as changed.

    Containers compare items by identity first, so this is fast and only
    calls ``__eq__`` of items that were replaced (numpy arrays raise there).
    """
    try:
        return bool(a == b)
    except Exception:
        return False


_short = reprlib.Repr()
_short.maxstring = 60
_short.maxother = 80
_short.maxlist = _short.maxtuple = _short.maxdict = _short.maxset = 6


def describe(value: object, where: Callable[[object], str | None] | None = None) -> str:
    """A short repr; a function or class also says where it was defined."""
    if value is MISSING:
        return "unset"
    text = _short.repr(value)
    if where is not None and isinstance(value, (types.FunctionType, type)):
        site = where(value)
        if site:
            text = f"{text} defined at {site}"
    return text


#: Values that are behaviour, not data: what a patch installs.
BEHAVIOUR = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    type,
    staticmethod,
    classmethod,
    property,
)


def redefined(old: object, new: object) -> bool:
    """A function, class or module replaced by a new object of the same
    definition: what re-importing a module does to every name in it."""
    if type(old) is not type(new) or old is new:
        return False
    if isinstance(old, types.ModuleType):
        # Two modules made in code (``types.ModuleType("x")``, no file) are two
        # stand-ins, not one module imported twice.
        source = getattr(old, "__file__", None)
        return bool(
            isinstance(source, str)
            and old.__name__ == getattr(new, "__name__", None)
            and source == getattr(new, "__file__", None)
        )
    if not isinstance(old, (types.FunctionType, type)):
        return False
    if (old.__module__, old.__qualname__) != (new.__module__, new.__qualname__):  # type: ignore[attr-defined]
        return False
    if "<locals>" in old.__qualname__:  # a lambda or closure made again by one line: no re-import
        return False
    if isinstance(old, types.FunctionType):
        code, other = old.__code__, new.__code__  # type: ignore[attr-defined]
        return (code.co_filename, code.co_firstlineno) == (other.co_filename, other.co_firstlineno)
    return True


def difference(old: object, new: object) -> str | None:
    """What differs between two plain containers, in words: the keys a
    mapping gained, lost and changed, the items a list or set gained and
    lost.  ``None`` for anything else."""
    if isinstance(old, dict) and isinstance(new, dict):
        added = [key for key in new if key not in old]
        removed = [key for key in old if key not in new]
        changed = [key for key in old if key in new and not same(old[key], new[key])]
        parts = [
            f"{label} {_keys(keys)}"
            for label, keys in (("added", added), ("removed", removed), ("changed", changed))
            if keys
        ]
        return "; ".join(parts) if parts else "the same keys and values"
    if isinstance(old, (list, tuple, set, frozenset)) and isinstance(
        new, (list, tuple, set, frozenset)
    ):
        gained = [item for item in new if not _has(old, item)]
        lost = [item for item in old if not _has(new, item)]
        parts = [f"added {_keys(gained)}"] if gained else []
        parts += [f"removed {_keys(lost)}"] if lost else []
        if not parts:
            return "the same items in another order" if len(old) == len(new) else None
        return "; ".join(parts)
    return None


def _has(items: object, value: object) -> bool:
    return any(item is value or same(item, value) for item in items)  # type: ignore[attr-defined]


def _keys(keys: list[object]) -> str:
    shown = ", ".join(_short.repr(key) for key in keys[:4])
    return shown + (f" and {len(keys) - 4} more" if len(keys) > 4 else "")


def is_closed(value: object) -> bool:
    """A resource that was closed or shut down (an executor, a file, a socket,
    an event loop): never put back, it would fail whoever uses it next.

    Only flags that are exactly ``True`` count (a mock answers anything)."""
    if value is None or isinstance(value, (type, types.ModuleType, types.FunctionType)):
        return False
    try:
        for flag in ("_shutdown", "_closed", "closed"):
            if getattr(value, flag, None) is True:
                return True
        check = getattr(value, "is_closed", None)
        return callable(check) and check() is True
    except Exception:
        return False


class Flat:
    """A category whose snapshot is a flat ``{key: value}`` dict."""

    name = ""
    hint = ""

    def read(self) -> dict[str, object]:
        raise NotImplementedError

    def snapshot(self) -> object:
        return self.read()

    def unchanged(self, saved: object) -> bool:
        return equal(self.read(), saved)

    def diff(self, saved: object) -> list[Change]:
        assert isinstance(saved, dict)
        now = self.read()
        return [
            (key, saved.get(key, MISSING), now.get(key, MISSING))
            for key in saved.keys() | now.keys()
            if not same(saved.get(key, MISSING), now.get(key, MISSING))
        ]

    def label(self, key: str) -> str:
        return key

    def show(self, value: object) -> str:
        return describe(value)

    def is_leak(self, key: str, old: object, new: object) -> bool:
        return True

    def restore(self, key: str, old: object) -> None:
        raise NotImplementedError


Slot = tuple[Callable[[], object], Callable[[object], object]]


class Slots(Flat):
    """Single values read and written through a getter and a setter."""

    def __init__(
        self,
        name: str,
        hint: str,
        slots: dict[str, Slot],
        formats: dict[str, Callable[[object], str]] | None = None,
        reader: Callable[[], list[object]] | None = None,
    ) -> None:
        self.name = name
        self.hint = hint
        self.slots = slots
        #: How to show the values of some slots (a level name, a signal handler).
        self.formats = formats or {}
        getters = tuple(get for get, _ in slots.values())
        #: All values at once, in slot order: one call per test instead of one per slot.
        self.values = reader or (lambda: [get() for get in getters])

    def read(self) -> dict[str, object]:
        return dict(zip(self.slots, self.values(), strict=True))

    def snapshot(self) -> object:
        return self.values()

    def unchanged(self, saved: object) -> bool:
        return bool(self.values() == saved)

    def diff(self, saved: object) -> list[Change]:
        assert isinstance(saved, list)
        return super().diff(dict(zip(self.slots, saved, strict=True)))

    def restore(self, key: str, old: object) -> None:
        self.slots[key][1](old)

    def show(self, value: object) -> str:
        if isinstance(value, ListState):
            return describe(list(value.items))
        return describe(value)

    def show_key(self, key: str, value: object) -> str:
        form = self.formats.get(key)
        return form(value) if form is not None and value is not MISSING else self.show(value)


class ListState(tuple[int, tuple[object, ...]]):
    """A list's identity and items: rebinding ``sys.path`` is a change too."""

    @property
    def items(self) -> tuple[object, ...]:
        return self[1]
