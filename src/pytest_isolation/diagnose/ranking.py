"""The polluter finder's order of a culprit's leaks: the likeliest cause of
the victim's failure first (see :func:`rank`)."""

from __future__ import annotations

import re
from typing import Any

#: Kinds of state, the likeliest cause of another test's failure first.
LIKELY = (
    "env",
    "attribute",
    "container",
    "sys.modules",
    "mock",
    "cwd",
    "import",
    "logging",
    "logger",
    "fakefs",
    "interpreter",
    "process",
    "fixture-value",
    "files",
    "threads",
    "processes",
)


def rank(leaks: list[dict[str, Any]], failure: str) -> list[dict[str, Any]]:
    """Leaks most likely to explain the victim's failure first: those whose
    name appears in its failure text (state the victim's code read), then by
    kind (see :data:`LIKELY`); routine state (counters, caches) last."""

    def key(leak: dict[str, Any]) -> tuple[int, int, int]:
        return (1 if leak.get("routine") else 0, -_named(leak, failure), _kind(leak))

    return sorted(leaks, key=key)


def _named(leak: dict[str, Any], failure: str) -> int:
    """How specifically the victim's failure names the leaked key: the length
    of the longest of its dotted tails (``proj.cfg.TIMEOUT``, ``cfg.TIMEOUT``,
    ``TIMEOUT``) found as a word in the text; 0 if none is."""
    parts = [part for part in re.split(r"[^A-Za-z0-9_.]+", str(leak.get("key", ""))) if part]
    best = 0
    for part in parts:
        names = part.split(".")
        for start in range(len(names)):
            tail = ".".join(names[start:])
            if len(tail) > max(best, 2) and re.search(rf"(?<![\w.]){re.escape(tail)}\b", failure):
                best = len(tail)
                break
    return best


def _kind(leak: dict[str, Any]) -> int:
    kind = str(leak.get("category", ""))
    return LIKELY.index(kind) if kind in LIKELY else len(LIKELY)
