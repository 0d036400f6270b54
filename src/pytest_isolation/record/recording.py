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
import fnmatch
import json
import os
import sys
from collections import Counter
from collections.abc import Callable
from collections.abc import Generator
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from typing import Protocol

import pytest

from pytest_isolation.core import outputs
from pytest_isolation.core.keys import FILE_PLACEHOLDER
from pytest_isolation.core.keys import LAST_WORDS
from pytest_isolation.core.keys import PARENT_PHASE
from pytest_isolation.core.keys import RECORDED
from pytest_isolation.core.nodeid import file_of
from pytest_isolation.core.outputs import SCHEMA
from pytest_isolation.core.records import FileAttempts
from pytest_isolation.core.words import counted
from pytest_isolation.core.xdist import is_worker
from pytest_isolation.record.executed import MODULES
from pytest_isolation.record.executed import Recorder
from pytest_isolation.record.executed import how as recording_how
from pytest_isolation.record.executed import watch
from pytest_isolation.record.parentrun import ParentRun
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


class _Facts:
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
    facts: _Facts,
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


def _functions(lines: dict[str, set[int]], facts: _Facts, record: Record) -> dict[str, list[str]]:
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


class ReportHolder(Protocol):
    """The run report (``ci.runreport.RunReport``), which holds this run's
    record too: told when the record grows after the report was written."""

    def record_changed(self) -> None: ...


class RecordKeeper:
    """Collects what each test file executed and writes the record at the
    end of the run (in the parent; an xdist worker's go to the controller).

    What the parent runs outside the files' processes (:mod:`.parentrun`)
    counts for every file: the record is written at the session's end, and
    again after the run's last cleanup when the parent ran more since.
    """

    def __init__(self, config: pytest.Config, report: ReportHolder | None = None) -> None:
        self.config = config
        #: The run report, which holds this run's record too.
        self.report = report
        #: What each test file's process executed, by the file's node id.
        self.executed: dict[str, dict[str, Any]] = {}
        #: Test files a conftest keeps out of collection: they run nothing.
        self.kept_out: set[str] = set()
        #: What the parent(s) ran outside the files' processes.
        self.parent = ParentRun(str(config.rootpath))
        #: File mode: the parent has set up what its children inherit.
        self.ready = False
        self.environment: dict[str, str] = {}
        self.facts: _Facts | None = None
        #: The record as written (this run's entries added), and what the
        #: parent had run by then.
        self.written: Record | None = None
        self.parent_seen: tuple[dict[str, set[int]], set[str]] = ({}, set())
        # The project's code objects, known here once for every child this
        # process forks (the entry plugin does it earlier, when it loads early).
        watch(str(config.rootpath))
        words = config.stash.get(LAST_WORDS, None)
        if words is None:  # loaded late: the cleanups registered before run after
            config.add_cleanup(self.last_words)
        else:
            words.append(self.last_words)

    def pytest_isolation_parent_ready(self) -> None:
        self.end_parent_phase()
        self.ready = True

    def end_parent_phase(self) -> None:
        """What this process ran from the loading of its first conftests
        until now (Python 3.12+, see the entry plugin's
        ``pytest_load_initial_conftests``): each of its children inherits
        what it did (a function the project calls while it is imported runs
        there, once, not in any file's process), so it counts for every
        file, as what the parent runs after it does."""
        recorder = self.config.stash.get(PARENT_PHASE, None)
        if recorder is None:
            return
        del self.config.stash[PARENT_PHASE]
        taken = recorder.hand_over()  # the events stay set for the next recorders
        if not recorder.lost:
            self.parent.add(taken)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
        """File mode: what the parent runs from its first file on (relaying
        the files' reports, the shared fixtures' teardown after the last) is
        every file's; not what a test item that runs in the parent itself
        runs (a non-Python item's)."""
        if not self.ready:
            return (yield)
        if item.stash.get(FILE_PLACEHOLDER, False):
            self.parent.start()  # the origin every child is forked from has been forked
            return (yield)
        with self.parent.left_out():
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_ignore_collect(
        self, collection_path: Path, config: pytest.Config
    ) -> Generator[None, bool | None, bool | None]:
        """A test file a conftest keeps out (``collect_ignore``, a hook) runs
        nothing, whatever changes: its entry depends on the conftests above
        it only, so it is selected when it or one of them changes, not
        always, as a file missing from the record is.  Not for ``--ignore``,
        which is this run's only."""
        ignored = yield
        if ignored and collection_path.suffix == ".py" and self._test_file(collection_path):
            given = config.getoption("ignore", None) or config.getoption("ignore_glob", None)
            root = config.rootpath
            if not given and collection_path.is_relative_to(root):
                conftests = [
                    str(directory / "conftest.py")
                    for directory in (collection_path.parent, *collection_path.parent.parents)
                    if directory.is_relative_to(root) and (directory / "conftest.py").is_file()
                ]
                nodeid = collection_path.relative_to(root).as_posix()
                self.executed[nodeid] = {"how": MODULES, "lines": {}, "modules": conftests}
                self.kept_out.add(nodeid)
        return ignored

    def _test_file(self, path: Path) -> bool:
        patterns = self.config.getini("python_files")
        return path.is_file() and any(fnmatch.fnmatch(path.name, p) for p in patterns)

    def pytest_isolation_file_finished(self, record: FileAttempts, seconds: float) -> None:
        if record.executed is not None:
            self.executed[file_of(record.path)] = record.executed

    def pytest_isolation_workeroutput(self, output: dict[str, Any]) -> None:
        self.end_parent_phase()
        lines, files = self.parent.seen()
        output["executed"] = self.executed
        output["kept_out"] = sorted(self.kept_out)
        output["inherited"] = {path: sorted(found) for path, found in lines.items()}
        output["parent_files"] = sorted(files)

    def pytest_isolation_merge_workeroutput(self, output: dict[str, Any]) -> None:
        self.executed.update(output.get("executed", {}))
        self.kept_out.update(output.get("kept_out", []))
        lines = output.get("inherited", {})
        self.parent.add({"lines": lines, "modules": output.get("parent_files", [])})

    @pytest.hookimpl(tryfirst=True)  # before the run report, which holds this run's record
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.end_parent_phase()  # a run that started no child
        if is_worker(self.config) or not self.executed:
            return
        self.parent.start()  # the rest of the session's end, and after: see last_words
        self.environment = environment()
        self.facts = _Facts(self.config.rootpath, load(getattr(self.config, "cache", None)))
        self._write()

    def last_words(self) -> None:
        """The run's last cleanup, after every plugin's and conftest's
        ``pytest_unconfigure`` and cleanups: what the parent ran since the
        record was written counts too; the record, and the run report that
        holds it, are written again when the parent ran more since."""
        try:
            if self.written is not None and self.parent.seen() != self.parent_seen:
                self._write()
        finally:
            self.parent.end()

    def _write(self) -> None:
        """Write this run's record into pytest's cache, and for the run report."""
        assert self.facts is not None
        root, facts = self.config.rootpath, self.facts
        self.parent_seen = lines, files = self.parent.seen()
        fresh = Record(self.environment, recording_how())
        for nodeid, executed in sorted(self.executed.items()):
            parent = () if nodeid in self.kept_out else files
            add_entry(fresh, nodeid, str(root / nodeid), executed, facts, parent)
        fresh.inherit(_functions(lines, facts, fresh))
        self.config.stash[RECORDED] = fresh.to_json()
        record = self.written or facts.previous  # the cache's, read once
        if record is None or (record.environment, record.how) != (fresh.environment, fresh.how):
            record = Record(fresh.environment, fresh.how)
        record.update(fresh)
        record.prune(lambda key: (root / key).is_file())
        self.written = record
        cache = getattr(self.config, "cache", None)
        if cache is not None:
            cache.set(CACHE_KEY, record.to_json())
        if self.report is not None:
            self.report.record_changed()

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.written is None or terminalreporter.verbosity < 2:
            return
        terminalreporter.write_line(
            f"isolation: recorded what {counted(len(self.executed), 'test file')} executed "
            f"({counted(len(self.written.tests), 'test file')} in the record, "
            f"cache key {CACHE_KEY})"
        )


class PlainRecording:
    """``--isolation-record=on`` in a plain run: what each test file's tests
    execute, between its first test and the next file's (code a higher-scoped
    fixture ran for an earlier file is that file's); what runs after the
    last file's (the session's end) is every file's, as the parent's is in
    file mode."""

    def __init__(self, config: pytest.Config, keeper: RecordKeeper) -> None:
        self.config = config
        self.keeper = keeper
        self.recorder = Recorder(str(config.rootpath))
        self.current: str | None = None
        self.expected: Counter[str] = Counter()
        self.finished: Counter[str] = Counter()
        self.partial: set[str] = set()

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed and report.nodeid:
            self.partial.add(file_of(report.nodeid))

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.partial.update(file_of(item.nodeid) for item in items)

    @pytest.hookimpl(trylast=True)  # after -k, -m, --deselect and sharding
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.expected = Counter(file_of(item.nodeid) for item in session.items)
        self.keeper.end_parent_phase()  # collection imported every test module: each file's
        self.recorder.start()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str) -> None:
        file = file_of(nodeid)
        if file != self.current:
            self._close(self.recorder.restart())
            self.current = file

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        self.finished[file_of(nodeid)] += 1

    @pytest.hookimpl(wrapper=True)  # the last file ends with the loop, before the session
    def pytest_runtestloop(self) -> Generator[None, object, object]:
        try:
            return (yield)
        finally:
            self._close(self.recorder.hand_over())  # its events stay set for the parent's
            self.current = None
            self.keeper.parent.start()  # the session fixtures' teardown: every file's

    def _close(self, executed: dict[str, Any]) -> None:
        file = self.current
        if (
            file is None
            or self.recorder.lost
            or file in self.partial
            or self.finished[file] < self.expected[file]
        ):
            return
        self.keeper.executed[file] = executed
