"""Loaded into each subprocess of ``--isolation-find-polluter``: records
what the run collected, in order, each test's outcome and the leaks the
guard found, as JSON in the file named by ``PYTEST_ISOLATION_PROBE``.
Given ``PYTEST_ISOLATION_PROBE_UNTIL``, it runs the collected tests only up
to that one (the others are deselected), so that one run both says the
order and runs every test before the victim."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from pytest_isolation.core import names
from pytest_isolation.core.records import Leak

#: How much of a failure's text a probe keeps.
FAILURE_TEXT = 20_000


class Probe:
    def __init__(self, path: str, until: str = "") -> None:
        self.path = path
        self.until = until
        #: Whether the tests run were exactly those up to ``until``.
        self.stopped = False
        self.collected: list[str] = []
        self.outcomes: dict[str, str] = {}
        self.collection_errors: list[str] = []
        self.leaks: list[dict[str, Any]] = []
        #: The failure text of each failed test (what the finder ranks leaks by).
        self.failures: dict[str, str] = {}

    @pytest.hookimpl(optionalhook=True)  # the guard's hook, absent under -p no:isolation
    def pytest_isolation_leak(self, leak: Leak) -> None:
        self.leaks.append(leak.to_wire())

    @pytest.hookimpl(trylast=True)  # the final order, after every plugin's reordering
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected = [item.nodeid for item in session.items]
        if self.until in self.collected:
            keep = self.collected.index(self.until) + 1
            session.config.hook.pytest_deselected(items=session.items[keep:])
            del session.items[keep:]
            self.stopped = True

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collection_errors.append(report.nodeid)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self.outcomes[report.nodeid] = "failed"
            self.failures.setdefault(report.nodeid, report.longreprtext[:FAILURE_TEXT])
        elif report.when == "call" or (report.skipped and report.when == "setup"):
            self.outcomes.setdefault(report.nodeid, report.outcome)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        data = {
            "collected": self.collected,
            "outcomes": self.outcomes,
            "collection_errors": self.collection_errors,
            "leaks": self.leaks,
            "failures": self.failures,
            "stopped": self.stopped,
        }
        with open(self.path, "w", encoding="utf-8") as file:
            json.dump(data, file)


def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get(names.PROBE_ENV)
    if path:
        until = os.environ.get(names.PROBE_UNTIL_ENV, "")
        config.pluginmanager.register(Probe(path, until), names.PROBE)
