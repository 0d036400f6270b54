"""The ``recorded`` scope: the test files whose recorded run executed what changed.

For a changed source file and each test file's entry in the record
(:mod:`pytest_isolation.record.recording`):

- the test file changed itself: selected;
- no entry (new, renamed, or its tests never all ran in a recorded run):
  always selected;
- a stale entry (a file it depends on, or the test file, changed but is not
  among the changed files asked about): the ``impact`` scope decides;
- otherwise selected when its tests ran a function of the source that
  changed, or loaded the source and the source's import-time code changed;
  what the parent process ran outside the files' processes (the record's
  ``inherited``) counts as run by every test file, each of which depends on
  its files.

Which functions changed: the record keeps each function's fingerprint of
the version it saw, so the difference with the file now says it; when the
record saw the current version (recorded after the change), git's changed
lines (``--isolation-since``) say it, and without them any function of the
file counts.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from pytest_isolation.record.sourcefacts import SourceFacts
from pytest_isolation.record.sourcefacts import digest
from pytest_isolation.record.sourcefacts import read_facts
from pytest_isolation.record.store import EVERY
from pytest_isolation.record.store import Entry
from pytest_isolation.record.store import Record
from pytest_isolation.record.store import bits_of
from pytest_isolation.selector.project import Project
from pytest_isolation.selector.scopes import Found

#: How a test file was found in the recorded scope (``Found.via``).
RECORDED = "recorded"
UNRECORDED = "unrecorded"
STALE = "stale"
#: What changed of a source whose functions a test file did not run.
IMPORT_TIME = "import-time code"
#: A function the parent process ran, outside the test files' processes.
PARENT = "run by the parent process, for every test file"


@dataclasses.dataclass(frozen=True)
class Changes:
    """What changed in one source, as far as it is known."""

    #: Nothing says which functions: any that ran counts.
    whole: bool = False
    functions: frozenset[str] = frozenset()
    #: Its import-time code (imports, constants, class bodies) changed, or it was deleted.
    module: bool = False

    def touches(self, entry: Entry, source: str, inherited: list[str]) -> list[str] | None:
        """What of ``source``, which ``entry``'s tests loaded, that they used
        changed (function names, or ``import-time code``); None when nothing
        they used did.  ``inherited``: the functions of ``source`` that the
        parent process ran, outside the files' processes (its conftests'
        imports, the shared fixtures, the session's end): every file's."""
        ran = entry.ran_in(source)
        if EVERY in ran:
            return ["the whole file"] if (self.whole or self.functions or self.module) else None
        used = set(ran) | set(inherited)
        hit = sorted(used) if self.whole else sorted(self.functions & used)
        if hit:
            return [name if name in ran else f"{name} ({PARENT})" for name in hit]
        return [IMPORT_TIME] if self.module else None


class Current:
    """The files as they are now: content hashes, from the record's sizes and
    times where they are unchanged, and facts, each read once."""

    def __init__(self, root: Path, record: Record) -> None:
        self.root = root
        self.record = record
        self.digests: dict[str, str | None] = {}
        self.facts: dict[str, SourceFacts | None] = {}

    def digest(self, key: str) -> str | None:
        """The content hash of ``key`` now; None when it is gone."""
        if key not in self.digests:
            self.digests[key] = self._digest(key)
        return self.digests[key]

    def _digest(self, key: str) -> str | None:
        path = self.root / key
        try:
            status = os.stat(path)
        except OSError:
            return None
        known = self.record.stats.get(key)
        if known is not None and known[:2] == [status.st_size, status.st_mtime_ns]:
            return str(known[2])
        try:
            return digest(path.read_bytes())
        except OSError:
            return None

    def facts_of(self, key: str) -> SourceFacts | None:
        if key not in self.facts:
            self.facts[key] = read_facts(self.root / key)
        return self.facts[key]


@dataclasses.dataclass
class Outcome:
    #: For each source, each test it selects.
    per_source: dict[str, dict[str, Found]]
    #: Why each test was selected, by (test, source), for --isolation-explain.
    why: dict[tuple[str, str], str]
    #: Test files with a stale entry, and the file whose change made it so.
    stale: dict[str, str]
    unrecorded: list[str]


class RecordedScope:
    def __init__(
        self,
        project: Project,
        record: Record,
        lines: dict[str, tuple[set[int], set[int]]] | None = None,
    ) -> None:
        self.project = project
        self.record = record
        #: Changed lines of each source now, and the lines after which lines
        #: were deleted (``--isolation-since``); None: not known.
        self.lines = lines
        self.current = Current(project.root, record)
        self._changes: dict[tuple[str, str], Changes] = {}

    def stale(self, sources: list[str]) -> dict[str, str]:
        """Each test file whose entry is stale, with the file that changed."""
        asked = set(sources)
        record, current = self.record, self.current
        entries = [(t, e) for t, e in record.tests.items() if t in self.project.tests]
        used = 0
        for _, entry in entries:
            used |= entry.deps
        changed = 0  # each (file, version) pair once: entries share most of them
        for bit in bits_of(used):
            key, version = record.files[bit]
            if key not in asked and current.digest(key) != version:
                changed |= 1 << bit
        found: dict[str, str] = {}
        for test, entry in entries:
            if test not in asked and current.digest(test) != entry.digest:
                found[test] = test
            elif entry.deps & changed:
                found[test] = min(record.files[bit][0] for bit in bits_of(entry.deps & changed))
        return found

    def changes(self, source: str, seen: str) -> Changes:
        """What changed in ``source`` since the version the record saw (``seen``)."""
        known = self._changes.get((source, seen))
        if known is None:
            known = self._changes[(source, seen)] = self._compare(source, seen)
        return known

    def _compare(self, source: str, seen: str) -> Changes:
        now = self.current.facts_of(source)
        if now is None:
            return Changes(module=True)  # deleted: whoever loaded it
        lines = None if self.lines is None else self.lines.get(source)
        by_lines = _by_lines(now, *lines) if lines is not None else Changes(whole=True)
        if now.digest == seen:  # the record saw this version: git's lines say what changed
            return by_lines
        old = self.record.facts.get(seen)
        if old is None:
            return Changes(whole=True, module=True)
        functions = {
            name for name, mark in old["functions"].items() if now.functions.get(name) != mark
        }
        return Changes(
            functions=frozenset(functions | by_lines.functions),
            module=old["module"] != now.module or by_lines.module,
        )

    def select(self, sources: list[str], stale: dict[str, str]) -> Outcome:
        project = self.project
        per_source: dict[str, dict[str, Found]] = {}
        why: dict[tuple[str, str], str] = {}
        unrecorded = sorted(t for t in project.tests if t not in self.record.tests)
        for source in sources:
            found: dict[str, Found] = {}
            if source in project.tests:
                found[source] = Found(source, source, 0, "changed", (source,))
            for test in unrecorded:
                found.setdefault(test, Found(test, source, 0, UNRECORDED, (test,)))
            for test, entry in self.record.tests.items():
                if test in found or test not in project.tests or test in stale:
                    continue
                hit = None
                seen = self.record.seen(entry, source)
                if seen is not None:
                    inherited = self.record.inherited.get(source, [])
                    hit = self.changes(source, seen).touches(entry, source, inherited)
                if hit is not None:
                    found[test] = Found(test, source, 1, RECORDED, (test, source))
                    why[(test, source)] = ", ".join(hit)
            per_source[source] = found
        return Outcome(per_source, why, stale, unrecorded)


def _by_lines(facts: SourceFacts, lines: set[int], gaps: set[int]) -> Changes:
    """The functions holding changed lines, and whether any is at module
    level; lines deleted after line ``n`` (a gap) changed what holds ``n``
    and what holds ``n + 1`` (module level where that is no function)."""
    names: list[str | None] = [facts.function_at(line) for line in lines]
    for gap in gaps:
        names += [facts.function_at(gap), facts.function_at(gap + 1)]
    if any(facts.in_header(line) for line in (*lines, *gaps)):
        names.append(None)  # a decorator or signature: import-time code
    functions = frozenset(name for name in names if name is not None)
    return Changes(functions=functions, module=None in names)
