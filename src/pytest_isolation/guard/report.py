"""The run's leaks and their terminal summary.

A leak (:class:`pytest_isolation.core.records.Leak`) holds only strings, so a
file-mode child can send it to the parent, whose summary lists the leaks of
every file.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import pytest

from pytest_isolation.core.records import Leak


class LeakLog:
    """Every leak of the run, grouped by owner, for the terminal summary."""

    def __init__(self, policy: str, notify: Callable[[Leak], None]) -> None:
        self.policy = policy
        self.by_owner: dict[str, list[Leak]] = defaultdict(list)
        #: Told of every leak the first time it is recorded.
        self.notify = notify

    def add(self, leak: Leak) -> None:
        known = self.by_owner[leak.owner]
        if leak in known:  # the same leak again, from a retry of its file
            return
        known.append(leak)
        self.notify(leak)

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
