"""Facts the docs state that the code defines (issue 49 item 9): a change of
the code fails here until the page says it too."""

from __future__ import annotations

import ast
import re
import typing
from pathlib import Path

import pytest

import pytest_isolation
from pytest_isolation.filemode import wire
from pytest_isolation.guard import allow
from pytest_isolation.lint import rules
from pytest_isolation.pertest import limits

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "pytest_isolation"
HOW_IT_WORKS = ROOT / "docs" / "explanation" / "how-it-works.md"
REFERENCE = ROOT / "docs" / "reference.md"

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


# -- the reference names what the code defines ---------------------------------------


@pytest.fixture(scope="module")
def reference() -> str:
    return REFERENCE.read_text(encoding="utf-8")


def entries(reference: str) -> set[str]:
    """The names the reference's entries are headed by (``### `NAME` ``)."""
    return set(re.findall(r"^#{2,6} `([^`]+)`$", reference, re.M))


def first_column(table: str) -> list[str]:
    return re.findall(r"^\| `([^`]+)` \|", table, re.M)


def fixtures_defined() -> list[str]:
    """The functions of ``pytest_isolation/fixtures`` decorated ``@pytest.fixture``."""
    tree = ast.parse((SRC / "fixtures" / "__init__.py").read_text(encoding="utf-8"))
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any("pytest.fixture" in ast.unparse(found) for found in node.decorator_list)
    ]


def environment_variables() -> set[str]:
    """Every ``"PYTEST_ISOLATION_..."`` string the code holds."""
    return {
        name
        for path in SRC.rglob("*.py")
        for name in re.findall(r"[\"'](PYTEST_ISOLATION_[A-Z_]+)[\"']", path.read_text("utf-8"))
    }


def test_every_public_name_is_an_entry(reference: str) -> None:
    public = {name for name in pytest_isolation.__all__ if name != "__version__"}
    assert len(public) >= 12
    assert {f"pytest_isolation.{name}" for name in public} - entries(reference) == set()


def test_every_marker_is_an_entry(reference: str) -> None:
    markers = {help.split("(")[0] for help in (allow.MARKER_HELP, limits.MARKER_HELP)}
    assert markers == {"isolation", "isolation_process"}
    assert {f"@pytest.mark.{name}" for name in markers} - entries(reference) == set()


def test_every_fixture_is_an_entry(reference: str) -> None:
    fixtures = fixtures_defined()
    assert "isolated_tmp" in fixtures
    assert set(fixtures) - entries(reference) == set()


def test_every_environment_variable_is_an_entry(reference: str) -> None:
    variables = environment_variables()
    assert {"PYTEST_ISOLATION_MODE", "PYTEST_ISOLATION_CHILD"} <= variables
    assert variables - entries(reference) == set()


def test_the_leak_categories_are_the_guards_in_its_order(reference: str) -> None:
    table = section(reference, "## Leak categories")
    assert first_column(table) == list(allow.CATEGORIES)


def test_the_lint_codes_are_the_lints(reference: str) -> None:
    table = section(reference, "### Lint codes")
    assert first_column(table) == sorted(rules.CODES)


def test_a_name_without_an_entry_is_found() -> None:
    assert entries("## Fixtures\n\n### `isolated_tmp`\n\n`isolated_env` ...\n") == {"isolated_tmp"}
