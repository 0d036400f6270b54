"""The guard's snapshots: fast paths agree with the slow ones."""

from __future__ import annotations

import os
import types
from pathlib import Path

import pytest

from pytest_isolation.guard import dictversion
from pytest_isolation.guard import tracked
from pytest_isolation.guard.attributes import Attributes
from pytest_isolation.guard.interpreter import IMPORT_SYSTEM
from pytest_isolation.guard.interpreter import INTERPRETER
from pytest_isolation.guard.loggers import ROOT_LOGGER
from pytest_isolation.guard.process import PROCESS
from pytest_isolation.guard.sites import Sites
from pytest_isolation.guard.state import Slots


@pytest.mark.parametrize("slots", [IMPORT_SYSTEM, INTERPRETER, ROOT_LOGGER, PROCESS])
def test_one_call_readers_match_the_slots(slots: Slots) -> None:
    assert slots.values() == [get() for get, _ in slots.slots.values()]


def test_tracked_modules_count_writes_through_setattr(monkeypatch: pytest.MonkeyPatch) -> None:
    assert tracked.track(os)  # the guard of this very run tracks it already
    before = tracked.version(os)
    assert before is not None
    monkeypatch.setattr(os, "sep", "|")
    monkeypatch.undo()
    assert tracked.version(os) == before + 2
    assert isinstance(os, type(pytest))  # still a module for everyone else
    assert tracked.version(pytest) is None


@pytest.mark.parametrize("tags", [True, False], ids=["version tags", "values compared"])
def test_a_renewed_snapshot_takes_again_only_what_changed(
    monkeypatch: pytest.MonkeyPatch, tags: bool
) -> None:
    """After a test changed one namespace, the renewal keeps every other
    namespace's snapshot (the same object) and takes the changed one again;
    over a new list of spaces (modules imported since) it matches by name."""
    if not tags:
        monkeypatch.setattr(dictversion, "WORKS", False)
    modules = [types.ModuleType(f"renewed{n}") for n in range(4)]
    for module in modules:
        module.value = 1  # type: ignore[attr-defined]
    watched = Attributes(Sites(Path.cwd()))
    watched.spaces = [(module.__name__, module) for module in modules]
    first = watched.snapshot()
    assert isinstance(first, list)
    modules[2].value = 2  # type: ignore[attr-defined]
    renewed = watched.resnapshot(first)
    assert isinstance(renewed, list)
    assert [a is b for a, b in zip(first, renewed, strict=True)] == [True, True, False, True]
    assert renewed[2].copy["value"] == 2
    assert watched.unchanged(renewed)
    assert not watched.unchanged(first)

    extra = types.ModuleType("renewed_extra")
    watched.spaces = [*watched.spaces[:2], ("renewed_extra", extra), *watched.spaces[2:]]
    modules[0].value = 3  # type: ignore[attr-defined]
    again = watched.resnapshot(renewed)
    assert isinstance(again, list)
    assert [saved.owner for saved in again] == [modules[0], modules[1], extra, *modules[2:]]
    assert again[0] is not renewed[0]
    assert again[0].copy["value"] == 3
    assert again[1] is renewed[1]
    assert again[3] is renewed[2]
    assert watched.unchanged(again)
