"""A test in a process of its own: the options, ini keys and marker, and
the part registered by the entry plugin (:class:`.processes.TestProcesses`),
in every process that runs tests.

PYTEST_DONT_REWRITE (see the package's docstring).
"""

from __future__ import annotations

import os

import pytest

from pytest_isolation.core import names
from pytest_isolation.core.keys import IN_CHILD
from pytest_isolation.core.kinds import Mode
from pytest_isolation.core.kinds import StartMethod
from pytest_isolation.core.options import MAX_SECONDS
from pytest_isolation.core.options import Setting
from pytest_isolation.core.options import flag_of
from pytest_isolation.core.options import limit
from pytest_isolation.core.settings import Settings
from pytest_isolation.filemode.placement import TESTS
from pytest_isolation.filemode.placement import patterns
from pytest_isolation.pertest import compat
from pytest_isolation.pertest.limits import MARKER
from pytest_isolation.pertest.limits import MARKER_HELP
from pytest_isolation.pertest.limits import Limits
from pytest_isolation.pertest.limits import marker_arguments
from pytest_isolation.pertest.limits import memory_limit_supported

#: The most megabytes a memory limit takes (a terabyte): more is a typo.
MAX_MEGABYTES = 1_000_000.0

#: The limits of a test's process, by dest (= ini key).
LIMITS = {
    "isolation_test_timeout": Setting(
        "A test in a process of its own fails after SECONDS (0: no limit), with its "
        "threads' stacks.",
        "SECONDS",
        unset="no limit",
        number="float",
    ),
    "isolation_test_memory": Setting(
        "A test in a process of its own may grow its memory by MB megabytes (0: no "
        "limit; Linux): more raises MemoryError.",
        "MB",
        unset="no limit",
        number="float",
    ),
    "isolation_test_cpu": Setting(
        "A test in a process of its own fails after SECONDS of CPU time (0: no limit).",
        "SECONDS",
        unset="no limit",
        number="float",
    ),
}


def pytest_addoption(parser: pytest.Parser) -> None:
    for dest, setting in LIMITS.items():
        setting.add(parser, dest)


def limits(config: pytest.Config) -> Limits:
    """The run's limits of a test's process (a marker's arguments override them)."""
    return Limits(
        timeout=limit(config, "isolation_test_timeout", "seconds", MAX_SECONDS),
        memory=limit(config, "isolation_test_memory", "megabytes", MAX_MEGABYTES),
        cpu=limit(config, "isolation_test_cpu", "seconds", MAX_SECONDS),
    )


def register(config: pytest.Config, settings: Settings, runs_tests: bool = True) -> None:
    """The part that runs the chosen tests each in a process of its own:
    checked at start (fork, the memory limit's platform), registered last
    so that it comes first among the runners of a test's protocol; an xdist
    controller, whose workers run the tests, only says so in the header."""
    from pytest_isolation.pertest.chosen import Chooser
    from pytest_isolation.pertest.processes import TestProcesses
    from pytest_isolation.pertest.testchild import Forwarder

    config.addinivalue_line("markers", MARKER_HELP)
    defaults = limits(config)
    every = settings.mode == "test"
    if not hasattr(os, "fork"):
        if every:
            raise pytest.UsageError(
                "--isolation-mode=test forks each test from the process that runs the tests: "
                "this platform has no fork; use --isolation-mode=file"
            )
        config.pluginmanager.register(NoFork(), names.PER_TEST)
        return
    if defaults.memory and not memory_limit_supported():
        raise pytest.UsageError(
            f"{flag_of('isolation_test_memory')}: a memory limit needs Linux "
            "(the kernel's limit on a process's address space)"
        )
    if every:
        compat.check_compatible(config)
    header = Header(settings.mode, defaults, settings.start, compat.notices(config))
    header.placed = any(
        p.placement.how == TESTS for p in patterns(config.getini("isolation_paths"))
    )
    config.pluginmanager.register(header, names.PER_TEST_HEADER)
    if not runs_tests:
        return
    chooser = Chooser(config, settings.mode, defaults)
    retries = settings.retries if every else 0  # file mode retries whole files
    config.pluginmanager.register(TestProcesses(config, chooser, retries), names.PER_TEST)
    config.pluginmanager.register(Forwarder(config), names.TEST_FORWARDER)


class Header:
    """The header's line of a run with tests in processes of their own."""

    def __init__(
        self,
        mode: Mode,
        defaults: Limits,
        start: StartMethod = "auto",
        notices: list[str] | None = None,
    ) -> None:
        self.mode = mode
        self.defaults = defaults
        self.start = start
        #: What test mode turned off in other plugins (:mod:`.compat`).
        self.notices = notices or []
        #: ``isolation_paths`` places files ``test``.
        self.placed = False

    def pytest_report_header(self) -> list[str]:
        lines = []
        if self.mode == "test":
            lines.append(
                "isolation: test mode: each test in a process of its own, forked once its "
                f"fixtures above function scope are set up (limits: {self.defaults.text()})"
            )
            lines += self.notices
        elif self.defaults != Limits():
            lines.append(
                f"isolation: limits of a test's own process ({self.defaults.text()}) apply to "
                f"the tests marked {MARKER} or placed with 'test'"
            )
        if self.mode == "file" and self.start in ("spawn", "forkserver") and self.placed:
            lines.append(
                "isolation: a test in a process of its own (the isolation_process marker, a file "
                f"placed 'test') is forked from its file's process, which {self.start} starts"
            )
        if self.mode == "file" and self.defaults.timeout:
            lines.append(
                f"isolation: a test of a file's process may run {self.defaults.timeout:g} s; "
                "over it, the process is ended, the test fails and the file goes on in a new one"
            )
        return lines

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        """A marker with a bad argument stops the run before any test runs
        (in a file's process: that file's collection fails with the message)."""
        del config
        for item in items:
            marker = item.get_closest_marker(MARKER)
            if marker is not None:
                marker_arguments(marker.kwargs, marker.args, str(item.nodeid))


class NoFork:
    """Without fork: a test marked to run in a process of its own is refused."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        if config.stash.get(IN_CHILD, False):
            return
        marked = [item for item in items if item.get_closest_marker(MARKER) is not None]
        if marked:
            raise pytest.UsageError(
                f"{marked[0].nodeid}: @pytest.mark.{MARKER} forks the test from the process "
                "that runs the tests: this platform has no fork; use isolation_paths or "
                "--isolation-mode=file to give its file a process of its own"
            )
