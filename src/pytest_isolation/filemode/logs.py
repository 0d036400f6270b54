"""A running test's log records, sent as they are made to the process that
reports the test, so that a process that dies keeps them: its report shows
them as pytest's ``Captured log`` section would have (file mode's children
and a test's own process both send them).

Imports: the standard library and pytest only (every side uses it).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

import pytest


def log_level(config: pytest.Config) -> int | None:
    """``--log-level`` / ``log_level`` as a number, as pytest reads it."""
    value = config.getoption("log_level", None) or config.getini("log_level")
    if value is None or value == "":
        return None
    if isinstance(value, int) or str(value).isdigit():
        return int(value)
    level = logging.getLevelName(str(value).upper())
    return level if isinstance(level, int) else None


class LogRelay(logging.Handler):
    """On the root logger: each record the test's report would show, formatted
    as its report would show it, handed to ``send`` while ``sending``."""

    def __init__(self, config: pytest.Config, send: Callable[[str], None]) -> None:
        super().__init__(level=log_level(config) or logging.NOTSET)
        self.send = send
        #: A process forked from this one (a test's own) has its own relay.
        self.pid = os.getpid()
        #: Off between tests (collection, a file's end): nobody keeps those.
        self.sending = True
        log_format = config.getoption("log_format", None) or config.getini("log_format")
        date_format = config.getoption("log_date_format", None) or config.getini("log_date_format")
        self.setFormatter(logging.Formatter(log_format, date_format))

    def emit(self, record: logging.LogRecord) -> None:
        if not self.sending or os.getpid() != self.pid:
            return
        try:
            self.send(self.format(record))
        except Exception:
            self.handleError(record)
