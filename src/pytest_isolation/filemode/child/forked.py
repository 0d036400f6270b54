"""The child side's one entry for the processes that fork children: the
parent's controller and starter and the fork servers import this module and
no other of :mod:`.child` (``lint-imports`` keeps it so).

A child forked from the parent's run loop (``fork`` start) collects its file
there and hands the run loop its tests, as pytest's own loop would run them,
then ends the process (:func:`run`).  The other ways a child starts, is
prepared, collects and ends are :mod:`.start`'s, :mod:`.collection`'s and
:mod:`.plugin`'s, named here for those callers.

The parent's controller calls :func:`run` once, in its ``pytest_runtestloop``
frame, and calls each test's protocol in the body of the ``with``: the
tests run exactly as deep in the stack as in a plain run (see
:mod:`.depth`), which a call into this module would not keep.

    with forked.run(session, plugin, loops) as tests:
        for item, nextitem in tests:
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
"""

from __future__ import annotations

import contextlib
import os
import traceback
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_isolation.filemode.child.collection import collect_forked
from pytest_isolation.filemode.child.collection import run_loop_logging_kept
from pytest_isolation.filemode.child.plugin import ChildPlugin
from pytest_isolation.filemode.child.plugin import Tests
from pytest_isolation.filemode.child.plugin import finish
from pytest_isolation.filemode.child.start import prepare_forked
from pytest_isolation.filemode.child.start import restart_capture
from pytest_isolation.filemode.child.start import start_forked

__all__ = [
    "ChildPlugin",
    "collect_forked",
    "finish",
    "prepare_forked",
    "restart_capture",
    "run",
    "start_forked",
]


@contextlib.contextmanager
def run(session: pytest.Session, plugin: ChildPlugin, loops: list[Any]) -> Iterator[Tests]:
    """Collect the file, run the conftests' own run loops, and give the
    tests to run with the next one of each; whatever happens in the
    ``with`` body, the child then ends (:func:`.plugin.finish`), and never
    returns into the parent's code."""
    try:
        with run_loop_logging_kept(session.config):
            session.config.hook.pytest_collection(session=session)
        with plugin.testing(session, loops) as tests:  # ends the process
            yield tests
    except BaseException:
        traceback.print_exc()
    os._exit(3)
