"""The selector's decision: what runs, or why nothing does, in words and as JSON.

Refusals never widen the selection; they say by how much it is over and how
to narrow it.  No refusal text names the environment variable that opens
the full-suite gate.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from pytest_isolation.core.kinds import GraphScope
from pytest_isolation.core.kinds import SelectorScope
from pytest_isolation.core.words import agreeing
from pytest_isolation.core.words import counted
from pytest_isolation.selector.recorded import IMPORT_TIME
from pytest_isolation.selector.scopes import SCOPES
from pytest_isolation.selector.scopes import Found
from pytest_isolation.selector.scopes import Selection
from pytest_isolation.selector.scopes import stem_of

#: Version of the ``--isolation-json`` record.
RECORD_VERSION = 1

SELECTED = "selected"
SCOPE_EXCEEDED = "scope_exceeded"
ALL_NOT_ALLOWED = "all_not_allowed"
EMPTY = "empty"
INVALID_INPUT = "invalid_input"
#: Exit code of each refusal (pytest's usage error, and no tests collected).
EXIT_CODES = {SCOPE_EXCEEDED: 4, ALL_NOT_ALLOWED: 4, INVALID_INPUT: 4, EMPTY: 5}


@dataclasses.dataclass
class Caps:
    max_sources: int = 50
    max_test_files: int = 50
    max_items: int | None = None
    max_depth: int | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class GraphStats:
    files: int = 0
    reparsed: int = 0
    ms: int = 0


@dataclasses.dataclass
class RecordStats:
    """The ``recorded`` scope's record: its test files, those with a stale
    entry (and the file that made each stale), those not in it."""

    tests: int = 0
    stale: dict[str, str] = dataclasses.field(default_factory=dict)
    unrecorded: int = 0
    #: Why a record of what each test file executed was not used (scope auto or recorded).
    unused: str = ""
    #: Why each test was selected, by ``test`` then ``source``, for --isolation-explain.
    why: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "tests": self.tests,
            "stale": self.stale,
            "unrecorded": self.unrecorded,
            "unused": self.unused,
        }


@dataclasses.dataclass
class Decision:
    # Attributes: the fields of the selector's JSON decision (its schema), one value.
    outcome: str
    #: The scope (a :data:`~pytest_isolation.core.kinds.SelectorScope`), or the
    #: ``--isolation-scope`` text as given when it is none (``invalid_input``).
    scope: str
    caps: Caps
    #: "input", "select" or "collect": how far the selector got.
    phase: str = "input"
    sources: list[str] = dataclasses.field(default_factory=list)
    tests: dict[str, Found] = dataclasses.field(default_factory=dict)
    selection: Selection | None = None
    #: The refusal's text, first line ``isolation: OUTCOME: ...``.
    message: str = ""
    suggested_batches: list[list[str]] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)
    graph: GraphStats = dataclasses.field(default_factory=GraphStats)
    #: ``--isolation-allow-empty`` turned an empty selection into exit 0.
    allow_empty: bool = False
    record: RecordStats = dataclasses.field(default_factory=RecordStats)

    @property
    def exit_code(self) -> int:
        if self.outcome == EMPTY and self.allow_empty:
            return 0
        return EXIT_CODES.get(self.outcome, 0)

    def via(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for found in self.tests.values():
            counts[found.via] = counts.get(found.via, 0) + 1
        return dict(sorted(counts.items()))

    def header(self) -> str:
        if self.scope == "all":
            return (
                f"isolation: scope=all: the whole suite, {len(self.tests)} test files "
                "(the full-suite gate is open)"
            )
        via = " ".join(f"{name}:{count}" for name, count in self.via().items())
        g = self.graph
        if self.scope == "recorded":
            r = self.record
            source = (
                f"record: {counted(r.tests, 'test file')}, {len(r.stale)} stale, "
                f"{r.unrecorded} unrecorded, {g.ms} ms"
            )
        else:
            source = f"graph: {g.files} files, {g.reparsed} reparsed, {g.ms} ms"
        return (
            f"isolation: scope={self.scope} sources={len(self.sources)} "
            f"test_files={len(self.tests)}/{self.caps.max_test_files} via {via or 'nothing'} "
            f"({source})"
        )

    def notes(self) -> list[str]:
        """What the header's reader must know about the scope: why no record
        was used, which entries were stale."""
        lines = []
        if self.record.unused:
            lines.append(f"isolation: {self.record.unused}")
        stale = self.record.stale
        if stale:
            changed = sorted(set(stale.values()))
            shown = ", ".join(changed[:3]) + (
                f" and {len(changed) - 3} more" if len(changed) > 3 else ""
            )
            lines.append(
                f"isolation: the record of {counted(len(stale), 'test file')} is stale "
                f"({shown} changed, not among the changed files given): "
                f"scope impact decides for {agreeing(len(stale), 'it', 'them')}"
            )
        return lines

    def explain(self) -> list[str]:
        lines = []
        for test, found in self.tests.items():
            why = self.record.why.get(test, {}).get(found.source)
            if found.via == "recorded" and why == IMPORT_TIME:
                how = f"it loaded {found.source}, whose import-time code changed"
            elif found.via == "recorded" and why is not None:
                how = f"its tests ran {found.source}: {why}"
            elif found.via == "unrecorded":
                how = (
                    "not in the record (new, renamed, or its tests never all ran in a recorded run)"
                )
            elif found.via == "stale":
                how = (
                    f"its record is stale ({self.record.stale.get(test)} changed); by impact: "
                    + (" -> ".join(found.chain))
                )
            elif found.via == "import":
                how = f"imports it (depth {found.depth}): " + " -> ".join(found.chain)
            elif found.via == "conftest":
                how = f"under a conftest (depth {found.depth}): " + " -> ".join(found.chain[1:])
            elif found.via == "convention":
                how = f"named after {found.source}"
            else:
                how = "changed itself"
            lines.append(f"isolation: {test}: {how}")
        return lines

    def to_json(self) -> dict[str, Any]:
        selection = self.selection
        per_source: dict[str, Any] = {}
        if selection is not None:
            for source in selection.sources:
                per_source[source] = {
                    "test_files": len(selection.per_source[source]),
                    "by_depth": {str(d): n for d, n in selection.depths(source).items()},
                }
        return {
            "version": RECORD_VERSION,
            "outcome": self.outcome,
            "phase": self.phase,
            "scope": self.scope,
            "caps": self.caps.to_json(),
            "sources": sorted(self.sources),
            "test_files": sorted(self.tests),
            "per_source": per_source,
            "via": self.via(),
            "suggested_batches": self.suggested_batches,
            "warnings": self.warnings,
            "graph": dataclasses.asdict(self.graph),
            "record": self.record.to_json(),
            "message": self.message,
        }

    def json_text(self) -> str:
        return json.dumps(self.to_json(), indent=2) + "\n"


# -- refusals -------------------------------------------------------------------


def _files(count: int) -> str:
    return counted(count, "test file")


def _depth_text(counts: dict[int, int]) -> str:
    return ", ".join(f"depth {d}: {n}" for d, n in counts.items())


def batches(per_source: dict[str, set[str]], cap: int, max_sources: int) -> list[list[str]]:
    """Sources packed into batches whose test files fit the cap: the largest
    first, each into the first batch it fits (deterministic)."""
    order = sorted(per_source, key=lambda s: (-len(per_source[s]), s))
    packed: list[tuple[list[str], set[str]]] = []
    for source in order:
        tests = per_source[source]
        for members, union in packed:
            if len(members) < max_sources and len(union | tests) <= cap:
                members.append(source)
                union |= tests
                break
        else:
            packed.append(([source], set(tests)))
    return [sorted(members) for members, _ in packed]


def scope_exceeded(
    decision: Decision, narrower: dict[GraphScope, int], what: str, count: int, cap: int
) -> None:
    """Fill in a ``scope_exceeded`` refusal: the numbers, each source's
    share, and ways to narrow (a depth, a scope, batches)."""
    selection = decision.selection
    assert selection is not None
    of = "" if what == "sources" else f" for {counted(len(decision.sources), 'source')}"
    lines = [
        f"isolation: {SCOPE_EXCEEDED}: {counted(count, what.removesuffix('s'), what)}{of}, "
        f"over the cap of {cap} "
        f"(scope={decision.scope}); nothing was run"
    ]
    per_source = {s: set(selection.per_source[s]) for s in selection.sources}
    for source in sorted(per_source, key=lambda s: (-len(per_source[s]), s)):
        counts = selection.depths(source)
        detail = f" ({_depth_text(counts)})" if counts else ""
        lines.append(f"  {source}: {_files(len(per_source[source]))}{detail}")
    lines.append("to narrow it:")
    tests = selection.tests
    deepest = max((f.depth for f in tests.values()), default=0)
    test_cap = decision.caps.max_test_files
    for depth in range(deepest - 1, 0, -1):
        fitting = sum(1 for f in tests.values() if f.depth <= depth)
        if fitting <= test_cap:
            lines.append(f"  --isolation-max-depth={depth}: {_files(fitting)}")
            break
    for scope, n in narrower.items():
        if n < len(tests):
            fits = "" if n <= test_cap else f", still over {test_cap}"
            lines.append(f"  --isolation-scope={scope}: {_files(n)}{fits}")
    packed = batches(per_source, test_cap, decision.caps.max_sources)
    if len(packed) > 1:
        decision.suggested_batches = packed
        lines.append(f"  run the sources in {counted(len(packed), 'batch', 'batches')}:")
        for members in packed:
            union = set().union(*(per_source[s] for s in members))
            over = f", over {test_cap}: alone" if len(union) > test_cap else ""
            lines.append(f"    {_files(len(union))}{over}: --isolation-for " + " ".join(members))
    if lines[-1] == "to narrow it:":
        lines.append(
            "  nothing narrower fits: raise --isolation-max-test-files, or run the suite "
            "without the selector"
        )
    decision.outcome = SCOPE_EXCEEDED
    decision.message = "\n".join(lines)


def empty_reasons(decision: Decision, deleted: set[str]) -> None:
    scope = decision.scope
    lines = [
        f"isolation: {EMPTY}: no test file maps to the {counted(len(decision.sources), 'source')} "
        f"(scope={scope})"
    ]
    for source in decision.sources:
        stem = stem_of(source)
        why = f"no test named test_{stem}.py or {stem}_test.py, nor under a {stem}/ directory"
        if scope != "convention":
            why += ", and no test file imports it"
            if scope == "graph":
                why += " (other sources that import it are not followed at scope=graph)"
        if scope == "recorded":
            why = "no recorded test file ran code of it that changed"
        if source in deleted and scope == "recorded":
            why = "deleted, and no recorded test file loaded it"
        elif source in deleted:
            why = "deleted, and no file imported it" if scope != "convention" else why
        lines.append(f"  {source}: {why}")
    decision.outcome = EMPTY
    decision.message = "\n".join(lines)


def narrower_scopes(scope: SelectorScope) -> list[GraphScope]:
    return list(SCOPES[: SCOPES.index(scope)]) if scope in SCOPES else []
