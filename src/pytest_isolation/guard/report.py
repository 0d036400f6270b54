"""Leak records, their messages and the terminal summary.

A record holds only strings, so a file-mode child can send it to the parent,
whose summary lists the leaks of every file.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest


@dataclasses.dataclass(frozen=True)
class Leak:
    #: Who leaked: a node id, "fixture 'x' (scope=module)", or a file.
    owner: str
    #: "test", "fixture" or "file", for the summary's counts.
    kind: str
    category: str
    #: The key ``allow_leaks`` patterns match, e.g. the variable name.
    key: str
    #: What leaked, e.g. ``os.environ['FOO'] (was unset, now 'bar')``.
    what: str
    #: Where it was made (file:line), if known.
    site: str = ""
    hint: str = ""
    #: False for report-only findings (threads, processes, files).
    restored: bool = True

    def message(self) -> str:
        site = f", at {self.site}" if self.site else ""
        undone = "" if self.restored else " (not undone)"
        return f"{self.owner} leaked {self.what}{site}{undone}; {self.hint}"

    def to_wire(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class LeakLog:
    """Every leak of the run, grouped by owner, for the terminal summary."""

    def __init__(self, policy: str) -> None:
        self.policy = policy
        self.by_owner: dict[str, list[Leak]] = defaultdict(list)
        #: Told of every leak as it is recorded (the run report counts them per file).
        self.listeners: list[Callable[[Leak], None]] = []

    def add(self, leak: Leak) -> None:
        known = self.by_owner[leak.owner]
        if leak in known:  # the same leak again, from a retry of its file
            return
        known.append(leak)
        for listener in self.listeners:
            listener(leak)

    def headline(self) -> str:
        kinds: dict[str, int] = defaultdict(int)
        for leaks in self.by_owner.values():
            kinds[leaks[0].kind] += 1
        parts = []
        for kind in ("test", "fixture", "file"):
            count = kinds.get(kind, 0)
            if count:
                parts.append(f"{count} {kind}{'s' if count != 1 else ''}")
        joined = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
        return f"isolation: {joined} leaked state"

    def summarize(self, reporter: pytest.TerminalReporter) -> None:
        if not self.by_owner:
            return
        reporter.write_sep("=", self.headline())
        if self.policy == "quiet":
            reporter.write_line("restored quietly; run with --isolation-leaks=warn for details")
            return
        for owner, leaks in self.by_owner.items():
            reporter.write_line(owner)
            for leak in sorted(leaks, key=lambda leak: (leak.category, leak.what)):
                site = f", at {leak.site}" if leak.site else ""
                undone = "" if leak.restored else " (not undone)"
                reporter.write_line(f"  [{leak.category}] {leak.what}{site}{undone}")
