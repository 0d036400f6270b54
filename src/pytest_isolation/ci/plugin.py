"""The CI features' options and ini keys (reruns, known failures, the run
report, shards), and their plugins registered by the entry plugin; each is
imported when it runs.

PYTEST_DONT_REWRITE (see the package's docstring).
"""

from __future__ import annotations

import pytest

from pytest_isolation.ci import quarantine
from pytest_isolation.ci.split import STRATEGIES
from pytest_isolation.core import names
from pytest_isolation.core.keys import QUARANTINE_KEY
from pytest_isolation.core.options import Setting
from pytest_isolation.core.options import add_flag
from pytest_isolation.core.settings import RETRY_SCOPES
from pytest_isolation.core.settings import Settings
from pytest_isolation.core.xdist import is_controller

#: Where a path from an ini key starts (see ``options.path``).
_RELATIVE = "an ini value is relative to the ini file"

RETRY_SCOPE = Setting.of_choices(
    "With --isolation-retries: rerun only a file's failed tests (failed) or the whole file (file).",
    RETRY_SCOPES,
)

#: Sharding, by dest (= ini key); --isolation-store-durations, an action, has no key.
SHARDING = {
    "isolation_shard": Setting(
        "Run only shard K of N (1-based) of the test files; 'auto': the shard "
        "CI_NODE_INDEX/CI_NODE_TOTAL, CIRCLE_NODE_INDEX/CIRCLE_NODE_TOTAL or "
        "BUILDKITE_PARALLEL_JOB/BUILDKITE_PARALLEL_JOB_COUNT name (every file when none is set).",
        "K/N|auto",
        unset="no sharding",
    ),
    "isolation_shard_strategy": Setting(
        "How files are split: duration (balance the durations of --isolation-durations), "
        "round-robin, or auto (duration with --isolation-durations, else round-robin).",
        "|".join(STRATEGIES),
        STRATEGIES[0],
    ),
    "isolation_durations": Setting(
        "A JSON file of each test file's duration (committed: every job reads the same) for "
        f"--isolation-shard to balance; {_RELATIVE}.",
        "PATH",
    ),
}

#: Reruns, known failures and the run report, by dest (= ini key).
OUTCOMES = {
    "isolation_retries": Setting(
        "File mode: run a file whose child failed (failures, errors, crash, timeout) again in a "
        "fresh process, up to N more times; a test that passes on a retry is reported passed "
        "and listed as flaky.",
        "N",
        "0",
    ),
    "isolation_quarantine": Setting(
        "A file of known failures (node ids, paths or globs, '# reason'); they are reported as "
        f"quarantined and do not fail the run; {_RELATIVE}.",
        "PATH",
    ),
    "isolation_report": Setting(
        "Write a JSON run report: each file's outcome, duration, attempts, exit code or signal, "
        f"test and leak counts; flaky and quarantined tests; shard; versions; {_RELATIVE}.",
        "PATH",
    ),
}


def pytest_addoption(parser: pytest.Parser) -> None:
    RETRY_SCOPE.add(parser, "isolation_retry_scope")
    for dest, setting in SHARDING.items():
        setting.add(parser, dest)
    add_flag(
        parser,
        "isolation_store_durations",
        "Write this run's file durations to --isolation-durations (default "
        "isolation-durations.json in the rootdir), to commit.",
    )
    for dest, setting in OUTCOMES.items():
        setting.add(parser, dest)


def register_quarantine(config: pytest.Config) -> None:
    """The quarantine, when a file of known failures is given (in file-mode
    children too: they make the reports)."""
    found = quarantine.from_config(config)
    if found is not None:
        plugin = quarantine.Quarantine(config, *found)
        config.stash[QUARANTINE_KEY] = plugin
        config.pluginmanager.register(plugin, names.QUARANTINE)


def register_run_records(config: pytest.Config, settings: Settings) -> None:
    """The parent's sharding, run report and record of what each file
    executed (never in a file-mode child, which does not import them)."""
    from pytest_isolation.ci.runreport import RunReport
    from pytest_isolation.ci.sharding import SHARDING_KEY
    from pytest_isolation.ci.sharding import Sharding
    from pytest_isolation.record import plugin as record

    sharding = Sharding(config)
    config.stash[SHARDING_KEY] = sharding
    config.pluginmanager.register(sharding, names.SHARDING)
    report = RunReport(config, settings.mode)
    config.pluginmanager.register(report, names.RUN_REPORT)
    record.register(config, settings, report, plain=not is_controller(config))
