"""Routine state that the project builds again the same way once the guard
put it back: kept as a cache from then on (``guard/routine.py``, issue 29)."""

from __future__ import annotations

import re
import types

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


class Loader:
    limit = 3

    def __init__(self) -> None:
        self.loaded: dict[str, object] = {}


def test_an_object_built_again_the_same_way_is_kept_and_a_changed_one_is_not() -> None:
    fresh, other = Loader(), Loader()
    other.loaded["en"] = object()  # what a loader has cached may differ
    assert Refills().keeps("attribute", "m.C.loader", "created", Loader()) is False
    refills = Refills()
    refills.keeps("attribute", "m.C.loader", "created", fresh)
    assert refills.keeps("attribute", "m.C.loader", "created", other)
    changed = Loader()
    changed.limit = 9  # hides the class's plain default: a test changed it
    refills = Refills()
    refills.keeps("attribute", "m.C.loader", "created", fresh)
    assert not refills.keeps("attribute", "m.C.loader", "created", changed)


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
    value = 0

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
                lexer.Lexer.tokens(); assert lexer.Service.get().value == 0

            def test_3():
                assert "_tokens" in vars(lexer.Lexer)  # kept since test_2 built it again
                assert lexer.Service.get().value == 0

            def test_4():
                lexer.Service.get().value = 4  # the kept singleton's attribute: put back

            def test_5():
                assert lexer.Service.get().value == 0
        """,
    )
    result = pytester.runpytest_subprocess("-p", "isolation", "-p", "no:randomly", timeout=TIMEOUT)
    result.assert_outcomes(passed=5)
    # The token table is kept after test_2 built it again; the singleton that
    # test_1 changed is put back, and kept after test_3 built it as test_2 did.
    result.stdout.fnmatch_lines(["isolation: routine state of * put back or kept (2 caches built*"])


def test_a_module_imported_again_by_a_later_test_is_kept() -> None:
    """Taken out after the first test that imported it; imported again from
    the same file by a later one, the code under test imports it as a matter
    of course (anyio's suite: ``sqlite3`` in every test), so it stays."""
    first, again = types.ModuleType("lazy_mod"), types.ModuleType("lazy_mod")
    first.__file__ = again.__file__ = "/project/lazy_mod.py"
    refills = Refills()
    assert not refills.keeps("sys.modules", "lazy_mod", "imported", first)
    assert refills.keeps("sys.modules", "lazy_mod", "imported", again)
