"""Containers mutated in place: dicts, lists, sets and deques.

The default tier watches the project's module-level containers and named
loggers' handlers, filters and formatters; the deep tier
(``--isolation-leaks-deep``) adds class-level containers, containers held
in any module-level one, and the values of higher-scoped fixtures a test
requested.  Each is fingerprinted shallowly (type, length, identities of
the items) and restored to its shallow content.  Lazily filled caches show
up here; allow them with ``allow_leaks``/``isolation_allow_leaks``.
"""

from __future__ import annotations

import collections
import logging
import types
from collections.abc import Callable
from collections.abc import Iterator
from functools import partial
from typing import Any

from pytest_isolation.core.words import counted
from pytest_isolation.guard import bindings
from pytest_isolation.guard import dictversion
from pytest_isolation.guard.loggers import LibraryLogger
from pytest_isolation.guard.loggers import module_logger
from pytest_isolation.guard.namespaces import Space
from pytest_isolation.guard.state import MISSING
from pytest_isolation.guard.state import Change
from pytest_isolation.guard.state import Flat
from pytest_isolation.guard.state import describe
from pytest_isolation.guard.state import equal

CONTAINERS = (dict, list, set, collections.deque)


def items_of(container: Any) -> tuple[object, ...]:
    """The shallow content: a dict's (key, value) pairs flattened, else the
    items.  Read with the built-in type's own methods, never a subclass's
    override (which may do anything, or raise)."""
    kind = type(container)
    if issubclass(kind, dict):
        return (*dict.keys(container), *dict.values(container))
    for base in (list, set, collections.deque):
        if issubclass(kind, base):
            return tuple(base.__iter__(container))
    return tuple(container)


#: How many containers held one level down in a watched container are watched too.
NESTED_PER_CONTAINER = 64


def _public(name: str) -> bool:
    return not name.startswith("_")


def constant(name: str) -> bool:
    """An UPPER_CASE name: a module's configuration or registry by convention."""
    return name.isupper()


def _containers_in(
    spaces: list[Space],
    watched: Callable[[str], bool] = lambda name: not name.startswith("__"),
    known: dict[str, Content] | None = None,
    nested: Callable[[str], bool] = constant,
) -> dict[str, Content]:
    """The containers bound in these namespaces, by ``prefix.name``, and,
    below the names ``nested`` accepts, those held one level down in them
    (``CONFIG['db']``, ``HANDLERS[0]``): ``CONFIG['db']['host'] = 'x'``
    changes only the inner one.  By default only below UPPER_CASE names:
    a module's data tables (dateparser's ``info`` of every language holds
    thousands of lists) would make the check after every test cost more
    than the test; the deep tier looks below every name.

    One container reached under many names (``from ._builtins import
    OPCODES``) is one key, named where it is defined: not in a module that
    binds it by ``from x import y``, then the shortest name, then the first
    alphabetically.  A container whose content ``known``
    already holds, unchanged, keeps that snapshot (no copy)."""
    by_container: dict[int, tuple[str, Any, Callable[[], bool]]] = {}
    for key, value, imported in _bound(spaces, watched, nested):
        seen = by_container.get(id(value))
        if seen is None:
            by_container[id(value)] = (key, value, imported)
            continue
        # Reached under a second name: only now is each module's source read
        # for its ``from x import y`` (parsing every module is too slow on a
        # large suite).
        first_key, _, first_imported = seen
        if (imported(), len(key), key) < (first_imported(), len(first_key), first_key):
            by_container[id(value)] = (key, value, imported)
    found: dict[str, Content] = {}
    for key, value, _ in by_container.values():
        old = known.get(key) if known is not None else None
        if old is not None and old.container is value and items_of(value) == old.items:
            found[key] = old
        else:
            found[key] = Content(value)
    return found


def _bound(
    spaces: list[Space], watched: Callable[[str], bool], nested: Callable[[str], bool]
) -> Iterator[tuple[str, Any, Callable[[], bool]]]:
    """Each container, its key, and whether its module binds it by ``from x
    import y`` (asked only when needed: it reads the module's source)."""
    for prefix, owner in spaces:
        for name, value in list(vars(owner).items()):
            if issubclass(type(value), CONTAINERS) and watched(name):
                key = f"{prefix}.{name}"
                imported = partial(_from_import, owner, name)
                yield key, value, imported
                if nested(name):
                    for inner, item in _nested(key, value):
                        yield inner, item, imported


def _from_import(owner: object, name: str) -> bool:
    return isinstance(owner, types.ModuleType) and name in bindings.from_imports(owner)


def _nested(key: str, container: Any) -> Iterator[tuple[str, Any]]:
    kind = type(container)
    if issubclass(kind, dict):
        pairs = list(dict.items(container))[:NESTED_PER_CONTAINER]
    elif issubclass(kind, (list, collections.deque)):
        pairs = list(enumerate(items_of(container)))[:NESTED_PER_CONTAINER]
    else:
        return
    for index, item in pairs:
        if issubclass(type(item), CONTAINERS):
            yield f"{key}[{index!r}]", item


def restore_content(container: Any, items: tuple[object, ...]) -> None:
    if isinstance(container, dict):
        half = len(items) // 2
        container.clear()
        container.update(zip(items[:half], items[half:], strict=True))
    elif isinstance(container, list):
        container[:] = items
    else:  # set, deque
        container.clear()
        container.extend(items) if isinstance(container, collections.deque) else container.update(
            items
        )


class Content:
    """A container and its shallow content, shown by length."""

    __slots__ = ("container", "items", "size")

    def __init__(self, container: Any) -> None:
        self.container = container
        self.items = items_of(container)
        items = self.items
        self.size = len(items) // 2 if issubclass(type(container), dict) else len(items)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Content)
            and other.container is self.container
            and equal(other.items, self.items)
        )

    def __hash__(self) -> int:
        return id(self.container)

    def _pairs(self) -> dict[Any, object]:
        """A dict's content as a plain dict (the items hold keys, then values)."""
        return dict(zip(self.items[: self.size], self.items[self.size :], strict=True))

    def keeps(self, old: Content) -> bool:
        """Whether every item of ``old`` is still here, unchanged (by identity)."""
        if isinstance(self.container, dict):
            now = self._pairs()
            return all(key in now and now[key] is value for key, value in old._pairs().items())
        ids = {id(item) for item in self.items}
        return all(id(item) in ids for item in old.items)

    def grew_from(self, old: Content) -> bool:
        """Only gained items, keeping the old ones: a cache or registry filled
        (a list or deque: appended to, its old items still first)."""
        if self.container is not old.container or self.size <= old.size:
            return False
        if isinstance(self.container, dict):
            return self.keeps(old)
        if isinstance(self.container, set):
            return set(old.items) <= set(self.items)
        return all(a is b for a, b in zip(old.items, self.items, strict=False))

    def plain(self) -> object:
        """The content as a plain dict, list or set, for messages."""
        if isinstance(self.container, dict):
            return self._pairs()
        if isinstance(self.container, set):
            return set(self.items)
        return list(self.items)

    def __repr__(self) -> str:
        kind = type(self.container).__name__
        return f"{kind} of {counted(self.size, 'item')}"


#: Built-in container types whose own ``==`` the fast check may call.
_FAST_TYPES = (dict, list, set, collections.deque)


def _fast_comparable(container: object) -> bool:
    """A built-in container, or a subclass that keeps its base's ``==``
    (which then runs no Python code)."""
    kind = type(container)
    base = next((base for base in _FAST_TYPES if issubclass(kind, base)), None)
    return base is not None and getattr(kind, "__eq__", None) is getattr(base, "__eq__", None)


def _plain_copy(content: Content) -> object:
    """A plain container with the snapshot's items, equal to the live one
    while it is unchanged."""
    if isinstance(content.container, collections.deque):
        return collections.deque(content.items)
    return content.plain()


class _Tagged:
    """Dict containers checked by their version tags (see
    :mod:`.dictversion`): one read each.  A dict whose tag moved but whose
    content is back as saved (the guard put it back) takes its tag anew."""

    __slots__ = ("containers", "plains", "tags")

    def __init__(self) -> None:
        self.containers: list[dict[object, object]] = []
        self.plains: list[object] = []
        self.tags = dictversion.Tags(lambda index: self.containers[index] == self.plains[index])

    def add(self, container: dict[object, object], plain: object) -> bool:
        """Watch a dict whose ``==`` is the built-in one, from its tag now if
        it still holds ``plain`` (its snapshot's content); whether it can be."""
        tag = dictversion.tag_of_dict(container)
        if tag is None or container != plain:
            return False
        self.tags.add(*tag)
        self.containers.append(container)
        self.plains.append(plain)
        return True

    def unchanged(self) -> bool:
        return not self.tags.moved()


class _Contents(dict[str, Content]):
    """The containers' snapshot, with a check that runs after every test in
    one C-level comparison: the live containers against plain containers
    built from the snapshot's items when the check is first needed (a list
    of a dict, a list's items compared by identity first, so an unchanged
    container costs no Python call), dicts by their version tags where the
    interpreter has them.  A subclass that overrides ``==`` is compared by
    its items."""

    _fast: tuple[list[object], list[object], list[Content], _Tagged] | None = None

    def __setitem__(self, key: str, value: Content) -> None:
        self._fast = None
        super().__setitem__(key, value)

    def setdefault(self, key: str, default: Content) -> Content:
        self._fast = None
        return super().setdefault(key, default)

    def unchanged(self) -> bool:
        fast = self._fast
        if fast is None:
            fast = self._fast = self._prepare()
        live, plain, others, tagged = fast
        return (
            live == plain
            and all(items_of(c.container) == c.items for c in others)
            and tagged.unchanged()
        )

    def _prepare(self) -> tuple[list[object], list[object], list[Content], _Tagged]:
        live: list[object] = []
        plain: list[object] = []
        others: list[Content] = []
        tagged = _Tagged()
        for content in self.values():
            if not _fast_comparable(content.container):
                others.append(content)
                continue
            copy = _plain_copy(content)
            if not (isinstance(content.container, dict) and tagged.add(content.container, copy)):
                live.append(content.container)
                plain.append(copy)
        return live, plain, others, tagged


class Containers:
    """In-place mutation of containers in project module and class namespaces."""

    name = "container"
    hint = "copy it in the test, or reset it in a fixture (allow a lazily filled cache)"

    def __init__(self, nest_everywhere: bool = False) -> None:
        #: Containers one level down below every name (the deep tier), not
        #: only below UPPER_CASE ones.
        self.nested: Callable[[str], bool] = (lambda name: True) if nest_everywhere else constant
        self.spaces: list[Space] = []
        #: Test modules: their public module-level containers, and those held
        #: in them, are watched for what their import put in: losing or
        #: changing it is a leak (``poly.clear()``, ``rows[0].pop("color")``),
        #: gaining items is not (a test's list of calls is its own).
        self.constants: list[Space] = []
        self.where: dict[str, Any] = {}
        #: Test modules' constants as their import left them.
        self.at_import: dict[str, Content] = {}
        #: Module-level objects of project classes: the containers they hold
        #: (``_module._methodcalls``) are part of their state, which other
        #: code keeps in step (a pool's free list): see :meth:`held_by_an_object`.
        self.objects: list[Space] = []
        self._of_objects: set[str] = set()

    def _read(self, known: dict[str, Content] | None = None) -> _Contents:
        found = _containers_in(self.spaces, known=known, nested=self.nested)
        held = _containers_in(self.objects, known=known, nested=lambda name: False)
        self._of_objects = set(held) - set(found)
        found = {**held, **found}
        constants = _containers_in(self.constants, _public, known, nested=_public)
        for key, content in constants.items():
            first = self.at_import.get(key)
            if first is None or first.container is not content.container:
                self.at_import[key] = content
        return _Contents({**found, **constants})

    def snapshot(self) -> object:
        return self._read()

    def resnapshot(self, previous: object) -> object:
        """A snapshot that reuses the contents of ``previous`` still current
        (after a test changed one cache, the other containers are as they were)."""
        assert isinstance(previous, dict)
        return self._read(previous)

    def adopt(self, saved: object, spaces: list[Space]) -> None:
        """Add the containers of namespaces that did not exist at the snapshot."""
        if isinstance(saved, dict):
            for key, content in _containers_in(spaces, nested=self.nested).items():
                saved.setdefault(key, content)

    def unchanged(self, saved: object) -> bool:
        assert isinstance(saved, _Contents)
        return saved.unchanged()

    def diff(self, saved: object) -> list[Change]:
        assert isinstance(saved, dict)
        found: list[Change] = []
        for key, content in saved.items():
            now = Content(content.container)
            if now != content:
                self.where[key] = content
                found.append((key, content, now))
        return found

    def label(self, key: str) -> str:
        return f"{key} (mutated in place)"

    def constant_of_a_test_module(self, key: str) -> bool:
        return key in self.at_import

    def held_by_an_object(self, key: str) -> bool:
        """A container an attribute of a project object holds: reported when
        its public content was lost or changed, or when a test's own code was
        added to it (a decorator's registry), never put back but for that
        addition, which nothing else knows of."""
        return key in self._of_objects

    def show(self, value: object) -> str:
        return describe(value)

    def is_leak(self, key: str, old: object, new: object) -> bool:
        first = self.at_import.get(key)
        if first is None or not isinstance(new, Content):
            return True
        # A test module's constant: a leak only when what its import put in
        # is gone or changed (tests that record into SEEN = {} for a later
        # test of the file are the file's own business).  A container held
        # inside one (``CONST['a']``) is part of what the import put in.
        return key.endswith("]") or not new.keeps(first)

    def restore(self, key: str, old: object) -> None:
        assert isinstance(old, Content)
        restore_content(old.container, old.items)


def _handler_state(handler: logging.Handler) -> tuple[object, ...]:
    return (handler, handler.formatter, tuple(handler.filters), handler.level)


class LoggerConfig(Flat):
    """Named loggers' handlers and filters, and those handlers' formatters and filters."""

    name = "logger"
    hint = "use caplog, or undo the logging configuration in a fixture"

    def __init__(self, library: LibraryLogger = module_logger) -> None:
        self.library = library

    def read(self) -> dict[str, object]:
        return {
            name: (
                tuple(_handler_state(handler) for handler in logger.handlers),
                tuple(logger.filters),
            )
            for name, logger in list(logging.Logger.manager.loggerDict.items())
            if isinstance(logger, logging.Logger)
        }

    def label(self, key: str) -> str:
        return f"the handlers/filters of logger {key!r}"

    def show(self, value: object) -> str:
        if not isinstance(value, tuple) or value == ((), ()):
            return "none"
        handlers, filters = value
        shown = ", ".join(
            f"{handler!r}" + (f" formatted by {formatter!r}" if formatter is not None else "")
            for handler, formatter, _, _ in handlers
        )
        return f"handlers [{shown}], {len(filters)} filter(s)"

    def is_leak(self, key: str, old: object, new: object) -> bool:
        if new is MISSING:
            return False
        if old is MISSING:  # a logger created in the window
            return new != ((), ()) and not self.library(key)
        return True

    def restore(self, key: str, old: object) -> None:
        logger = logging.getLogger(key)
        handlers, filters = old if isinstance(old, tuple) else ((), ())
        for handler, formatter, handler_filters, level in handlers:
            handler.setFormatter(formatter)
            handler.filters[:] = handler_filters
            handler.setLevel(level)
        logger.handlers[:] = [state[0] for state in handlers]
        logger.filters[:] = filters
