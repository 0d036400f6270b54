"""Stash entries that more than one part reads, typed.

The entries here hold what parts above, below and beside each other
exchange: plain values, and the objects one part offers to others, typed by
what the others may call (a part's object that only its own modules read
keeps its key beside its class, as pytest's ``junitxml.xml_key``).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
from typing import Any
from typing import Protocol

import pytest

from pytest_isolation.core.kinds import Repeat
from pytest_isolation.core.kinds import Started
from pytest_isolation.core.records import Leak


class LeakLog(Protocol):
    """What file mode and a test's own process ask of the leak guard
    (``guard.watch.LeakGuard``)."""

    def record(self, leak: Leak) -> bool:
        """Keep a leak a child found for the summary; False when it is a repeat."""

    def before_fork(self) -> None:
        """Right before a test's own process is forked (``pertest``)."""


class Quarantining(Protocol):
    """What file mode and the run report ask of the quarantine
    (``ci.quarantine.Quarantine``)."""

    def apply(self, report: pytest.TestReport) -> None:
        """Mark ``report`` quarantined when its test is listed."""

    def to_json(self) -> dict[str, Any]:
        """The quarantine's part of the run report."""


#: The leak guard, when it runs (``isolation-guard``).
GUARD_KEY = pytest.StashKey[LeakLog]()
#: The quarantine, when a file of known failures is given (``isolation-quarantine``).
QUARANTINE_KEY = pytest.StashKey[Quarantining]()

#: Set in a file-mode child: the process contains what the file's import and
#: its tests leave changed, so the guard watches only each test.
IN_CHILD = pytest.StashKey[bool]()
#: Set in a file-mode child that runs several files (a group, or the files not
#: isolated): the guard watches imports and files as in a plain run.
SHARED_CHILD = pytest.StashKey[bool]()
#: How file mode starts its children (``fork`` or ``spawn``), for the run report.
START_METHOD = pytest.StashKey[Started]()
#: "node id: path" of every ``isolated_tmp`` directory kept, for the summary (a
#: file-mode child and an xdist worker send theirs to the parent).
KEPT_DIRS = pytest.StashKey[list[str]]()
#: On an item: it stands for a whole test file that runs in a child process.
FILE_PLACEHOLDER = pytest.StashKey[bool]()
#: File mode's controller: asks a child for a file's tests and returns stand-ins
#: for them (``--collect-only``, the selector's count of tests).
COLLECT_IN_CHILD = pytest.StashKey[Callable[[pytest.File], Sequence[pytest.Item]]]()

#: On an item that ``--isolation-twice`` runs twice: ``"first"`` on the test
#: while its first run ends (the guard reports what it left changed, restores
#: nothing and keeps the test's window open), ``"again"`` on the copy that runs
#: it again (its set-up goes on in that window, its teardown closes it and
#: restores, reporting nothing more).
REPEAT = pytest.StashKey[Repeat]()
#: On a report of a failed repeat (it crosses processes: file mode, xdist):
#: what the first run left changed, one line each.
REPEAT_ATTR = "isolation_repeat"
#: On a test that ran twice: what its first run left changed, as the guard found it.
FIRST_RUN_LEFT = pytest.StashKey[list[Leak]]()

#: Entries the parent's plugins keep: a forked child deletes them with those plugins
#: (``names.PARENT_ONLY``), so nothing in it calls back into the parent's objects.
PARENT_ONLY = (COLLECT_IN_CHILD,)

#: This run's record of what each test file executed, as JSON, for the run
#: report (``pytest_isolation.record.recording``).
RECORDED = pytest.StashKey[dict[str, Any]]()
#: Python 3.12+: the recorder of what the parent runs from the loading of its
#: first conftests until its first child starts (``record.executed.Recorder``).
PARENT_PHASE = pytest.StashKey[Any]()
#: What the entry plugin calls as the run's very last cleanup, after every
#: conftest's and plugin's (registered before their ``pytest_configure``):
#: the record of what each test file executed ends there.
LAST_WORDS = pytest.StashKey[list[Callable[[], None]]]()
#: In file mode's parent: the files during whose run their process's fork server ended.
#: The test whose ``pytest_runtest_logstart`` runs now runs in a process of
#: its own (``pertest``): file mode's parent leaves its time to that process.
IN_OWN_PROCESS = pytest.StashKey[bool]()
#: This process is a test's own (``pertest``): it holds one test, and ends after it.
IN_TEST_PROCESS = pytest.StashKey[bool]()
SERVERS_ENDED = pytest.StashKey[list[str]]()
