"""The record of what each test file executed: kept in pytest's cache and
the run report, read by the selector's ``recorded`` scope.

Per test file it holds the content hash of the test file, of every project
file whose code the file's tests ran or whose module was loaded (its
*dependencies*), and which functions of each ran.  A file's entry is
written only when all of its tests ran (no ``-k``/``-m``/``--deselect``,
no ``path::name``, no ``-x`` stop, no crash, no failed collection).  The
entry of a file that did not run this time stays as it was.  What the
parent process ran outside the files' processes (:mod:`.parentrun`) counts
for each file of its run.

Facts of each dependency's version (function fingerprints, see
:mod:`.sourcefacts`) are kept by content hash, so the selector can tell
which functions a change touched without the old source.

The record is valid for one Python (implementation and minor version)
and one set of installed distributions (:func:`environment`); recording
under another replaces it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Callable
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from pytest_isolation.core import outputs
from pytest_isolation.core.outputs import SCHEMA
from pytest_isolation.record.executed import MODULES
from pytest_isolation.record.sourcefacts import SourceFacts
from pytest_isolation.record.sourcefacts import digest
from pytest_isolation.record.sourcefacts import read_facts

#: Where pytest's cache keeps the record.
CACHE_KEY = "isolation/recorded"
#: Version of the record's layout (3: what the parent ran counts for every
#: entry; a record made before may miss what it ran after its first child).
RECORD_VERSION = 3
#: Every function of the file counts as run (a record made by modules loaded).
EVERY = "*"


def environment() -> dict[str, str]:
    """What a record is valid for: the Python, and the installed
    distributions (the names of their metadata directories: name and version)."""
    found: list[str] = []
    for entry in dict.fromkeys(sys.path):
        if os.path.basename(entry) not in {"site-packages", "dist-packages"}:
            continue
        try:
            names = os.listdir(entry)
        except OSError:
            continue
        found += [n for n in names if n.endswith((".dist-info", ".egg-info"))]
    version = sys.version_info
    return {
        "python": f"{sys.implementation.name} {version.major}.{version.minor}",
        "packages": digest("\n".join(sorted(found)).encode())[:16],
    }


def bits_of(mask: int) -> list[int]:
    """The indexes of the bits set in ``mask``, lowest first."""
    return [index for index, bit in enumerate(reversed(f"{mask:b}")) if bit == "1"]


@dataclasses.dataclass
class Entry:
    """What one test file's tests executed."""

    #: The test file's content hash when it was recorded.
    digest: str
    #: Its dependencies: bit ``i`` is set for the record's ``files[i]`` (a
    #: file, by key, and its content hash then).  Test files share most of
    #: their dependencies: each pair is stored once, an entry holds a bit.
    deps: int
    #: The functions of each dependency that ran, by key ([``*``]: all).
    ran: dict[str, list[str]]
    #: Every function of every dependency counts as run (a record of modules loaded).
    every: bool = False

    def ran_in(self, key: str) -> list[str]:
        return [EVERY] if self.every else self.ran.get(key, [])

    def to_json(self) -> dict[str, Any]:
        ran: object = EVERY if self.every else self.ran
        return {"digest": self.digest, "deps": f"{self.deps:x}", "ran": ran}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Entry:
        ran = data["ran"]
        every = ran == EVERY
        if not every and not isinstance(ran, dict):
            raise TypeError(ran)
        return cls(str(data["digest"]), int(data["deps"], 16), {} if every else ran, every)


@dataclasses.dataclass
class Record:
    environment: dict[str, str]
    #: How it was made: ``monitoring`` (functions seen to start) or ``modules``.
    how: str
    tests: dict[str, Entry] = dataclasses.field(default_factory=dict)
    #: Each (dependency, content hash) pair an entry holds, once.
    files: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    #: Facts of each dependency version, by content hash.
    facts: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    #: ``[size, mtime_ns, content hash]`` of each dependency and test file when
    #: last recorded, so a selection hashes only the files whose size or time changed.
    stats: dict[str, list[Any]] = dataclasses.field(default_factory=dict)
    #: The functions of each file that ran in the parent, outside the test
    #: files' processes (its conftests' imports and hooks, the shared
    #: fixtures, the session's end, unconfigure): each counts as run by every
    #: test file that depends on its file, which every entry of the run does.
    inherited: dict[str, list[str]] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        self._bit = {pair: index for index, pair in enumerate(self.files)}
        self._versions: dict[str, list[tuple[str, int]]] | None = None

    def add(
        self,
        test: str,
        entry_digest: str,
        deps: dict[str, str],
        ran: dict[str, list[str]],
        every: bool = False,
    ) -> None:
        """The entry of ``test``, with its dependencies by key."""
        mask = 0
        for pair in sorted(deps.items()):
            bit = self._bit.get(pair)
            if bit is None:
                bit = self._bit[pair] = len(self.files)
                self.files.append(pair)
                self._versions = None
            mask |= 1 << bit
        self.tests[test] = Entry(entry_digest, mask, dict(sorted(ran.items())), every)

    def deps(self, entry: Entry) -> dict[str, str]:
        """``entry``'s dependencies: the content hash of each, by key."""
        return dict(sorted(self.files[bit] for bit in bits_of(entry.deps)))

    def versions(self, key: str) -> list[tuple[str, int]]:
        """Each version of ``key`` an entry holds: its content hash and bit."""
        if self._versions is None:
            self._versions = {}
            for bit, (each, version) in enumerate(self.files):
                self._versions.setdefault(each, []).append((version, bit))
        return self._versions.get(key, [])

    def seen(self, entry: Entry, key: str) -> str | None:
        """The content hash of ``key`` that ``entry`` recorded; None when it
        does not depend on ``key``."""
        for version, bit in self.versions(key):
            if entry.deps >> bit & 1:
                return version
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "version": RECORD_VERSION,
            "environment": self.environment,
            "how": self.how,
            "files": [list(pair) for pair in self.files],
            "tests": {key: entry.to_json() for key, entry in sorted(self.tests.items())},
            "facts": self.facts,
            "stats": self.stats,
            "inherited": self.inherited,
        }

    @classmethod
    def from_json(cls, data: object) -> Record | None:
        """The record in ``data``; None when it is not one this version reads."""
        if not isinstance(data, dict) or data.get("version") != RECORD_VERSION:
            return None
        try:
            files = [(str(key), str(version)) for key, version in data["files"]]
            tests = {key: Entry.from_json(value) for key, value in data["tests"].items()}
            if any(entry.deps.bit_length() > len(files) for entry in tests.values()):
                return None
            stats = {str(key): _stat_of(value) for key, value in data["stats"].items()}
            return cls(
                environment=dict(data["environment"]),
                how=str(data["how"]),
                tests=tests,
                files=files,
                facts=dict(data["facts"]),
                stats=stats,
                inherited={key: list(names) for key, names in data["inherited"].items()},
            )
        except (KeyError, TypeError, AttributeError, ValueError):
            return None

    def update(self, other: Record) -> None:
        """Take ``other``'s entries (its own win), facts and stats."""
        for test, entry in other.tests.items():
            self.add(test, entry.digest, other.deps(entry), entry.ran, entry.every)
        self.facts.update(other.facts)
        self.stats.update(other.stats)
        self.inherit(other.inherited)

    def inherit(self, functions: dict[str, list[str]]) -> None:
        """Add the functions of each file that ran in a parent (a union: what
        one run's parent did, the next one's most likely does too)."""
        for key, names in functions.items():
            self.inherited[key] = sorted(set(self.inherited.get(key, ())) | set(names))

    def prune(self, exists: Callable[[str], bool]) -> None:
        """Drop the entries of test files gone, and the pairs, facts and
        stats no entry refers to."""
        kept = {
            test: (entry, self.deps(entry)) for test, entry in self.tests.items() if exists(test)
        }
        self.tests, self.files, self._bit, self._versions = {}, [], {}, None
        for test, (entry, deps) in sorted(kept.items()):
            self.add(test, entry.digest, deps, entry.ran, entry.every)
        used = {version for _, version in self.files}
        self.facts = {key: value for key, value in self.facts.items() if key in used}
        keys = {key for key, _ in self.files} | set(self.tests)
        self.stats = {key: value for key, value in self.stats.items() if key in keys}
        self.inherited = {key: names for key, names in self.inherited.items() if key in keys}


def _stat_of(value: object) -> list[Any]:
    """``[size, mtime_ns, content hash]``, checked (a record read from disk)."""
    if not isinstance(value, list) or len(value) != 3:
        raise TypeError(value)
    size, mtime, version = value
    if not (isinstance(size, int) and isinstance(mtime, int) and isinstance(version, str)):
        raise TypeError(value)
    return [size, mtime, version]


def load(cache: pytest.Cache | None) -> Record | None:
    return None if cache is None else Record.from_json(cache.get(CACHE_KEY, None))


def from_report(path: Path, option: str) -> Record | None:
    """The record in the run report at ``path`` (None when it holds none);
    a file that is not a readable JSON run report is a usage error naming it."""
    try:
        document = json.loads(outputs.read_input(path))
    except OSError as error:
        raise pytest.UsageError(
            f"{option}: {str(path)!r}: cannot read it: {error.strerror}"
        ) from None
    except ValueError as error:
        raise pytest.UsageError(f"{option}: {str(path)!r}: not JSON: {error}") from None
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        raise pytest.UsageError(f"{option}: {str(path)!r}: not a pytest-isolation run report")
    return Record.from_json(document.get("recorded"))


class Facts:
    """Each file's facts, read once per session; a file whose size and time
    are those the previous record kept takes that record's facts of its
    version, without reading or parsing it again."""

    def __init__(self, root: Path, previous: Record | None = None) -> None:
        self.root = root
        self.previous = previous
        self.known: dict[str, tuple[str, SourceFacts] | None] = {}

    def __call__(self, path: str) -> tuple[str, SourceFacts] | None:
        if path not in self.known:
            key = os.path.relpath(path, self.root).replace(os.sep, "/")
            facts = None
            if not key.startswith("../"):
                facts = self._kept(key, path) or read_facts(Path(path))
            self.known[path] = None if facts is None else (key, facts)
        return self.known[path]

    def version(self, path: str) -> tuple[str, str] | None:
        """The key and content hash of ``path`` (a test file, whose
        functions the record does not need): the previous record's, when
        its size and time are those it kept; else read, not parsed."""
        known = self.known.get(path)
        if known is not None:
            return known[0], known[1].digest
        key = os.path.relpath(path, self.root).replace(os.sep, "/")
        if key.startswith("../"):
            return None
        kept = self._kept_version(key, path)
        if kept is not None:
            return key, kept
        try:
            return key, digest(Path(path).read_bytes())
        except OSError:
            return None

    def _kept_version(self, key: str, path: str) -> str | None:
        """The content hash the previous record kept for ``path``, if its
        size and time are unchanged since."""
        if self.previous is None or key not in self.previous.stats:
            return None
        size, mtime, version = self.previous.stats[key]
        try:
            status = os.stat(path)
        except OSError:
            return None
        return str(version) if [status.st_size, status.st_mtime_ns] == [size, mtime] else None

    def _kept(self, key: str, path: str) -> SourceFacts | None:
        version = self._kept_version(key, path)
        if version is None or self.previous is None:
            return None
        return SourceFacts.from_json(version, self.previous.facts.get(version))


def add_entry(
    record: Record,
    nodeid: str,
    test: str,
    executed: dict[str, Any],
    facts: Facts,
    parent: Iterable[str] = (),
) -> None:
    """The entry of the test file ``test`` (an absolute path) from what its
    process executed, with its dependencies' facts and stats, into ``record``;
    ``parent``: the files the parent ran or loaded, a dependency of each file."""
    own = facts.version(test)
    if own is None:
        return
    deps: dict[str, str] = {}
    ran: dict[str, list[str]] = {}

    def depend(path: str) -> tuple[str, SourceFacts] | None:
        found = None if path == test else facts(path)
        if found is None:
            return None
        key, source = found
        deps[key] = source.digest
        if source.digest not in record.facts:  # the same for every test file that ran it
            record.facts[source.digest] = source.to_json()
        if key not in record.stats:
            _stat(record, key, path, source.digest)
        return found

    for path, lines in executed["lines"].items():
        found = depend(path)
        if found is not None:
            names = {name for line in lines if (name := found[1].function_at(line))}
            if names:
                ran[found[0]] = sorted(names)
    for path in (*executed["modules"], *parent):
        depend(path)
    _stat(record, own[0], test, own[1])
    record.add(nodeid, own[1], deps, ran, every=executed["how"] == MODULES)


def functions_ran(lines: dict[str, set[int]], facts: Facts, record: Record) -> dict[str, list[str]]:
    """The functions whose first lines are ``lines``, by key: only of the
    files an entry of ``record`` depends on (the others no test file loaded)."""
    keys = {key for key, _ in record.files}
    found: dict[str, list[str]] = {}
    for path, first in sorted(lines.items()):
        known = facts(path)
        if known is None or known[0] not in keys:
            continue
        names = {name for line in first if (name := known[1].function_at(line))}
        if names:
            found[known[0]] = sorted(names)
    return found


def _stat(record: Record, key: str, path: str, version: str) -> None:
    try:
        status = os.stat(path)
    except OSError:
        return
    record.stats[key] = [status.st_size, status.st_mtime_ns, version]
