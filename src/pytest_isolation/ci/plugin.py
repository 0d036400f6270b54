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

#: Reruns and known failures, by dest (= ini key).
OUTCOMES = {
    "isolation_retries": Setting(
        "Rerun a failed test file (in test mode, a failed test) in a fresh process, up to N "
        "times; a test that passes on a retry is reported flaky.",
        "N",
        "0",
        number="int",
    ),
    "isolation_retry_scope": Setting.of_choices(
        "What a retry of a file reruns: its failed tests (failed) or the whole file (file).",
        RETRY_SCOPES,
    ),
    "isolation_quarantine": Setting(
        "A file of known failures (node ids, paths, globs): they are reported as "
        "quarantined and do not fail the run.",
        "PATH",
    ),
}

#: Sharding, by dest (= ini key); --isolation-store-durations, an action, has no key.
SHARDING = {
    "isolation_shard": Setting(
        "Run only shard K of N of the test files; auto: the shard the CI job's variables "
        "name (CI_NODE_INDEX/CI_NODE_TOTAL, ...).",
        "K/N|auto",
        unset="no sharding",
    ),
    "isolation_shard_strategy": Setting(
        "How the files are split: by duration (from --isolation-durations), round-robin, "
        "or auto (duration when there are durations).",
        "|".join(STRATEGIES),
        STRATEGIES[0],
    ),
    "isolation_durations": Setting(
        "A committed JSON file of each test file's duration, for sharding by duration.",
        "PATH",
    ),
}

#: The run report, by dest (= ini key).
REPORT = Setting(
    "Write a JSON run report to PATH: each file's outcome, duration and attempts, the "
    "flaky and quarantined tests.",
    "PATH",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    for dest, setting in OUTCOMES.items():
        setting.add(parser, dest)
    for dest, setting in SHARDING.items():
        setting.add(parser, dest)
    add_flag(
        parser,
        "isolation_store_durations",
        "Write this run's test file durations to --isolation-durations (default: "
        "isolation-durations.json in the rootdir).",
    )
    REPORT.add(parser, "isolation_report")


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
