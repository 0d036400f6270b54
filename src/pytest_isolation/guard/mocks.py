"""Patchers left active: ``unittest.mock`` patches, a pyfakefs ``Patcher``, a
hand-made ``pytest.MonkeyPatch``.

Each of these changes other state (module attributes, ``os.environ``, ...);
the guard stops the patcher itself first, which puts all of that back the way
its author meant, and only then looks at what is still changed.
"""

from __future__ import annotations

import gc
import os
import sys
import types
import weakref
from collections.abc import Callable
from typing import Any

import pytest

from pytest_isolation.core import frozen
from pytest_isolation.core import pytest_private
from pytest_isolation.guard.state import MISSING
from pytest_isolation.guard.state import Flat
from pytest_isolation.guard.state import describe

Locate = Callable[[], "str | None"]
#: Where ``start()`` sites come from while a guard listens.
_locate: Locate | None = None
#: What the registry reads as before ``unittest.mock`` is imported by anyone.
_NO_PATCHES: list[Any] = []


class _StartSites(list[Any]):
    """Stands in for ``mock._patch._active_patches`` and records, for each
    patch started, where ``start()`` was called."""

    def __init__(self, items: list[Any]) -> None:
        super().__init__(items)
        self.sites: dict[int, str] = {}

    def append(self, patch: Any) -> None:
        site = _locate() if _locate is not None else None
        if site:
            self.sites[id(patch)] = site
        super().append(patch)

    def remove(self, patch: Any) -> None:
        super().remove(patch)
        self.sites.pop(id(patch), None)


def _patch_registry() -> list[Any]:
    """The list of started, unstopped patches (empty until some code imports
    ``unittest.mock``: the guard does not import it, which costs ~30 ms).

    Private stdlib detail, unavoidable: ``unittest.mock`` keeps them only in
    ``_patch._active_patches`` (``patch``, ``patch.object``, ``patch.dict``
    and ``patch.multiple`` alike); ``tests/test_guard_fences.py`` fails loudly
    if that changes.  The first read replaces the list with one that records
    start sites.
    """
    module = sys.modules.get("unittest.mock")
    if module is None:
        return _NO_PATCHES
    registry: list[Any] = module._patch._active_patches
    if not isinstance(registry, _StartSites):
        registry = _StartSites(registry)
        module._patch._active_patches = registry
    return registry


def record_start_sites(locate: Locate | None) -> Locate | None:
    """Make ``start()`` record its caller's site (``None`` stops recording);
    returns the previous locator, to put back."""
    global _locate
    _patch_registry()
    previous, _locate = _locate, locate
    return previous


def active_patches() -> list[Any]:
    return list(_patch_registry())


#: Modules whose objects stand in for real ones while a patch is active.
STAND_IN_MODULES = frozenset({"unittest.mock", "freezegun.api", "time_machine"})


def stand_in(value: object) -> bool:
    """A patcher's stand-in: a mock, or freezegun's ``FakeDate`` and fake
    functions (defined in :data:`STAND_IN_MODULES`)."""
    try:
        if isinstance(value, (type, types.FunctionType)):
            return value.__module__ in STAND_IN_MODULES
        return type(value).__module__ in STAND_IN_MODULES
    except Exception:  # an odd object's __class__ may raise
        return False


def start_site(patch: object) -> str | None:
    registry = _patch_registry()
    return registry.sites.get(id(patch)) if isinstance(registry, _StartSites) else None


def target_of(patch: object) -> object:
    """The object a patch changes (a module, class or dict)."""
    getter = getattr(patch, "getter", None)
    return getter() if callable(getter) else getattr(patch, "in_dict", None)


def patched_by(patch: object) -> set[tuple[int, str]]:
    """The (id of owner, attribute) pairs a started patch replaced."""
    found = set()
    for part in (patch, *getattr(patch, "additional_patchers", ())):
        attribute = getattr(part, "attribute", None)
        if attribute:
            found.add((id(target_of(part)), str(attribute)))
    return found


def patch_name(patch: object) -> str:
    target = target_of(patch)
    attribute = getattr(patch, "attribute", None)
    if target is os.environ:
        name = "os.environ"
    elif target is sys.modules:
        name = "sys.modules"
    else:
        name = str(
            getattr(target, "__qualname__", None)
            or getattr(target, "__name__", None)
            or type(target).__name__
        )
        module = getattr(target, "__module__", None)
        if isinstance(target, type) and module:
            name = f"{module}.{name}"
    kind = "patch.dict" if attribute is None else None
    if getattr(patch, "additional_patchers", None):
        kind = "patch.multiple"
    return (
        f"{name}.{attribute}" + (f" ({kind})" if kind else "") if attribute else f"{name} ({kind})"
    )


class MockPatches(Flat):
    """``unittest.mock`` patches started and never stopped."""

    name = "mock"
    hint = "stop it (patcher.stop()), or use the patch as a decorator, context manager or mocker"

    def read(self) -> dict[str, object]:
        return {str(id(patch)): patch for patch in _patch_registry()}

    def unchanged(self, saved: object) -> bool:
        registry = _patch_registry()
        if not registry:  # the common case: no patch started and left running
            return not saved
        return super().unchanged(saved)

    def subject(self, key: str, old: object, new: object) -> str:
        return patch_name(new)

    def label(self, key: str) -> str:
        return "an unstopped mock patch"

    def is_leak(self, key: str, old: object, new: object) -> bool:
        return old is MISSING and new is not MISSING

    def restore(self, key: str, old: object) -> None:
        """Nothing to put back per key; see :func:`stop_patches`."""


def stop_patches(patches: list[object]) -> None:
    """Stop exactly these patches, last started first (never ``patch.stopall()``,
    which would also stop pytest-mock's)."""
    order = {id(patch): index for index, patch in enumerate(_patch_registry())}
    for patch in sorted(patches, key=lambda p: order.get(id(p), -1), reverse=True):
        patch.stop()  # type: ignore[attr-defined]


def _pyfakefs_patcher() -> object:
    """pyfakefs's active ``Patcher`` (its public class attribute ``PATCHER``)."""
    module = sys.modules.get("pyfakefs.fake_filesystem_unittest")
    patcher = getattr(getattr(module, "Patcher", None), "PATCHER", None)
    return patcher if getattr(patcher, "is_patching", False) else None


def resume_pyfakefs() -> bool:
    """Resume a paused pyfakefs ``Patcher`` now, at the start of a test's window.

    pyfakefs's pytest plugin pauses the patcher of a longer-lived fake file
    system (``fs_module``, ``fs_session``) while pytest reports and resumes
    it in ``pytest_runtest_setup``, inside the window.  Resuming it first
    makes the window start from the state the test will see; pyfakefs's own
    resume then does nothing.  Returns whether a fake file system is active:
    its fakes are new objects after every resume, so the window needs a
    fresh snapshot.
    """
    module = sys.modules.get("pyfakefs.fake_filesystem_unittest")
    patcher = getattr(getattr(module, "Patcher", None), "PATCHER", None)
    if patcher is None:
        return False
    if not getattr(patcher, "is_patching", True):
        patcher.resume()
    return True


def pyfakefs_alive() -> bool:
    module = sys.modules.get("pyfakefs.fake_filesystem_unittest")
    return getattr(getattr(module, "Patcher", None), "PATCHER", None) is not None


def _fake(value: object) -> bool:
    return type(value).__module__.startswith("pyfakefs.") or getattr(
        getattr(value, "__self__", None), "__module__", ""
    ).startswith("pyfakefs.")


def made_by_pyfakefs(old: object, new: object) -> bool:
    """A change that is pyfakefs's own doing while one of its patchers lives.

    pyfakefs pauses and resumes its patcher around every report, which puts
    new fake objects in place each time; the FakeFilesystem category reports
    a patcher left active, so these changes are never leaks by themselves.
    """
    if _fake(new) or _fake(old):
        return True
    old_items, new_items = getattr(old, "items", None), getattr(new, "items", None)
    if isinstance(old_items, tuple) and isinstance(new_items, tuple):  # a list in sys
        return [x for x in old_items if not _fake(x)] == [x for x in new_items if not _fake(x)]
    return False


class FakeFilesystem(Flat):
    """A pyfakefs ``Patcher`` set up and never torn down: the whole process
    then sees a fake file system."""

    name = "fakefs"
    hint = "use the fs fixture, or call patcher.tearDown() (or use Patcher as a context manager)"

    def read(self) -> dict[str, object]:
        return {"pyfakefs": _pyfakefs_patcher()}

    def unchanged(self, saved: object) -> bool:
        assert isinstance(saved, dict)
        return _pyfakefs_patcher() is saved["pyfakefs"]

    def label(self, key: str) -> str:
        return "an active pyfakefs Patcher"

    def show(self, value: object) -> str:
        return "none" if value is None or value is MISSING else describe(value)

    def is_leak(self, key: str, old: object, new: object) -> bool:
        return new is not None and new is not MISSING and old in (None, MISSING)

    def restore(self, key: str, old: object) -> None:
        for _ in range(16):  # pyfakefs counts nested setUp() calls
            patcher = _pyfakefs_patcher()
            if patcher is None:
                return
            patcher.tearDown()  # type: ignore[attr-defined]


def monkeypatch_records(patcher: pytest.MonkeyPatch) -> list[tuple[str, str, object]]:
    """What a ``pytest.MonkeyPatch`` would undo, as (category, key, old value)
    (its undo lists are private: :mod:`pytest_isolation.core.pytest_private`)."""
    records: list[tuple[str, str, object]] = []
    for target, name, old in pytest_private.monkeypatch_setattrs(patcher, MISSING):
        owner = getattr(target, "__name__", None)
        if isinstance(target, type):
            owner = f"{target.__module__}.{target.__qualname__}"
        if owner is not None:
            records.append(("attribute", f"{owner}.{name}", old))
    for mapping, key, value in pytest_private.monkeypatch_setitems(patcher, MISSING):
        if mapping is os.environ:
            records.append(("env", str(key), value))
        elif mapping is sys.modules:
            records.append(("sys.modules", str(key), value))
    cwd = pytest_private.monkeypatch_cwd(patcher)
    if cwd is not None:
        records.append(("cwd", "cwd", cwd))
    if pytest_private.monkeypatch_saved_syspath(patcher):
        records.append(("import", "sys.path", MISSING))
    return records


def monkeypatch_setattrs(patcher: pytest.MonkeyPatch) -> list[tuple[Any, str, object]]:
    """The ``setattr`` calls a ``pytest.MonkeyPatch`` would undo, as
    (object, name, old value), but those of attributes that were not set."""
    unset = object()
    return [
        (target, name, old)
        for target, name, old in pytest_private.monkeypatch_setattrs(patcher, unset)
        if old is not unset
    ]


class _LivePatchers:
    """Every live ``pytest.MonkeyPatch``, without a walk of the heap each time.

    An instance holds a reference to its class, so the class's reference
    count is the number of instances plus a base (its module's names, its
    MRO, ...).  The heap is walked (``gc.get_referrers``, in C, but over the
    whole heap, which is long on a large suite) only when that count is not
    what the instances found by the last walk, those of them still alive,
    explain: a patcher made since, or another reference to the class taken or
    dropped.  A new patcher and a dropped reference in the same window would
    cancel out; the leak is then still put back key by key, only not through
    the patcher's ``undo()`` and not reported as the patcher's.
    """

    def __init__(self) -> None:
        self.known: weakref.WeakSet[pytest.MonkeyPatch] = weakref.WeakSet()
        self.base = -1  # the class's references that are not instances, at the last walk

    def __call__(self) -> list[pytest.MonkeyPatch]:
        references = sys.getrefcount(pytest.MonkeyPatch)
        if references != self.base + len(self.known):
            # An instance of a class refers to its class, and the collector's
            # walk for referrers runs in C: faster than a Python loop over
            # ``gc.get_objects()`` on a large heap.
            # In a file's child, the walk leaves the inherited objects frozen:
            # a patcher made before the fork is not one of this file's tests'.
            with frozen.unobserved():
                referrers = gc.get_referrers(pytest.MonkeyPatch)
            found = [candidate for candidate in referrers if type(candidate) is pytest.MonkeyPatch]
            self.known = weakref.WeakSet(found)
            self.base = references - len(found)
            return found
        return list(self.known)


_live_patchers = _LivePatchers()


def known_patcher(patcher: pytest.MonkeyPatch) -> None:
    """A patcher whose making the guard saw (the ``monkeypatch`` fixture's):
    it explains its reference to the class, so it causes no walk."""
    _live_patchers.known.add(patcher)


def forgotten_monkeypatches(leaks: list[tuple[str, str, object]]) -> list[pytest.MonkeyPatch]:
    """``pytest.MonkeyPatch`` objects that made these leaks and were never undone.

    Only asked when a window found leaks of the kinds a MonkeyPatch makes.  A
    patcher matches when it recorded the leaked key with the value the window
    started from, so a higher-scoped fixture's patcher (whose old value
    predates the window) never matches.
    """
    wanted = {(category, key) for category, key, _ in leaks}
    olds = {(category, key): old for category, key, old in leaks}
    found = []
    for candidate in _live_patchers():
        for category, key, old in monkeypatch_records(candidate):
            if (category, key) in wanted and _same_old(olds[(category, key)], old, category):
                found.append(candidate)
                break
    return found


def _same_old(window_old: object, recorded: object, category: str) -> bool:
    if category == "env" and isinstance(window_old, bytes):
        window_old = os.fsdecode(window_old)
    if category in ("cwd", "import"):
        return True
    return window_old is recorded or window_old == recorded
