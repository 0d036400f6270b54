"""Splitting ``path::name`` arguments for file mode.

The parent collects files without importing them, so it cannot match the
``::name`` part of an argument; it collects the file and the child narrows
to the named tests.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

Selector = tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class NodeArgs:
    #: The arguments with ``::name`` parts removed, deduplicated, in order.
    paths: list[str]
    #: Plain path arguments (directories or whole files), absolute.
    whole: frozenset[Path]
    #: For files named with ``::name`` parts: the name tuples, absolute path keys.
    selectors: dict[Path, list[Selector]]

    def selectors_for(self, path: Path) -> tuple[Selector, ...] | None:
        """The selectors narrowing ``path``, or None to run the whole file."""
        if path in self.whole or any(p in self.whole for p in path.parents):
            return None
        found = self.selectors.get(path)
        return None if found is None else tuple(found)


def split_node_args(args: Sequence[str], invocation_dir: Path) -> NodeArgs:
    paths: list[str] = []
    whole: set[Path] = set()
    selectors: dict[Path, list[Selector]] = {}
    for arg in args:
        path, sep, rest = arg.partition("::")
        absolute = Path(os.path.abspath(invocation_dir / path))
        if sep and rest:
            selectors.setdefault(absolute, []).append(tuple(rest.split("::")))
        else:
            whole.add(absolute)
        if path not in paths:
            paths.append(path)
    return NodeArgs(paths, frozenset(whole), selectors)


def fail_if_not_found(session: pytest.Session, notfound: Sequence[str]) -> None:
    """As pytest does for a ``path::name`` that names no test: exit code 4."""
    if notfound:
        session.exitstatus = pytest.ExitCode.USAGE_ERROR


def write_not_found(reporter: pytest.TerminalReporter, notfound: Sequence[str]) -> None:
    for arg in notfound:
        reporter.write_line(f"ERROR: not found: {arg}", red=True)
