"""The forking process's part of a test that runs in a process of its own:
set up what the test shares with others before the fork, tear it down after.

Before the fork: the test's collectors (``setup_module``, ``setup_class``)
and its fixtures above function scope, in the order pytest's own set-up
takes them (higher scopes first), under the same capture as the test's
set-up: what they print stays in the capture for the test's process to
read as its set-up's output, and their log records are handed to it
(:class:`SetUpLogs`).  After the test's process ended: what the next test
does not share, torn down here as pytest's runner would, its output and
any error merged into the test's teardown report (:func:`merged_teardown`).

A test whose set-up would run no fixture (a ``skip`` mark, ``xfail(run=False)``)
is not forked: pytest runs it here, as in a plain run, and so does a test
whose shared set-up failed (pytest raises the kept error again, before any
function-scoped fixture).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import pytest

from pytest_isolation.core import pytest_private
from pytest_isolation.filemode.logs import log_level

#: What pytest's set-up raises for a test's outcome (its ``TEST_OUTCOME``).
SET_UP_FAILED = (Exception, pytest.skip.Exception, pytest.fail.Exception)


def runs_code(item: pytest.Item) -> bool:
    """Whether pytest's set-up of ``item`` would set up anything: not when a
    mark skips it or keeps it from running (evaluated as pytest does; a
    condition that raises is pytest's to report, here)."""
    try:
        return not (
            pytest_private.skip_marks_apply(item) or pytest_private.xfail_mark_stops_run(item)
        )
    except SET_UP_FAILED:
        return False


class SetUpLogs(logging.Handler):
    """The log records of the shared set-up, kept for the test's process,
    which hands them to pytest's handlers of its set-up phase."""

    def __init__(self, config: pytest.Config) -> None:
        super().__init__(level=log_level(config) or logging.NOTSET)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    @contextlib.contextmanager
    def listening(self) -> Iterator[None]:
        root = logging.getLogger()
        level = root.level
        if self.level and self.level < level:
            root.setLevel(self.level)
        root.addHandler(self)
        try:
            yield
        finally:
            root.removeHandler(self)
            root.setLevel(level)

    def replay(self, config: pytest.Config) -> None:
        """In the test's process, in its set-up: to the handlers pytest has
        on the root logger for this phase (the report's and ``caplog``'s)."""
        handlers = pytest_private.phase_log_handlers(config)
        for record in self.records:
            for handler in handlers:
                if record.levelno >= handler.level:
                    handler.handle(record)


def set_up_shared(item: pytest.Item, logs: SetUpLogs) -> None:
    """Set up ``item``'s collectors and its fixtures above function scope,
    here, under the set-up's capture; raises what the set-up raised."""
    # What the set-up prints stays in the capture: the test's set-up reads it.
    with pytest_private.capturing(item.config, read=False), logs.listening():
        if item.parent is not None:
            pytest_private.set_up_collectors(item.session, item.parent)
        if isinstance(item, pytest.Function):
            _set_up_fixtures(item)


def _set_up_fixtures(item: pytest.Function) -> None:
    """The fixtures above function scope, with the test active on pytest's
    set-up stack (as during its set-up) but not set up: the test's process
    sets it up, and its function-scoped fixtures."""
    pytest_private.renew_request(item)
    request = pytest_private.item_request(item)
    definitions = pytest_private.fixture_definitions(item)
    pushed = pytest_private.push_nodes(item.session, [item])
    try:
        for name in item.fixturenames:  # higher scopes first, as pytest sorts them
            found = definitions.get(name)
            if found and found[-1].scope != "function":
                request.getfixturevalue(name)
    finally:
        pytest_private.pop_nodes(item.session, pushed)  # nothing registered on the test itself


def tear_down_between(item: pytest.Item, nextitem: pytest.Item | None) -> pytest.TestReport | None:
    """Tear down here what ``nextitem`` does not share, as pytest's runner
    does after ``item``'s teardown; its report (``None``: nothing to tear
    down).  Its captured output is its only section."""
    session = item.session
    if not pytest_private.needs_teardown(session, nextitem):
        return None
    with pytest_private.capturing(item.config) as captured:
        call = pytest.CallInfo.from_call(
            lambda: pytest_private.teardown_exact(session, nextitem), when="teardown"
        )
    out, err = captured or ("", "")
    # The plugins made the test's teardown report in its process; one that
    # passed here only adds its output to it.  A failure is pytest's own
    # report (an ``xfail`` mark applies): the plugins' implementations did
    # not see the test's earlier phases in this process.
    report = (
        pytest.TestReport.from_item_and_call(item, call)
        if call.excinfo is None
        else pytest_private.pytest_s_own_makereport(item, call)
    )
    report.sections = [
        (f"Captured {name} teardown", text)
        for name, text in (("stdout", out), ("stderr", err))
        if text
    ]
    return report


def merged_teardown(
    report: pytest.TestReport | None, here: pytest.TestReport | None
) -> pytest.TestReport | None:
    """The test's teardown report from its process, with the teardown done
    here (``here``): its sections added, and its failure where the test's
    own teardown passed."""
    if here is None or report is None:
        return report if here is None else here
    for title, content in here.sections:
        _add_section(report, title, content)
    report.duration += here.duration
    if report.passed and not here.passed:  # failed, or an xfail mark's "xfailed"
        report.outcome = here.outcome
        report.longrepr = here.longrepr
        if hasattr(here, "wasxfail"):
            report.wasxfail = here.wasxfail
    return report


def _add_section(report: pytest.TestReport, title: str, content: str) -> None:
    for index, (existing, text) in enumerate(report.sections):
        if existing == title:
            report.sections[index] = (title, f"{text}{content}")
            return
    report.sections.append((title, content))
