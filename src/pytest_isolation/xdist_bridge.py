"""Running under pytest-xdist: file mode in every worker, summaries to the controller.

Each worker collects one placeholder per test file and runs its files in
children of its own, exactly as a single process does; the real tests'
reports travel to the controller through xdist as usual.  What a worker
learns beyond the reports (leaks, each file's attempts and processes,
quarantine and kept directories) goes back in xdist's ``workeroutput`` at
the end and is merged into the controller's summaries.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from typing import Any

import pytest

from pytest_isolation.wire import GUARD_NAME

WORKER_BRIDGE = "isolation-xdist-worker"
CONTROLLER_BRIDGE = "isolation-xdist-controller"
#: Key of the plugin's summary in a worker's ``workeroutput``.
OUTPUT_KEY = "isolation"
#: Attribute of a file's first relayed report: how many tests the file has.
FILE_TESTS = "isolation_file_tests"


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def is_controller(config: pytest.Config) -> bool:
    """This process hands tests to xdist workers (``-n N`` or ``--tx``)."""
    if is_worker(config) or not config.pluginmanager.has_plugin("xdist"):
        return False
    dist = config.getoption("dist", "no")
    return bool(dist and dist != "no") and not config.getoption("collectonly")


def worker_interactor(config: pytest.Config) -> Any:
    """xdist's plugin in a worker that sends reports to the controller.

    Private pytest-xdist detail, unavoidable: it is registered without a name,
    and it asserts that a report's node id is the one of the item it was
    told to run (``session.items[item_index]``), which a file's placeholder
    is not; ``tests/test_xdist.py`` fails loudly if this changes.
    """
    for plugin in config.pluginmanager.get_plugins():
        if type(plugin).__name__ == "WorkerInteractor" and hasattr(plugin, "item_index"):
            return plugin
    return None


class WorkerBridge:
    """Registered in each xdist worker."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        """Let xdist send a file's real tests' reports while it runs the placeholder."""
        interactor = worker_interactor(self.config)
        items = getattr(getattr(interactor, "session", None), "items", None)
        index = getattr(interactor, "item_index", None)
        if items is None or index is None or items[index].nodeid == report.nodeid:
            return (yield)
        from pytest_isolation.placeholder import ChildTest

        placeholder = items[index]
        items[index] = ChildTest.for_nodeid(placeholder.parent, report.nodeid)
        try:
            return (yield)
        finally:
            items[index] = placeholder

    @pytest.hookimpl(tryfirst=True)  # inside xdist's wrapper, before it sends workeroutput
    def pytest_sessionfinish(self) -> None:
        self.config.workeroutput[OUTPUT_KEY] = worker_summary(self.config)  # type: ignore[attr-defined]


def worker_summary(config: pytest.Config) -> dict[str, Any]:
    from pytest_isolation.controller import CONTROLLER_NAME
    from pytest_isolation.fixtures import KEPT_KEY
    from pytest_isolation.quarantine import PLUGIN_NAME as QUARANTINE
    from pytest_isolation.runlog import RUNLOG_KEY

    manager = config.pluginmanager
    guard = manager.get_plugin(GUARD_NAME)
    leaks = (
        [] if guard is None else [leak.to_wire() for v in guard.log.by_owner.values() for leak in v]
    )
    runlog = config.stash.get(RUNLOG_KEY, None)
    files = []
    if runlog is not None:
        for result in runlog.files.values():
            if result.attempts is not None:
                files.append(
                    {"record": dataclasses.asdict(result.attempts), "duration": result.duration}
                )
    quarantine = manager.get_plugin(QUARANTINE)
    controller = manager.get_plugin(CONTROLLER_NAME)
    kept: list[str] = config.stash.get(KEPT_KEY, [])
    return {
        "leaks": leaks,
        "files": files,
        "seen": sorted(quarantine.seen) if quarantine is not None else [],
        "opaque": sorted(quarantine.opaque) if quarantine is not None else [],
        "kept": kept,
        "notfound": list(controller.notfound) if controller is not None else [],
        "start_method": controller.method if controller is not None else None,
    }


class ControllerBridge:
    """Registered in the xdist controller."""

    def __init__(self, config: pytest.Config, file_mode: bool) -> None:
        self.config = config
        self.file_mode = file_mode
        self.session: pytest.Session | None = None
        self.notfound: list[str] = []
        #: How the workers start their children, as the first worker reports it.
        self.start_method: str | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    def pytest_report_header(self) -> str | None:
        if not self.file_mode:
            return None
        return (
            "isolation: file mode under pytest-xdist: each worker runs each of its test files "
            "in a process of its own"
        )

    @pytest.hookimpl(tryfirst=True)  # before the terminal computes progress
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        count = getattr(report, FILE_TESTS, None)
        if isinstance(count, int) and self.session is not None:
            self.session.testscollected += count - 1  # the worker counted the file as one

    def pytest_testnodedown(self, node: Any) -> None:
        output = getattr(node, "workeroutput", None) or {}
        summary = output.get(OUTPUT_KEY)
        if summary:
            merge_summary(self.config, summary, self.notfound)
            self.start_method = self.start_method or summary.get("start_method")

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.notfound:
            session.exitstatus = pytest.ExitCode.USAGE_ERROR

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        for arg in sorted(set(self.notfound)):
            terminalreporter.write_line(f"ERROR: not found: {arg}", red=True)


def merge_summary(config: pytest.Config, summary: dict[str, Any], notfound: list[str]) -> None:
    from pytest_isolation.attempts import FileAttempts
    from pytest_isolation.attempts import ProcessEnd
    from pytest_isolation.attempts import TestAttempts
    from pytest_isolation.fixtures import KEPT_KEY
    from pytest_isolation.quarantine import PLUGIN_NAME as QUARANTINE
    from pytest_isolation.runlog import RUNLOG_KEY

    manager = config.pluginmanager
    guard = manager.get_plugin(GUARD_NAME)
    if guard is not None:
        for fields in summary["leaks"]:
            guard.record(fields)
    runlog = config.stash.get(RUNLOG_KEY, None)
    if runlog is not None:
        for entry in summary["files"]:
            data = entry["record"]
            record = FileAttempts(
                path=data["path"],
                attempts=data["attempts"],
                processes=[ProcessEnd(**p) for p in data["processes"]],
                tests={
                    k: TestAttempts(t["nodeid"], [(n, o) for n, o in t["outcomes"]])
                    for k, t in data["tests"].items()
                },
            )
            runlog.file_ran(record, entry["duration"])
    quarantine = manager.get_plugin(QUARANTINE)
    if quarantine is not None:
        quarantine.seen.update(summary["seen"])
        quarantine.opaque.update(summary["opaque"])
    config.stash.setdefault(KEPT_KEY, []).extend(summary["kept"])
    notfound.extend(summary["notfound"])
