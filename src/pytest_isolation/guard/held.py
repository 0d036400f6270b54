"""State held by what outlives a test: the project objects a higher-scoped
fixture returns and those a unittest ``setUpClass`` puts on its class, the
behaviour of a test module's helper classes, and files.

The tests of a module (or class) share such an object; what one test sets
on it, or adds to a list or dict inside it, the next test sees.  No module
binds it, so the per-test tier cannot reach it: it is read here, from the
test's own fixtures, class and module, when the test starts, and compared
when its function-scoped fixtures are about to end.

Files too: a file such a fixture (or ``setup_module``) made in the working
directory or beside the test file, and a path a higher-scoped fixture
returns (a file, or a folder's files and hidden folders), compared once the
test's own fixtures ended.

Reported, never put back: the tests of a scope that share an object may
build on each other on purpose (a first test creates, the next reads), and
a plain run keeps what they did.
"""

from __future__ import annotations

import os
import types
import unittest
from collections.abc import Callable
from collections.abc import Iterator
from stat import S_ISDIR
from typing import Any
from typing import NamedTuple

import pytest

from pytest_isolation.core.kinds import FixtureScope
from pytest_isolation.core.records import Leak
from pytest_isolation.guard import allow
from pytest_isolation.guard.attributes import equal_for_real
from pytest_isolation.guard.deep import CONTAINERS
from pytest_isolation.guard.deep import Content
from pytest_isolation.guard.leftovers import TOOL_FILES
from pytest_isolation.guard.namespaces import identical
from pytest_isolation.guard.routine import classify
from pytest_isolation.guard.routine import hides_a_default
from pytest_isolation.guard.routine import private
from pytest_isolation.guard.state import MISSING
from pytest_isolation.guard.state import PLAIN
from pytest_isolation.guard.state import describe
from pytest_isolation.guard.state import difference
from pytest_isolation.guard.state import same
from pytest_isolation.guard.windows import Window


class _Real(NamedTuple):
    stat: Callable[[str], os.stat_result]
    scandir: Callable[[str], Any]
    getcwd: Callable[[], str]


# Read once: a test may replace them (pyfakefs patches the os module).
_REAL = _Real(os.stat, os.scandir, os.getcwd)


def fixture_folders(test_file: object) -> list[str]:
    """Where a higher-scoped fixture's files are looked for: the working
    directory and the running test file's folder."""
    try:
        folders = [_REAL.getcwd()]
    except OSError:  # the working directory was removed
        folders = []
    if isinstance(test_file, os.PathLike):
        folders.append(os.path.dirname(os.fspath(test_file)))
    return folders


#: A folder with more files than this is not compared per test.
FOLDER_FILES = 256


def regular_files(folder: str, hidden_folders: bool = False) -> set[str]:
    """The regular files directly in ``folder`` (none if it cannot be read),
    and with ``hidden_folders`` its hidden folders too (``.git``: a commit
    changes what is in it, and so its modification time)."""
    try:
        with _REAL.scandir(folder) as entries:
            return {
                entry.path
                for entry in entries
                if not entry.name.startswith(TOOL_FILES)
                and (
                    entry.is_file(follow_symlinks=False)
                    or (hidden_folders and entry.name.startswith(".") and entry.is_dir())
                )
            }
    except OSError:
        return set()


def _stamp(path: str) -> object:
    try:
        stat = _REAL.stat(path)
    except OSError:
        return MISSING
    return (stat.st_mtime_ns, stat.st_size)


def signature(path: str) -> object:
    """What a file's content is known by (modification time and size); a
    folder's: each of its regular files'; MISSING when it is gone."""
    try:
        stat = _REAL.stat(path)
    except OSError:
        return MISSING
    if not S_ISDIR(stat.st_mode):
        return (stat.st_mtime_ns, stat.st_size)
    files = sorted(regular_files(path, hidden_folders=True))[:FOLDER_FILES]
    return Folder((os.path.basename(name), _stamp(name)) for name in files)


class Folder(tuple[tuple[str, object], ...]):
    """A folder's signature: its regular files' names and signatures."""

    def files(self) -> dict[str, object]:
        return dict(self)


def fixture_label(fixturedef: Any) -> str:
    """A higher-scoped fixture as the summary names it (``setup_module`` and
    ``setUpClass`` run as pytest's own fixtures, named after them)."""
    name, scope = fixturedef.argname, fixturedef.scope
    if name.startswith("_xunit_setup_") or name.startswith("_unittest_setUpClass"):
        kind, _, where = name.lstrip("_").partition("_fixture_")
        kind = kind.removeprefix("xunit_").removeprefix("unittest_")
        return f"{kind} of {where} (scope={scope})"
    return f"fixture {name!r} (scope={scope})"


def as_path(value: object) -> str | None:
    """A fixture value that names an existing file or folder (``tmp_path``-like), else None."""
    if isinstance(value, (str, os.PathLike)) and not isinstance(value, bytes):
        try:
            path = os.fspath(value)
        except Exception:  # a PathLike that fails
            return None
        if isinstance(path, str) and 0 < len(path) < 4096 and "\n" not in path:
            try:
                _REAL.stat(path)
            except (OSError, ValueError):
                return None
            return os.path.abspath(path)
    return None


#: How many project objects below a held one are read (``skill.valid.app_id``).
DEPTH = 2
#: A container larger than this is not copied per test (a data table).
LARGEST = 4096

FILE_HINT = "give each test its own copy (tmp_path), or make the fixture function-scoped"
HINT = "give each test its own object (a function-scoped fixture, setUp), or reset it in a fixture"


class _Object:
    """A held object's (or a helper class's) attributes when the test started."""

    __slots__ = ("attributes", "key", "owner", "values")

    def __init__(self, key: str, owner: object) -> None:
        self.key, self.owner = key, owner
        self.attributes = dict(vars(owner))
        self.values = list(self.attributes.values())

    def unchanged(self) -> bool:
        """The same names bound to the same objects: one pass at C speed,
        the common case after a test."""
        try:
            now = vars(self.owner)
        except TypeError:
            return True
        return len(now) == len(self.values) and identical(list(now.values()), self.values)


class HeldState:
    """The project objects the running test reaches through its
    higher-scoped fixtures and its unittest class, as they were when it
    started."""

    def __init__(
        self, project_object: Callable[[object], bool], holds_test_code: Callable[[object], bool]
    ) -> None:
        self.project_object = project_object
        self.holds_test_code = holds_test_code
        #: The higher-scoped fixtures alive, by name: (scope, value).
        self.scoped: dict[str, tuple[FixtureScope, object]] = {}
        self.objects: list[_Object] = []
        self.contents: list[tuple[str, Content]] = []
        #: The keys of ``contents`` that a class binds (not an object).
        self.class_level: set[str] = set()
        #: The running test's module's helper classes, as it started.
        self.classes: list[_Object] = []
        #: The last test's file and its module's helper classes.
        self._path: object = None
        self._helpers: list[tuple[str, type]] = []
        #: Each test module's helper classes, found once.
        self.helpers: dict[str, tuple[types.ModuleType, list[tuple[str, type]]]] = {}

    def remember(self, item: pytest.Item) -> None:
        """Read what ``item`` shares with the other tests of its scopes."""
        self.objects, self.contents, self.class_level = [], [], set()
        seen: set[int] = set()
        for name, value in getattr(item, "funcargs", {}).items():
            scoped = self.scoped.get(name)
            if scoped is not None and scoped[1] is value:
                self._read(f"fixture {name!r} (scope={scoped[0]})", value, DEPTH, seen)
            if self.project_object(value):  # of any scope: its class is shared
                self._read_class(type(value), seen)
        cls = getattr(item, "cls", None)
        if isinstance(cls, type) and issubclass(cls, unittest.TestCase):
            for name, value in list(vars(cls).items()):
                if not name.startswith("__"):
                    self._read(f"{cls.__qualname__}.{name}", value, DEPTH, seen)
        if item.path != self._path:  # the tests of one file run one after another
            module = getattr(item, "module", None)
            self._path = item.path
            self._helpers = self._helpers_of(module) if isinstance(module, types.ModuleType) else []
        self.classes = [_Object(*pair) for pair in self._helpers]

    def _helpers_of(self, module: types.ModuleType) -> list[tuple[str, type]]:
        """The classes a test module defines that hold no tests (``class
        NotJsonFriendly``, a fake, a sample model): its tests share them."""
        known = self.helpers.get(module.__name__)
        if known is None or known[0] is not module:
            found = [
                (f"{module.__name__}.{value.__qualname__}", value)
                for value in list(vars(module).values())
                if isinstance(value, type)
                and value.__module__ == module.__name__
                and not issubclass(value, unittest.TestCase)
                and not any(name.startswith("test") for name in vars(value))
            ]
            known = self.helpers[module.__name__] = (module, found)
        return known[1]

    def _read_class(self, cls: type, seen: set[int]) -> None:
        """The containers a project class (and its project bases) binds: a
        mutable class attribute is one object for every instance, so what
        one test registers through its own instance the next test's sees
        (``self.serializers[mimetype] = fn`` on ``serializers = {}``)."""
        home = cls.__module__.partition(".")[0]
        for klass in cls.__mro__:
            if klass.__module__.partition(".")[0] != home:
                continue
            for name, inner in list(vars(klass).items()):
                if (
                    issubclass(type(inner), CONTAINERS)
                    and id(inner) not in seen
                    and not name.startswith("__")
                    and len(inner) <= LARGEST
                ):
                    seen.add(id(inner))
                    key = f"{klass.__module__}.{klass.__qualname__}.{name}"
                    self.contents.append((key, Content(inner)))
                    self.class_level.add(key)

    def _read(self, key: str, value: object, depth: int, seen: set[int]) -> None:
        if id(value) in seen or not self.project_object(value):
            return
        seen.add(id(value))
        held = _Object(key, value)
        self.objects.append(held)
        for name, inner in held.attributes.items():
            if issubclass(type(inner), CONTAINERS) and id(inner) not in seen:
                if len(inner) <= LARGEST:
                    seen.add(id(inner))
                    self.contents.append((f"{key}.{name}", Content(inner)))
            elif depth > 0:
                self._read(f"{key}.{name}", inner, depth - 1, seen)

    def leaks(self, window: Window) -> list[Leak]:
        """What the test changed in the objects it shares (reported, kept)."""
        found = [
            *(("shared", key, what) for key, what in self._attribute_changes()),
            *(("shared", key, what) for key, what in self._content_changes()),
            *(("shared", key, what) for key, what in self._class_changes()),
        ]
        self.objects, self.contents, self.classes = [], [], []
        return _leaks(window, found)

    def _attribute_changes(self) -> list[tuple[str, str]]:
        found = []
        for held, name, old, new in _rebound(self.objects):
            set_or_dropped = new if old is MISSING else old
            if (old is MISSING or new is MISSING) and not hides_a_default(
                held.owner, name, set_or_dropped
            ):
                continue  # a cache filled or dropped on the object
            key = f"{held.key}.{name}"
            kind = classify("attribute", key, old, new, held.owner)
            if _routine(kind, new) and not self.holds_test_code(new):
                continue  # a counter advanced, an object created lazily
            found.append((key, f"{key} (was {describe(old)}, now {describe(new)})"))
        return found

    def _class_changes(self) -> list[tuple[str, str]]:
        found = []
        for held, name, old, new in _rebound(self.classes):
            if name.startswith("__") or not (_behaviour(old) or _behaviour(new)):
                continue  # a record kept for a later test of the file: its own business
            key = f"{held.key}.{name}"
            found.append((key, f"{key} (was {describe(old)}, now {describe(new)})"))
        return found

    def _content_changes(self) -> list[tuple[str, str]]:
        found = []
        for key, content in self.contents:
            now = Content(content.container)
            if now == content:
                continue
            name = key.rpartition(".")[2]
            # A class's container that only grew is filled, as a module's is
            # (``instances = []`` appended to by each new object); an object's
            # only when it is private (its cache): a public one is its state.
            filled = now.grew_from(content) and (key in self.class_level or private(name))
            if filled and not any(self.holds_test_code(value) for value in _added(content, now)):
                continue
            change = difference(content.plain(), now.plain()) or f"was {content!r}, now {now!r}"
            found.append((key, f"{key} (mutated in place: {change})"))
        return found


class SharedFiles:
    """The files and folders higher-scoped fixtures made or returned, and
    their signatures as the running test started."""

    def __init__(self) -> None:
        #: path -> who made or returned it (the fixture).
        self.paths: dict[str, str] = {}
        self.signatures: dict[str, object] = {}

    def add(self, path: str, who: str) -> None:
        """A file or folder a higher-scoped fixture made or returned."""
        self.paths.setdefault(path, who)

    def drop(self, who: str) -> None:
        """The fixture ended: its files are its own again."""
        self.paths = {path: owner for path, owner in self.paths.items() if owner != who}

    def remember(self) -> None:
        self.signatures = {path: signature(path) for path in self.paths}

    def leaks(self, window: Window) -> list[Leak]:
        """The shared files the test changed, once its own fixtures ended
        (a file it opened is written when closed); a file whose fixture
        ended meanwhile is that fixture's business."""
        found = [("files", key, what) for key, what in self._file_changes()]
        self.signatures = {}
        return _leaks(window, found)

    def _file_changes(self) -> list[tuple[str, str]]:
        found = []
        for path, old in self.signatures.items():
            if path not in self.paths:
                continue
            new = signature(path)
            if new == old:
                continue
            who = self.paths.get(path, "a fixture")
            if isinstance(old, Folder) and isinstance(new, Folder):
                change = difference(old.files(), new.files())
                what = f"folder {path} of {who} ({change})"
            else:
                kind = "folder" if isinstance(old, Folder) else "file"
                what = f"{kind} {path} of {who} ({'removed' if new is MISSING else 'changed'})"
            found.append((path, what))
        return found


def _leaks(window: Window, found: list[tuple[str, str, str]]) -> list[Leak]:
    """Report-only leaks of the window, less those it allows."""
    return [
        Leak(
            window.owner,
            window.kind,
            category,
            key,
            what,
            hint=HINT if category == "shared" else FILE_HINT,
            restored=False,
        )
        for category, key, what in found
        if not allow.allowed(window.allowances, category, key)
    ]


def _rebound(objects: list[_Object]) -> Iterator[tuple[_Object, str, object, object]]:
    """Each attribute of these objects (or classes) bound to another value
    than when the test started, set or deleted: the owner, the name, the
    old and the new value (MISSING for none)."""
    for held in objects:
        if held.unchanged():
            continue
        now = dict(vars(held.owner))
        for name in held.attributes.keys() | now.keys():
            old, new = held.attributes.get(name, MISSING), now.get(name, MISSING)
            if not (same(old, new) or equal_for_real(old, new)):
                yield held, name, old, new


def _behaviour(value: object) -> bool:
    """A function, method or descriptor: what a class does, not a record."""
    return value is not MISSING and (
        callable(value) or isinstance(value, (staticmethod, classmethod, property))
    )


def _routine(kind: str, new: object) -> bool:
    """A counter, or an object made lazily; not a plain value set where
    there was ``None`` (``skill.valid.app_id = '12345'``)."""
    return bool(kind) and not (kind == "created" and isinstance(new, PLAIN))


def _added(old: Content, new: Content) -> list[Any]:
    known = {id(value) for value in old.items}
    return [value for value in new.items if id(value) not in known]
