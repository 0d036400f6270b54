"""Node ids: the file a node id belongs to, and which tests a name selects;
and the globs that match them."""

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


def unbalanced_bracket(pattern: str) -> int:
    """Index of a ``[`` that no ``]`` closes (as fnmatch reads it), or -1."""
    index = 0
    while True:
        start = pattern.find("[", index)
        if start < 0:
            return -1
        first = start + 1
        if first < len(pattern) and pattern[first] == "!":
            first += 1
        end = pattern.find("]", first + 1)  # a ']' right after '[' or '[!' is literal
        if end < 0:
            return start
        index = end + 1
