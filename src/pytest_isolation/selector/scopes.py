"""From changed files to the test files that exercise them, by scope.

``convention`` ⊆ ``graph`` ⊆ ``impact``: each scope adds to the one before,
and nothing falls back to a wider scope on its own.  Depth counts import
steps from the changed file: 0 for a changed test, a conftest's subtree and
a test found by its name, 1 for a test importing the file, and so on.
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections import deque
from typing import get_args

from pytest_isolation.core.kinds import GraphScope
from pytest_isolation.core.kinds import SelectorScope
from pytest_isolation.selector.graph import FILE
from pytest_isolation.selector.graph import ImportGraph
from pytest_isolation.selector.project import Project

#: The scopes that follow imports, narrowest first (each adds to the one before).
SCOPES: tuple[GraphScope, ...] = get_args(GraphScope)


@dataclasses.dataclass(frozen=True)
class Found:
    """How one test file was selected for one changed file."""

    test: str
    source: str
    depth: int
    #: changed, conftest, convention or import (all: the whole suite, the gate open)
    via: str
    #: test file, ..., changed file (import chains; just the two otherwise)
    chain: tuple[str, ...]


def stem_of(key: str) -> str:
    """``auth`` for ``pkg/_auth.py``; a package's name for its ``__init__.py``."""
    name = posixpath.basename(key).removesuffix(".py")
    if name == "__init__":
        name = posixpath.basename(posixpath.dirname(key))
    if name.startswith("_") and not name.startswith("__"):
        name = name[1:]
    return name


def by_convention(project: Project, source: str) -> list[str]:
    """``test_<stem>.py``/``<stem>_test.py`` anywhere in the test tree, and
    the tests under a directory named ``<stem>`` there."""
    stem = stem_of(source)
    names = {f"test_{stem}.py", f"{stem}_test.py"}
    return sorted(
        test
        for test in project.tests
        if posixpath.basename(test) in names or stem in test.split("/")[:-1]
    )


@dataclasses.dataclass
class Selection:
    scope: SelectorScope
    sources: list[str]
    #: For each source, each test it selects (shallowest way).
    per_source: dict[str, dict[str, Found]]

    @property
    def tests(self) -> dict[str, Found]:
        """Each selected test file, by its shallowest way from any source."""
        best: dict[str, Found] = {}
        for found in self.per_source.values():
            for test, way in found.items():
                known = best.get(test)
                if known is None or (way.depth, way.source) < (known.depth, known.source):
                    best[test] = way
        return dict(sorted(best.items()))

    def within(self, depth: int) -> dict[str, Found]:
        return {t: f for t, f in self.tests.items() if f.depth <= depth}

    def depths(self, source: str) -> dict[int, int]:
        counts: dict[int, int] = {}
        for way in self.per_source[source].values():
            counts[way.depth] = counts.get(way.depth, 0) + 1
        return dict(sorted(counts.items()))


def select(
    project: Project,
    graph: ImportGraph,
    sources: list[str],
    scope: SelectorScope,
    max_depth: int | None = None,
) -> Selection:
    per_source = {}
    for source in sources:
        found = _for_source(project, graph, source, scope)
        if max_depth is not None:
            found = {t: way for t, way in found.items() if way.depth <= max_depth}
        per_source[source] = found
    return Selection(scope, sources, per_source)


def _for_source(
    project: Project, graph: ImportGraph, source: str, scope: SelectorScope
) -> dict[str, Found]:
    found: dict[str, Found] = {}

    def add(test: str, depth: int, via: str, chain: tuple[str, ...]) -> None:
        if test not in found or depth < found[test].depth:
            found[test] = Found(test, source, depth, via, chain)

    if source in project.tests:
        add(source, 0, "changed", (source,))
    if project.is_conftest(source):
        for test in project.tests_under(posixpath.dirname(source)):
            add(test, 0, "conftest", (test, source))
    if source.endswith(".py") and source not in project.tests and not project.is_conftest(source):
        for test in by_convention(project, source):
            add(test, 0, "convention", (test, source))
    if scope == "convention":
        return found
    for node, chain in _importers(project, graph, source, scope):
        depth = len(chain) - 1
        if node in project.tests:
            add(node, depth, "import", chain)
        elif project.is_conftest(node):
            for test in project.tests_under(posixpath.dirname(node)):
                add(test, depth, "conftest", (test, *chain))
    return found


def _importers(
    project: Project, graph: ImportGraph, source: str, scope: SelectorScope
) -> list[tuple[str, tuple[str, ...]]]:
    """Every file that imports ``source`` (transitively, within the scope),
    with its shortest chain back to it, breadth first."""
    parent: dict[str, str | None] = {source: None}
    depth = {source: 0}
    queue = deque([source])
    reached = []
    while queue:
        node = queue.popleft()
        edges = list(graph.importers.get(node, ()))
        if node == source and node not in project.files:  # deleted: its former importers
            edges += [(importer, "full") for importer in sorted(graph.missing.get(node, ()))]
        for importer, kind in edges:
            if importer in parent or (kind == FILE and depth[node] > 0):
                continue
            if scope == "graph" and not project.is_test_side(importer):
                continue
            parent[importer] = node
            depth[importer] = depth[node] + 1
            queue.append(importer)
            chain = [importer]
            step = parent[importer]
            while step is not None:
                chain.append(step)
                step = parent[step]
            reached.append((importer, tuple(chain)))
    return reached
