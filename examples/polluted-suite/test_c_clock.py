"""Needs the real clock."""

import time


def test_clock_moves() -> None:
    assert time.time() > 1_600_000_000
