"""Searching the tests before a victim for the ones that change its outcome.

``reproduces(units)`` runs the given units (lists of node ids, in their
original order) and then the victim, and says whether the victim's
order-dependent outcome came back.  The search assumes one culprit and
checks the answer at the end: with ``k``-way splits that is about
``log_k(n) + 1`` runs; only when no single unit reproduces does it fall back
to delta debugging for a minimal set.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence

Unit = tuple[str, ...]
#: Runs several candidate sets at once; one answer per set, in order.
Reproduces = Callable[[Sequence[Sequence[Unit]]], list[bool]]
#: Told how many candidates are left before each round ("12 files").
Note = Callable[[str], None]


def _quiet(text: str) -> None:
    del text


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


def one(
    units: Sequence[Unit], reproduces: Reproduces, width: int, note: Note = _quiet, what: str = ""
) -> Unit | None:
    """The single unit that reproduces alone, assuming there is one; None if
    the unit found does not reproduce alone (then a set is needed)."""
    candidates = list(units)
    while len(candidates) > 1:
        note(f"{len(candidates)} {what} left".replace("  ", " "))
        pieces = split(candidates, width + 1)
        answers = reproduces(pieces[:-1])
        hit = next((p for p, yes in zip(pieces, answers, strict=False) if yes), None)
        candidates = hit if hit is not None else pieces[-1]
    if not candidates:
        return None
    note(f"checking the one {what.removesuffix('s')} left".replace("  ", " "))
    return candidates[0] if reproduces([candidates])[0] else None


def minimal(
    units: Sequence[Unit], reproduces: Reproduces, note: Note = _quiet, what: str = ""
) -> list[Unit]:
    """A 1-minimal set of units that reproduces (delta debugging): removing
    any one of them loses the outcome.  ``units`` must reproduce."""
    current = list(units)
    granularity = 2
    while len(current) >= 2:
        note(f"{len(current)} {what} left, looking for a set".replace("  ", " "))
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
    files: Sequence[Unit], reproduces: Reproduces, width: int, note: Note = _quiet
) -> list[str]:
    """Files first, then tests within them: the culprit test(s)."""
    found = one(files, reproduces, width, note, "files")
    chosen = [found] if found is not None else minimal(files, reproduces, note, "files")
    tests = [(nodeid,) for unit in chosen for nodeid in unit]
    if len(tests) == 1:
        return list(tests[0])
    single = one(tests, reproduces, width, note, "tests") if len(chosen) == 1 else None
    if single is not None:
        return list(single)
    return [nodeid for unit in minimal(tests, reproduces, note, "tests") for nodeid in unit]
