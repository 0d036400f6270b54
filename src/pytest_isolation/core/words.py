"""Number agreement in what a person reads: ``1 test``, ``2 tests``."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str = "") -> str:
    """``count`` and ``noun`` in agreement (``plural``: when not noun + "s")."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def agreeing(count: int, singular: str, plural: str) -> str:
    """The word that agrees with ``count``: ``is``/``are``, ``it``/``them``."""
    return singular if count == 1 else plural
