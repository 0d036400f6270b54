"""``--lf`` and ``--ff`` in the parent, one test file at a time.

pytest decides both from the tests it collects, which only the children
see: each child's own last-failed plugin selects (``--lf``) or puts first
(``--ff``) its file's recorded failures.  The parent does the same with the
files: ``--lf`` leaves out the files without a recorded failure, ``--ff``
runs the files with one first, and the header says what a plain run says.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_isolation.core import pytest_private
from pytest_isolation.core.nodeid import file_of
from pytest_isolation.core.words import counted
from pytest_isolation.filemode.parent.nodes import IsolatedFileItem


def select_files(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Apply ``--lf``/``--ff`` to the files (after pytest's own plugin ran)."""
    cache: pytest.Cache | None = getattr(config, "cache", None)  # -p no:cacheprovider
    lf, ff = bool(config.getoption("lf", False)), bool(config.getoption("failedfirst", False))
    if cache is None or not (lf or ff):
        return
    recorded = list(cache.get("cache/lastfailed", {}))
    root = config.rootpath
    failed_paths = {root / file_of(nodeid) for nodeid in recorded}
    files = [item for item in items if isinstance(item, IsolatedFileItem)]
    with_failures = [item for item in files if item.path in failed_paths]
    if not with_failures:  # pytest's own line says so: "N known failures not in selected tests"
        return
    rest = [item for item in items if item not in with_failures]
    if lf:
        items[:] = [item for item in rest if not isinstance(item, IsolatedFileItem)]
        items[:0] = with_failures
    else:
        items[:] = with_failures + rest
    _set_status(config, _status(recorded, {i.path for i in with_failures}, root, lf, files))


def _status(
    recorded: list[str], paths: set[Path], root: Path, lf: bool, files: list[IsolatedFileItem]
) -> str:
    count = sum(1 for nodeid in recorded if "::" in nodeid and root / file_of(nodeid) in paths)
    status = f"rerun previous {counted(count, 'failure')}" + ("" if lf else " first")
    skipped = len(files) - len(paths) if lf else 0
    if skipped:
        status += f" (skipped {counted(skipped, 'file')})"
    return status


def _set_status(config: pytest.Config, status: str) -> None:
    """Put ``status`` in pytest's "run-last-failure: ..." header line, in
    place of the one pytest's last-failed plugin decided from the
    placeholders, which match no recorded failure."""
    plugin = config.pluginmanager.get_plugin("lfplugin")
    if plugin is not None:
        pytest_private.set_report_status(plugin, status)
