"""What the guard may put back, in one place.

The guard's first rule wins over every other: it never changes an outcome
on its own.  A plain run keeps everything a test left, so keeping state is
always consistent with the rest of the process; putting back part of it is
not.  Put back, then, only state whose old value is whole and that nothing
else built upon:

- patchers (``mock.patch``, a forgotten ``pytest.MonkeyPatch``), the
  environment, the working directory, ``sys.path``/``sys.argv``/
  ``sys.meta_path``, signal handlers and the like: the old value is a plain
  value or a list the guard copied;
- the logging configuration of a logger (a logger the test created back to
  a fresh logger's: a project's own set-up of its logger is routine, kept);
- a module or class attribute rebound away from a value that existed
  before the test, when that old value is itself as it was: a plain value,
  a function, a class, a module, a container whose content the guard saved
  (its content as it was), an object replaced by one of another kind
  (a stand-in), or a value the test module's own code replaced; never an
  object that other code replaced by a fresh one of its own kind and that
  the guard cannot see into (a mock library's registry swapped for a new
  one on reset holds what the test registered);
- a module taken out of ``sys.modules``, and what a test put there that is
  no module.

What a test *created* is kept: a module first imported, a counter advanced
(the store it numbers stays), a cache or registry filled (whatever remembers
that it was filled stays), a private cache rebuilt, an object created
lazily (it may have registered itself, its name or its parts anywhere in
the process: no check short of a process boundary proves it did not).  A
container a project object holds is put back only when a test's code was
added to it: its other changes are the object's own, kept in step with the
rest of its state (a pool's free list).
"""

from __future__ import annotations

import types
from collections.abc import Mapping

from pytest_isolation.guard.deep import Content
from pytest_isolation.guard.deep import items_of
from pytest_isolation.guard.routine import holds_resource
from pytest_isolation.guard.state import BEHAVIOUR
from pytest_isolation.guard.state import MISSING
from pytest_isolation.guard.state import PLAIN
from pytest_isolation.guard.windows import Found

#: Routine kinds kept as the test left them (see :data:`.routine.KINDS`).
KEPT_ROUTINE = frozenset({"bookkeeping", "counter", "created", "filled", "imported", "rebuilt"})

#: Values whose state is their identity or their equality: whole by nature.
_WHOLE = (*PLAIN, range)


def kept_because(
    item: Found,
    routine: str,
    contents: Mapping[str, Content],
    by_test: bool = False,
    of_an_object: bool = False,
) -> str:
    """Why ``item`` stays as the test left it, in words for its report, or
    ``""`` when putting it back is safe.  ``contents``: the content of the
    watched containers when the window opened, by their key; ``by_test``:
    the test module's own code binds the name (``Registry.PLUGINS = {...}``),
    so the old value is what the test replaced, not what a library swapped
    out after filling it."""
    if routine == "created" and holds_resource(item.new):
        return "kept: it holds a resource"
    if routine in KEPT_ROUTINE:
        return "kept"
    if of_an_object and not _only_grew(item):
        return "not put back: the object's other state may depend on it"
    if item.category.name == "attribute" and not by_test and _may_hold_changes(item, contents):
        kind = type(item.old).__name__
        return f"not put back: the old {kind} may hold what the test changed"
    return ""


def _only_grew(item: Found) -> bool:
    """A container that only gained items (what a test's code added to a
    registry): taking them out again leaves it as it was."""
    return (
        isinstance(item.old, Content)
        and isinstance(item.new, Content)
        and (item.new.grew_from(item.old))
    )


def _may_hold_changes(item: Found, contents: Mapping[str, Content]) -> bool:
    """Whether the old value, rebound to a new one of its own kind, may have
    been changed in place before it was replaced, as far as the guard can
    tell: unless it is a watched container whose content is as it was."""
    old, new = item.old, item.new
    if old is MISSING or new is MISSING or type(old) is not type(new):
        return False
    if isinstance(old, (*_WHOLE, *BEHAVIOUR, types.ModuleType)):
        return False
    saved = contents.get(item.key)
    return saved is None or saved.container is not old or items_of(old) != saved.items
