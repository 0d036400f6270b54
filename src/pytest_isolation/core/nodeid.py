"""Node ids: the file a node id belongs to, and which tests a name selects."""

from __future__ import annotations


def file_of(nodeid: str) -> str:
    """``tests/test_a.py`` of ``tests/test_a.py::TestC::test_m[1]``."""
    return nodeid.split("::", 1)[0]


def name_of(nodeid: str) -> str:
    """``TestC::test_m[1]`` of ``tests/test_a.py::TestC::test_m[1]`` (a bare file: itself)."""
    return nodeid.split("::", 1)[-1]


def selects(prefix: str, nodeid: str) -> bool:
    """Whether ``prefix`` names ``nodeid``, as a ``path::name`` argument does in pytest:
    the test itself, every parametrization of it, or every test inside a class."""
    return nodeid == prefix or nodeid.startswith((prefix + "[", prefix + "::"))


def matches(nodeid: str, names: tuple[str, ...]) -> bool:
    """Whether the ``::``-separated ``names`` of a ``path::a::b`` argument select ``nodeid``."""
    return selects("::".join(names), name_of(nodeid))
