"""What the leak guard's per-test checks cost by themselves.

Builds the guard as a run would (without running pytest), snapshots every
per-test category, then times the comparison a test that changed nothing
costs: every category's ``unchanged`` check plus the report-only leftovers
check (threads, child processes, files).  Prints the best of ``--repeat``
rounds of ``--number`` calls, in microseconds, with the number of modules
loaded (``sys.modules`` and the watched stdlib modules dominate).

    .venv/bin/python benchmarks/bench_guard_checks.py [--number 5000] [--repeat 7]

In a real run the guard's hooks cost more per test than this (pluggy's hook
wrappers, the per-file scan, cold caches after pytest's own work): see
``bench_guard.py`` for that figure.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import timeit
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pytest_isolation.guard import tracked
from pytest_isolation.guard.watch import LeakGuard


def build_guard(rootdir: Path) -> LeakGuard:
    """A guard as ``pytest_configure`` makes it, from a stand-in config."""
    config: Any = SimpleNamespace(
        rootpath=rootdir,
        option=SimpleNamespace(basetemp=None),
        getini=lambda name: [],
    )
    guard = LeakGuard(config, "warn", deep=False)
    tracked.start()
    guard._refresh_watch()
    guard.tier.ensure()
    guard.leftovers.start()
    return guard


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=5000, help="calls per round (5000)")
    parser.add_argument("--repeat", type=int, default=7, help="rounds; the best is shown (7)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        guard = build_guard(Path(tmp))
        tier = guard.tier

        def categories() -> list[object]:
            return [c for c in tier.categories if not c.unchanged(tier.saved[c])]

        if categories() or guard.leftovers.check():
            print("state changed while measuring", file=sys.stderr)
            return 1
        timings = {
            "categories": categories,
            "leftovers": guard.leftovers.check,
        }
        total = 0.0
        for name, call in timings.items():
            best = min(timeit.repeat(call, number=args.number, repeat=args.repeat))
            micros = best / args.number * 1e6
            total += micros
            print(f"{name:<11} {micros:6.1f} us per test")
        print(f"{'total':<11} {total:6.1f} us per test ({len(sys.modules)} modules loaded)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
