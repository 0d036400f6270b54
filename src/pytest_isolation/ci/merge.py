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

import pytest

from pytest_isolation.core import outputs
from pytest_isolation.core.outputs import SCHEMA
from pytest_isolation.core.outputs import SCHEMA_VERSION
from pytest_isolation.core.words import counted
from pytest_isolation.record.store import Record


class MergeError(Exception):
    """A report that cannot be merged; the message names the file."""


#: The run report's JSON Schema, shipped with the package.
SCHEMA_FILE = Path(__file__).resolve().parent.parent / "run-report.schema.json"


def load(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(outputs.read_input(path))
    except OSError as error:
        raise MergeError(f"{path}: cannot read it: {error.strerror}") from None
    except ValueError as error:  # not JSON, or not UTF-8
        raise MergeError(f"{path}: not JSON: {error}") from None
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        raise MergeError(f"{path}: not a pytest-isolation run report")
    if document.get("version") != SCHEMA_VERSION:
        raise MergeError(
            f"{path}: run report version {document.get('version')!r}; "
            f"this pytest-isolation reads version {SCHEMA_VERSION}"
        )
    problem = schema_problem(document)
    if problem is not None:
        raise MergeError(f"{path}: {problem}")
    return document


def schema_problem(document: object) -> str | None:
    """Where ``document`` breaks the run report's JSON Schema, and how
    (``$.files[0].path: None is not of type 'string'``), or None."""
    try:
        import jsonschema  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        raise MergeError(
            "merging needs the jsonschema package to check the reports: "
            "pip install jsonschema (or, in a checkout of pytest-isolation, "
            "pip install -e '.[merge]')"
        ) from None
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    return None if error is None else f"{error.json_path}: {error.message}"


def check_shards(documents: Sequence[tuple[Path, dict[str, Any]]], partial: bool) -> list[str]:
    """The shards must be one split: the same total, each index once, and
    (unless ``partial``) all of them.  Returns warnings for ``partial``."""
    shards = [(path, document["shard"]) for path, document in documents]
    split = [(path, shard) for path, shard in shards if shard is not None]
    if not split:
        return []
    if len(split) != len(shards):
        whole = next(path for path, shard in shards if shard is None)
        raise MergeError(f"{whole}: a report of a whole run cannot be merged with shards")
    totals = {shard["total"] for _, shard in split}
    if len(totals) > 1:
        listed = ", ".join(f"{path} ({shard['index']}/{shard['total']})" for path, shard in split)
        raise MergeError(f"the reports are shards of different splits: {listed}")
    total = totals.pop()
    digests = {shard.get("split", "") for _, shard in split}
    if len(digests) > 1:
        listed = ", ".join(
            f"{path} ({shard['index']}/{total}: {shard['strategy']})" for path, shard in split
        )
        raise MergeError(
            f"the shards were split differently, so they are no partition of the suite "
            f"(their jobs read other durations, or collected other files): {listed}"
        )
    seen: dict[int, Path] = {}
    for path, shard in split:
        if shard["index"] in seen:
            raise MergeError(
                f"{path}: shard {shard['index']}/{total} is also {seen[shard['index']]}"
            )
        seen[shard["index"]] = path
    missing = [f"{index}/{total}" for index in range(1, total + 1) if index not in seen]
    if missing and not partial:
        raise MergeError(f"shard {', '.join(missing)} missing (merge them all, or pass --partial)")
    return [f"shard {', '.join(missing)} missing: the merged report is partial"] if missing else []


def _recorded(documents: Sequence[tuple[Path, dict[str, Any]]]) -> dict[str, Any] | None:
    """The shards' records of what each test file executed, combined (each
    file is in one shard); shards recorded with another Python or other
    packages cannot be combined."""
    combined: Record | None = None
    for path, document in documents:
        recorded = Record.from_json(document.get("recorded"))
        if recorded is None:
            continue
        if combined is None:
            combined = Record(recorded.environment, recorded.how)
        if (recorded.environment, recorded.how) != (combined.environment, combined.how):
            python, first = recorded.environment["python"], combined.environment["python"]
            what = f"{python}, not {first}" if python != first else "other installed packages"
            raise MergeError(
                f"{path}: its record of what each test file executed was made with {what} "
                "(the first report's): record every shard in one environment"
            )
        combined.update(recorded)
    return None if combined is None else combined.to_json()


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
    recorded = _recorded(documents)
    merged.pop("recorded", None)
    if recorded is not None:
        merged["recorded"] = recorded
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
    parser.add_argument(
        "--partial", action="store_true", help="merge even when some shards are missing"
    )
    options = parser.parse_args(argv)
    try:
        target = None if options.output is None else outputs.checked(options.output, "-o")
        documents = [(path, load(path)) for path in options.reports]
        warnings = check_shards(documents, options.partial)
        merged = merge(documents)
    except (MergeError, pytest.UsageError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    text = json.dumps(merged, indent=2) + "\n"
    if target is None:
        sys.stdout.write(text)
    else:
        failed = outputs.write(target, text)
        if failed is not None:
            print(f"error: {failed}", file=sys.stderr)
            return 2
    totals = merged["totals"]
    counts = ", ".join(f"{n} {name}" for name, n in totals["tests"].items() if n)
    print(
        f"merged {counted(len(options.reports), 'report')}: {counted(totals['files'], 'file')}, "
        f"{counts or 'no tests'}, "
        f"{totals['flaky']} flaky; exit code {merged['exit_code']}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
