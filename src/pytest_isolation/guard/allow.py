"""Opt-outs: ``@pytest.mark.isolation(allow_leaks=[...])`` and the ini list
``isolation_allow_leaks``.  An entry is ``category`` or ``category:pattern``
(shell-style, matched against the leaked key, e.g. ``env:MYAPP_*``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from fnmatch import fnmatchcase

import pytest

from pytest_isolation.core.nodeid import unbalanced_bracket

#: Every category name, in the order of the documentation.
CATEGORIES = (
    "mock",
    "sys.modules",
    "attribute",
    "env",
    "cwd",
    "import",
    "interpreter",
    "logging",
    "process",
    "fakefs",
    "threads",
    "processes",
    "files",
    "container",
    "logger",
    "fixture-value",
    "shared",
)

MARKER = "isolation"
#: pytest's ``--markers`` takes what comes before the first ``:`` as the
#: marker's signature: no colon in it.
MARKER_HELP = (
    "isolation(allow_leaks=[ENTRY, ...], mode='file'|'test'|'off', group='NAME'): leaks the "
    "pytest-isolation leak guard neither reports nor restores for this test, each ENTRY a "
    "category or category:pattern ('env:MYAPP_*', 'sys.modules:pkg.*'); in a module's "
    "pytestmark, mode and group say where file mode runs the file"
)
#: Categories whose keys are dotted Python names: a pattern with a space never matches.
DOTTED = frozenset({"sys.modules", "attribute", "import", "container"})
#: The marker's arguments that only a module's ``pytestmark`` takes (:mod:`..filemode.placement`).
PLACING = ("mode", "group")


@dataclasses.dataclass(frozen=True)
class Allowance:
    category: str
    pattern: str

    def covers(self, category: str, key: str) -> bool:
        return category == self.category and fnmatchcase(key, self.pattern)


def parse(entries: Iterable[object], source: str) -> tuple[Allowance, ...]:
    """Allowances from ``category[:pattern]`` strings; ``source`` names where they came from."""
    found = []
    for entry in entries:
        if not isinstance(entry, str):
            raise pytest.UsageError(
                f"{source}: allow_leaks entries must be strings like 'env:NAME', got {entry!r}"
            )
        category, _, pattern = entry.strip().partition(":")
        if category not in CATEGORIES:
            choices = ", ".join(CATEGORIES)
            raise pytest.UsageError(
                f"{source}: unknown leak category {category!r} in {entry!r}; choose from {choices}"
            )
        _check_can_match(entry, category, pattern, source)
        if unbalanced_bracket(pattern) >= 0:
            raise pytest.UsageError(
                f"{source}: unbalanced '[' in the pattern of {entry!r} "
                "(write '[[]' for a literal '[')"
            )
        found.append(Allowance(category, pattern or "*"))
    return tuple(found)


def _check_can_match(entry: str, category: str, pattern: str, source: str) -> None:
    """A pattern that no key of its category can match is a usage error: it
    would be accepted, match nothing, and the leak would still be reported."""
    cause = fixed = ""
    if pattern != pattern.strip():
        cause = "a key never starts or ends with a space"
        meant = f"{category}:{pattern.strip()}" if pattern.strip() else category
        fixed = f"; did you mean {meant!r}?"
    elif category == "env" and "=" in pattern:
        cause = "an environment variable's name has no '='"
    elif category in DOTTED and any(c.isspace() for c in pattern):
        cause = f"a {category} key is a dotted name, without spaces"
    if cause:
        raise pytest.UsageError(
            f"{source}: the pattern of {entry!r} can never match ({cause}){fixed}"
        )


def of_node(node: pytest.Item | pytest.Collector) -> tuple[Allowance, ...]:
    """The allowances of every ``isolation`` marker on a test, its class and module."""
    found: list[Allowance] = []
    for owner, marker in node.iter_markers_with_node(MARKER):
        placing = sorted(set(marker.kwargs) & set(PLACING))
        if placing and not isinstance(owner, pytest.Module):
            raise pytest.UsageError(
                f"{node.nodeid}: @pytest.mark.isolation({placing[0]}=...) places a whole file; "
                "give it in the module's pytestmark, not on a test or class"
            )
        unknown = set(marker.kwargs) - {"allow_leaks", *PLACING}
        if marker.args or unknown:
            raise pytest.UsageError(
                f"{node.nodeid}: @pytest.mark.isolation takes allow_leaks=[...], mode= and "
                f"group=, got {marker.args or sorted(unknown)!r}"
            )
        entries = marker.kwargs.get("allow_leaks", ())
        if isinstance(entries, str):
            entries = (entries,)
        found.extend(parse(entries, f"{node.nodeid}: @pytest.mark.isolation"))
    return tuple(found)


def allowed(allowances: Iterable[Allowance], category: str, key: str) -> bool:
    return any(allowance.covers(category, key) for allowance in allowances)
