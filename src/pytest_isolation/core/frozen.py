"""What a forked child inherits stays frozen until something looks at it.

A fork server freezes its objects before forking (``gc.freeze()``): the
collector of the server, and of each child, then leaves them alone instead
of walking the whole heap it shares with its parent and so copying every
page of it.  A child that thawed them first thing would pay that walk at
its session's end, where pytest's unraisable-exception check collects
garbage.

It sits in the core because both the guard (the heap walk of
:mod:`pytest_isolation.guard.mocks`) and file mode's processes see what is
frozen.

Frozen objects are invisible to ``gc.get_objects()`` and
``gc.get_referrers()``, and are not collected by ``gc.collect()``; a test
(django-extensions' signals, anyio's reference cycles) or the code it tests
may use those.  So a child keeps them frozen only until the first of:

* ``gc.get_objects()`` or ``gc.get_referrers()``, seen by an audit hook
  before the call runs (no wrapper: a wrapper's frame would hold the
  arguments and be one more referrer);
* ``gc.collect()``, ``gc.freeze()``, ``gc.unfreeze()`` or
  ``gc.get_freeze_count()``, through thin stand-ins in the ``gc`` module
  that thaw and then call the original.

At the session's end (:func:`session_ends`), pytest's own collection is left
to the original ``gc.collect``: it collects the child's objects, those its
file made, and not the frozen ones (see docs/explanation/limitations.md).

Imports: stdlib only (the child side stays light).
"""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Callable
from collections.abc import Iterator
from typing import Any

#: The audit events of calls that see every object the collector tracks.
_OBSERVING = frozenset({"gc.get_objects", "gc.get_referrers"})
#: The ``gc`` functions that thaw before they run.
_THAWING = ("collect", "freeze", "unfreeze", "get_freeze_count")


class _Frozen:
    """The state of one child: frozen or thawed, and the originals to put back."""

    def __init__(self) -> None:
        self.frozen = False
        self.watching = True  # False while this package itself walks the heap
        self.originals: dict[str, Callable[..., Any]] = {}
        self.hooked = False

    def keep(self) -> None:
        if not self.hooked:  # an audit hook cannot be removed: one per process
            sys.addaudithook(self._audit)
            self.hooked = True
        self.frozen = True
        for name in _THAWING:
            original = getattr(gc, name)
            self.originals[name] = original
            setattr(gc, name, _thawing(name, original, self.thaw))

    def _audit(self, event: str, args: tuple[object, ...]) -> None:
        if self.frozen and self.watching and event in _OBSERVING:
            self.thaw()

    def thaw(self) -> None:
        if self.frozen:
            self.frozen = False
            self.put_back()
            gc.unfreeze()

    def put_back(self) -> None:
        for name, original in self.originals.items():
            setattr(gc, name, original)
        self.originals.clear()


def _thawing(
    name: str, original: Callable[..., Any], thaw: Callable[[], None]
) -> Callable[..., Any]:
    def stand_in(*args: Any, **kwargs: Any) -> Any:
        thaw()
        return original(*args, **kwargs)

    stand_in.__name__ = stand_in.__qualname__ = name
    stand_in.__doc__ = original.__doc__
    return stand_in


_state = _Frozen()


def keep_until_observed() -> None:
    """In a forked child: leave what it inherited frozen until a call that
    would see the difference."""
    _state.keep()


def is_frozen() -> bool:
    """Whether what this child inherited is still frozen."""
    return _state.frozen


def session_ends() -> None:
    """Before the child's ``pytest_unconfigure``: pytest's last
    ``gc.collect()`` collects what the file made, not what it inherited."""
    _state.put_back()


@contextlib.contextmanager
def unobserved() -> Iterator[None]:
    """This package's own walk of the heap (the guard's search for live
    patchers) neither thaws nor sees what the child inherited: that was made
    before the file's first test."""
    watching = _state.watching
    _state.watching = False
    try:
        yield
    finally:
        _state.watching = watching
