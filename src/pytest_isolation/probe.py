"""Loaded into each subprocess of ``--isolation-find-polluter``: records
what the run collected, in order, each test's outcome and the leaks the
guard found, as JSON in the file named by ``PYTEST_ISOLATION_PROBE``."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

ENV = "PYTEST_ISOLATION_PROBE"
GUARD_NAME = "isolation-guard"


class Probe:
    def __init__(self, config: pytest.Config, path: str) -> None:
        self.path = path
        self.collected: list[str] = []
        self.outcomes: dict[str, str] = {}
        self.collection_errors: list[str] = []
        self.leaks: list[dict[str, Any]] = []
        guard = config.pluginmanager.get_plugin(GUARD_NAME)
        if guard is not None:
            guard.log.listeners.append(lambda leak: self.leaks.append(leak.to_wire()))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected = [item.nodeid for item in session.items]

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collection_errors.append(report.nodeid)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self.outcomes[report.nodeid] = "failed"
        elif report.when == "call" or (report.skipped and report.when == "setup"):
            self.outcomes.setdefault(report.nodeid, report.outcome)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        data = {
            "collected": self.collected,
            "outcomes": self.outcomes,
            "collection_errors": self.collection_errors,
            "leaks": self.leaks,
        }
        with open(self.path, "w", encoding="utf-8") as file:
            json.dump(data, file)


@pytest.hookimpl(trylast=True)  # after the isolation plugin registered its guard
def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get(ENV)
    if path:
        config.pluginmanager.register(Probe(config, path), "isolation-probe")
