"""Path globs of the ini keys (``isolation_paths``, ``isolation_lint_allow``).

pathlib's semantics, relative to the ini file's directory, with ``/``
between parts: ``**`` as a whole part matches any number of parts (none
too); within a part ``*``, ``?``, ``[seq]``, ``[a-m]`` and ``[!seq]`` are
``fnmatch``'s (``[*]`` is a literal ``*``, ``[[]`` a literal ``[``).
Matching walks the path once, keeping the set of pattern parts reached: its
time is the product of the two lengths at most, whatever the pattern (a
regular expression with one group per ``**`` backtracks exponentially).
A ``[`` that nothing closes is a usage error: fnmatch would read it as a
literal ``[``, which is rarely what was meant.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable

import pytest

#: A part of a pattern: ``None`` for ``**``, else whether a path part matches.
_Part = Callable[[str], bool] | None


class Glob:
    """One path glob; ``source`` names where it was written, for errors."""

    def __init__(self, text: str, source: str) -> None:
        self.text = text
        parts = text.replace("\\", "/").strip("/").split("/")
        self.parts: list[_Part] = [_part(part, source) for part in parts]

    def match(self, relative: str) -> bool:
        """Whether the whole path matches."""
        return self._walk(relative, prefixes=False)

    def match_or_parent(self, relative: str) -> bool:
        """Whether the path or one of its directories matches."""
        return self._walk(relative, prefixes=True)

    def _walk(self, relative: str, prefixes: bool) -> bool:
        parts, end = self.parts, len(self.parts)
        reached = self._closure({0})
        for name in relative.strip("/").split("/"):
            step: set[int] = set()
            for index in reached:
                if index == end:
                    continue
                part = parts[index]
                if part is None:  # ``**`` takes this name and may take more
                    step.add(index)
                elif part(name):
                    step.add(index + 1)
            reached = self._closure(step)
            if not reached:
                return False
            if prefixes and end in reached:
                return True
        return end in reached

    def _closure(self, reached: set[int]) -> set[int]:
        """``reached`` with the parts after each ``**`` that takes no name."""
        todo = list(reached)
        while todo:
            index = todo.pop()
            if index < len(self.parts) and self.parts[index] is None and index + 1 not in reached:
                reached.add(index + 1)
                todo.append(index + 1)
        return reached


def _part(part: str, source: str) -> _Part:
    if part == "**":
        return None
    if not any(char in part for char in "*?["):
        return lambda name: name == part
    _check_brackets(part, source)
    regex = re.compile(fnmatch.translate(part), re.DOTALL)
    return lambda name: regex.match(name) is not None


def _check_brackets(part: str, source: str) -> None:
    """Every ``[`` closed, as ``fnmatch`` reads a set (a ``]`` right after
    ``[`` or ``[!`` belongs to it)."""
    index = 0
    while index < len(part):
        if part[index] == "[":
            close = index + 1
            if close < len(part) and part[close] == "!":
                close += 1
            if close < len(part) and part[close] == "]":
                close += 1
            close = part.find("]", close)
            if close < 0:
                raise pytest.UsageError(
                    f"{source}: '[' without a closing ']' in {part!r}; write '[[]' for a "
                    "literal '['"
                )
            index = close
        index += 1
