"""Sharding: split a suite's test files over N CI jobs, every file in exactly one.

Sharding happens only when asked (``--isolation-shard=K/N``, or ``auto`` to
read a CI system's parallel-job variables).  Assignment depends only on
what every job shares: the files' rootdir-relative paths and, for the
``duration`` strategy, a committed durations file (never pytest's cache,
which each job has or lacks on its own disk), so every job computes the same
split.  ``duration`` balances them (longest first onto the least loaded
shard, then swaps between the fullest and the emptiest shard while that
shortens the longest).  Each shard's run report carries a digest of the
split, so that merging the reports proves they were one partition.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import json
from collections.abc import Iterable
from collections.abc import Mapping
from pathlib import Path
from typing import get_args

import pytest

from pytest_isolation.core import options
from pytest_isolation.core import outputs
from pytest_isolation.core.kinds import ShardStrategy

STRATEGIES: tuple[ShardStrategy, ...] = get_args(ShardStrategy)
#: CI variables (index, total, whether the index is 0-based), checked in this order.
CI_VARIABLES = (
    ("CI_NODE_INDEX", "CI_NODE_TOTAL", False),
    ("CIRCLE_NODE_INDEX", "CIRCLE_NODE_TOTAL", True),
    ("BUILDKITE_PARALLEL_JOB", "BUILDKITE_PARALLEL_JOB_COUNT", True),
)
CACHE_KEY = "isolation/durations"
#: Assumed duration of a file without a record, as a share of the known mean.
UNKNOWN = 1.0


@dataclasses.dataclass(frozen=True)
class Shard:
    index: int  # 1-based
    total: int
    source: str  # the option, or the CI variables it came from


def parse(text: str, source: str) -> Shard:
    """``K/N``, 1-based; anything else is a usage error naming ``source``."""
    index_text, slash, total_text = text.strip().partition("/")
    try:
        if not slash:
            raise ValueError
        index, total = int(index_text), int(total_text)
    except ValueError:
        raise pytest.UsageError(
            f"{source}: invalid shard {text!r}; expected K/N, e.g. 2/4"
        ) from None
    if total < 1 or not 1 <= index <= total:
        raise pytest.UsageError(
            f"{source}: invalid shard {text!r}; K must be between 1 and N, and N at least 1"
        )
    return Shard(index, total, source)


def requested(text: str, source: str, environ: Mapping[str, str]) -> Shard | None:
    """The shard ``text`` asks for: ``K/N``, or ``auto`` for the CI variables
    (None when none are set: the whole suite runs)."""
    if text.strip() == "auto":
        return from_environment(environ)
    return parse(text, source)


def from_environment(environ: Mapping[str, str]) -> Shard | None:
    """The shard a CI system's parallel-job variables describe, if any; a
    bad value is a usage error naming the variables and their values as set."""
    for index_name, total_name, zero_based in CI_VARIABLES:
        if index_name in environ and total_name in environ:
            index_text, total_text = environ[index_name], environ[total_name]
            first = 0 if zero_based else 1
            values = f"{index_name}={index_text!r}, {total_name}={total_text!r}"
            if not (options.whole(index_text) and options.whole(total_text)):
                raise pytest.UsageError(
                    f"{index_name}/{total_name}: invalid values {values}; expected whole numbers"
                )
            index, total = int(index_text), int(total_text)
            if total < 1 or not first <= index < total + first:
                last = "N-1" if zero_based else "N"
                raise pytest.UsageError(
                    f"{index_name}/{total_name}: invalid values {values}; {index_name} must be "
                    f"between {first} and {last} (it counts from {first}), and {total_name} "
                    "at least 1"
                )
            return Shard(index + 1 - first, total, f"{index_name}/{total_name}")
    return None


def round_robin(files: Iterable[str], total: int) -> dict[str, int]:
    """Sorted paths dealt out in turn: shard of the i-th file is i mod N (0-based)."""
    return {name: position % total for position, name in enumerate(sorted(files))}


def by_duration(durations: Mapping[str, float], total: int) -> dict[str, int]:
    """Balance durations over ``total`` shards (0-based shard numbers)."""
    ordered = sorted(durations, key=lambda name: (-durations[name], name))
    loads = [0.0] * total
    members: list[list[str]] = [[] for _ in range(total)]
    for name in ordered:  # longest first onto the least loaded (lowest number on ties)
        shard = min(range(total), key=lambda s: (loads[s], s))
        loads[shard] += durations[name]
        members[shard].append(name)
    _improve(durations, loads, members)
    return {name: shard for shard, names in enumerate(members) for name in names}


def _improve(durations: Mapping[str, float], loads: list[float], members: list[list[str]]) -> None:
    """Move or swap files from the fullest shard to the emptiest while that
    lowers the fullest shard's load (deterministic: ties by name)."""
    for _ in range(10 * sum(map(len, members)) + 10):
        full = max(range(len(loads)), key=lambda s: (loads[s], -s))
        empty = min(range(len(loads)), key=lambda s: (loads[s], s))
        gap = loads[full] - loads[empty]
        if gap <= 0:
            return
        best: tuple[float, str, str | None] | None = None
        small = sorted((durations[name], name) for name in members[empty])
        small_times = [time for time, _ in small]
        for name in sorted(members[full]):
            moved = durations[name]
            # Moving ``name`` alone, or swapping it with one ``other`` of the
            # emptiest shard: the transfer t = moved - other must be in (0, gap).
            for other_time, candidate in _candidates(small, small_times, moved - gap / 2):
                transfer = moved - other_time
                if 0 < transfer < gap:
                    score = abs(gap / 2 - transfer)
                    if best is None or score < best[0]:
                        best = (score, name, candidate)
            if 0 < moved < gap:
                score = abs(gap / 2 - moved)
                if best is None or score < best[0]:
                    best = (score, name, None)
        if best is None:
            return
        _, moved_name, swapped = best
        members[full].remove(moved_name)
        members[empty].append(moved_name)
        loads[full] -= durations[moved_name]
        loads[empty] += durations[moved_name]
        if swapped is not None:
            members[empty].remove(swapped)
            members[full].append(swapped)
            loads[empty] -= durations[swapped]
            loads[full] += durations[swapped]


def _candidates(
    small: list[tuple[float, str]], times: list[float], target: float
) -> list[tuple[float, str]]:
    """The files of the emptiest shard nearest to ``target`` in duration."""
    at = bisect.bisect_left(times, target)
    return small[max(0, at - 1) : at + 1]


def assign(
    files: Iterable[str],
    total: int,
    strategy: ShardStrategy,
    durations: Mapping[str, float] | None,
) -> tuple[dict[str, int], str]:
    """Each file's 0-based shard, and the strategy used (``auto``: ``duration``
    with a durations file, ``round-robin`` without)."""
    names = sorted(set(files))
    given = durations or {}
    known = {name: given[name] for name in names if name in given}
    if strategy == "auto":
        strategy = "duration" if durations is not None else "round-robin"
    if strategy == "round-robin":
        return round_robin(names, total), strategy
    mean = sum(known.values()) / len(known) if known else 1.0
    filled = {name: max(0.0, known.get(name, mean * UNKNOWN)) for name in names}
    return by_duration(filled, total), strategy


def digest(assignment: Mapping[str, int], total: int) -> str:
    """A short digest of a whole split: equal in every shard of the same one."""
    text = json.dumps([total, sorted(assignment.items())], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_durations(path: Path, source: str) -> dict[str, float]:
    """A durations file: ``{"path/to/test_x.py": seconds, ...}``; ``source``
    (the option, or the ini key) names it in a usage error."""
    try:
        data = json.loads(outputs.read_input(path))
    except FileNotFoundError:
        raise pytest.UsageError(f"{source}: no such file: {str(path)!r}") from None
    except OSError as error:  # a directory, a file it may not read
        raise pytest.UsageError(
            f"{source}: cannot read {str(path)!r}: {error.strerror or error}"
        ) from None
    except ValueError as error:  # not JSON, or not UTF-8
        raise pytest.UsageError(f"{source}: {str(path)!r} is not valid JSON: {error}") from None
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and _seconds(v) for k, v in data.items()
    ):
        raise pytest.UsageError(
            f"{source}: {str(path)!r} must map file paths to seconds (finite numbers of 0 or more)"
        )
    return {key: float(value) for key, value in data.items()}


def _seconds(value: object) -> bool:
    """A duration: a finite number of 0 or more (JSON's ``NaN`` and ``1e400``
    parse, as nan and inf; ``true`` is an int to Python)."""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and 0 <= value < float("inf")
    )


def store_durations(target: Path, durations: Mapping[str, float]) -> str | None:
    """Write the durations file (``target`` as :func:`.outputs.checked` gave
    it); the error in words, if it could not be written."""
    text = json.dumps({k: round(v, 4) for k, v in sorted(durations.items())}, indent=1)
    return outputs.write(target, text + "\n")
