"""What runs in a test's own process, from its fork to its ``os._exit``.

The process runs pytest's protocol for its one test (every plugin's
wrappers, pytest-rerunfailures and ``--isolation-twice`` included), with the
test's teardown stopping at the test itself: what the next test shares
belongs to the process it was forked from.  The calls of the hooks that
report (a phase's report, a warning, a leak) are sent to that process
instead of being made here (``pytest_private.divert_hooks``): it makes
them, in order, so its terminal, junit XML, ``--lf``, xdist and file mode
see them as from a test run in place.  The test's log records are sent as
they are made, so that a process that dies keeps them.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any
from typing import NoReturn

import pytest

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
from pytest_isolation.filemode.wire import sendable_properties
from pytest_isolation.pertest.limits import Limits

#: The hooks whose calls are sent to the forking process.
SENT = frozenset({"pytest_runtest_logreport", "pytest_warning_recorded", "pytest_isolation_leak"})
#: The hooks the forking process calls itself, around the test's process.
LEFT = frozenset({"pytest_runtest_logstart", "pytest_runtest_logfinish"})
#: Exit codes of a test's process: interrupted (as pytest's), failed inside.
INTERRUPTED_EXIT = 2
BROKEN_EXIT = 3


def run(
    item: pytest.Item,
    limits: Limits,
    pipe: int,
    dumps: int,
    parent: int,
    enter: Callable[[Sender], None],
) -> NoReturn:
    """Run ``item``'s protocol in this (forked) process and end it; ``pipe``:
    the write end to the forking process ``parent``, ``dumps``: where a
    fatal error and the stacks asked for at a time limit go; ``enter``:
    makes the forking side's plugin step aside for this process's run."""
    code = BROKEN_EXIT
    try:
        sender = Sender(pipe)
        adopt_senders()  # a file's process's terminal output and junit data, say
        config = item.config
        _start(parent, dumps, debugging=_debugging(config))
        pytest_private.divert_hooks(config, SENT | LEFT, Diversion(config, sender))
        relay = LogRelay(config, lambda text: sender.send(LOGRECORD, text=text))
        logging.getLogger().addHandler(relay)
        limits.apply_here()
        config.stash[IN_TEST_PROCESS] = True  # the guard: one test, no file to watch
        enter(sender)
        try:
            parent_node = item.parent  # the teardown stops at the test itself
            item.ihook.pytest_runtest_protocol(item=item, nextitem=parent_node)
            code = 0
        except (KeyboardInterrupt, pytest.exit.Exception) as stop:
            reason = getattr(stop, "msg", None)
            returncode = getattr(stop, "returncode", None)
            sender.send(INTERRUPTED, reason=reason, returncode=returncode, where=None)
            code = INTERRUPTED_EXIT
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        cov.save()
        os._exit(code)


def _debugging(config: pytest.Config) -> bool:
    """``--pdb`` or ``--trace``: the debugger reads the terminal."""
    option = config.option
    return bool(getattr(option, "usepdb", False) or getattr(option, "trace", False))


def _start(parent: int, dumps: int, debugging: bool) -> None:
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


class Diversion:
    """Sends the diverted hook calls to the forking process."""

    def __init__(self, config: pytest.Config, sender: Sender) -> None:
        self.config = config
        self.sender = sender

    def __call__(self, name: str, kwargs: dict[str, Any]) -> None:
        sends: dict[str, Callable[..., None]] = {
            "pytest_runtest_logreport": self._report,
            "pytest_warning_recorded": self._warning,
            "pytest_isolation_leak": self._leak,
        }
        send = sends.get(name)
        if send is not None:  # the others (logstart, logfinish) are the forking side's
            send(**kwargs)

    def _leak(self, leak: Leak, **others: Any) -> None:
        self.sender.send(LEAK, fields=leak.to_wire())

    def _report(self, report: pytest.TestReport) -> None:
        config = self.config
        # A plugin may settle the outcome when its status is asked (pytest's
        # subtests), from state kept in this process: ask here.
        config.hook.pytest_report_teststatus(report=report, config=config)
        data: dict[str, Any] = config.hook.pytest_report_to_serializable(
            config=config, report=report
        )
        properties = data.get("user_properties")
        if properties:
            data["user_properties"], unsent = sendable_properties(list(properties))
            if unsent:
                sections = list(data.get("sections") or [])
                data["sections"] = [*sections, ("isolation", "\n".join(unsent))]
        self.sender.send(REPORT, data=data)

    def _warning(
        self,
        warning_message: Any,
        when: str,
        nodeid: str,
        location: tuple[str, int, str] | None,
    ) -> None:
        if when == "config":
            return
        category = warning_message.category
        self.sender.send(
            WARNING,
            module=category.__module__,
            qualname=category.__qualname__,
            message=str(warning_message.message),
            filename=warning_message.filename,
            lineno=warning_message.lineno,
            when=when,
            nodeid=str(nodeid),
            location=location,
        )
