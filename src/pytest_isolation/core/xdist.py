"""pytest-xdist: which side of it this process is, and the exchange of each
feature's state from the workers to the controller.

A worker's features add what the controller's summaries need to one
dictionary at the end of its session (the ``pytest_isolation_workeroutput``
hook), which xdist carries in ``workeroutput``; the controller hands each
worker's dictionary to the same features (``pytest_isolation_merge_workeroutput``).
"""

from __future__ import annotations

from typing import Any

import pytest

#: Key of the plugin's state in a worker's ``workeroutput``.
OUTPUT_KEY = "isolation"
#: Attribute of a file's first relayed report in file mode: how many tests
#: the file has (the worker counted its placeholder as one).
FILE_TESTS = "isolation_file_tests"


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def is_controller(config: pytest.Config) -> bool:
    """This process hands tests to xdist workers (``-n N`` or ``--tx``)."""
    if is_worker(config) or not config.pluginmanager.has_plugin("xdist"):
        return False
    dist = config.getoption("dist", "no")
    return bool(dist and dist != "no") and not config.getoption("collectonly")


class WorkerOutput:
    """In a worker: collects every feature's state for the controller."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(tryfirst=True)  # inside xdist's wrapper, before it sends workeroutput
    def pytest_sessionfinish(self) -> None:
        output: dict[str, Any] = {}
        self.config.hook.pytest_isolation_workeroutput(config=self.config, output=output)
        self.config.workeroutput[OUTPUT_KEY] = output  # type: ignore[attr-defined]


class ControllerInput:
    """In the controller: hands each worker's state to the features."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook
    def pytest_testnodedown(self, node: Any) -> None:
        output = (getattr(node, "workeroutput", None) or {}).get(OUTPUT_KEY)
        if output:
            self.config.hook.pytest_isolation_merge_workeroutput(config=self.config, output=output)
