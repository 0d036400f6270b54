"""Routine state: what the project builds as a matter of course (a counter
advanced, a cache filled, an object created lazily, a private cache rebuilt)
is told apart from a leak (``guard/routine.py``) and kept as the test left
it, as a plain run keeps it (``guard/safety.py``, issue 45)."""

from __future__ import annotations

import types

import pytest
from tests.conftest import TIMEOUT

from pytest_isolation.guard.routine import classify
from pytest_isolation.guard.routine import grown
from pytest_isolation.guard.state import MISSING


class Service:
    pass


@pytest.mark.parametrize(
    ("key", "old", "new", "kind"),
    [
        ("m.C.cls_counter", 3, 4, "counter"),
        ("m.Table._lastrowid", 0, 1, "counter"),  # private: a counter whatever its name
        ("m.settings.LEVEL", 10, 99, ""),  # a public setting raised: a leak
        ("m.C.count", 4, 3, ""),  # a counter going down is no counter
        ("m._instance", None, Service(), "created"),
        ("m.handler", None, print, ""),  # behaviour installed: a patch
        ("m.PLUGINS", {"a": 1}, {"a": 1, "b": 2}, "filled"),  # a bigger copy bound
        ("m.ITEMS", [1], [1, 2], "filled"),
        ("m.ITEMS", [1], [2, 1], ""),  # not the old items first: rebuilt otherwise
        ("m._tokens", {"a": 1}, {"b": 2}, "rebuilt"),
        ("m.app._got_first_request", False, True, "created"),  # a private flag set once
        ("m._werkzeug_version", "", "3.1.9", "created"),  # found on first use
        ("m.settings.DEBUG", False, True, ""),  # a public flag raised: a leak
        ("m._mode", "fast", "safe", ""),  # a private value changed: a leak
        ("m._ready", True, False, ""),  # a flag lowered: a leak
        ("m._classes", {"a": 1, "b": 2}, {}, ""),  # a registry reset by rebinding: a leak
        ("m._classes", {"a": 1, "b": 2}, {"c": 3}, ""),  # fewer entries: no cache made again
        ("m.TOKENS", {"a": 1}, {"b": 2}, ""),  # public: a leak
    ],
)
def test_classify(key: str, old: object, new: object, kind: str) -> None:
    assert classify("attribute", key, old, new) == kind


def test_a_first_import_is_routine() -> None:
    module = types.ModuleType("lazy_mod")
    assert classify("sys.modules", "lazy_mod", MISSING, module) == "imported"
    assert classify("sys.modules", "lazy_mod", module, MISSING) == ""


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ({"a": 1}, {"a": 1, "b": 2}, True),
        ({"a": 1}, {"a": 2, "b": 2}, False),  # an old value changed
        ({"a": 1}, {"a": 1}, False),  # not bigger
        ([1, 2], [1, 2, 3], True),
        ([1, 2], [2, 1, 3], False),
        ({1}, {1, 2}, True),
        ({1}, {2, 3}, False),
        ("ab", "abc", False),  # only containers
    ],
)
def test_grown(old: object, new: object, expected: bool) -> None:
    assert grown(old, new) is expected


def test_routine_state_is_kept_as_a_plain_run_keeps_it(pytester: pytest.Pytester) -> None:
    """A lazily built cache, a singleton, a counter and a registry filled by
    a loader: each test sees what the tests before it left, with the guard
    as without it, and nothing is reported as a leak."""
    pytester.makepyfile(
        **{
            "proj/__init__.py": "",
            "proj/lexer.py": """
import functools

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

class Row:
    _lastrowid = 0
    STORE = {}

    def __init__(self):
        Row._lastrowid += 1
        if Row._lastrowid in Row.STORE:
            raise ValueError("duplicate primary key")
        Row.STORE[Row._lastrowid] = self

REGISTRY = {}

@functools.cache
def load():
    REGISTRY["x"] = 1
""",
        },
        test_a="""
            import proj.lexer as lexer

            def test_1():
                lexer.Lexer.tokens(); lexer.Service.get(); lexer.Row(); lexer.load()

            def test_2():
                assert "_tokens" in vars(lexer.Lexer)
                assert lexer.Service.get() is lexer.Service._instance
                lexer.Row(); lexer.load()
                assert lexer.REGISTRY["x"] == 1
        """,
    )
    plain = pytester.runpytest_subprocess("-p", "no:isolation", timeout=TIMEOUT)
    plain.assert_outcomes(passed=2)
    for tier in ((), ("--isolation-leaks-deep",)):
        result = pytester.runpytest_subprocess(
            "-p",
            "isolation",
            "-p",
            "no:randomly",
            "--isolation-leaks=error",
            "-v",
            *tier,
            timeout=TIMEOUT,
        )
        result.assert_outcomes(passed=2)
        result.stdout.no_fnmatch_line("*= isolation: * leak* by * =*")
        result.stdout.fnmatch_lines(
            [
                "isolation: routine state of 2 tests kept (1 counter advanced, 2 created lazily,"
                " * filled lazily; not leaks)",
            ]
        )
