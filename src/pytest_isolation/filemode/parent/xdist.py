"""File mode under pytest-xdist: the worker's and the controller's part.

Each worker collects one placeholder per test file and runs its files in
children of its own, exactly as a single process does; the real tests'
reports travel to the controller through xdist as usual.  What the
controller's summaries need beyond them goes back in ``workeroutput``
(:mod:`pytest_isolation.core.xdist`); each part merges its own.
"""

from __future__ import annotations

from collections.abc import Generator
from collections.abc import Sequence
from typing import Any
from typing import cast

import pytest

from pytest_isolation.core import pytest_private
from pytest_isolation.core.keys import START_METHOD
from pytest_isolation.core.xdist import FILE_TESTS
from pytest_isolation.filemode import compat
from pytest_isolation.filemode import lifetime
from pytest_isolation.filemode.parent import progress
from pytest_isolation.filemode.parent.controller import refuse_replaced_loop
from pytest_isolation.filemode.parent.nodeargs import fail_if_not_found
from pytest_isolation.filemode.parent.nodeargs import write_not_found
from pytest_isolation.filemode.parent.nodes import ChildTest
from pytest_isolation.filemode.parent.raised import AT_SESSIONFINISH
from pytest_isolation.filemode.parent.raised import apply_raised_status
from pytest_isolation.filemode.parent.raised import write_raised_status


class WorkerFileMode:
    """Registered in each xdist worker in file mode."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        lifetime.end_with_controller()

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        """Let xdist send a file's real tests' reports while it runs the placeholder."""
        running = pytest_private.worker_running(self.config)
        if running is None:
            return (yield)
        items, index = running
        if items[index].nodeid == report.nodeid:
            return (yield)
        placeholder = items[index]
        file = cast(pytest.Collector, placeholder.parent)  # a placeholder is under its file
        items[index] = ChildTest.for_nodeid(file, report.nodeid)
        try:
            return (yield)
        finally:
            items[index] = placeholder


class ControllerFileMode:
    """Registered in the xdist controller in file mode."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.session: pytest.Session | None = None
        self.notfound: list[str] = []
        #: The exit status a plugin raised at the end of a child's session, and the file's.
        self.status = 0
        self.status_from = ""
        self.status_why = AT_SESSIONFINISH
        self.ending: dict[int, Any] = {}
        self.counts = progress.WorkersFiles()

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session
        refuse_replaced_loop(self.config, self)  # a worker's pytest.exit would read as a crash
        self.ending = lifetime.interrupt_on_ending()  # until the session finishes

    def pytest_report_header(self) -> list[str]:
        return [
            "isolation: file mode under pytest-xdist: each worker runs each of its test files "
            "in a process of its own",
            *compat.notices(self.config),
        ]

    @pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook
    def pytest_xdist_node_collection_finished(self, ids: Sequence[str]) -> None:
        self.counts.collected(ids)

    @pytest.hookimpl(tryfirst=True)  # before the terminal computes progress
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._count(report)
        if self.session is not None:
            self.counts.reported(self.session, report.nodeid)

    @pytest.hookimpl(trylast=True)  # after the terminal showed its percentage
    def pytest_runtest_logfinish(self) -> None:
        if self.session is not None:
            self.counts.displayed(self.session)

    @pytest.hookimpl(tryfirst=True)  # before the terminal counts the error
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self._count(report)

    def _count(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        """A worker said how many tests the report's file has."""
        count = getattr(report, FILE_TESTS, None)
        if isinstance(count, int) and self.session is not None:
            self.counts.correct(self.session, report.nodeid, count)

    def pytest_isolation_merge_workeroutput(self, output: dict[str, Any]) -> None:
        self.notfound.extend(output.get("notfound", ()))
        if not self.status and output.get("status"):
            self.status, self.status_from = int(output["status"]), str(output["status_from"])
            self.status_why = str(output.get("status_why", AT_SESSIONFINISH))
        method = output.get("start_method")
        if method and START_METHOD not in self.config.stash:  # as the first worker reports it
            self.config.stash[START_METHOD] = method

    @pytest.hookimpl(tryfirst=True)  # before the terminal reporter ends the run
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        lifetime.put_back(self.ending)
        fail_if_not_found(session, self.notfound)
        apply_raised_status(session, self.status)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        write_not_found(terminalreporter, sorted(set(self.notfound)))
        write_raised_status(terminalreporter, self.status, self.status_from, self.status_why)
