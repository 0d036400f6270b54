"""Splitting path::name arguments, and matching names in the child."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_isolation.core.nodeid import matches
from pytest_isolation.filemode.parent.nodeargs import split_node_args

ROOT = Path("/work/suite")


def test_plain_paths_run_whole_files() -> None:
    args = split_node_args(["tests", "other/test_x.py"], ROOT)
    assert args.paths == ["tests", "other/test_x.py"]
    assert args.selectors_for(ROOT / "tests/sub/test_a.py") is None
    assert args.selectors_for(ROOT / "other/test_x.py") is None


def test_node_ids_are_stripped_and_kept_per_file() -> None:
    args = split_node_args(
        ["tests/test_a.py::test_1", "tests/test_a.py::TestC::test_m", "./tests/test_b.py::t"],
        ROOT,
    )
    assert args.paths == ["tests/test_a.py", "./tests/test_b.py"]
    assert args.selectors_for(ROOT / "tests/test_a.py") == (("test_1",), ("TestC", "test_m"))
    assert args.selectors_for(ROOT / "tests/test_b.py") == (("t",),)


def test_a_whole_directory_wins_over_node_ids() -> None:
    args = split_node_args(["tests/test_a.py::test_1", "tests"], ROOT)
    assert args.selectors_for(ROOT / "tests/test_a.py") is None


@pytest.mark.parametrize(
    ("nodeid", "selector", "expected"),
    [
        ("t.py::test_x", ("test_x",), True),
        ("t.py::test_x[1-a]", ("test_x",), True),
        ("t.py::test_x[1-a]", ("test_x[1-a]",), True),
        ("t.py::test_x[2-a]", ("test_x[1-a]",), False),
        ("t.py::test_xy", ("test_x",), False),
        ("t.py::TestC::test_m", ("TestC",), True),
        ("t.py::TestC::test_m", ("TestC", "test_m"), True),
        ("t.py::TestD::test_m", ("TestC", "test_m"), False),
        ("t.py::TestC", ("TestC", "test_m"), False),
    ],
)
def test_matches_like_pytest(nodeid: str, selector: tuple[str, ...], expected: bool) -> None:
    assert matches(nodeid, selector) is expected
