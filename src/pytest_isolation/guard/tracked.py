"""Write tracking for the stdlib modules tests patch most.

Comparing every attribute of ``os``, ``socket``, ``time``, ... after every
test costs tens of microseconds; these modules are only ever rebound from
outside (``monkeypatch.setattr``, ``mock.patch``, ``os.getcwd = fake``), which
goes through the module's ``__setattr__``.  So the guard gives them a module
subclass (``module.__class__`` assignment is the mechanism
``importlib.util.LazyLoader`` uses) that bumps a version number and tells
the guard where the write came from.  A test that wrote nothing costs one
dict lookup per module.

``sys`` is not tracked: the import system uses ``type(sys)`` as the module
type, and the interpreter writes its attributes directly.  It is compared
like project modules.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable

#: Writes per tracked module, by ``id(module)``.
versions: dict[int, int] = {}
#: Called with (module, name) on every write while a guard listens.
on_write: Callable[[types.ModuleType, str], None] | None = None
_users = 0


class TrackedModule(types.ModuleType):
    """A module whose attribute writes are counted (and reported to the guard)."""

    def __setattr__(self, name: str, value: object) -> None:
        _written(self, name)
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        _written(self, name)
        super().__delattr__(name)


def _written(module: types.ModuleType, name: str) -> None:
    versions[id(module)] = versions.get(id(module), 0) + 1
    if on_write is not None:
        on_write(module, name)


def track(module: object) -> bool:
    """Track a plain module's writes; whether it is tracked now."""
    if type(module) is types.ModuleType and module is not sys:
        module.__class__ = TrackedModule
        versions.setdefault(id(module), 0)
    return type(module) is TrackedModule


def version(module: object) -> int | None:
    """How many writes a tracked module has seen; ``None`` if it is not tracked."""
    return versions.get(id(module)) if type(module) is TrackedModule else None


def start() -> None:
    global _users
    _users += 1


def stop() -> None:
    """The last guard gone (an in-process inner run nests): plain modules again."""
    global _users
    _users -= 1
    if _users > 0:
        return
    for module in list(sys.modules.values()):
        if type(module) is TrackedModule:
            object.__setattr__(module, "__class__", types.ModuleType)
