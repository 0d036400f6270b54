"""Facts the docs state that the code defines (issue 49 item 9): a change of
the code fails here until the page says it too."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest

from pytest_isolation.filemode import wire

ROOT = Path(__file__).resolve().parent.parent
HOW_IT_WORKS = ROOT / "docs" / "explanation" / "how-it-works.md"

#: The kind the parent sends, described above the table rather than in it.
TO_THE_CHILD = "start"


def section(text: str, heading: str) -> str:
    """The text under a heading, up to the next heading."""
    start = text.index(f"\n{heading}\n")
    end = re.search(r"^#", text[start + len(heading) + 2 :], re.M)
    return text[start : start + len(heading) + 2 + (end.start() if end else len(text))]


def protocol_version(text: str) -> int | None:
    found = re.search(r"protocol version \(now (\d+)\)", text)
    return int(found[1]) if found else None


def table_kinds(text: str) -> list[str]:
    """The first column of the message table: `` | `kind` | ... ``."""
    return re.findall(r"^\| `([a-z-]+)` \|", text, re.M)


@pytest.fixture(scope="module")
def wire_section() -> str:
    return section(HOW_IT_WORKS.read_text(encoding="utf-8"), "### The wire protocol")


def test_the_protocol_version_is_the_wires(wire_section: str) -> None:
    assert protocol_version(wire_section) == wire.PROTOCOL_VERSION


def test_the_message_table_lists_every_kind_once(wire_section: str) -> None:
    kinds = typing.get_args(wire.MessageKind)
    listed = table_kinds(wire_section)
    assert len(listed) == len(set(listed)), "a kind is listed twice"
    assert sorted(listed) == sorted(set(kinds) - {TO_THE_CHILD})
    assert f"`{TO_THE_CHILD}`" in wire_section


def test_a_drifted_page_is_found() -> None:
    page = "\n### The wire protocol\n\nversion (now 6)... protocol version (now 6),\n\n"
    page += "| Kind | Payload |\n| --- | --- |\n| `hello` | `version` |\n\n### Next\n"
    drifted = section(page, "### The wire protocol")
    assert protocol_version(drifted) == 6
    assert table_kinds(drifted) == ["hello"]
    assert "### Next" not in drifted
