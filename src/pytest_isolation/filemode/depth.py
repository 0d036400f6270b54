"""A child runs its tests as deep in the stack as the parent's run loop.

A test that measures its recursion headroom (how far it can recurse before
``RecursionError``, as structlog's own suite does) sees everything below it.
A forked child runs its tests from the frame of the parent's run loop
itself (see :class:`..server.origin.Origin`).  A spawned interpreter starts
shallower than the parent (``python -c`` against ``python -m pytest``,
whose ``exec`` counts too on Python 3.11), so its loop calls the tests
through as many plain frames as it has headroom to spare.  Headroom is
measured, not counted from frames: what counts towards the recursion limit
differs between Python versions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

_T = TypeVar("_T")
_A = TypeVar("_A")


def headroom() -> int:
    """How many more nested calls the caller can make before ``RecursionError``
    (found by making them: a fraction of a millisecond)."""
    return _down(0)


def _down(calls: int) -> int:
    try:
        return _down(calls + 1)
    except RecursionError:
        return calls


def call_deeper(frames: int, function: Callable[[_A], _T], argument: _A) -> _T:
    """``function(argument)``, called from ``frames`` frames of this function
    (``function`` runs ``frames + 1`` frames deeper than the caller)."""
    if frames > 1:
        return call_deeper(frames - 1, function, argument)
    return function(argument)
