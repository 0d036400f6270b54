"""What a test's own process does around pytest's run of its test.

The process is forked from inside the forking side's
``pytest_runtest_protocol`` implementation, which then returns None in it:
pluggy goes on to the next implementations (pytest's runner,
pytest-rerunfailures, ``--isolation-twice``) in the very call pytest's loop
made, so the test runs exactly as deep in the stack as in a plain run, with
every plugin's wrappers around it and the real next test.  Before that,
:func:`start` makes the process:

- end with the forking process, and lead a process group of its own;
- keep a fatal error's traceback, and the stacks asked for at a time
  limit, in the dump file;
- send the calls of the hooks that report (a phase's report, a warning, a
  leak) to the forking process instead of making them (:class:`Forwarder`),
  and leave ``logstart`` and ``logfinish`` to it: so its terminal, junit
  XML, ``--lf``, xdist and file mode see them as from a test run in place;
- send its log records as they are made, so that a process that dies keeps them;
- leave the teardown of what the next test shares to the forking process.

Once the protocol is over (the forking side's outermost wrapper), :func:`end`
ends the process.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import sys
import traceback
from typing import Any
from typing import NoReturn

import pytest

from pytest_isolation.core import names
from pytest_isolation.core import pytest_private
from pytest_isolation.core.keys import IN_TEST_PROCESS
from pytest_isolation.core.records import Leak
from pytest_isolation.filemode import cov
from pytest_isolation.filemode import forks
from pytest_isolation.filemode import lifetime
from pytest_isolation.filemode.logs import LogRelay
from pytest_isolation.filemode.processes import DUMP_SIGNAL
from pytest_isolation.filemode.wire import INTERRUPTED
from pytest_isolation.filemode.wire import LEAK
from pytest_isolation.filemode.wire import LOGRECORD
from pytest_isolation.filemode.wire import REPORT
from pytest_isolation.filemode.wire import WARNING
from pytest_isolation.filemode.wire import Sender
from pytest_isolation.filemode.wire import adopt_senders
from pytest_isolation.filemode.wire import report_data
from pytest_isolation.filemode.wire import warning_payload
from pytest_isolation.pertest.limits import Limits

#: The hooks whose calls go to the forking process (:class:`Forwarder`).
SENT = frozenset({"pytest_runtest_logreport", "pytest_warning_recorded", "pytest_isolation_leak"})
#: The hooks the forking process calls itself, around the test's process.
LEFT = frozenset({"pytest_runtest_logstart", "pytest_runtest_logfinish"})
#: Exit codes of a test's process: interrupted (as pytest's), failed inside.
INTERRUPTED_EXIT = 2
BROKEN_EXIT = 3


def start(item: pytest.Item, limits: Limits, pipe: int, dumps: int, parent: int) -> Sender:
    """Make this (just forked) process the test's own; ``pipe``: the write
    end to the forking process ``parent``, ``dumps``: where a fatal error
    and the stacks asked for at a time limit go.  Returns its sender."""
    sender = Sender(pipe)
    adopt_senders()  # a file's process's terminal output and junit data, say
    config = item.config
    _own_process(parent, dumps, debugging=_debugging(config))
    forwarder = config.pluginmanager.get_plugin(names.TEST_FORWARDER)
    assert isinstance(forwarder, Forwarder)  # registered with the forking side's plugin
    pytest_private.take_hooks(config, SENT | LEFT, keep=forwarder)
    forwarder.sender = sender
    relay = LogRelay(config, lambda text: sender.send(LOGRECORD, text=text))
    logging.getLogger().addHandler(relay)
    limits.apply_here()
    config.stash[IN_TEST_PROCESS] = True  # the guard: one test, no file to watch
    pytest_private.hand_over_set_up(item.session)
    return sender


def end(sender: Sender, error: BaseException | None) -> NoReturn:
    """End the test's process once its protocol is over (``error``: what
    the protocol raised): a Ctrl-C or ``pytest.exit()`` in the test ends
    the whole run, which the forking process is told."""
    code = 0
    if isinstance(error, (KeyboardInterrupt, pytest.exit.Exception)):
        reason = getattr(error, "msg", None)
        returncode = getattr(error, "returncode", None)
        sender.send(INTERRUPTED, reason=reason, returncode=returncode, where=None)
        code = INTERRUPTED_EXIT
    elif error is not None:
        traceback.print_exception(error)
        code = BROKEN_EXIT
    sys.stdout.flush()
    sys.stderr.flush()
    cov.save()
    os._exit(code)


def _debugging(config: pytest.Config) -> bool:
    """``--pdb`` or ``--trace``: the debugger reads the terminal."""
    option = config.option
    return bool(getattr(option, "usepdb", False) or getattr(option, "trace", False))


def _own_process(parent: int, dumps: int, debugging: bool) -> None:
    """End with the forking process; lead a process group of its own (a time
    limit ends the test's processes together), unless a debugger must read
    the terminal (a background group would be stopped when it reads); a
    fatal error's traceback, and every thread's stack when the forking
    process asks, to ``dumps``; the suite's timers and watchdog as they were."""
    lifetime.die_with_parent(parent)
    lifetime.ending_default()
    lifetime.suite_sigchld()
    if not debugging:
        os.setpgid(0, 0)
    faulthandler.enable(dumps, all_threads=True)
    faulthandler.register(DUMP_SIGNAL, dumps, all_threads=True)
    cov.measure_in_fork()
    forks.resume()


class Forwarder:
    """In a test's own process, the one implementation of the hooks that
    report: it sends each call to the forking process.  Registered, idle,
    with the forking side's plugin (registering a plugin in each test's
    process would cost pytest's look for fixtures on it, every time)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        #: Set in a test's own process only.
        self.sender: Sender | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.sender is None:
            return
        config = self.config
        # A plugin may settle the outcome when its status is asked (pytest's
        # subtests), from state kept in this process: ask here.
        config.hook.pytest_report_teststatus(report=report, config=config)
        self.sender.send(REPORT, data=report_data(config, report))

    def pytest_warning_recorded(
        self,
        warning_message: Any,
        when: str,
        nodeid: str,
        location: tuple[str, int, str] | None,
    ) -> None:
        if self.sender is not None and when != "config":
            self.sender.send(WARNING, **warning_payload(warning_message, when, nodeid, location))

    def pytest_isolation_leak(self, leak: Leak) -> None:
        if self.sender is not None:
            self.sender.send(LEAK, fields=leak.to_wire())
