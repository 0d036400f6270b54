"""Merge the run reports of a suite's shards into one.

    python -m pytest_isolation.merge shard-*.json -o run.json

The result is a run report of the same schema: every file once, totals
summed, flaky and quarantined tests of every shard, the worst exit code,
the earliest start and the longest duration; ``shard`` is null.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_isolation.ci.runreport import SCHEMA
from pytest_isolation.ci.runreport import SCHEMA_VERSION


class MergeError(Exception):
    """A report that cannot be merged; the message names the file."""


def load(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise MergeError(f"{path}: cannot read it: {error.strerror}") from None
    except ValueError as error:
        raise MergeError(f"{path}: not JSON: {error}") from None
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        raise MergeError(f"{path}: not a pytest-isolation run report")
    if document.get("version") != SCHEMA_VERSION:
        raise MergeError(
            f"{path}: run report version {document.get('version')!r}; "
            f"this pytest-isolation reads version {SCHEMA_VERSION}"
        )
    return document


def merge(documents: Sequence[tuple[Path, dict[str, Any]]]) -> dict[str, Any]:
    if not documents:
        raise MergeError("no run reports to merge")
    first = documents[0][1]
    files: dict[str, dict[str, Any]] = {}
    tests: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    merged: dict[str, Any] = {
        **first,
        "created": min(d["created"] for _, d in documents),
        "duration": max(d["duration"] for _, d in documents),
        "exit_code": next((d["exit_code"] for _, d in documents if d["exit_code"]), 0),
        "shard": None,
    }
    for key in ("flaky", "quarantined", "quarantine_passing", "quarantine_stale"):
        merged[key] = []
    leaks = flaky = 0
    for path, document in documents:
        for entry in document["files"]:
            if entry["path"] in files:
                raise MergeError(f"{path}: {entry['path']} is in another report too")
            files[entry["path"]] = entry
            outcomes[entry["outcome"]] += 1
        tests.update(document["totals"]["tests"])
        leaks += document["totals"]["leaks"]
        flaky += document["totals"]["flaky"]
        for key in ("flaky", "quarantined", "quarantine_passing"):
            merged[key] += document[key]
        for stale in document["quarantine_stale"]:
            if stale not in merged["quarantine_stale"]:
                merged["quarantine_stale"].append(stale)
    merged["files"] = [files[path] for path in sorted(files)]
    merged["totals"] = {
        "files": len(files),
        "outcomes": dict(sorted(outcomes.items())),
        "tests": dict(tests),
        "flaky": flaky,
        "leaks": leaks,
    }
    return merged


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_isolation.merge",
        description="Merge the --isolation-report files of a suite's shards into one report.",
    )
    parser.add_argument("reports", nargs="+", type=Path, metavar="REPORT")
    parser.add_argument(
        "-o", "--output", type=Path, help="where to write the merged report (default: stdout)"
    )
    options = parser.parse_args(argv)
    try:
        merged = merge([(path, load(path)) for path in options.reports])
    except MergeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    text = json.dumps(merged, indent=2) + "\n"
    if options.output is None:
        sys.stdout.write(text)
    else:
        options.output.write_text(text, encoding="utf-8")
    totals = merged["totals"]
    counts = ", ".join(f"{n} {name}" for name, n in totals["tests"].items() if n)
    print(
        f"merged {len(options.reports)} reports: {totals['files']} files, {counts or 'no tests'}, "
        f"{totals['flaky']} flaky; exit code {merged['exit_code']}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
