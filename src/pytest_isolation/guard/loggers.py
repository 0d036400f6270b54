"""Logging's state: named loggers' level, ``disabled`` and ``propagate``;
the root logger's handlers and level, and ``logging.disable()``.  (The
configuration a logger holds, its handlers and filters, is the ``logger``
category's: :class:`.deep.LoggerConfig`.)"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import cast

from pytest_isolation.core import pytest_private
from pytest_isolation.guard.state import MISSING
from pytest_isolation.guard.state import Flat
from pytest_isolation.guard.state import Slots
from pytest_isolation.guard.state import describe


def _show_level(value: object) -> str:
    return logging.getLevelName(value) if isinstance(value, int) else describe(value)


#: The logging plugin's handlers (``caplog``'s and the reports' capture, live
#: logging, ``--log-file``) belong to the run: it adds and removes the same
#: handler objects around every phase.  A fixture that saves the root's
#: handlers during a phase and puts them back after it (Flask's suite) leaves
#: them there until the next phase takes them off, which the guard must
#: neither blame on the next test nor undo.
_RUN_OWNED = pytest_private.LOGGING_MODULE


def _run_owned(handler: logging.Handler) -> bool:
    return type(handler).__module__ == _RUN_OWNED


def _root_handlers() -> object:
    return tuple(handler for handler in logging.root.handlers if not _run_owned(handler))


def _set_root_handlers(old: object) -> None:
    owned = [handler for handler in logging.root.handlers if _run_owned(handler)]
    logging.root.handlers = [*owned, *cast(tuple[logging.Handler, ...], old)]


def _root_level() -> object:
    return logging.root.level


def _set_root_level(old: object) -> None:
    logging.root.setLevel(cast(int, old))


def _disable_level() -> object:
    return logging.root.manager.disable


def _set_disable_level(old: object) -> None:
    logging.disable(cast(int, old))


_LOGGER_DEFAULTS = (logging.NOTSET, False, True)


def module_logger(name: str) -> bool:
    """A logger named after an imported package (``werkzeug``, ``urllib3``):
    what a library sets up when it creates its logger, at import or lazily
    at first use, is not the test's doing."""
    return name.partition(".")[0] in sys.modules


#: Whether a logger, created inside a window, is a library's own (see
#: :func:`module_logger`); the guard narrows it to installed libraries.
LibraryLogger = Callable[[str], bool]


class Loggers(Flat):
    """Named loggers: level, ``disabled`` and ``propagate``.

    ``logging.config.dictConfig`` disables every existing logger unless told
    otherwise, which silently breaks ``caplog`` in later tests.
    """

    name = "logging"
    hint = "use caplog.set_level, or pass disable_existing_loggers=False to dictConfig"

    def __init__(self, library: LibraryLogger = module_logger) -> None:
        self.library = library

    def read(self) -> dict[str, object]:
        return {
            name: (logger.level, logger.disabled, logger.propagate)
            for name, logger in list(logging.Logger.manager.loggerDict.items())
            if isinstance(logger, logging.Logger)
        }

    def label(self, key: str) -> str:
        return f"logger {key!r} (level, disabled, propagate)"

    def show(self, value: object) -> str:
        if not isinstance(value, tuple):
            value = _LOGGER_DEFAULTS
        level, disabled, propagate = value
        return (
            f"{logging.getLevelName(level)}, {'disabled' if disabled else 'enabled'}, "
            f"propagate={propagate}"
        )

    def is_leak(self, key: str, old: object, new: object) -> bool:
        if new is MISSING:
            return False
        if old is MISSING and self.library(key):
            return False
        # A logger created during the test lives on: only its defaults are clean.
        return new != (old if old is not MISSING else _LOGGER_DEFAULTS)

    def restore(self, key: str, old: object) -> None:
        level, disabled, propagate = old if isinstance(old, tuple) else _LOGGER_DEFAULTS
        logger = logging.getLogger(key)
        logger.setLevel(level)
        logger.disabled, logger.propagate = disabled, propagate


ROOT_LOGGER = Slots(
    "logging",
    "use caplog, or undo the logging configuration in a fixture",
    {
        "the root logger's handlers": (_root_handlers, _set_root_handlers),
        "the root logger's level": (_root_level, _set_root_level),
        "logging.disable()": (_disable_level, _set_disable_level),
    },
    formats={"the root logger's level": _show_level, "logging.disable()": _show_level},
)
