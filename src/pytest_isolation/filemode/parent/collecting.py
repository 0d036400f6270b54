"""The parent's collection in file mode: one placeholder per test file,
nothing imported; node-id arguments split into files and the selectors each
file's child applies; the node ids no child found."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_isolation.core.kinds import Placed
from pytest_isolation.core.settings import Settings
from pytest_isolation.filemode.parent import conftests
from pytest_isolation.filemode.parent import lastfailed
from pytest_isolation.filemode.parent.nodeargs import NodeArgs
from pytest_isolation.filemode.parent.nodeargs import fail_if_not_found
from pytest_isolation.filemode.parent.nodeargs import split_node_args
from pytest_isolation.filemode.parent.nodeargs import write_not_found
from pytest_isolation.filemode.parent.nodes import PLACEMENT
from pytest_isolation.filemode.parent.nodes import PLACEMENT_ERROR
from pytest_isolation.filemode.parent.nodes import ChildTest
from pytest_isolation.filemode.parent.nodes import IsolatedFile
from pytest_isolation.filemode.parent.nodes import IsolatedFileItem
from pytest_isolation.filemode.parent.nodes import gather_shared
from pytest_isolation.filemode.parent.nodes import placements_line
from pytest_isolation.filemode.parent.nodes import process_of
from pytest_isolation.filemode.placement import ALONE
from pytest_isolation.filemode.placement import TOGETHER
from pytest_isolation.filemode.placement import Placement
from pytest_isolation.filemode.placement import Placements

# Options of pytest's own selection whose work moves into the children, by dest.
_CHILD_SELECTION_OPTIONS = {"keyword": "", "markexpr": "", "deselect": None}


class Collection:
    """What the parent collects, and what it learns of the files' tests."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        #: Where each file runs (alone, in a group's process, with the files not isolated).
        default: Placed = TOGETHER if settings.opted_in else ALONE
        self.placements = Placements(config, Placement(default, "", settings.mode_from.text))
        self.node_args: NodeArgs | None = None
        #: The ``path::name`` arguments no child found.
        self.notfound: list[str] = []
        #: Index of each placeholder in session.items, for children started ahead.
        self.positions: dict[pytest.Item, int] = {}

    def file(self, file_path: Path, parent: pytest.Collector) -> IsolatedFile:
        """The placeholder of a test file, placed."""
        file = IsolatedFile.from_parent(parent, path=file_path)
        try:
            file.stash[PLACEMENT] = self.placements.of(file_path)
        except pytest.UsageError as error:  # the file fails to collect: the run stops there
            file.stash[PLACEMENT_ERROR] = str(error)
        return file

    @contextlib.contextmanager
    def files_only(self) -> Iterator[None]:
        """pytest's collection, of files: node-id arguments name their file
        only (the child selects), and conftests' item hooks are left to the
        children."""
        config = self.config
        original = config.args
        if not config.option.pyargs:
            self.node_args = split_node_args(original, config.invocation_params.dir)
            config.args = self.node_args.paths
        try:
            with conftests.item_hook_without_conftests(config):
                yield
        finally:
            config.args = original

    @contextlib.contextmanager
    def selecting(self, items: list[pytest.Item]) -> Iterator[None]:
        """pytest's selection, of placeholders: ``-k``, ``-m`` and
        ``--deselect`` are the children's; then the files a child found
        nothing selected in are deselected, ``--lf`` picks files, and
        the files of one shared process are put together."""
        with selection_deferred_to_children(self.config):
            yield
        dropped = [i for i in items if isinstance(i, ChildTest) and i.deselected_in_child]
        if dropped:
            items[:] = [i for i in items if i not in dropped]
            self.config.hook.pytest_deselected(items=dropped)
        lastfailed.select_files(self.config, items)
        gather_shared(items)

    def finished(self, items: Sequence[pytest.Item]) -> None:
        self.positions = {item: index for index, item in enumerate(items)}

    def report_lines(self, items: Sequence[pytest.Item]) -> list[str] | None:
        """Explain the "collected N items" line, which counts files in file mode."""
        if self.config.option.collectonly or self.config.option.verbose < 0:
            return None
        files = [process_of(item) for item in items if isinstance(item, IsolatedFileItem)]
        lines = [placements_line(files)]
        for path in conftests.with_item_hook(self.config):
            where = os.path.relpath(path, self.config.invocation_params.dir)
            lines.append(
                f"isolation: {where}: pytest_collection_modifyitems runs in each file's "
                f"process, on that file's tests (it cannot reorder tests across files)"
            )
        return lines

    def selectors(self, path: Path) -> tuple[tuple[str, ...], ...] | None:
        """The ``::name`` selectors the arguments give for ``path``, if any."""
        return None if self.node_args is None else self.node_args.selectors_for(path)

    def not_found(self, arg: str) -> None:
        """A child found no test for ``arg``."""
        path, _, names = arg.partition("::")
        relative = os.path.relpath(path, self.config.invocation_params.dir)
        self.notfound.append(f"{relative}::{names}")

    def fail_if_not_found(self, session: pytest.Session) -> None:
        fail_if_not_found(session, self.notfound)

    def write_not_found(self, reporter: pytest.TerminalReporter) -> None:
        write_not_found(reporter, self.notfound)


@contextlib.contextmanager
def selection_deferred_to_children(config: pytest.Config) -> Iterator[None]:
    """Hide ``-k``, ``-m`` and ``--deselect`` from the parent's item selection.

    The parent only has one placeholder per file; the children apply the
    selection to the real tests.  This relies on the ``dest`` names of
    pytest's own options; ``tests/test_controller.py`` fails if they change.
    """
    option = config.option
    saved = {name: getattr(option, name) for name in _CHILD_SELECTION_OPTIONS}
    for name, blank in _CHILD_SELECTION_OPTIONS.items():
        setattr(option, name, blank)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(option, name, value)
