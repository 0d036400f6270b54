"""The plugin that runs the chosen tests each in a process of its own, in
whichever process runs the tests: the run's, an xdist worker's or a file's
process in file mode (never file mode's parent, whose items stand for
files)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Generator
from typing import IO
from typing import Any

import pytest

from pytest_isolation.core import pytest_private
from pytest_isolation.core.keys import FILE_PLACEHOLDER
from pytest_isolation.core.keys import GUARD_KEY
from pytest_isolation.core.keys import IN_OWN_PROCESS
from pytest_isolation.core.records import TestAttempts
from pytest_isolation.filemode.wire import TIMER
from pytest_isolation.filemode.wire import Sender
from pytest_isolation.pertest import compat
from pytest_isolation.pertest import scoped
from pytest_isolation.pertest import testchild
from pytest_isolation.pertest.chosen import Chooser
from pytest_isolation.pertest.limits import Limits
from pytest_isolation.pertest.running import TestRun
from pytest_isolation.pertest.running import dump_file
from pytest_isolation.pertest.scoped import SetUpLogs


def _note(attempts: TestAttempts, report: pytest.TestReport) -> None:
    """A retried test's report says how its attempts went, as file mode's do
    (and, for the run report, as data)."""
    if attempts.retried:
        report.isolation_attempts = [list(pair) for pair in attempts.outcomes]  # type: ignore[attr-defined]
    if attempts.flaky:
        report.user_properties.append(("isolation_flaky", attempts.describe()))
    elif attempts.retried and report.failed:
        report.sections.append(("isolation: attempts", attempts.describe()))


class TestProcesses:
    """Runs each chosen test in a process of its own (``pytest_runtest_protocol``)."""

    __test__ = False  # not a test class, whatever pytest's python_classes say

    def __init__(self, config: pytest.Config, chooser: Chooser, retries: int = 0) -> None:
        self.config = config
        self.chooser = chooser
        #: ``--isolation-retries`` in test mode: more attempts at a failed test.
        self.retries = retries
        #: In a test's own process: its pipe to the forking process (this
        #: plugin then steps aside: pytest runs the test here).
        self.sender: Sender | None = None
        self.logs: SetUpLogs | None = None
        self._dumps: IO[bytes] | None = None
        #: What a test in a process of its own made this run turn off in
        #: another plugin, said after the collection (:mod:`.compat`).
        self.narrowed: str | None = None
        #: pytest-timeout's settings of a test about to be forked, by node id.
        self.timer_settings: dict[str, Any] = {}

    @pytest.hookimpl(tryfirst=True)  # instead of pytest's runner, for the chosen tests
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> bool | None:
        if self.sender is not None or item.stash.get(FILE_PLACEHOLDER, False):
            return None
        limits = self.chooser.limits_of(item)
        option = self.config.option
        if limits is None or getattr(option, "setupplan", False) or not scoped.runs_code(item):
            return None  # pytest runs it here
        logs = SetUpLogs(self.config)
        try:
            scoped.set_up_shared(item, logs)
        except scoped.SET_UP_FAILED:
            if isinstance(item, pytest.Function):  # a fresh request: pytest 8.0's kept
                pytest_private.release_request(item)  # the failed lookup's place in it
            return None  # pytest runs it here, and raises the kept error again
        ihook = item.ihook
        self.config.stash[IN_OWN_PROCESS] = True  # file mode's parent leaves its time to it
        try:
            ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        finally:
            self.config.stash[IN_OWN_PROCESS] = False
        run = self._attempts(item, limits, logs)  # Ctrl-C: the session tears down, as pytest's
        if run is None:  # the test's process: pytest's runner runs the test from here, as deep
            return None  # in the stack as in a plain run; the outermost wrapper ends it
        self._finish(item, nextitem, run)
        return True

    def _finish(self, item: pytest.Item, nextitem: pytest.Item | None, run: TestRun) -> None:
        """After the test's process: tear down here what ``nextitem`` does not
        share, with the test's teardown report, as pytest's runner would end
        the test; a Ctrl-C or ``pytest.exit()`` in the test ends the run."""
        ihook = item.ihook
        teardown = scoped.merged_teardown(run.teardown, scoped.tear_down_between(item, nextitem))
        if teardown is not None:
            teardown.isolation_process = run.figures()  # type: ignore[attr-defined]
            ihook.pytest_runtest_logreport(report=teardown)
        ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        self.timer_settings.pop(str(item.nodeid), None)
        if isinstance(item, pytest.Function):
            pytest_private.release_request(item)
            item.funcargs = None  # type: ignore[assignment]
        if run.interrupted is not None:
            reason, returncode = run.interrupted
            if reason is None:
                raise KeyboardInterrupt
            pytest.exit(reason, returncode)

    def _attempts(self, item: pytest.Item, limits: Limits, logs: SetUpLogs) -> TestRun | None:
        """Run the test's process, and again while it fails and retries are
        left; log the reports of the last attempt, noted as a retry's are.
        None in the test's process."""
        attempts = TestAttempts(str(item.nodeid))
        while True:
            number = len(attempts.outcomes) + 1
            run = TestRun(item, limits, self._dump_file(), hold=self.retries > 0)
            guard = self.config.stash.get(GUARD_KEY, None)
            if guard is not None:
                guard.before_fork()
            if run.fork(lambda sender: self._enter(item, sender, logs)):
                return None
            run.wait()
            attempts.outcomes.append((number, run.outcome()))
            if not run.failed or number > self.retries or run.interrupted is not None:
                break
        run.release(functools.partial(_note, attempts))
        return run

    @pytest.hookimpl(trylast=True)  # the items as they will run
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.narrowed = compat.check_chosen(self.config, items, self._forks)

    def pytest_report_collectionfinish(self) -> list[str]:
        return [self.narrowed] if self.narrowed else []

    def _enter(self, item: pytest.Item, sender: Sender, logs: SetUpLogs) -> None:
        """In the test's process: step aside, keep the pipe and the set-up's
        logs, and arm pytest-timeout's timer, declined in the forking process."""
        self.sender = sender
        self.logs = logs
        settings = self.timer_settings.pop(str(item.nodeid), None)
        if settings is not None:
            self.config.hook.pytest_timeout_set_timer(item=item, settings=settings)

    # pytest takes only methods named pytest_* for hooks: this one is a second
    # implementation of pytest_runtest_protocol.
    @pytest.hookimpl(wrapper=True, tryfirst=True, specname="pytest_runtest_protocol")
    def pytest_isolation_end_test_process(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, object, object]:
        """Outermost: in a test's own process, once every plugin's part of
        the test's protocol is over, end the process (it never returns
        into pytest's loop)."""
        try:
            result = yield
        except BaseException as error:
            if self.sender is not None:
                testchild.end(self.sender, error)
            raise
        if self.sender is not None:
            testchild.end(self.sender, None)
        return result

    @pytest.hookimpl(tryfirst=True)  # inside pytest's logging of the set-up phase
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if self.logs is not None:  # the test's process: the shared set-up's records
            logs, self.logs = self.logs, None
            logs.replay(self.config)

    @pytest.hookimpl(optionalhook=True)  # pytest-timeout's
    def pytest_timeout_set_timer(self, item: pytest.Item, settings: Any) -> bool | None:
        """pytest-timeout's timer runs in the test's process (and the process
        says so), not in the one that forks: its signal would fire there."""
        if self.sender is not None:
            seconds = getattr(settings, "timeout", None)
            method = str(getattr(settings, "method", ""))
            if seconds:
                self.sender.send(TIMER, seconds=float(seconds), method=method)
            return None
        if not self._forks(item):
            return None
        self.timer_settings[str(item.nodeid)] = settings  # armed in the test's process
        return True

    @pytest.hookimpl(optionalhook=True)  # pytest-timeout's
    def pytest_timeout_cancel_timer(self, item: pytest.Item) -> bool | None:
        return True if self.sender is None and self._forks(item) else None

    def _forks(self, item: pytest.Item) -> bool:
        return (
            not item.stash.get(FILE_PLACEHOLDER, False) and self.chooser.limits_of(item) is not None
        )

    def _dump_file(self) -> IO[bytes]:
        if self._dumps is None:
            self._dumps = dump_file()
        return self._dumps

    def pytest_unconfigure(self) -> None:
        if self._dumps is not None:
            with contextlib.suppress(OSError):
                self._dumps.close()
