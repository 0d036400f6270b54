"""Routine state that the project builds again the same way once the guard
put it back: kept as a cache from then on (``guard/routine.py``, issue 29)."""

from __future__ import annotations

import re

import pytest
from tests.conftest import TIMEOUT

from pytest_isolation.guard.routine import Refills
from pytest_isolation.guard.routine import alike


class Service:
    pass


def _table() -> dict[str, list[tuple[object, str]]]:
    """A token table as pygments builds it: new bound methods each time."""
    return {"root": [(re.compile("a+", re.I).fullmatch, "Text")]}


@pytest.mark.parametrize(
    ("was", "new", "expected"),
    [
        ({"a": 1}, {"a": 1}, True),
        ({"home": "/tmp/a"}, {"home": "/tmp/b"}, False),  # built from another test's data
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ([1, 2], [1, 2, 3], False),
        (Service(), Service(), False),  # a singleton made anew: never a cache
        ([Service()], [Service()], True),  # below the top, the same type is enough
        ("x", "y", False),
        ({"a": [1]}, {"a": (1,)}, False),
    ],
)
def test_alike(was: object, new: object, expected: bool) -> None:
    assert alike(was, new) is expected


def test_a_token_table_built_again_is_alike() -> None:
    assert alike(_table(), _table())


def test_a_refill_alike_is_kept_from_then_on() -> None:
    refills = Refills()
    assert not refills.keeps("attribute", "m.C._tokens", "created", {"a": 1})  # taken away
    assert refills.keeps("attribute", "m.C._tokens", "created", {"a": 1})  # built again
    assert refills.keeps("attribute", "m.C._tokens", "created", {"b": 2})  # kept for the run


def test_a_filled_container_or_a_counter_is_never_kept() -> None:
    refills = Refills()
    for _ in range(3):
        assert not refills.keeps("container", "m.ITEMS", "filled", [1])
        assert not refills.keeps("attribute", "m.C.count", "counter", 2)


def test_a_cache_built_again_the_same_way_is_kept_in_a_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        **{
            "proj/__init__.py": "",
            "proj/lexer.py": """
class Lexer:
    @classmethod
    def tokens(cls):
        if "_tokens" not in cls.__dict__:
            cls._tokens = {"root": ["a", "b"]}
        return cls._tokens

class Service:
    _instance = None

    @classmethod
    def get(cls):
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance
""",
        },
        test_a="""
            import proj.lexer as lexer

            def test_1():
                lexer.Lexer.tokens(); lexer.Service.get().value = 1

            def test_2():
                lexer.Lexer.tokens(); assert not hasattr(lexer.Service.get(), "value")

            def test_3():
                assert "_tokens" in vars(lexer.Lexer)  # kept since test_2 built it again
                assert not hasattr(lexer.Service.get(), "value")
        """,
    )
    result = pytester.runpytest_subprocess("-p", "isolation", "-p", "no:randomly", timeout=TIMEOUT)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["isolation: routine state of * put back or kept (1 cache built*"])
