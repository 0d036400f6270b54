"""How a child collects its file as the run would: logging handlers kept
through a forked child's collection inside the run loop, and files named
as the run named them."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_isolation.core import pytest_private


@contextlib.contextmanager
def run_loop_logging_kept(config: pytest.Config) -> Iterator[None]:
    """Give the root logger back the handlers of pytest's logging plugin
    that a forked child's collection takes off.

    A forked child collects inside the run loop, whose logging wrapper has
    put on its handlers (live logs, ``--log-file``); the collection's
    wrapper puts the same ones on and takes them off at its end.  In a
    plain run the loop puts them on after the collection, whatever a test
    module did to the root logger at import.
    """
    root = logging.getLogger()
    before = list(root.handlers)
    try:
        yield
    finally:
        owned = pytest_private.logging_plugin_handlers(config)
        for handler in before:
            if any(handler is own for own in owned) and handler not in root.handlers:
                root.addHandler(handler)


@contextlib.contextmanager
def named_as_in_the_run(session: pytest.Session, unnamed: set[str]) -> Iterator[None]:
    """Collect the files of ``unnamed`` as the run does, which reached them
    through a directory: a spawned child gets its file as an argument, and
    pytest collects an argument as a test module whatever ``python_files``
    says (a module that only ``--doctest-modules`` collects would be
    imported as a test module too).

    That pytest's Python collector asks ``Session.isinitpath`` before
    ``python_files`` is a private detail
    (:func:`.pytest_private.not_initial_paths`)."""
    if not unnamed:
        yield
        return
    with pytest_private.not_initial_paths(session, unnamed):
        yield


def collect_forked(session: pytest.Session) -> None:
    """Collect a forked child's file, inside the run loop."""
    with run_loop_logging_kept(session.config):
        session.config.hook.pytest_collection(session=session)


def with_directories(paths: list[str]) -> set[Path]:
    """``paths`` and every directory above them."""
    found: set[Path] = set()
    for path in map(Path, paths):
        found.add(path)
        found.update(path.parents)
    return found
