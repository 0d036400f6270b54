"""Module globals and class attributes rebound by a test.

Per test the guard watches the project's own modules (under the rootdir, not
test modules or conftests) and the classes defined in them, the stdlib
modules tests patch most, and any module a test was seen patching.  At each
file boundary it scans every module dict, reporting only functions and
classes replaced there (library data changes lazily and is not a test's doing).
"""

from __future__ import annotations

import dataclasses
import logging
import operator
import os
import re
import sys
import types
from collections.abc import Iterable
from collections.abc import Mapping
from itertools import chain
from itertools import compress
from pathlib import Path

from pytest_isolation.core import pytest_private
from pytest_isolation.guard import dictversion
from pytest_isolation.guard import tracked
from pytest_isolation.guard.process import SYS_COVERED
from pytest_isolation.guard.routine import hides_a_default
from pytest_isolation.guard.sites import Sites
from pytest_isolation.guard.state import BEHAVIOUR
from pytest_isolation.guard.state import MISSING
from pytest_isolation.guard.state import Change
from pytest_isolation.guard.state import describe
from pytest_isolation.guard.state import same

#: Stdlib modules whose attributes tests patch most, watched per test once imported.
COMMON_STDLIB = (
    "os",
    os.path.__name__,
    "time",
    "datetime",
    "socket",
    "subprocess",
    "shutil",
    "sys",
    "random",
    "uuid",
    "json",
    "builtins",
)

#: The ones whose writes are tracked instead of compared (not ``sys``, see
#: :mod:`.tracked`).
TRACKED_STDLIB = frozenset(COMMON_STDLIB) - {"sys"}

#: Attributes that change legitimately, or that another category watches.
SKIPPED = {
    "sys": SYS_COVERED | {"last_type", "last_value", "last_traceback", "last_exc", "ps1", "ps2"},
    "builtins": frozenset({"_"}),
}

#: A logger's state that the ``logging`` and ``logger`` categories compare
#: (and the logging plugin changes around every phase), not attributes.
LOGGER_COVERED = frozenset({"handlers", "filters", "level", "disabled", "propagate", "_cache"})

#: Packages never scanned: pytest's machinery (``warnings`` is rebound by
#: pytest's per-test warning capture) and this plugin.
MACHINERY = frozenset(
    {"pytest", pytest_private.PYTEST_PACKAGE, "pluggy", "pytest_isolation", "__main__", "warnings"}
)

#: One watched namespace: (name prefix, the module or class).
Space = tuple[str, object]


class _Saved:
    """One namespace's dict at snapshot time: a live view, its values as a
    list (for the fast compare) and a copy (for the diff).  A tracked stdlib
    module is compared by its write count instead (see :mod:`.tracked`), a
    module or class by its dict's version tag where the interpreter has one
    (see :mod:`.dictversion`)."""

    __slots__ = (
        "copy",
        "live",
        "owner",
        "owner_id",
        "prefix",
        "tag",
        "values",
        "version",
        "view",
    )

    def __init__(self, prefix: str, owner: object, by_version: bool = True) -> None:
        self.prefix = prefix
        self.owner = owner
        self.owner_id = id(owner)
        self.version = tracked.version(owner) if by_version else None
        tag = dictversion.tag_of(owner) if self.version is None else None
        self.view: dictversion.View | None = None
        self.tag = 0
        if tag is not None:
            self.view, self.tag = tag
        self.live = vars(owner)
        self.copy = dict(self.live)
        # What the fast check compares (nothing where a count or tag tells).
        self.values = list(self.copy.values()) if self.view is None and self.version is None else []

    def unchanged(self) -> bool:
        if self.version is not None:
            return tracked.version(self.owner) == self.version
        if self.view is not None:
            return self.view[0] == self.tag or self.settled()
        return identical(list(self.live.values()), self.values)

    def settled(self) -> bool:
        """A tagged namespace written to since, with every name back to its
        saved value (the guard put them back, or a test's own clean-up did):
        unchanged, and the tag taken anew, so the next check is one read."""
        assert self.view is not None
        now = self.view[0]
        live = dict(self.live)
        back = live.keys() == self.copy.keys() and identical(
            [live[name] for name in self.copy], list(self.copy.values())
        )
        if back:
            self.tag = now
        return back


_values = operator.methodcaller("values")


def identical(now: list[object], saved: list[object]) -> bool:
    """The same objects, by identity: a value whose ``__eq__`` always answers
    ``True`` (or raises) is compared as what it is, another object."""
    return len(now) == len(saved) and all(map(operator.is_, now, saved))


@dataclasses.dataclass
class _Fast:
    """What the fast check compares, with each namespace's position in the
    snapshot: the tracked modules (write counts), the tagged namespaces
    (a moved tag with the values back as saved is no change), the other
    namespaces' live dicts, their sizes and their values at snapshot time
    (flat, and per namespace)."""

    counted: list[int]
    versions: list[tuple[int, int | None]]
    tagged: list[int]
    tags: dictversion.Tags
    compared: list[int]
    lives: list[Mapping[str, object]]
    sizes: list[int]
    values: list[object]
    value_lists: list[list[object]]

    def tags_moved(self) -> list[int]:
        """The positions of the tagged namespaces changed."""
        return [self.tagged[index] for index in self.tags.moved()]


class _Snapshot(list[_Saved]):
    """The namespaces' snapshots, with a check that runs after every test in
    a few C-level passes instead of a Python loop over hundreds of
    namespaces: the tracked modules' write counts, the version tags, the
    other dicts' sizes, then all their values in one list compared by
    identity only (an object whose ``__eq__`` always answers ``True`` is
    still another object)."""

    _fast: _Fast | None = None
    #: The list of spaces this snapshot was taken of, position by position
    #: (so a renewal can replace just the namespaces that changed).
    over: list[Space] | None = None

    def extend(self, spaces: Iterable[_Saved]) -> None:
        self._fast = self.over = None
        super().extend(spaces)

    def append(self, space: _Saved) -> None:
        self._fast = self.over = None
        super().append(space)

    def _checks(self) -> _Fast:
        fast = self._fast
        if fast is None:
            fast = self._fast = self._prepare()
        return fast

    def unchanged(self) -> bool:
        fast = self._checks()
        versions = tracked.versions
        for owner_id, version in fast.versions:
            if versions.get(owner_id) != version:
                return False
        return (
            not fast.tags_moved()
            and list(map(len, fast.lives)) == fast.sizes
            and identical(list(chain.from_iterable(map(_values, fast.lives))), fast.values)
        )

    def changed_at(self) -> list[int]:
        """The positions of the namespaces changed since the snapshot, in
        order: each compared in C (its tag, or a list of its values against
        the saved one), so a test that changed one namespace costs no Python
        call per namespace."""
        fast = self._checks()
        flags = [
            not identical(list(live.values()), saved)
            for live, saved in zip(fast.lives, fast.value_lists, strict=True)
        ]
        moved = [*fast.tags_moved(), *compress(fast.compared, flags)]
        moved += [index for index in fast.counted if not self[index].unchanged()]
        return sorted(moved)

    def changed(self) -> list[_Saved]:
        return [self[index] for index in self.changed_at()]

    def _prepare(self) -> _Fast:
        counted = [index for index, space in enumerate(self) if space.version is not None]
        tagged = [index for index, space in enumerate(self) if space.view is not None]
        compared = [
            index
            for index, space in enumerate(self)
            if space.version is None and space.view is None
        ]
        tagged_spaces = [self[index] for index in tagged]
        tags = dictversion.Tags(lambda index: tagged_spaces[index].settled())
        for space in tagged_spaces:
            if space.view is not None:
                tags.add(space.view, space.tag)
        compared_spaces = [self[index] for index in compared]
        value_lists = [space.values for space in compared_spaces]
        return _Fast(
            counted,
            [(self[index].owner_id, self[index].version) for index in counted],
            tagged,
            tags,
            compared,
            [space.live for space in compared_spaces],
            list(map(len, value_lists)),
            list(chain.from_iterable(value_lists)),
            value_lists,
        )


def _name_rank(prefix: str, owner: object) -> tuple[bool, int, str]:
    """How good a name is for a namespace: a module and a class by their
    own name; an object first by a global of the module its class is
    defined in, then by the shortest name, then alphabetically."""
    if isinstance(owner, types.ModuleType):
        return (prefix != owner.__name__, 0, prefix)
    if isinstance(owner, type):
        return (prefix != f"{owner.__module__}.{owner.__qualname__}", 0, prefix)
    home = type(owner).__module__
    return (prefix.rpartition(".")[0] != home, prefix.count("."), prefix)


class _Other:
    """An object nothing is equal to, but an ``__eq__`` that always says yes."""


def equal_for_real(old: object, new: object) -> bool:
    """``new`` equals ``old`` and is no object equal to anything: a config
    reloaded into equal objects is no change; an object whose ``__eq__``
    always answers ``True`` is compared by identity."""
    if old is MISSING or new is MISSING:
        return False
    try:
        return bool(old == new) and not bool(new == _Other()) and not bool(old == _Other())
    except Exception:  # an ``__eq__`` that fails: compared by identity
        return False


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


#: The values of a flag: what a test sets as ``Plugin.__configured__ = True``.
_FLAG_TYPES = (bool, int, float, type(None))


def _flag(old: object, new: object) -> bool:
    """A dunder-named flag set or changed (``__configured__``, ``__initialised__``):
    the interpreter's own dunders of a module or class hold no such values
    after its creation."""
    return (old is MISSING or isinstance(old, _FLAG_TYPES)) and isinstance(new, _FLAG_TYPES)


def _replaceable(value: object) -> bool:
    """Functions and classes: what a hand-made patch replaces."""
    return isinstance(value, BEHAVIOUR) and not isinstance(value, property)


class Attributes:
    """Rebinding of names in a set of module and class namespaces."""

    name = "attribute"
    hint = "use monkeypatch.setattr or mock.patch.object, which undo themselves"

    def __init__(self, sites: Sites, *, replaced_only: bool = False) -> None:
        self.sites = sites
        #: Only functions and classes replaced (the file-boundary scan of library modules).
        self.replaced_only = replaced_only
        self.spaces: list[Space] = []
        self.where: dict[str, tuple[object, str]] = {}
        #: Each namespace as first seen (after its import): by id, (owner, copy).
        self.origin: dict[int, tuple[object, dict[str, object]]] = {}

    def _saved(self, prefix: str, owner: object) -> _Saved:
        # The file scan compares tracked modules in full: it is there for
        # the writes the tracking cannot see.
        saved = _Saved(prefix, owner, by_version=not self.replaced_only)
        first = self.origin.get(saved.owner_id)
        if first is None or first[0] is not owner:
            self.origin[saved.owner_id] = (owner, saved.copy)
        return saved

    def cleaned_up(self, owner: object, name: str, new: object) -> bool:
        """A name set back to its value at import (or removed again): a
        clean-up, never a leak (``_pool.shutdown(); _pool = None``)."""
        first = self.origin.get(id(owner))
        return first is not None and first[0] is owner and same(first[1].get(name, MISSING), new)

    def snapshot(self) -> object:
        snapshot = _Snapshot(self._saved(prefix, owner) for prefix, owner in self.spaces)
        snapshot.over = self.spaces
        return snapshot

    def adopt(self, saved: object, spaces: list[Space]) -> None:
        """Add namespaces to a snapshot taken before they existed (a module
        imported inside the test, as its import completes)."""
        if isinstance(saved, _Snapshot):
            saved.extend(self._saved(prefix, owner) for prefix, owner in spaces)

    def resnapshot(self, previous: object) -> object:
        """A snapshot that reuses the parts of ``previous`` still current."""
        assert isinstance(previous, list)
        if not isinstance(previous, _Snapshot):
            return self._reusing([saved for saved in previous if saved.unchanged()])
        moved = previous.changed_at()
        if previous.over is self.spaces:
            # Taken of these same spaces: a copy (in C) with the changed ones replaced.
            renewed = _Snapshot(previous)
            for index in moved:
                prefix, owner = self.spaces[index]
                renewed[index] = self._saved(prefix, owner)
            renewed.over = self.spaces
            return renewed
        gone = set(moved)
        return self._reusing([saved for index, saved in enumerate(previous) if index not in gone])

    def extend(self, previous: object) -> object:
        """``previous`` (known to be current) plus namespaces added since."""
        assert isinstance(previous, list)
        return self._reusing(previous)

    def _reusing(self, known: list[_Saved]) -> list[_Saved]:
        """A snapshot of the spaces, taking each namespace's part from
        ``known`` where it is there.  Matched by prefix and identity, not by
        ``id()``: each ``id()`` call raises an audit event, which the guard's
        own audit hook makes a Python call, for every module at every file."""
        by_prefix = {saved.prefix: saved for saved in known}
        snapshot = _Snapshot()
        for prefix, owner in self.spaces:
            saved = by_prefix.get(prefix)
            snapshot.append(
                saved if saved is not None and saved.owner is owner else self._saved(prefix, owner)
            )
        snapshot.over = self.spaces
        return snapshot

    def unchanged(self, saved: object) -> bool:
        assert isinstance(saved, _Snapshot)
        return saved.unchanged()

    def changed_spaces(self, saved: object) -> list[_Saved]:
        """The namespaces of a snapshot that changed since it was taken."""
        return saved.changed() if isinstance(saved, _Snapshot) else []

    def diff(self, saved: object) -> list[Change]:
        assert isinstance(saved, list)
        found: list[Change] = []
        spaces = saved.changed() if isinstance(saved, _Snapshot) else saved
        for space in spaces:
            if space.unchanged():
                continue
            skipped = SKIPPED.get(space.prefix, frozenset())
            if isinstance(space.owner, logging.Logger):
                skipped = LOGGER_COVERED
            live = dict(space.live)
            # An object's attribute appearing or going away is a cache filled
            # or dropped (Django's settings, DRF's api_settings, which lists
            # what it cached, a cached_property), not a leak; a module's or
            # class's is.
            instance = not isinstance(space.owner, (type, types.ModuleType))
            for name in space.copy.keys() | live.keys():
                # A module's or class's dunders are the interpreter's; an
                # object's (``self.__initialised__``) are its own state.
                old, new = space.copy.get(name, MISSING), live.get(name, MISSING)
                if name in skipped or (not instance and _dunder(name) and not _flag(old, new)):
                    continue
                appeared = instance and (new is MISSING or old is MISSING)
                if appeared and not hides_a_default(
                    space.owner, name, new if old is MISSING else old
                ):
                    continue
                if (
                    not same(old, new)
                    and not equal_for_real(old, new)
                    and not self.cleaned_up(space.owner, name, new)
                ):
                    key = f"{space.prefix}.{name}"
                    self.where[key] = (space.owner, name)
                    found.append((key, old, new))
        return found

    def label(self, key: str) -> str:
        return key

    def show(self, value: object) -> str:
        return describe(value, self.sites.defined)

    def is_leak(self, key: str, old: object, new: object) -> bool:
        if old is MISSING and (new is None or isinstance(new, types.ModuleType)):
            # A submodule imported (its package gains the name), or
            # ``getattr(x, name, None)`` written back (freezegun's time.clock).
            return False
        return not self.replaced_only or _replaceable(old)

    def restore(self, key: str, old: object) -> None:
        owner, name = self.where[key]
        if not isinstance(owner, (type, types.ModuleType)):
            # An object: its own __dict__, never its __setattr__/__delattr__
            # (Django's LazySettings would delete the setting itself).
            namespace = vars(owner)
            if old is MISSING:
                namespace.pop(name, None)
            else:
                namespace[name] = old
        elif old is MISSING:
            if name in vars(owner):
                delattr(owner, name)
        else:
            setattr(owner, name, old)


def _real(path: str) -> str:
    return os.path.realpath(path)


class Watchlist:
    """Decides which namespaces the attribute tiers watch, as modules arrive."""

    def __init__(
        self, rootdir: Path, library_roots: tuple[str, ...], installed: tuple[str, ...] = ()
    ) -> None:
        self.root = os.path.join(_real(str(rootdir)), "")
        self.given_root = os.path.join(os.path.normpath(str(rootdir)), "")
        self.library_roots = library_roots
        #: The project's packages installed in site-packages (see :func:`.sites.installed_copies`).
        self.installed = installed
        #: Real paths of collected test modules (never project state).
        self.test_files: set[str] = set()
        #: Their file names, a cheap first check before resolving a path.
        self.test_names: set[str] = set()
        #: Top-level packages of registered pytest plugins (skipped by the scan).
        self.plugin_packages: set[str] = set(MACHINERY)
        #: The modules registered as pytest plugins (syrupy's own module when
        #: syrupy's suite runs): their state is the run's, not the project's.
        self.plugin_modules: set[str] = set()
        self.project: dict[str, Space] = {}
        self.classes: list[Space] = []
        self.patched: dict[int, Space] = {}
        #: Module-level objects of project classes (and those in module-level containers).
        self.objects: list[Space] = []
        #: What test modules assign (``Base.extra = 1``), by the owner's id and
        #: the attribute: a change there is the test's doing, never routine.
        self.assigned: dict[tuple[int, str], object] = {}
        self._project_types: dict[str, bool] = {}
        #: Imported test modules, whose UPPER_CASE containers are watched.
        self.test_modules: dict[str, Space] = {}
        self._seen: dict[str, object] = {}
        self._test_file: dict[str, bool] = {}
        self._every: tuple[tuple[int, int, int], list[Space]] | None = None
        self._count = -1
        self._dirty = True

    def project_origin(self, origin: str) -> bool:
        """Whether a module file is the project's, by its path alone (string
        operations only: this runs inside tests, during an import)."""
        path = os.path.normpath(origin)
        if path.startswith(self.installed):
            return True
        if not path.startswith((self.root, self.given_root)) or path.startswith(self.library_roots):
            return False
        name = os.path.basename(path)
        if name == "conftest.py" or name in self.test_names:
            return False
        parts = Path(path).parts
        return "site-packages" not in parts and "dist-packages" not in parts

    def project_module(self, name: str, module: types.ModuleType) -> bool:
        """A module of the project (not a test file, conftest or library)."""
        return self._is_project(name, module)

    def forget(self, names: set[str]) -> None:
        """Modules taken out of ``sys.modules``: no longer watched (a later
        import makes a new module, watched anew)."""
        if not names:
            return

        def gone(prefix: str) -> bool:
            return any(prefix == name or prefix.startswith(f"{name}.") for name in names)

        for name in names:
            self.project.pop(name, None)
            self._seen.pop(name, None)
        self.classes = [space for space in self.classes if not gone(space[0])]
        self.objects = [space for space in self.objects if not gone(space[0])]
        self._dirty = True

    def assigned_by_a_test(self, owner: object, attribute: str) -> bool:
        return self.assigned.get((id(owner), attribute)) is owner

    def project_logger(self, name: str) -> bool:
        """A logger named after a package of the project."""
        top = name.partition(".")[0]
        module = sys.modules.get(top)
        return module is not None and self._is_project(top, module)

    def library_logger(self, name: str) -> bool:
        """A logger named after an imported package that is not the
        project's: an installed library's own logger."""
        top = name.partition(".")[0]
        module = sys.modules.get(top)
        return module is not None and not self._is_project(top, module)

    def spaces_of(self, name: str, module: types.ModuleType) -> list[Space]:
        """A project module's namespaces: itself, its classes, its objects."""
        return [(name, module), *_classes_of(name, module), *self._objects_of(name, module)]

    def add_test_file(self, path: Path) -> None:
        self.test_files.add(_real(str(path)))
        self.test_names.add(path.name)

    def add_test_module(self, module: object) -> None:
        """A test module imported: its constants are watched."""
        if isinstance(module, types.ModuleType) and module.__name__ not in self.test_modules:
            self.test_modules[module.__name__] = (module.__name__, module)
            self._dirty = True

    def add_patched(self, owner: object) -> None:
        """A module or class a test patched: watched per test from now on."""
        if id(owner) in self.patched or not isinstance(owner, (types.ModuleType, type)):
            return
        if isinstance(owner, type):
            prefix = f"{owner.__module__}.{owner.__qualname__}"
        else:
            prefix = owner.__name__
        self.patched[id(owner)] = (prefix, owner)
        self._dirty = True

    def refresh(self) -> bool:
        """Classify modules imported since the last call; whether the per-test set changed."""
        if len(sys.modules) == self._count and not self._dirty:
            return False
        changed, self._dirty = self._dirty, False
        self._count = len(sys.modules)
        for name, module in list(sys.modules.items()):
            if self._seen.get(name) is module:
                continue
            self._seen[name] = module
            if name in COMMON_STDLIB:
                if name in TRACKED_STDLIB:
                    tracked.track(module)
                changed = True
            elif self._is_project(name, module):
                self.project[name] = (name, module)
                if self._test_helper(module):  # its data is watched as a test module's
                    self.test_modules.setdefault(name, (name, module))
                self.classes.extend(_classes_of(name, module))
                self.objects.extend(self._objects_of(name, module))
                changed = True
        return changed

    def _objects_of(self, name: str, module: types.ModuleType) -> Iterable[Space]:
        """A project module's module-level objects of project classes, and
        those held up to two levels down in its module-level lists, tuples
        and dicts (``factory = Factory()``, ``RULES = [Rule(), ...]``,
        ``RULES = {"auth": [Rule(), ...]}``): their attributes are project
        state too."""
        for global_name, value in list(vars(module).items()):
            if not global_name.startswith("__"):
                yield from self._objects_in(f"{name}.{global_name}", value, NESTED_OBJECTS)

    def _objects_in(self, key: str, value: object, depth: int) -> Iterable[Space]:
        if self._project_object(value):
            yield key, value
            return
        if depth == 0:
            return
        if isinstance(value, (list, tuple)):
            items: list[tuple[object, object]] = list(enumerate(value[:OBJECTS_PER_CONTAINER]))
        elif isinstance(value, dict):
            items = list(value.items())[:OBJECTS_PER_CONTAINER]
        else:
            return
        for index, item in items:
            yield from self._objects_in(f"{key}[{index!r}]", item, depth - 1)

    def project_object(self, value: object) -> bool:
        """An instance of a project class with its own ``__dict__`` (see below)."""
        return self._project_object(value)

    def _project_object(self, value: object) -> bool:
        """An instance (with a ``__dict__``) of a class defined in the project.

        Only ``type(value)`` is consulted before the class is known to be the
        project's: a proxy (werkzeug's ``LocalProxy``, Django's lazy objects)
        answers ``__class__`` and ``__dict__`` with its target, or raises."""
        kind = type(value)
        if issubclass(kind, (type, types.ModuleType, types.FunctionType, types.MethodType)):
            return False
        module_name = kind.__module__
        known = self._project_types.get(module_name)
        if known is None:
            known = module_name in self.project or self._is_project(
                module_name, sys.modules.get(module_name)
            )
            self._project_types[module_name] = known
        if not known:
            return False
        return _has_dict(value)

    def watch_assigned(self, module: types.ModuleType, source: str) -> None:
        """What a test module assigns attributes of (``mock.MagicMock.content
        = ...``, ``factory.auto_assign_id = True``, ``setattr(cls, ...)``):
        each such object reached from the module's globals, a class, module
        or instance of anywhere, is watched per test from now on."""
        for names, attribute in assigned_attributes(source):
            owner = _resolve(vars(module), names)
            if owner is not MISSING and owner is not module:
                self.assigned[(id(owner), attribute)] = owner
        for names in assigned_chains(source):
            owner = _resolve(vars(module), names)
            if owner is MISSING or owner is module:
                continue
            if isinstance(owner, types.ModuleType) and (
                owner.__name__.partition(".")[0] in MACHINERY or self._is_test_file(owner)
            ):
                continue
            if isinstance(owner, type) and owner.__module__ in self.test_modules:
                continue  # a test module's own class: the file's business
            if isinstance(owner, (types.ModuleType, type)):
                self.add_patched(owner)
            elif not callable(owner) and id(owner) not in self.patched and _has_dict(owner):
                self.patched[id(owner)] = (".".join(names), owner)
                self._dirty = True

    def per_test(self) -> list[Space]:
        stdlib = [(name, sys.modules[name]) for name in COMMON_STDLIB if name in sys.modules]
        loggers = [(f"logging.{cls.__qualname__}", cls) for cls in _logger_classes()]
        spaces = [
            *stdlib,
            *self.project.values(),
            *self.classes,
            *loggers,
            *self.objects,
            *self.patched.values(),
        ]
        # One object reached under many names (``from tools.registry import
        # registry`` in 33 modules) is one namespace, named where it is
        # defined, so its keys are the same in every process and every order.
        unique: dict[int, Space] = {}
        for prefix, owner in spaces:
            known = unique.get(id(owner))
            if known is None or _name_rank(prefix, owner) < _name_rank(known[0], owner):
                unique[id(owner)] = (prefix, owner)
        return list(unique.values())

    def every_module(self) -> list[Space]:
        """Every module dict for the file-boundary scan, except pytest's, plugins'
        and test modules (their own state is theirs)."""
        key = (len(sys.modules), len(self.project), len(self.patched))
        if self._every is None or self._every[0] != key:
            self._every = (key, self._every_module())
        return self._every[1]

    def _every_module(self) -> list[Space]:
        # Per-test modules are compared already, except a tracked module's
        # write that bypassed setattr (vars(os)[...] = ...): scan those too.
        # By name and identity, not id(): see Attributes._reusing.
        watched = {
            prefix: owner for prefix, owner in self.per_test() if tracked.version(owner) is None
        }
        return [
            (name, module)
            for name, module in list(sys.modules.items())
            if isinstance(module, types.ModuleType)
            and watched.get(name) is not module
            and name.partition(".")[0] not in self.plugin_packages
            and not self._is_test_file(module)
        ]

    def _is_test_file(self, module: types.ModuleType) -> bool:
        path = getattr(module, "__file__", None)
        if not isinstance(path, str):
            return False
        known = self._test_file.get(path)
        if known is None:  # test files are recorded before they are imported
            name = os.path.basename(path)
            known = name == "conftest.py" or (
                name in self.test_names and _real(path) in self.test_files
            )
            self._test_file[path] = known
        return known

    def holds_test_code(self, value: object, depth: int = 2) -> bool:
        """A function or class a test module defines (also in a test's body),
        an instance of one, or a tuple, list or dict holding one up to
        ``depth`` levels down (a registry entry ``(name, test_function)``)."""
        if isinstance(value, (tuple, list)):
            items: list[object] = list(value[:OBJECTS_PER_CONTAINER])
        elif isinstance(value, dict):
            items = list(value.values())[:OBJECTS_PER_CONTAINER]
        else:
            code: object = value if isinstance(value, (types.FunctionType, type)) else type(value)
            if isinstance(value, types.MethodType):
                code = value.__func__
            home = sys.modules.get(getattr(code, "__module__", None) or "")
            return isinstance(home, types.ModuleType) and self._is_test_file(home)
        return depth > 0 and any(self.holds_test_code(item, depth - 1) for item in items)

    def _test_helper(self, module: types.ModuleType) -> bool:
        """A module of the test tree that holds no tests (``tests/data.py``,
        ``tests/helpers/rows.py``): test data, shared by the tests that import it."""
        path = os.path.normpath(str(getattr(module, "__file__", "")))
        relative = path[len(self.given_root) :] if path.startswith(self.given_root) else path
        return any(part in TEST_FOLDERS for part in Path(relative).parts[:-1])

    def _is_project(self, name: str, module: object) -> bool:
        if not isinstance(module, types.ModuleType) or name.partition(".")[0] in MACHINERY:
            return False
        if name in self.plugin_modules:
            return False
        path = getattr(module, "__file__", None)
        if not isinstance(path, str):
            return False
        if path.startswith(self.installed):
            return True
        if path.startswith(self.library_roots):
            return False
        real = _real(path)
        if not real.startswith(self.root) or real.startswith(self.library_roots):
            return False
        parts = Path(real).parts
        if "site-packages" in parts or "dist-packages" in parts:
            return False
        return not self._is_test_file(module)


def _resolve(namespace: dict[str, object], chain: tuple[str, ...]) -> object:
    """``a.b.c`` looked up from a module's globals; MISSING if any step fails
    (an attribute lookup may run any code: a property, a proxy)."""
    owner: object = namespace.get(chain[0], MISSING)
    for name in chain[1:]:
        if owner is MISSING:
            break
        try:
            owner = getattr(owner, name, MISSING)
        except Exception:
            return MISSING
    return owner


def _has_dict(value: object) -> bool:
    """An object whose ``__dict__`` is its own state: not one whose class
    computes attributes on demand (``__getattr__``) and caches them there,
    such as Django's ``LazySettings`` or Django REST framework's
    ``api_settings`` (restoring such a cache corrupts it)."""
    if getattr(type(value), "__getattr__", None) is not None:
        return False
    try:
        return isinstance(vars(value), dict)
    except Exception:  # no __dict__, or one that cannot be read
        return False


#: Folders that hold a project's tests (and their data modules).
TEST_FOLDERS = frozenset({"tests", "test", "testing"})

#: How many items of a module-level container are looked at for project objects.
OBJECTS_PER_CONTAINER = 64
#: How many levels of containers below a module-level name are looked into.
NESTED_OBJECTS = 2


def _logger_classes() -> list[type]:
    """``logging.Logger`` and its subclasses (a project's logger class keeps
    class-level settings there)."""
    found: list[type] = []
    pending: list[type] = [logging.Logger]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found


_DOTTED = r"[A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)+"
#: ``a.b.c = ...``, ``a.b.c += ...``, ``a.b.c: T = ...`` at the start of a
#: statement (a line, or after ``def f():`` or ``;``).
_ASSIGNED = re.compile(
    rf"(?:^|[:;])[ \t]*({_DOTTED})\s*(?::[^=\n]*)?(?:[-+*/%&|^@]|//|\*\*|<<|>>)?=(?!=)", re.M
)
#: ``setattr(a.b, ...)``, ``delattr(a, ...)``, ``del a.b.c``.
_SET_OR_DELETED = re.compile(
    rf"\b(?:setattr|delattr)\(\s*([A-Za-z_][\w.]*)\s*,|\bdel\s+({_DOTTED})"
)


def assigned_chains(source: str) -> list[tuple[str, ...]]:
    """The dotted owners a module's code assigns or deletes attributes of:
    ``a.b.c = 1`` gives ``("a", "b")``; ``setattr(a.b, "c", 1)`` gives
    ``("a", "b")``.  Found by a textual scan (an ``ast`` walk of every test
    module cost seconds on large suites); what it finds is only a candidate,
    resolved against the module's globals."""
    chains: set[tuple[str, ...]] = set()
    for match in _ASSIGNED.finditer(source):
        names = [name.strip() for name in match.group(1).split(".")]
        chains.add(tuple(names[:-1]))
    for match in _SET_OR_DELETED.finditer(source):
        if match.group(1):
            chains.add(tuple(match.group(1).split(".")))
        else:
            names = [name.strip() for name in match.group(2).split(".")]
            chains.add(tuple(names[:-1]))
    return sorted(chain for chain in chains if chain and chain[0] not in ("self", "cls"))


def assigned_attributes(source: str) -> set[tuple[tuple[str, ...], str]]:
    """The attributes a module's code assigns with ``a.b.c = 1`` (or an
    augmented assignment): ``(("a", "b"), "c")``.  Not ``setattr(...)``,
    which is mostly ``monkeypatch.setattr``, undone by itself."""
    found = set()
    for match in _ASSIGNED.finditer(source):
        names = [name.strip() for name in match.group(1).split(".")]
        if len(names) > 1 and names[0] not in ("self", "cls"):
            found.add((tuple(names[:-1]), names[-1]))
    return found


def _classes_of(name: str, module: types.ModuleType) -> Iterable[Space]:
    for value in list(vars(module).values()):
        if isinstance(value, type) and value.__module__ == name:
            yield f"{name}.{value.__qualname__}", value
