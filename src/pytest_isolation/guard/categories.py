"""The kinds of process-wide state the leak guard watches.

Each category takes a snapshot as a flat mapping (key -> value), names a key
for messages, says whether a change is a leak, and puts a key back.
"""

from __future__ import annotations

import os
import sys
import types
from typing import Protocol
from unittest import mock


class _Missing:
    def __repr__(self) -> str:
        return "<unset>"


#: The value of a key that did not exist in a snapshot.
MISSING = _Missing()

Snapshot = dict[str, object]


class Category(Protocol):
    name: str
    hint: str

    def snapshot(self) -> Snapshot: ...

    def label(self, key: str) -> str: ...

    def is_leak(self, key: str, old: object, new: object) -> bool: ...

    def restore(self, key: str, old: object) -> None: ...


class Environ:
    """``os.environ``, key by key."""

    name = "env"
    hint = "use monkeypatch.setenv/delenv"
    #: Set and removed by pytest around every test.
    ignored = frozenset({"PYTEST_CURRENT_TEST"})

    def snapshot(self) -> Snapshot:
        return dict(os.environ)

    def label(self, key: str) -> str:
        return f"os.environ[{key!r}]"

    def is_leak(self, key: str, old: object, new: object) -> bool:
        return key not in self.ignored

    def restore(self, key: str, old: object) -> None:
        if old is MISSING:
            os.environ.pop(key, None)
        else:
            os.environ[key] = str(old)


class WorkingDirectory:
    """The current working directory."""

    name = "cwd"
    hint = "use monkeypatch.chdir"

    def snapshot(self) -> Snapshot:
        try:
            return {"cwd": os.getcwd()}
        except FileNotFoundError:  # the directory was removed under us
            return {"cwd": MISSING}

    def label(self, key: str) -> str:
        return "the working directory"

    def is_leak(self, key: str, old: object, new: object) -> bool:
        return True

    def restore(self, key: str, old: object) -> None:
        if isinstance(old, str):
            os.chdir(old)


class SysModules:
    """``sys.modules``: replaced modules and injected non-modules.

    A real module imported during a test is not a leak, nor is one removed.
    """

    name = "sys.modules"
    hint = "use monkeypatch.setitem(sys.modules, ...) or mock.patch.dict(sys.modules, ...)"

    def snapshot(self) -> Snapshot:
        return dict(sys.modules)

    def label(self, key: str) -> str:
        return f"sys.modules[{key!r}]"

    def is_leak(self, key: str, old: object, new: object) -> bool:
        if new is MISSING:
            return False
        return old is not MISSING or not isinstance(new, types.ModuleType)

    def restore(self, key: str, old: object) -> None:
        if old is MISSING:
            sys.modules.pop(key, None)
        else:
            sys.modules[key] = old  # type: ignore[assignment]


def _active_patches() -> list[object]:
    """The patches started with ``start()`` and not stopped yet.

    Private stdlib API, unavoidable: ``unittest.mock`` keeps them only in
    ``_patch._active_patches``; ``tests/test_guard.py`` fails loudly if that
    changes.
    """
    return list(mock._patch._active_patches)  # type: ignore[attr-defined]


class MockPatches:
    """``unittest.mock`` patches started and never stopped."""

    name = "mock"
    hint = "stop the patch (patcher.stop()), or use the patch as a decorator/context manager"

    def snapshot(self) -> Snapshot:
        return {str(id(patch)): patch for patch in _active_patches()}

    def label(self, key: str) -> str:
        return "an unstopped mock patch"

    def is_leak(self, key: str, old: object, new: object) -> bool:
        return old is MISSING

    def restore(self, key: str, old: object) -> None:
        """Nothing to put back per key; see :func:`stop_patches`."""

    @staticmethod
    def describe(patch: object) -> str:
        target = getattr(patch, "getter", None)
        attribute = getattr(patch, "attribute", None)
        owner = target() if callable(target) else getattr(patch, "in_dict", None)
        name = getattr(owner, "__name__", type(owner).__name__)
        return f"{name}.{attribute}" if attribute else f"{name} (patch.dict)"


def stop_patches(patches: list[object]) -> None:
    """Stop exactly these patches, last started first (never ``patch.stopall()``)."""
    order = {id(patch): index for index, patch in enumerate(_active_patches())}
    for patch in sorted(patches, key=lambda p: order.get(id(p), -1), reverse=True):
        patch.stop()  # type: ignore[attr-defined]


CATEGORIES: tuple[Category, ...] = (Environ(), WorkingDirectory(), SysModules(), MockPatches())
