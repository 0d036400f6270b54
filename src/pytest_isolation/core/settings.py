"""Settings of the plugin, read once from the command line and the ini file."""

from __future__ import annotations

import dataclasses
import enum
import os
import sys
import threading
from typing import get_args

import pytest

from pytest_isolation.core import options
from pytest_isolation.core.kinds import LeakPolicy
from pytest_isolation.core.kinds import LintLevel
from pytest_isolation.core.kinds import Mode
from pytest_isolation.core.kinds import Preload
from pytest_isolation.core.kinds import RecordSetting
from pytest_isolation.core.kinds import RetryScope
from pytest_isolation.core.kinds import Started
from pytest_isolation.core.kinds import StartMethod

MODES: tuple[Mode, ...] = get_args(Mode)
LEAK_POLICIES: tuple[LeakPolicy, ...] = get_args(LeakPolicy)
START_METHODS: tuple[StartMethod, ...] = get_args(StartMethod)
RETRY_SCOPES: tuple[RetryScope, ...] = get_args(RetryScope)
PRELOAD: tuple[Preload, ...] = get_args(Preload)
LINT: tuple[LintLevel, ...] = get_args(LintLevel)
#: Record what each test file executes: in file mode (auto), also in a plain run (on), never (off).
RECORD: tuple[RecordSetting, ...] = get_args(RecordSetting)

#: Sets the run's mode (``file`` or ``off``) between the command line and the ini key.
MODE_ENV = "PYTEST_ISOLATION_MODE"


class ModeSource(enum.Enum):
    """What set the run's mode; each value is how messages name it."""

    OPTION = "--isolation-mode"
    ENV = MODE_ENV
    INI = "isolation_mode (ini)"
    #: An ``isolation_paths`` line or a conftest that puts files in processes
    #: of their own (messages name that setting: :attr:`ModeFrom.text`).
    PLACEMENT = "isolation_paths or a conftest"


@dataclasses.dataclass(frozen=True)
class ModeFrom:
    """Where the run's mode was set: what set it, compared, and its place as
    messages name it."""

    by: ModeSource = ModeSource.INI
    #: The setting that put files in processes of their own, as its placement
    #: names it (``tests/db/conftest.py: isolation_group``); ``PLACEMENT`` only.
    setting: str = ""

    @property
    def text(self) -> str:
        """``--isolation-mode``, ``PYTEST_ISOLATION_MODE``, ``isolation_mode (ini)``
        or the setting."""
        return self.setting if self.by is ModeSource.PLACEMENT else self.by.value


@dataclasses.dataclass(frozen=True)
class Settings:
    """The plugin's settings, read once from the command line and the ini file."""

    # Attributes: one per setting the parts read; a value, not a part with a job.
    mode: Mode = "off"
    #: Where the mode was set: the option, the environment variable, the ini
    #: key, or the setting that puts files in processes of their own.
    mode_from: ModeFrom = ModeFrom()

    @property
    def opted_in(self) -> bool:
        """File mode for the files placed in processes of their own only; the
        other files run together."""
        return self.mode == "file" and self.mode_from.by is ModeSource.PLACEMENT

    start: StartMethod = "auto"
    leaks: LeakPolicy = "warn"
    deep: bool = False
    #: File mode: seconds a file's child may run (None: no limit), and how long
    #: its processes get between SIGTERM and SIGKILL.
    timeout: float | None = None
    kill_grace: float = 10.0
    #: How long one test may run (``--isolation-test-timeout``; a marker's
    #: ``timeout`` is its process's own): in file mode, a test of a file's
    #: process over it ends that process, and the file goes on in a new one.
    test_timeout: float | None = None
    #: File mode: more attempts at a file whose child failed, and what they rerun.
    retries: int = 0
    retry_scope: RetryScope = "failed"
    #: File mode: the fork server imports what the test files import (auto,
    #: opt-in: they share what those imports made) or not (off).
    preload: Preload = "off"
    #: The isolation lint of test files: off, warn or error.
    lint: LintLevel = "off"
    #: Run every test a second time right after the first (``--isolation-twice``).
    twice: bool = False
    #: Record what each test file executes (the selector's ``recorded`` scope).
    record: RecordSetting = "auto"

    #: Whether a record made here can be kept: pytest's cache is on, or a run
    #: report (which holds the run's record) is written.
    record_kept: bool = True

    @property
    def recording(self) -> bool:
        """Whether this run records: file mode unless ``off`` (or, under
        ``auto``, unless nothing could keep the record), a plain run when ``on``."""
        automatic = self.record == "auto" and self.mode == "file" and self.record_kept
        return self.record == "on" or automatic

    @classmethod
    def from_config(cls, config: pytest.Config, run_mode: tuple[Mode, ModeFrom]) -> Settings:
        """The settings of this run; ``run_mode``: the run's mode and where it
        was set (``filemode.placement.run_mode``)."""
        deep = config.getoption("isolation_leaks_deep") or options.boolean(
            config, "isolation_leaks_deep"
        )
        timeout = options.seconds(config, "isolation_timeout")
        test_timeout = options.limit(
            config, "isolation_test_timeout", "seconds", options.MAX_SECONDS
        )
        grace = options.seconds(config, "isolation_kill_grace", maximum=options.MAX_KILL_GRACE)
        mode, mode_from = run_mode
        return cls(
            mode=mode,
            mode_from=mode_from,
            timeout=timeout,
            test_timeout=test_timeout,
            kill_grace=10.0 if grace is None else grace,
            retries=options.count(config, "isolation_retries") or 0,
            # Read in this order: the first bad value is the one reported, as before.
            start=options.choice(config, "isolation_start", START_METHODS),
            leaks=options.choice(config, "isolation_leaks", LEAK_POLICIES),
            retry_scope=options.choice(config, "isolation_retry_scope", RETRY_SCOPES),
            preload=options.choice(config, "isolation_preload", PRELOAD),
            lint=options.choice(config, "isolation_lint", LINT),
            record=options.choice(config, "isolation_record", RECORD),
            deep=bool(deep),
            twice=bool(config.getoption("isolation_twice", False)),
            record_kept=(
                config.pluginmanager.has_plugin("cacheprovider")
                or options.path(config, "isolation_report") is not None
            ),
        )


def resolve_start(
    start: StartMethod, baseline_threads: int = 1, beside: str = ""
) -> tuple[Started, str]:
    """The start method to use and why, for ``auto``: fork on Linux unless
    threads run beyond ``baseline_threads``, the plugins' own idle threads
    (``beside`` names them), which the children never use; with other threads,
    forkserver (children forked from a fresh interpreter without them)."""
    if start != "auto":
        if start == "forkserver" and not hasattr(os, "fork"):
            raise pytest.UsageError(
                f"--isolation-start=forkserver: {sys.platform} cannot fork; use spawn"
            )
        return start, "requested"
    if not hasattr(os, "fork") or sys.platform != "linux":
        return "spawn", f"auto: fork is not the safe default on {sys.platform}"
    if threading.active_count() > baseline_threads:
        return "forkserver", f"auto: {THREADS_RUNNING}"
    return "fork", f"auto, {beside}" if beside else "auto"


#: Why ``auto`` does not fork the parent itself.
THREADS_RUNNING = (
    "other threads are running in this process, so each file's child is forked "
    "from a fresh interpreter instead"
)


def plugin_threads(config: pytest.Config, in_xdist_worker: bool) -> tuple[int, str]:
    """Threads that plugins start at configuration and that sit idle while
    tests run, and a phrase naming them: pytest-xdist's I/O thread in a
    worker, pytest-rerunfailures' status server (started whenever
    pytest-xdist is installed)."""
    if in_xdist_worker:
        return threading.active_count() - 1, "in a pytest-xdist worker"
    database = getattr(config, "failures_db", None)
    if type(database).__name__ == "ServerStatusDB":
        return 1, "beside pytest-rerunfailures' status-server thread"
    return 0, ""
