"""State a project changes as a matter of course, told apart from leaks.

A test that advances a counter (attrs' ``_CountingAttr.cls_counter``, Django
REST framework's ``Field._creation_counter``, a factory's sequence), creates
something lazily (a cache, a singleton: ``_instance = None`` then an object)
fills a cache lazily, or rebuilds a private cache as a new container
(pygments' lexers make ``cls._all_tokens = {}`` again whenever one is
instantiated) has not done anything wrong; the next test should
still see the state of before.  So the guard puts such state back after
every test, as it does a leak, but never warns or fails for it, and the
summary lists each key once.  A lazily created object that holds a resource
(it has ``close``, ``shutdown``, ...) is kept: taking it away would orphan
the resource and make every test create another.
"""

from __future__ import annotations

import re
import types

from pytest_isolation.guard.state import BEHAVIOUR
from pytest_isolation.guard.state import MISSING
from pytest_isolation.guard.state import equal

#: Routine kinds, as the summary names them.
KINDS = {
    "counter": "a counter",
    "created": "created lazily",
    "filled": "filled lazily",
    "rebuilt": "a private cache rebuilt",
    "ended": "left by a fixture finalized after the last test",
    "imported": "first imported, taken out again",
    "cached": "built again the same way after it was put back: a cache, kept",
}

#: Routine kinds a project may build again the same way once put back
#: (a module first imported that a later test imports again: the code the
#: tests run imports it as a matter of course, sqlite3 under anyio's suite).
REBUILDABLE = frozenset({"created", "rebuilt", "imported"})


class Refills:
    """Routine state the project builds again, equal to what the guard took
    away, once the guard put it back: a cache (pygments compiles a lexer's
    token table on the class at its first use).  Putting it back only makes
    the project build it again, at a cost, so from then on it is kept, and
    reported once.  Told apart by comparing the value built again with the
    one taken away (:func:`alike`): equal (``==``), or a container of the
    same shape and the same plain values (pygments' token tables hold new
    bound methods of compiled patterns each time); an object created anew
    each time (a singleton instance) or built from other data (a settings
    dict with another test's path) is never alike, so it is put back.  Only created values
    and rebuilt private caches, never a container that only gained items: a
    registry that tests append to looks like a cache filled again."""

    def __init__(self) -> None:
        #: What the guard took away, by (category, key).
        self.taken: dict[tuple[str, str], object] = {}
        self.kept: set[tuple[str, str]] = set()

    def keeps(self, category: str, key: str, routine: str, new: object) -> bool:
        """Whether to keep ``new`` rather than put the key back."""
        if routine not in REBUILDABLE:
            return False
        slot = (category, key)
        if slot in self.kept:
            return True
        was = self.taken.pop(slot, MISSING)
        if was is not MISSING and (alike(was, new) or built_alike(was, new) or same_file(was, new)):
            self.kept.add(slot)
            return True
        self.taken[slot] = new
        return False


#: Methods whose presence makes a value a resource (kept when created lazily).
RESOURCE_METHODS = ("close", "shutdown", "stop", "terminate", "disconnect", "dispose")


#: What a counter's name says (``cls_counter``, ``_creation_counter``, ``_seq``,
#: ``next_id``, ``count``, ``hits``): an int with such a name that went up is a
#: counter; ``LEVEL = 99`` is not.
COUNTER_NAME = re.compile(r"count|seq|serial|next|index|idx|total|hits|calls|tick|num", re.I)


def classify(category: str, key: str, old: object, new: object, owner: object = None) -> str:
    """The routine kind of ``old -> new`` (see :data:`KINDS`), or ``""`` for a leak."""
    if category == "sys.modules" and old is MISSING and isinstance(new, types.ModuleType):
        return "imported"
    if category == "attribute":
        name = key.rpartition(".")[2]
        if type(old) is int and type(new) is int and new > old and COUNTER_NAME.search(name):
            return "counter"
        if (old is None or old is MISSING) and new is not MISSING:
            behaviour = callable(new) or issubclass(type(new), BEHAVIOUR)
            # Installing behaviour (a function, a class, a mock) is a patch,
            # unless the owner's own package loads it lazily (pygments.lexers'
            # module __getattr__, Django REST framework's api_settings), or
            # an object caches it on itself.
            if not behaviour or lazily_loaded(owner, new):
                return "created"
        if private(name) and type(old) is type(new) and type(old) in CACHES and old is not new:
            return "rebuilt"
    return ""


#: The containers a private cache is rebuilt as.
CACHES = (dict, list, set)


def private(name: str) -> bool:
    """``_name``: an implementation detail, not a dunder."""
    return name.startswith("_") and not name.startswith("__")


def lazily_loaded(owner: object, value: object) -> bool:
    """An object caching an attribute on itself, or a module or class given a
    function or class of its own top-level package."""
    if owner is None:
        return False
    if not isinstance(owner, (type, types.ModuleType)):
        return True
    if not isinstance(value, (type, types.FunctionType)):
        return False
    home = owner.__name__ if isinstance(owner, types.ModuleType) else owner.__module__
    defined = getattr(value, "__module__", None)
    return isinstance(defined, str) and defined.partition(".")[0] == home.partition(".")[0]


def holds_resource(value: object) -> bool:
    """Whether a value looks like a resource (a pool, a connection, a client)."""
    if issubclass(type(value), (type, types.ModuleType, *BEHAVIOUR)) or value is None:
        return False
    try:
        return any(callable(getattr(type(value), name, None)) for name in RESOURCE_METHODS)
    except Exception:
        return False


#: Values that are data: alike only when equal.
_PLAIN = (str, bytes, int, float, complex, bool, type(None), frozenset)
#: How deep a cache's shape is compared.
_DEPTH = 5


def alike(was: object, new: object, depth: int = 0) -> bool:
    """Built the same way: equal, or a dict with the same keys whose values
    are alike, or a list or tuple whose items are alike; below the top, an
    object of the same type (a new bound method of a compiled pattern).  A
    plain value (a string, a number) is alike only when equal, so a cache
    built from another test's data (``{'home': '/tmp/a'}``) is not; and at
    the top an object must be equal, so a singleton made anew is not."""
    if equal(was, new):
        return True
    if type(was) is not type(new) or isinstance(was, _PLAIN) or depth > _DEPTH:
        return False
    if isinstance(was, dict) and isinstance(new, dict):
        return was.keys() == new.keys() and all(alike(was[key], new[key], depth + 1) for key in was)
    if isinstance(was, (list, tuple)) and isinstance(new, (list, tuple)):
        return len(was) == len(new) and all(
            alike(a, b, depth + 1) for a, b in zip(was, new, strict=True)
        )
    return depth > 0


def built_alike(was: object, new: object) -> bool:
    """Two objects a project created lazily (a loader, a client, a
    singleton) that look freshly built the same way: of one class, with the
    same attributes of their own, equal plain values, containers of the same
    types (what a loader has cached may differ), and no attribute of their
    own that hides a plain class-level default with another value (a test
    that set ``Service.get().value = 5`` left such an object: never kept)."""
    kind = type(was)
    if kind is not type(new) or issubclass(kind, (type, *_PLAIN)):
        return False
    try:
        old_state, new_state = vars(was), vars(new)
    except TypeError:
        return False
    if not isinstance(new_state, dict) or old_state.keys() != new_state.keys():
        return False
    for name, value in new_state.items():
        before = old_state[name]
        if isinstance(value, _PLAIN) or isinstance(before, _PLAIN):
            if not equal(before, value):
                return False
        elif type(before) is not type(value):
            return False
        default = getattr(kind, name, MISSING)
        if isinstance(default, _PLAIN) and isinstance(value, _PLAIN) and not equal(default, value):
            return False
    return True


def same_file(was: object, new: object) -> bool:
    """One module imported again from the same file."""
    return (
        isinstance(was, types.ModuleType)
        and isinstance(new, types.ModuleType)
        and was.__name__ == new.__name__
        and getattr(was, "__file__", None) == getattr(new, "__file__", None)
    )
