"""Hooks of this plugin, by which its parts tell each other what happened.

Added to pytest's hooks by the entry plugin (``pytest_addhooks``).  A part
that implements one of them in a module that can also be loaded without
the plugin (the fixtures, a probe) marks its implementation
``optionalhook=True``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any

import pytest

if TYPE_CHECKING:  # types only
    from pytest_isolation.core.records import FileAttempts
    from pytest_isolation.core.records import Leak


@pytest.hookspec
def pytest_isolation_leak(config: pytest.Config, leak: Leak) -> None:
    """The leak guard recorded a leak it had not recorded before (found in
    this process, a file-mode child or an xdist worker)."""


@pytest.hookspec
def pytest_isolation_file_finished(
    config: pytest.Config, record: FileAttempts, seconds: float
) -> None:
    """File mode: every attempt at a file is over; ``record`` tells its
    processes and its tests' outcomes, ``seconds`` the file's wall time."""


@pytest.hookspec
def pytest_isolation_workeroutput(config: pytest.Config, output: dict[str, Any]) -> None:
    """In a pytest-xdist worker at the end of its session: add this part's
    state for the controller to ``output`` (a key of your own, plain data)."""


@pytest.hookspec
def pytest_isolation_merge_workeroutput(config: pytest.Config, output: dict[str, Any]) -> None:
    """In the pytest-xdist controller: a worker ended; merge this part's
    state from what the worker's parts put into ``output``."""


@pytest.hookspec
def pytest_isolation_child_started(config: pytest.Config, shared: dict[str, object]) -> None:
    """File mode: first thing in each child process, before it collects its
    file.  Renew here what must not be shared across a fork (a database
    connection, a socket, a thread pool); ``shared`` holds the values of the
    shared fixtures the child inherited, by name (empty when the child was
    not forked from the parent)."""


@pytest.hookspec
def pytest_isolation_parent_ready(config: pytest.Config) -> None:
    """File mode: the parent (or an xdist worker) has set up what each of its
    children inherits (its conftests, their imports, the shared fixtures); the
    first child starts next."""
