"""State a project changes as a matter of course, told apart from leaks.

A test that advances a counter (attrs' ``_CountingAttr.cls_counter``, Django
REST framework's ``Field._creation_counter``, a factory's sequence), creates
something lazily (a cache, a singleton: ``_instance = None`` then an object),
fills a cache or registry (in place, or by binding a bigger copy), or
rebuilds a private cache as a new container (pygments' lexers make
``cls._all_tokens = {}`` again whenever one is instantiated) has not done
anything wrong.  Such state is routine: never warned about, listed under
``-v``, and kept as the test left it (see :mod:`.safety`): what it numbers,
registers or remembers lives on elsewhere in the process.
"""

from __future__ import annotations

import re
import types

from pytest_isolation.guard.state import BEHAVIOUR
from pytest_isolation.guard.state import MISSING
from pytest_isolation.guard.state import PLAIN

#: Routine kinds, as the summary names them.
KINDS = {
    "counter": "a counter",
    "created": "created lazily",
    "filled": "filled lazily",
    "rebuilt": "a private cache rebuilt",
    "imported": "first imported",
    "ended": "left by a fixture finalized after the last test",
    "bookkeeping": "an object's own bookkeeping",
}


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
        advanced = type(old) is int and type(new) is int and new > old
        if advanced and (COUNTER_NAME.search(name) or private(name)):  # ``_lastrowid`` too
            return "counter"
        if old is MISSING and hides_a_default(owner, name, new):
            # ``rule.enabled = False`` over the class's ``enabled = True`` is a
            # change; a private flag set once over its default is not.
            default = getattr(type(owner), name, MISSING)
            return "created" if private(name) and set_once(default, new) else ""
        if private(name) and set_once(old, new):
            return "created"  # ``_got_first_request``, ``_werkzeug_version`` found lazily
        if (old is None or old is MISSING) and new is not MISSING:
            behaviour = callable(new) or issubclass(type(new), BEHAVIOUR)
            # Installing behaviour (a function, a class, a mock) is a patch,
            # unless the owner's own package loads it lazily (pygments.lexers'
            # module __getattr__, Django REST framework's api_settings), or
            # an object caches it on itself.
            if not behaviour or lazily_loaded(owner, new):
                return "created"
        if private(name) and rebuilt(old, new):
            return "rebuilt"
        if type(old) in CACHES and grown(old, new):  # ``PLUGINS = {**PLUGINS, ...}``
            return "filled"
    return ""


def set_once(old: object, new: object) -> bool:
    """A flag raised (``False`` to ``True``) or an empty string given its
    value: what a library does once, the first time it needs it."""
    if old is False:
        return new is True
    return type(old) is str and old == "" and type(new) is str and new != ""


#: The containers a private cache is rebuilt as.
CACHES = (dict, list, set)


def private(name: str) -> bool:
    """``_name``: an implementation detail, not a dunder."""
    return name.startswith("_") and not name.startswith("__")


def hides_a_default(owner: object, name: str, value: object) -> bool:
    """An object's own attribute set over a plain class-level default with
    another value: a change of the object's state, not something created."""
    if owner is None or isinstance(owner, (type, types.ModuleType)):
        return False
    default = getattr(type(owner), name, MISSING)
    plain = (str, bytes, int, float, bool, type(None))
    return isinstance(default, plain) and not (type(default) is type(value) and default == value)


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


def rebuilt(old: object, new: object) -> bool:
    """A new object of the old one's own class in its place: a cache made
    again, or a registry a library swapped for a fresh one on reset (not a
    plain value, a function or a class)."""
    if old is new or old is None or type(old) is not type(new):
        return False
    if isinstance(old, (*PLAIN, *BEHAVIOUR)):
        return False
    return not lost_entries(old, new)


def lost_entries(old: object, new: object) -> bool:
    """A container rebound to a smaller one: a registry reset
    (``Registry._classes = {}``), not a cache made again (pygments' token
    tables, made anew for the lexer at hand)."""
    if isinstance(old, (dict, list, set)) and isinstance(new, (dict, list, set)):
        return len(new) < len(old)
    return False


def grown(old: object, new: object) -> bool:
    """``new`` holds every item of ``old`` (the same objects) and more."""
    if isinstance(old, dict) and isinstance(new, dict):
        return len(new) > len(old) and all(
            key in new and new[key] is value for key, value in old.items()
        )
    if isinstance(old, list) and isinstance(new, list):
        return len(new) > len(old) and all(a is b for a, b in zip(old, new, strict=False))
    if isinstance(old, set) and isinstance(new, set):
        return old < new
    return False
