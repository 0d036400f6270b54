"""What ``os.fork()`` changes beyond copying the process, put back in every
process file mode forks (:func:`fork`), so that a forked child starts with
what the conftests set at import, as a fresh ``pytest FILE`` does.

- ``random``: the module's shared generator is reseeded in each forked
  process (its fork handler), so a conftest's ``random.seed(0)`` at import
  would be lost in every child.  Where the generator is no longer as the
  process started it (a conftest or plugin seeded it or drew from it), a
  forked process takes the state of the process it was forked from;
  otherwise it keeps its fresh seed, as a new process has one of its own.
- Watchdogs: a fork keeps neither the interval timers (``signal.alarm``,
  ``signal.setitimer``) nor faulthandler's watchdog thread
  (``faulthandler.dump_traceback_later``), and the forked process's next
  ``cancel_dump_traceback_later`` (pytest calls it at every failure) would
  wait for that thread for ever.  The forking process stops the watchdog
  before it forks and starts it again after.  A forked process that runs
  tests starts both as the suite left them (:func:`resume`): the timers
  with the time they had left at the fork, the watchdog as it was last
  armed.  The origin and the fork servers, which run no test, run neither
  (:func:`quiet`): a timer's signal or the watchdog's ``exit=True`` would
  end a server, and its running child with it.  Knowing how the watchdog
  was armed takes stand-ins for its two functions (:func:`watch`), put in
  place before the first conftest is imported.

Imports: the standard library only (every side uses it).
"""

from __future__ import annotations

import faulthandler
import functools
import os
import random
import signal
from typing import Any

#: The interval timers a fork does not keep (where the platform has them).
_TIMERS = tuple(
    getattr(signal, name)
    for name in ("ITIMER_REAL", "ITIMER_VIRTUAL", "ITIMER_PROF")
    if hasattr(signal, name)
)


class _Suite:
    """What the suite set that a fork drops, as this process last saw it."""

    #: The random generator's state as this process started.
    random_start: object = None
    #: How faulthandler's watchdog was last armed (``None``: it is not).
    watchdog: tuple[tuple[Any, ...], dict[str, Any]] | None = None
    #: Whether the watchdog runs in this process.
    watching = False
    #: The interval timers running at the last fork: (which, time left, interval).
    timers: tuple[tuple[int, float, float], ...] = ()
    #: This process only forks (the origin, a fork server): it keeps the
    #: timers it was told of for its children.
    serving = False


_arm = faulthandler.dump_traceback_later
_cancel = faulthandler.cancel_dump_traceback_later


@functools.wraps(_arm)
def _dump_traceback_later(*args: Any, **kwargs: Any) -> None:
    _arm(*args, **kwargs)
    _Suite.watchdog, _Suite.watching = (args, kwargs), True


@functools.wraps(_cancel)
def _cancel_dump_traceback_later() -> None:
    _cancel()
    _Suite.watchdog, _Suite.watching = None, False


def watch() -> None:
    """At the start of a run, before the first conftest: note the random
    generator's state, and put the watchdog's stand-ins in place."""
    _Suite.random_start = random.getstate()
    faulthandler.dump_traceback_later = _dump_traceback_later
    faulthandler.cancel_dump_traceback_later = _cancel_dump_traceback_later


def fork() -> int:
    """``os.fork()``, with the watchdog stopped around it; in the new
    process, the random generator's state of this one where the suite
    changed it.  The timers running here are noted for :func:`resume`."""
    state = random.getstate()
    carried = _Suite.random_start is not None and state != _Suite.random_start
    if not _Suite.serving:
        _Suite.timers = _running_timers()
    watching = _Suite.watching
    if watching:
        _cancel()
    pid = os.fork()
    if pid == 0:
        _Suite.watching = False
        if carried:
            random.setstate(state)
        else:  # a fresh seed: this process's own start
            _Suite.random_start = random.getstate()
    elif watching:
        _rearm()
    return pid


def resume() -> None:
    """In a forked process that runs tests: the suite's timers and watchdog."""
    _Suite.serving = False
    for which, left, interval in _Suite.timers:
        signal.setitimer(which, left, interval)
    if _Suite.watchdog is not None and not _Suite.watching:
        _rearm()


def quiet() -> None:
    """In a process that only forks: no timer and no watchdog of the suite
    (its conftests' imports may have started them, in the zygote); its
    children start them (:func:`resume`)."""
    timers = _running_timers()
    if timers:
        _Suite.timers = timers
    for which, _, _ in timers:
        signal.setitimer(which, 0)
    _Suite.serving = True
    if _Suite.watching:
        _cancel()
        _Suite.watching = False


def _running_timers() -> tuple[tuple[int, float, float], ...]:
    running = ((which, *signal.getitimer(which)) for which in _TIMERS)
    return tuple((which, left, interval) for which, left, interval in running if left)


def _rearm() -> None:
    if _Suite.watchdog is not None:
        args, kwargs = _Suite.watchdog
        _arm(*args, **kwargs)
        _Suite.watching = True
