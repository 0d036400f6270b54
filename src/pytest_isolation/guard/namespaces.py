"""Module, class and object namespaces saved as dicts, and the fast check of
many of them after every test: a few C-level passes instead of a Python loop
over hundreds of namespaces (see :class:`NamespaceSnapshot`).  What a change
in them means is the ``attribute`` category's business (:mod:`.attributes`);
which namespaces are watched, the watch list's (:mod:`.watchlist`)."""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Iterable
from collections.abc import Mapping
from itertools import chain
from itertools import compress

from pytest_isolation.guard import dictversion
from pytest_isolation.guard import tracked

#: One watched namespace: (name prefix, the module or class).
Space = tuple[str, object]


class SavedNamespace:
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


class NamespaceSnapshot(list[SavedNamespace]):
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

    def extend(self, spaces: Iterable[SavedNamespace]) -> None:
        self._fast = self.over = None
        super().extend(spaces)

    def append(self, space: SavedNamespace) -> None:
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

    def changed(self) -> list[SavedNamespace]:
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
