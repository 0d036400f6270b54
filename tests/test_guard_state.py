"""The guard's snapshots: fast paths agree with the slow ones."""

from __future__ import annotations

import os

import pytest

from pytest_isolation.guard import tracked
from pytest_isolation.guard.process import IMPORT_SYSTEM
from pytest_isolation.guard.process import INTERPRETER
from pytest_isolation.guard.process import PROCESS
from pytest_isolation.guard.process import ROOT_LOGGER
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
