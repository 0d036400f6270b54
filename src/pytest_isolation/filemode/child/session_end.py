"""How a file-mode child ends its pytest session: like a pytest-xdist worker.

The plugins that live in the child (fixtures' session teardown, logging's
file handler, syrupy, the unraisable-exception check, ...) get their
``pytest_sessionfinish`` and ``pytest_unconfigure`` there, as they would at
the end of a plain run.  The plugins whose end-of-run work is the parent's,
because the parent holds the whole run's results (terminal, junit XML,
``--lf``/``--nf``/``--sw`` cache, tmp_path retention, pastebin, pytest-cov's
report, this plugin's run records), are left out: the parent runs them once
for the whole run.

Imports: stdlib and pytest only (the child side stays light).
"""

from __future__ import annotations

import traceback
from typing import Any

import pytest

from pytest_isolation.core import frozen
from pytest_isolation.core import names

#: pytest's and other plugins' names whose end-of-run work the parent does.
PARENT_OWNED = (
    "terminalreporter",
    "junitxml",
    "lfplugin",
    "nfplugin",
    "stepwise",
    "stepwiseplugin",
    "tmpdir",
    "pastebin",
    "_cov",
    names.XDIST_OUTPUT,
    *names.PARENT_ONLY,
)


def parent_owned(config: pytest.Config) -> list[object]:
    """The registered plugins of :data:`PARENT_OWNED` (junit's XML writer has
    already left the child: :mod:`.junit`)."""
    manager = config.pluginmanager
    found = [manager.get_plugin(name) for name in PARENT_OWNED]
    return [plugin for plugin in found if plugin is not None]


def end_session(session: pytest.Session, status: int) -> int:
    """Run the child-side plugins' ``pytest_sessionfinish``; return the exit
    status they leave.

    A plugin may raise the status in its ``pytest_sessionfinish`` (syrupy
    does for unused snapshots); the parent applies the raised value.
    """
    config = session.config
    excluded = parent_owned(config)
    manager = config.pluginmanager
    session.exitstatus = status
    finish: Any = manager.subset_hook_caller("pytest_sessionfinish", excluded)
    finish(session=session, exitstatus=status)
    return int(session.exitstatus)


def unconfigure(session: pytest.Session) -> int:
    """Run the child-side plugins' ``pytest_unconfigure``; return the
    process's exit code (3, pytest's internal error, when it raised).

    The child runs it after telling the parent it finished, while the parent
    goes on with the next file.  pytest's unraisable-exception check collects
    garbage there: the objects the file made, not the frozen ones the child
    inherited, unless the file thawed them (:mod:`pytest_isolation.core.frozen`).
    """
    config = session.config
    frozen.session_ends()
    unconfigure: Any = config.pluginmanager.subset_hook_caller(
        "pytest_unconfigure", parent_owned(config)
    )
    try:
        unconfigure(config=config)
    except BaseException:  # reported by the exit code and on stderr
        traceback.print_exc()
        return int(pytest.ExitCode.INTERNAL_ERROR)
    return 0


def session_status(session: pytest.Session, interrupted: bool) -> int:
    """The exit status a plain session of this one file would finish with."""
    if interrupted:
        return int(pytest.ExitCode.INTERRUPTED)
    if session.testsfailed:
        return int(pytest.ExitCode.TESTS_FAILED)
    return int(pytest.ExitCode.OK)


def write_raised_status(reporter: pytest.TerminalReporter, status: int, nodeid: str) -> None:
    """In the parent's summary: which file's session end failed the run."""
    if status:
        reporter.write_line(
            f"isolation: the process of {nodeid} ended its session with exit status {status} "
            "(a plugin's or conftest's pytest_sessionfinish); the run exits with it",
            red=True,
        )


def apply_raised_status(session: pytest.Session, status: int) -> None:
    """In the parent's sessionfinish: a child's raised status fails a run that passed."""
    if status and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = status
