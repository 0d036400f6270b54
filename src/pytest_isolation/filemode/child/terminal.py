"""A child's terminal: the parent owns the real one; a child writes
through a stand-in, and forwards what a plugin writes to it."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from pytest_isolation.core import pytest_private


def detach_terminal(config: pytest.Config, forward: Callable[[str], None] | None = None) -> None:
    """Stop the child's terminal reporter from printing; the parent reports.

    ``config.get_terminal_writer()`` must keep working (pytest before 9.1
    calls it to explain failed ``==`` assertions; ``--setup-show`` and live
    logs write through it), so a hook-less stand-in keeps the reporter's
    writer under the reporter's name, and what is written with it goes to
    ``forward``: the parent writes it in its place among the replayed
    reports.
    """
    manager = config.pluginmanager
    reporter = manager.get_plugin("terminalreporter")
    if reporter is None:
        return
    writer = pytest_private.terminal_writer(reporter)
    if forward is not None and not isinstance(pytest_private.writer_file(writer), _Forwarding):
        pytest_private.set_writer_file(writer, _Forwarding(forward))
    manager.unregister(reporter)
    manager.register(TerminalStandIn(config, writer), "terminalreporter")


class _Forwarding:
    """The stream of the child's terminal writer: each write goes to the parent."""

    encoding = "utf-8"

    def __init__(self, forward: Callable[[str], None]) -> None:
        self.forward = forward

    def write(self, text: str) -> int:
        if text:
            self.forward(text)
        return len(text)

    def flush(self) -> None:
        return None


class TerminalStandIn:
    """Holds the detached reporter's writer; implements no hooks.

    ``stats`` stays empty: plugins that tidy the reporter's statistics
    (pytest-rerunfailures) find nothing to tidy; the parent keeps the real ones.
    """

    def __init__(self, config: pytest.Config, writer: object) -> None:
        self.config = config
        pytest_private.set_terminal_writer(self, writer)
        self.stats: dict[str, list[object]] = {}


def written_to_stderr() -> int:
    """The size of this child's stderr file (-1 when it is not a file)."""
    try:
        return os.fstat(2).st_size
    except OSError:
        return -1
