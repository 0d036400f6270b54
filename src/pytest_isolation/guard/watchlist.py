"""Which namespaces the attribute tiers watch, decided as modules arrive.

Per test: the project's own modules (see :mod:`.provenance` for whose a module
is), the classes defined in them and their module-level objects, the test
modules' constants, the stdlib modules tests patch most, and any module,
class or object a test was seen patching.  At each file boundary: every
module dict but pytest's, the plugins' and the test files'.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import types
from collections.abc import Iterable
from pathlib import Path

from pytest_isolation.guard import tracked
from pytest_isolation.guard.namespaces import Space
from pytest_isolation.guard.provenance import MACHINERY
from pytest_isolation.guard.provenance import Provenance
from pytest_isolation.guard.state import MISSING

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


class Watchlist:
    """Decides which namespaces the attribute tiers watch, as modules arrive."""

    def __init__(
        self, rootdir: Path, library_roots: tuple[str, ...], installed: tuple[str, ...] = ()
    ) -> None:
        #: Whose a module is (the project's, a test file, a plugin's, a library's).
        self.provenance = Provenance(rootdir, library_roots, installed)
        self.project: dict[str, Space] = {}
        self.classes: list[Space] = []
        self.patched: dict[int, Space] = {}
        #: Module-level objects of project classes (and those in module-level containers).
        self.objects: list[Space] = []
        #: What test modules assign (``Base.extra = 1``), by the owner's id and
        #: the attribute: a change there is the test's doing, never routine.
        self.assigned: dict[tuple[int, str], object] = {}
        #: Imported test modules, whose UPPER_CASE containers are watched.
        self.test_modules: dict[str, Space] = {}
        self._seen: dict[str, object] = {}
        self._every: tuple[tuple[int, int, int], list[Space]] | None = None
        self._count = -1
        self._dirty = True

    def project_origin(self, origin: str) -> bool:
        """Whether a module file is the project's, by its path alone (see
        :meth:`.Provenance.project_origin`)."""
        return self.provenance.project_origin(origin)

    def project_module(self, name: str, module: types.ModuleType) -> bool:
        """A module of the project (not a test file, conftest or library)."""
        return self.provenance.is_project(name, module)

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
        return module is not None and self.provenance.is_project(top, module)

    def library_logger(self, name: str) -> bool:
        """A logger named after an imported package that is not the
        project's: an installed library's own logger."""
        top = name.partition(".")[0]
        module = sys.modules.get(top)
        return module is not None and not self.provenance.is_project(top, module)

    def spaces_of(self, name: str, module: types.ModuleType) -> list[Space]:
        """A project module's namespaces: itself, its classes, its objects."""
        return [(name, module), *_classes_of(name, module), *self._objects_of(name, module)]

    def add_test_file(self, path: Path) -> None:
        self.provenance.add_test_file(path)

    def add_plugin(self, name: str) -> None:
        """A module registered as a pytest plugin: never the project's, never scanned."""
        self.provenance.add_plugin(name)

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
            elif self.provenance.is_project(name, module):
                self.project[name] = (name, module)
                if self.provenance.test_helper(module):  # its data is watched as a test module's
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
        if not self.provenance.project_types(kind.__module__, self.project):
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
                owner.__name__.partition(".")[0] in MACHINERY or self.provenance.is_test_file(owner)
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
        plugin_packages = self.provenance.plugin_packages
        return [
            (name, module)
            for name, module in list(sys.modules.items())
            if isinstance(module, types.ModuleType)
            and watched.get(name) is not module
            and name.partition(".")[0] not in plugin_packages
            and not self.provenance.is_test_file(module)
        ]

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
            return isinstance(home, types.ModuleType) and self.provenance.is_test_file(home)
        return depth > 0 and any(self.holds_test_code(item, depth - 1) for item in items)


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
    module is too slow on a large suite); what it finds is only a candidate,
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
