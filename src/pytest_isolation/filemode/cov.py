"""Coverage in file-mode children (pytest-cov, or coverage.py run by hand).

A child ends with ``os._exit``, which skips coverage's own save at exit; and
a forked child would otherwise write its measurements into its parent's
data file.  So a forked child measures into a data file of its own, and
every child saves before it ends.  pytest-cov (and ``coverage combine``)
combine these ``.coverage.*`` files with the parent's at the end.

Public coverage.py API only (``Coverage.current()``, ``config``); nothing is
imported unless coverage already runs.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def _current() -> Any:
    coverage = sys.modules.get("coverage")
    return None if coverage is None else coverage.Coverage.current()


def measure_in_fork() -> None:
    """In a forked child: stop the inherited measurement, start one that
    writes a data file of its own (same settings)."""
    inherited = _current()
    if inherited is None:
        return
    config = inherited.config
    inherited.stop()
    child = sys.modules["coverage"].Coverage(
        data_file=os.path.abspath(config.data_file),
        data_suffix=True,
        config_file=config.config_file or False,
        source=config.source,
        branch=config.branch,
        include=config.run_include or None,
        omit=config.run_omit or None,
    )
    child.start()


def save() -> None:
    """Save what this child measured, before ``os._exit``."""
    current = _current()
    if current is not None:
        current.stop()
        current.save()


def save_so_far() -> None:
    """In the fork server, after preloading: save what the imports measured;
    the measurement goes on, for each child to replace with its own."""
    current = _current()
    if current is not None:
        current.save()


def quiet_parent() -> None:
    """In the parent: its own measurement is empty (the children run the
    tests), which is no reason for coverage's "No data was collected"
    warning when pytest-cov saves it before combining the children's."""
    current = _current()
    if current is not None:
        quiet = list(current.get_option("run:disable_warnings") or [])
        current.set_option("run:disable_warnings", [*quiet, "no-data-collected"])
