"""The plugins that keep the record of what each test file executed
(:mod:`.store`): the parent's keeper, which adds each file's entry and
writes the record into pytest's cache and the run report, and what a plain
run executes."""

from __future__ import annotations

import fnmatch
from collections import Counter
from collections.abc import Generator
from pathlib import Path
from typing import Any
from typing import Protocol

import pytest

from pytest_isolation.core.keys import FILE_PLACEHOLDER
from pytest_isolation.core.keys import LAST_WORDS
from pytest_isolation.core.keys import PARENT_PHASE
from pytest_isolation.core.keys import RECORDED
from pytest_isolation.core.nodeid import file_of
from pytest_isolation.core.records import FileAttempts
from pytest_isolation.core.words import counted
from pytest_isolation.core.xdist import is_worker
from pytest_isolation.record.executed import MODULES
from pytest_isolation.record.executed import Recorder
from pytest_isolation.record.executed import how as recording_how
from pytest_isolation.record.executed import watch
from pytest_isolation.record.parentrun import ParentRun
from pytest_isolation.record.store import CACHE_KEY
from pytest_isolation.record.store import Facts
from pytest_isolation.record.store import Record
from pytest_isolation.record.store import add_entry
from pytest_isolation.record.store import environment
from pytest_isolation.record.store import functions_ran
from pytest_isolation.record.store import load


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
        self.facts: Facts | None = None
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
        self.facts = Facts(self.config.rootpath, load(getattr(self.config, "cache", None)))
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
        fresh.inherit(functions_ran(lines, facts, fresh))
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
