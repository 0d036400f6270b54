"""Number agreement (issue 33): every count a person reads goes through
:func:`pytest_isolation.core.words.counted` (or ``agreeing`` for a verb or
pronoun), checked on the source so that a hand-made plural cannot come back
(``1 tests in 1 files``, ``1 sources``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import pytest_isolation
from pytest_isolation.core.words import agreeing
from pytest_isolation.core.words import counted

SOURCE = Path(pytest_isolation.__file__).parent

#: Ways of making a plural by hand: ``'s' if n != 1``, ``'s' * (n != 1)``,
#: ``"file" if n == 1 else "files"``, and a count-like value written straight
#: before a plural noun (``f"{len(found)} files"``, ``f"{count} tests"``).
HAND_MADE = [
    re.compile(r"""["']s["'] (if|\*)"""),
    re.compile(r"""["'](\w+)["'] if [^"']*[=!]= 1 else ["']\1(s|es)["']"""),
    re.compile(
        r"""\{(len\([^{}]*\)|[a-z_]*count[a-z_]*|total|n|number)\} """
        r"""(?!(is|was|has|as|its)\b)[a-z]+s\b"""
    ),
]


def hand_made(text: str) -> list[str]:
    """The lines of ``text`` that make a plural by hand; a line may say why
    it can (the count is never 1) in a ``# agrees:`` comment."""
    return [
        line.strip()
        for line in text.splitlines()
        if "# agrees:" not in line and any(pattern.search(line) for pattern in HAND_MADE)
    ]


def test_counted_agrees() -> None:
    assert [counted(n, "test") for n in (0, 1, 2)] == ["0 tests", "1 test", "2 tests"]
    assert counted(1, "directory", "directories") == "1 directory"
    assert counted(3, "directory", "directories") == "3 directories"
    assert [agreeing(n, "is", "are") for n in (1, 2)] == ["is", "are"]


def test_no_plural_is_made_by_hand_in_the_source() -> None:
    found = {
        str(path.relative_to(SOURCE)): lines
        for path in sorted(SOURCE.rglob("*.py"))
        if (lines := hand_made(path.read_text(encoding="utf-8")))
    }
    assert found == {}


@pytest.mark.parametrize(
    "line",
    [
        """f"{count} tests in {files} file{'s' if files != 1 else ''}\"""",
        """f"{len(found)} finding{'s' * (len(found) != 1)}\"""",
        """noun = "file" if total == 1 else "files\"""",
        """f"isolation: {len(names)} modules re-imported\"""",
    ],
)
def test_a_hand_made_plural_is_found(line: str) -> None:
    assert hand_made(line) == [line]


def test_a_line_may_say_why_its_count_is_never_one() -> None:
    assert hand_made('many = f"{count} tests, first "  # agrees: count > 1 here') == []
