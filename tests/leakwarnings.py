"""A test-only plugin (``-p leakwarnings``): prints every ``LeakedStateWarning``
the inner run recorded, one line each, at the end of its terminal summary.

The leak guard raises a ``LeakedStateWarning`` for the first leak of each
key (so that ``-W``/``filterwarnings`` decide what becomes an error), but
the warnings summary leaves them out: a person reads each leak once, in the
leak summary.  The tests that check the warnings themselves (their text,
which leak warns, how often) read them here, as pytest recorded them."""

from __future__ import annotations

import warnings

import pytest

_recorded: list[str] = []


def pytest_warning_recorded(warning_message: warnings.WarningMessage, nodeid: str) -> None:
    if warning_message.category.__name__ == "LeakedStateWarning":
        where = f"{warning_message.filename}:{warning_message.lineno}"
        _recorded.append(f"  {where}: LeakedStateWarning: {warning_message.message}")


@pytest.hookimpl(tryfirst=True)  # where pytest's warnings summary is, before the leak summary
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _recorded:
        terminalreporter.write_sep("=", "recorded leak warnings (tests/leakwarnings.py)")
        for line in _recorded:
            terminalreporter.write_line(line)
