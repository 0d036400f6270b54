"""Naming how a process ended."""

from __future__ import annotations

import signal


def signal_name(number: int) -> str | None:
    """``SIGSEGV`` for 11; None for a number that names no signal here."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return None
