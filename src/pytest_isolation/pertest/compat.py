"""Plugins whose results a test's own process would lose.

A test's process ends with ``os._exit`` after its test: what a plugin keeps
in memory for the end of the session (pytest-benchmark's measurements,
syrupy's snapshots to write and the snapshots used) stays in it.  As file
mode does, test mode turns off what can be done without
(``--benchmark-disable``, ``--snapshot-disable-unused``) before the plugins
read their options, and refuses what the command line asks for that would
be lost; a test marked ``isolation_process`` in another mode is checked when
it is collected.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence

import pytest

from pytest_isolation.filemode import compat


def before_configure(config: pytest.Config) -> None:
    """Test mode: turn off, before the plugins read their options, what
    every test's own process would lose, as file mode does."""
    compat.turn_off_benchmarks(config)
    compat.turn_off_unused_snapshots(config)


def check_compatible(config: pytest.Config) -> None:
    """Test mode: refuse what the command line asks for that would be lost."""
    asked = compat.benchmark_results_asked(config)
    if asked and compat.benchmarks_run(config):
        raise pytest.UsageError(
            "--isolation-mode=test cannot combine pytest-benchmark's results "
            f"({', '.join(asked)}): each test's process would measure and keep its own; "
            "run benchmarks without --isolation-mode=test"
        )
    if config.getoption("update_snapshots", False):
        raise pytest.UsageError(
            "--isolation-mode=test cannot combine syrupy's --snapshot-update: syrupy writes "
            "snapshots at the session's end, which a test's own process never reaches; "
            "update snapshots without --isolation-mode=test"
        )


def notices(config: pytest.Config) -> list[str]:
    """The header's lines about the plugins test mode narrowed."""
    found = []
    if config.stash.get(compat.BENCHMARKS_OFF, False):
        found.append(
            "isolation: pytest-benchmark: benchmarks run once, unmeasured "
            "(--benchmark-disable): each test runs in a process of its own"
        )
    if config.stash.get(compat.UNUSED_SNAPSHOTS_OFF, False):
        found.append(
            "isolation: syrupy: unused snapshots are not looked for (--snapshot-disable-unused): "
            "each test uses its snapshots in a process of its own"
        )
    return found


def check_chosen(
    config: pytest.Config, items: Sequence[pytest.Item], alone: Callable[[pytest.Item], bool]
) -> str | None:
    """Tests in processes of their own, in any mode: refuse one that uses
    what it would lose (a benchmark, an update of snapshots); turn off
    syrupy's unused-snapshot check when one uses snapshots, and say so
    (the line returned)."""
    benchmarks = compat.benchmarks_run(config)
    updating = bool(config.getoption("update_snapshots", False))
    checking_unused = not config.getoption("disable_unused_snapshots", True)
    snapshots = False
    for item in items:
        names = getattr(item, "fixturenames", ())
        if not ({"benchmark", "snapshot"} & set(names)) or not alone(item):
            continue
        if "benchmark" in names and benchmarks:
            raise pytest.UsageError(
                f"{item.nodeid} runs in a process of its own and uses pytest-benchmark's "
                "benchmark fixture, whose measurement would stay in that process; run it "
                "in place, or with --benchmark-disable"
            )
        if "snapshot" in names and updating:
            raise pytest.UsageError(
                f"{item.nodeid} runs in a process of its own and uses syrupy's snapshot: "
                "--snapshot-update writes snapshots at the session's end, which that process "
                "never reaches; update snapshots without a process of its own"
            )
        snapshots = snapshots or "snapshot" in names
    if snapshots and checking_unused:
        config.option.disable_unused_snapshots = True  # syrupy reads it at the session's end
        return (
            "isolation: syrupy: unused snapshots are not looked for (--snapshot-disable-unused): "
            "tests in processes of their own use their snapshots there"
        )
    return None
