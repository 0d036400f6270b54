"""A child's process that raised the run's exit status at its session's end
(a plugin's or conftest's ``pytest_sessionfinish`` or ``pytest_unconfigure``):
said in the parent's summary, and applied to the run's exit status."""

from __future__ import annotations

import pytest

#: Why a child's process raised the run's exit status.
AT_SESSIONFINISH = (
    "ended its session with exit status {status} (a plugin's or conftest's pytest_sessionfinish)"
)
AT_UNCONFIGURE = (
    "exited with status {status} after its last test (a plugin's or conftest's "
    "pytest_unconfigure raised; see its traceback above)"
)
KILLED_AFTER = "{ended} after its last test (in its plugins' pytest_unconfigure)"


def write_raised_status(
    reporter: pytest.TerminalReporter, status: int, nodeid: str, why: str = AT_SESSIONFINISH
) -> None:
    """In the parent's summary: which file's session end failed the run, and where."""
    if status:
        said = why.format(status=status)
        reporter.write_line(
            f"isolation: the process of {nodeid} {said}; the run exits with status {status}",
            red=True,
        )


def apply_raised_status(session: pytest.Session, status: int) -> None:
    """In the parent's sessionfinish: a child's raised status fails a run that passed."""
    if status and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = status
