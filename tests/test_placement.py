"""Where file mode runs each file (``filemode/placement.py``): the settings' syntax,
their precedence and their conflicts, without running pytest."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from pytest_isolation.filemode import placement
from pytest_isolation.filemode.placement import Placement


def test_ini_values_spell_the_three_placements() -> None:
    assert placement.parse("file", "x") == Placement("file", "", "x")
    assert placement.parse(" off ", "x").how == "off"
    assert placement.parse("group = db", "x") == Placement("group", "db", "x")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("files", "invalid mode 'files'"),
        ("group=", "invalid group name ''"),
        ("group=a b", "invalid group name 'a b'"),
        ("group", "invalid mode 'group'"),
    ],
)
def test_a_bad_ini_value_names_where_and_what(value: str, message: str) -> None:
    with pytest.raises(pytest.UsageError, match="isolation_paths") as raised:
        placement.parse(value, "isolation_paths (ini) line 'x: y'")
    assert message in str(raised.value)


def test_the_marker_arguments_give_a_placement_or_none() -> None:
    assert placement.from_arguments({}, "m") is None
    assert placement.from_arguments({"mode": "off"}, "m") == Placement("off", "", "m")
    assert placement.from_arguments({"group": "db"}, "m") == Placement("group", "db", "m")
    assert placement.from_arguments({"mode": "file", "group": "db"}, "m") == Placement(
        "group", "db", "m"
    )


def test_off_with_a_group_contradicts_itself() -> None:
    with pytest.raises(pytest.UsageError, match=r"mode='off' and group='db' contradict"):
        placement.from_arguments({"mode": "off", "group": "db"}, "tests/test_a.py:3")
    with pytest.raises(pytest.UsageError, match="invalid mode 'alone'"):
        placement.from_arguments({"mode": "alone"}, "tests/test_a.py:3")


def test_the_marker_is_read_from_the_source_without_importing(tmp_path: Path) -> None:
    path = tmp_path / "test_a.py"
    path.write_text(
        "import pytest\n"
        "raise RuntimeError('never imported')\n"
        "pytestmark = [pytest.mark.slow, pytest.mark.isolation(group='db', allow_leaks=['env'])]\n"
    )
    found = placement.marker_in_source(path)
    assert found is not None
    assert (found.how, found.group) == ("group", "db")
    assert found.source == f"{path}:3: pytestmark"


def test_every_spelling_of_the_marker_assignment_is_read(tmp_path: Path) -> None:
    spellings = {
        "plain": "pytestmark = pytest.mark.isolation(mode='off')",
        "annotated": "pytestmark: object = pytest.mark.isolation(mode='off')",
        "added": "pytestmark = []\npytestmark += [mark.isolation(mode='off')]",
        "tuple": "pytestmark = (pytest.mark.isolation(mode='off'),)",
    }
    for name, text in spellings.items():
        path = tmp_path / f"test_{name}.py"
        path.write_text(f"import pytest\nfrom pytest import mark\n{text}\n")
        found = placement.marker_in_source(path)
        assert found is not None, name
        assert found.how == "off", name


def test_no_marker_and_other_markers_give_none(tmp_path: Path) -> None:
    path = tmp_path / "test_a.py"
    path.write_text("import pytest\npytestmark = pytest.mark.isolation(allow_leaks=['env'])\n")
    assert placement.marker_in_source(path) is None
    path.write_text("def test_isolation(): pass\n")
    assert placement.marker_in_source(path) is None
    path.write_text("isolation = (\n")  # a syntax error: the child's import reports it
    assert placement.marker_in_source(path) is None


def test_a_marker_argument_that_is_not_a_literal_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "test_a.py"
    path.write_text(
        "import pytest\nGROUP = 'db'\npytestmark = pytest.mark.isolation(group=GROUP)\n"
    )
    with pytest.raises(pytest.UsageError, match=r"test_a.py:3: pytestmark: .*must be a literal"):
        placement.marker_in_source(path)


def test_two_markers_that_disagree_are_refused_naming_both(tmp_path: Path) -> None:
    path = tmp_path / "test_a.py"
    path.write_text(
        "import pytest\n"
        "pytestmark = [pytest.mark.isolation(mode='off'),\n"
        "              pytest.mark.isolation(group='db')]\n"
    )
    with pytest.raises(pytest.UsageError) as raised:
        placement.marker_in_source(path)
    assert "test_a.py:2: pytestmark (off) and" in str(raised.value)
    assert "test_a.py:3: pytestmark (group=db) disagree" in str(raised.value)


def test_the_imported_module_s_marker_is_read_the_same_way() -> None:
    module = types.ModuleType("test_a")
    module.pytestmark = [pytest.mark.filterwarnings("error"), pytest.mark.isolation(mode="off")]  # type: ignore[attr-defined]
    found = placement.marker_of_module(module, "tests/test_a.py")
    assert found is not None
    assert found.how == "off"
    assert placement.marker_of_module(types.ModuleType("test_b"), "tests/test_b.py") is None


def test_a_conftest_sets_its_directory() -> None:
    module = types.ModuleType("conftest")
    module.__file__ = "/p/tests/conftest.py"
    module.isolation_group = "db"  # type: ignore[attr-defined]
    found = placement.conftest_placement(module)
    assert found == Placement("group", "db", "/p/tests/conftest.py: isolation_group")
    module.isolation_mode = "off"  # type: ignore[attr-defined]
    with pytest.raises(
        pytest.UsageError, match=r"conftest\.py: isolation_mode and isolation_group"
    ):
        placement.conftest_placement(module)


def test_patterns_match_files_and_directories() -> None:
    (legacy, db, nested) = placement.patterns(
        ["tests/legacy: off", "tests/*/db_*.py: group=db", "**/slow/**: file"]
    )
    assert legacy.matches("tests/legacy/test_a.py")
    assert legacy.matches("tests/legacy/sub/test_a.py")
    assert not legacy.matches("tests/legacy_x/test_a.py")
    assert db.matches("tests/api/db_users.py")
    assert not db.matches("tests/db_users.py")
    assert nested.matches("slow/test_a.py")
    assert nested.matches("a/b/slow/c/test_a.py")
    assert (legacy.depth, db.depth, nested.depth) == (2, 1, 0)


def test_pattern_brackets_and_question_marks() -> None:
    (pattern,) = placement.patterns(["tests/test_[ab]?.py: off"])
    assert pattern.matches("tests/test_a1.py")
    assert not pattern.matches("tests/test_c1.py")
    (negated,) = placement.patterns(["tests/test_[!a].py: off"])
    assert negated.matches("tests/test_b.py")
    assert not negated.matches("tests/test_a.py")


def test_the_most_specific_pattern_wins() -> None:
    found = placement.patterns(["**: off", "tests/integration/**: file", "tests/*/db/*: group=db"])
    assert placement.from_patterns(found, "tests/unit/test_a.py") == found[0].placement
    assert placement.from_patterns(found, "tests/integration/test_b.py") == found[1].placement
    assert placement.from_patterns(found, "tests/integration/db/test_c.py") == found[1].placement
    assert placement.from_patterns(found, "tests/api/db/test_c.py") == found[2].placement
    assert placement.from_patterns([], "tests/test_a.py") is None


def test_equally_specific_patterns_that_disagree_are_refused_naming_both() -> None:
    found = placement.patterns(["tests/a*: off", "tests/*b: group=x", "tests/*: off"])
    with pytest.raises(pytest.UsageError) as raised:
        placement.from_patterns(found, "tests/ab/test_x.py")
    assert "'tests/a*: off' and 'tests/*b: group=x' both match 'tests/ab/test_x.py'" in str(
        raised.value
    )
    assert placement.from_patterns(found, "tests/a/test_x.py") == found[0].placement


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("tests/legacy", "expected 'GLOB: MODE'"),
        (": off", "expected 'GLOB: MODE'"),
        ("/abs/tests: off", "relative to the ini file"),
        ("../other: off", "relative to the ini file"),
        ("tests: alone", "invalid mode 'alone'"),
    ],
)
def test_a_bad_pattern_line_names_the_line(line: str, message: str) -> None:
    with pytest.raises(pytest.UsageError, match=f"isolation_paths \\(ini\\) line {line!r}"):
        placement.patterns([line])
    with pytest.raises(pytest.UsageError, match=message):
        placement.patterns([line])


def test_comments_and_blank_lines_are_skipped() -> None:
    assert placement.patterns(["", "# legacy files", "  "]) == []


def test_pattern_ranges_and_sets_follow_fnmatch() -> None:
    """Issue 31, item 6: ``test_[a-m].py`` was read as the set of ``a``,
    ``-`` and ``m``, so files were silently misplaced."""
    (ranged,) = placement.patterns(["tests/test_[a-m].py: off"])
    assert ranged.matches("tests/test_c.py")
    assert not ranged.matches("tests/test_-.py")
    assert not ranged.matches("tests/test_x.py")
    (literal,) = placement.patterns(["tests/test_[*].py: off"])
    assert literal.matches("tests/test_*.py")
    assert not literal.matches("tests/test_a.py")
    (bracket,) = placement.patterns(["tests/test_[!]].py: off"])  # a ']' first is in the set
    assert bracket.matches("tests/test_a.py")
    assert not bracket.matches("tests/test_].py")


@pytest.mark.parametrize("line", ["test_[!].py: off", "tests/[abc/test.py: file"])
def test_an_unclosed_bracket_is_a_usage_error_naming_the_line(line: str) -> None:
    """``test_[!].py`` raised ``re.error``: an INTERNALERROR."""
    with pytest.raises(pytest.UsageError) as raised:
        placement.patterns([line])
    assert str(raised.value).startswith(f"isolation_paths (ini) line {line!r}: '[' without")


def test_many_double_stars_match_in_linear_time() -> None:
    """Eight or more ``**`` parts took seconds per file (a regular
    expression's backtracking); the walk is bounded by the two lengths."""
    (deep,) = placement.patterns(["/".join(["**"] * 12 + ["x", "**", "test_z.py"]) + ": off"])
    # A regular expression would backtrack for hours here; the walk does not.
    assert not deep.matches("/".join(["d"] * 60 + ["test_a.py"]))
    assert deep.matches("a/b/x/c/test_z.py")
    assert deep.matches("x/test_z.py")
