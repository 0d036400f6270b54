"""A child that runs several files (a group's, or the files not isolated):
it collects them all first, and holds each file's collection messages until
just before that file's tests run, so that the parent relays them with that
file's."""

from __future__ import annotations

from typing import Any
from typing import NamedTuple

import pytest

from pytest_isolation.filemode.wire import Message
from pytest_isolation.filemode.wire import MessageKind


class FileRun(NamedTuple):
    """One file of a shared process: its items and its held collection messages."""

    path: str
    items: list[pytest.Item]
    messages: list[Message]


class HeldMessages:
    """The messages of a shared process's files while it collects them all:
    each file's go out just before its tests run, so that the parent
    relays them with that file's."""

    def __init__(self, paths: list[str]) -> None:
        self.messages: dict[str, list[Message]] = {p: [] for p in paths}
        self.current = paths[0]

    def enter(self, path: str) -> None:
        if path in self.messages:
            self.current = path

    def put(self, kind: MessageKind, payload: dict[str, Any], path: str | None) -> None:
        key = path if path in self.messages else self.current
        self.messages[key].append((kind, payload))

    def split(self, items: list[pytest.Item]) -> list[FileRun]:
        """The files in order, each with its items (an item of no file goes
        with the first)."""
        first = next(iter(self.messages))
        mine: dict[str, list[pytest.Item]] = {path: [] for path in self.messages}
        for item in items:
            mine.get(str(item.path), mine[first]).append(item)
        return [FileRun(path, mine[path], held) for path, held in self.messages.items()]
