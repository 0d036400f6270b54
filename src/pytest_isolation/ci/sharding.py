"""The sharding hooks: keep only this shard's files, and record each file's
duration for the next split (in pytest's cache, or a file to commit)."""

from __future__ import annotations

import os
from collections import defaultdict

import pytest

from pytest_isolation.ci import split
from pytest_isolation.core import options
from pytest_isolation.core import outputs
from pytest_isolation.core.nodeid import file_of
from pytest_isolation.core.words import counted

DEFAULT_DURATIONS = "isolation-durations.json"


class Sharding:
    """Registered as ``isolation-shard``, and kept under :data:`SHARDING_KEY`, in
    the parent (never in a file-mode child)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        text, source = options.raw(config, "isolation_shard")
        #: Why no shard was chosen although one was asked for (``auto`` outside CI).
        self.whole = ""
        self.shard = split.requested(text, source, os.environ) if text else None
        if text.strip() == "auto" and self.shard is None:
            self.whole = (
                f"isolation: {source}=auto: no CI parallel-job variables set, every test file runs"
            )
        self.strategy = options.choice(config, "isolation_shard_strategy", split.STRATEGIES)
        path, named = options.path(config, "isolation_durations") or (None, "")
        self.durations_file = None if path is None else options.relative(config, path)
        if self.shard is not None and self.strategy == "duration" and path is None:
            asked = options.raw(config, "isolation_shard_strategy")[1]
            raise pytest.UsageError(
                f"{asked}=duration needs --isolation-durations FILE (ini isolation_durations), "
                "one file every job reads (committed): the durations in each job's pytest cache "
                "differ, so the shards would overlap and leave files out"
            )
        store = bool(config.getoption("isolation_store_durations"))
        store_path = self.durations_file or config.rootpath / DEFAULT_DURATIONS
        self.store_target = (
            outputs.checked(store_path, "--isolation-store-durations") if store else None
        )
        #: Why the durations could not be stored at the end, for the summary.
        self.failed: str | None = None
        self.known: dict[str, float] = {}
        # A file to read must exist, unless this run is the one writing it.
        if self.durations_file is not None and (not store or self.durations_file.exists()):
            self.known = split.load_durations(self.durations_file, named)
        cache = getattr(config, "cache", None)
        if not self.known and cache is not None:
            cached = cache.get(split.CACHE_KEY, {})
            if isinstance(cached, dict):
                self.known = {k: float(v) for k, v in cached.items() if isinstance(v, (int, float))}
        self.measured: dict[str, float] = defaultdict(float)
        self.used_strategy = ""
        self.counts = (0, 0)
        #: The digest of the whole split (:func:`.split.digest`), for the run report.
        self.split = ""

    @pytest.hookimpl(trylast=True)  # after -k/-m/--deselect have chosen the tests
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        if self.shard is None:
            return
        files = {file_of(item.nodeid) for item in items}
        shared = self.known if self.durations_file is not None else None  # the file only
        assignment, self.used_strategy = split.assign(
            files, self.shard.total, self.strategy, shared
        )
        self.split = split.digest(assignment, self.shard.total)
        mine = self.shard.index - 1
        kept = [item for item in items if assignment[file_of(item.nodeid)] == mine]
        dropped = [item for item in items if assignment[file_of(item.nodeid)] != mine]
        self.counts = (sum(1 for shard_of in assignment.values() if shard_of == mine), len(files))
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept

    def pytest_report_collectionfinish(self) -> str | None:
        if self.shard is None:
            return self.whole or None
        index, total = self.shard.index, self.shard.total
        mine, files = self.counts
        return (
            f"isolation: shard {index}/{total} ({self.used_strategy}, from {self.shard.source}): "
            f"{mine} of {counted(files, 'test file')}"
        )

    @pytest.hookimpl(optionalhook=True)  # pytest-xdist's, in its controller
    def pytest_xdist_node_collection_finished(self, node: object, ids: list[str]) -> None:
        """Under ``-n`` the controller collects nothing (so it reports no
        collection): each worker makes the split and keeps its shard's tests.
        The header comes from the first worker's: which shard, how many files."""
        if self.shard is None or self.used_strategy:
            return
        strategy = "duration" if self.durations_file is not None else "round-robin"
        self.used_strategy = strategy if self.strategy == "auto" else self.strategy
        mine = len({file_of(nodeid) for nodeid in ids})
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(
                f"isolation: shard {self.shard.index}/{self.shard.total} ({self.used_strategy}, "
                f"from {self.shard.source}): {counted(mine, 'test file')}, split in each worker"
            )

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.measured[file_of(report.nodeid)] += report.duration

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.measured or self.config.option.collectonly:
            return
        merged = {**self.known, **self.measured}
        cache = getattr(self.config, "cache", None)
        if cache is not None:
            cache.set(split.CACHE_KEY, {k: round(v, 4) for k, v in sorted(merged.items())})
        if self.store_target is not None:
            self.failed = split.store_durations(self.store_target, merged)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.failed is not None:
            terminalreporter.write_line(f"isolation: durations not stored: {self.failed}")


SHARDING_KEY = pytest.StashKey[Sharding]()
