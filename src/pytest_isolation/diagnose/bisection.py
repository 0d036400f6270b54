"""Searching the tests before a victim for the ones that change its outcome.

``reproduces(units)`` runs the given units (lists of node ids, in their
original order) and then the victim, and says whether the victim's
order-dependent outcome came back.  The search assumes one culprit and
checks the answer at the end: with ``k``-way splits that is about
``log_k(n) + 1`` runs; only when no single unit reproduces does it fall back
to delta debugging for a minimal set.

Before each round the search tells its ``note`` how many candidates are
left and how many probes it needs at most from there, if one test is the
cause (:func:`rounds`); a search for a set has no such bound (None).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence

Unit = tuple[str, ...]
#: Runs several candidate sets at once; one answer per set, in order.
Reproduces = Callable[[Sequence[Sequence[Unit]]], list[bool]]
#: Told before each round how many candidates are left ("12 files left") and
#: how many probes the search needs at most from there (None: no bound).
Note = Callable[[str, "int | None"], None]


def _quiet(text: str, most: int | None) -> None:
    del text, most


def _nothing_after(candidates: Sequence[Unit]) -> int:
    del candidates
    return 0


def split(units: Sequence[Unit], parts: int) -> list[list[Unit]]:
    """``units`` in ``parts`` contiguous, nearly equal, non-empty pieces."""
    parts = max(1, min(parts, len(units)))
    size, extra = divmod(len(units), parts)
    pieces, start = [], 0
    for index in range(parts):
        end = start + size + (1 if index < extra else 0)
        pieces.append(list(units[start:end]))
        start = end
    return pieces


def rounds(count: int, width: int) -> int:
    """The most probes :func:`one` runs to narrow ``count`` candidates down
    to one (without the check of that one): each round splits them into
    ``width + 1`` parts and runs all but the last."""
    probes = 0
    while count > 1:
        parts = min(width + 1, count)
        probes += parts - 1
        count = -(-count // parts)
    return probes


def one(
    units: Sequence[Unit],
    reproduces: Reproduces,
    width: int,
    note: Note = _quiet,
    what: str = "",
    check: Reproduces | None = None,
    later: Callable[[Sequence[Unit]], int] = _nothing_after,
) -> Unit | None:
    """The single unit that reproduces alone, assuming there is one; None if
    the unit found does not reproduce alone (then a set is needed).

    ``check`` runs that last check (by default ``reproduces``);
    :func:`search` passes :func:`_unchecked` to leave it to the next stage.
    ``later(candidates)`` is how many probes the stages after this one need
    at most, for the note."""
    candidates = list(units)
    last = check or reproduces
    checks = 0 if last is _unchecked else 1
    while len(candidates) > 1:
        most = rounds(len(candidates), width) + checks + later(candidates)
        note(f"{len(candidates)} {what} left".replace("  ", " "), most)
        pieces = split(candidates, width + 1)
        # With a probe to spare the last test is run too: that is its check.
        spare = checks and len(pieces) <= width
        answers = reproduces(pieces if spare else pieces[:-1])
        hit = next((p for p, yes in zip(pieces, answers, strict=False) if yes), None)
        if spare:
            return None if hit is None else hit[0]
        candidates = hit if hit is not None else pieces[-1]
    if not candidates:
        return None
    if last is _unchecked:
        return candidates[0]
    text = f"checking the one {what.removesuffix('s')} left".replace("  ", " ")
    note(text, 1 + later(candidates))
    return candidates[0] if last([candidates])[0] else None


def _unchecked(sets: Sequence[Sequence[Unit]]) -> list[bool]:
    """A check that runs nothing and answers yes: the stage after checks."""
    return [True for _ in sets]


def minimal(
    units: Sequence[Unit], reproduces: Reproduces, note: Note = _quiet, what: str = ""
) -> list[Unit]:
    """A 1-minimal set of units that reproduces (delta debugging): removing
    any one of them loses the outcome.  ``units`` must reproduce."""
    current = list(units)
    granularity = 2
    while len(current) >= 2:
        note(f"{len(current)} {what} left, looking for a set".replace("  ", " "), None)
        pieces = split(current, granularity)
        answers = reproduces(pieces)
        hit = next((p for p, yes in zip(pieces, answers, strict=False) if yes), None)
        if hit is not None:
            current, granularity = hit, 2
            continue
        complements = [[u for u in current if u not in piece] for piece in pieces]
        answers = reproduces(complements) if granularity > 2 else [False] * len(pieces)
        hit = next((c for c, yes in zip(complements, answers, strict=True) if yes), None)
        if hit is not None:
            current, granularity = hit, max(granularity - 1, 2)
            continue
        if granularity >= len(current):
            break
        granularity = min(granularity * 2, len(current))
    return current


def search(
    files: Sequence[Unit],
    reproduces: Reproduces,
    width: int,
    note: Note = _quiet,
    check: Reproduces | None = None,
) -> list[str]:
    """Files first, then tests within them: the culprit test(s).

    The file the rounds leave is not run on its own: the check of the test
    found in it (``check``, by default ``reproduces``) proves both.  Only
    when that test does not reproduce alone is the file run, to tell a set
    within it (delta debugging over its tests) from a set across files."""

    def tests_after(candidates: Sequence[Unit]) -> int:
        return rounds(max(map(len, candidates)), width) + 1

    found = one(files, reproduces, width, note, "files", _unchecked, tests_after)
    if found is None:
        return []
    tests = [(nodeid,) for nodeid in found]
    single = one(tests, reproduces, width, note, "tests", check)
    if single is not None:
        return list(single)
    if len(tests) > 1:
        note("checking the file left", None)
        if reproduces([[found]])[0]:
            return [nodeid for unit in minimal(tests, reproduces, note, "tests") for nodeid in unit]
    chosen = minimal(files, reproduces, note, "files")
    tests = [(nodeid,) for unit in chosen for nodeid in unit]
    if len(tests) == 1:
        return list(tests[0])
    single = one(tests, reproduces, width, note, "tests", check) if len(chosen) == 1 else None
    if single is not None:
        return list(single)
    return [nodeid for unit in minimal(tests, reproduces, note, "tests") for nodeid in unit]
