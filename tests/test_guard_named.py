"""The guard's second oracle: a victim's polluter is named with what it
leaked (issue 45, classes B and D). Each polluter here makes its victim fail
in a plain run; with the guard the polluter and the key are named, and where
the rule allows the state is put back, in a plain run and in file mode."""

from __future__ import annotations

import json
import textwrap

import pytest
from tests.conftest import GUARD_MODES
from tests.conftest import TIMEOUT
from tests.conftest import literal

PROJECT = {
    "proj/__init__.py": "",
    "proj/state.py": """
        class AlwaysEqual:
            def __eq__(self, other):
                return True

            __hash__ = object.__hash__

        class Plugin:
            pass

        class Rule:
            enabled = True

        TARGET = AlwaysEqual()
        RULES = {"auth": [Rule(), Rule()]}
    """,
}

#: name: (polluter body, victim body, the key the report names, put back).
CASES = {
    "module-taken-out": (
        "import sys; del sys.modules['proj.state']",
        "import sys; assert 'proj.state' in sys.modules",
        "sys.modules['proj.state']",
        True,
    ),
    "module-replaced-by-a-module": (
        "import sys, types; sys.modules['proj.state'] = types.ModuleType('proj.state')",
        "import sys; assert sys.modules['proj.state'] is s",
        "sys.modules['proj.state'] (another module object: from no file, was from",
        True,
    ),
    "equal-object-rebound": (
        "s.TARGET = s.AlwaysEqual()",
        "assert s.TARGET is ORIGINAL",
        "proj.state.TARGET",
        True,
    ),
    "dunder-flag-on-a-class": (
        "s.Plugin.__configured__ = True",
        "assert not hasattr(s.Plugin, '__configured__')",
        "proj.state.Plugin.__configured__",
        True,
    ),
    "object-two-levels-down": (
        "s.RULES['auth'][1].enabled = False",
        "assert s.RULES['auth'][1].enabled",
        "proj.state.RULES['auth'][1].enabled",
        True,
    ),
    "event-loop-policy": (
        "import asyncio; asyncio.set_event_loop_policy(Custom())",
        "import asyncio; assert not isinstance(asyncio.get_event_loop_policy(), Custom)",
        "the asyncio event loop policy",
        True,
    ),
}

HEADER = """
import asyncio
import proj.state as s

ORIGINAL = s.TARGET


class Custom(asyncio.DefaultEventLoopPolicy):
    pass
"""


def _write(pytester: pytest.Pytester, polluter: str, victim: str) -> None:
    pytester.makepyfile(**{name: textwrap.dedent(text) for name, text in PROJECT.items()})
    pytester.makepyfile(
        test_a=f"{HEADER}\ndef test_polluter():\n    {polluter}\n\n"
        f"def test_victim():\n    {victim}\n"
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_victim_fails_without_the_guard(pytester: pytest.Pytester, name: str) -> None:
    polluter, victim, _, _ = CASES[name]
    _write(pytester, polluter, victim)
    result = pytester.runpytest_subprocess(
        "-p", "no:isolation", "-p", "no:randomly", timeout=TIMEOUT
    )
    result.assert_outcomes(passed=1, failed=1)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("mode", sorted(GUARD_MODES))
def test_the_polluter_is_named_with_what_it_leaked(
    pytester: pytest.Pytester, name: str, mode: str
) -> None:
    polluter, victim, key, restored = CASES[name]
    _write(pytester, polluter, victim)
    result = pytester.runpytest_subprocess(*GUARD_MODES[mode], "-p", "no:randomly", timeout=TIMEOUT)
    result.assert_outcomes(passed=2 if restored else 1, failed=0 if restored else 1)
    result.stdout.fnmatch_lines(
        [
            "*isolation: * by 1 test*",
            f"[[]*] {literal(key)} *",
            "  * test_a.py::test_polluter",  # by, or set during where no line is known
        ]
    )


DOCTEST = {
    "mod.py": '''
        def f():
            """
            >>> import os
            >>> os.environ["DOCTEST_LEAK"] = "1"
            """
    ''',
    "test_v.py": """
        import os

        def test_victim():
            assert "DOCTEST_LEAK" not in os.environ
    """,
}


@pytest.mark.parametrize("mode", sorted(GUARD_MODES))
def test_a_doctest_s_environment_write_is_its_own(pytester: pytest.Pytester, mode: str) -> None:
    """A doctest's examples run as code made at run time (``<doctest
    mod.f[1]>``), which the guard took for a library's: the write was
    neither named nor put back."""
    pytester.makepyfile(**{name: textwrap.dedent(text) for name, text in DOCTEST.items()})
    result = pytester.runpytest_subprocess(
        *GUARD_MODES[mode], "--doctest-modules", "mod.py", "test_v.py", timeout=TIMEOUT
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            literal(
                "[env] os.environ['DOCTEST_LEAK'] (was unset, now '1'), at <doctest mod.f[1]>:1"
            ),
            "  by mod.py::mod.f",
        ]
    )


def test_a_fixture_s_leak_names_the_test_and_others_are_counted_by_kind(
    pytester: pytest.Pytester,
) -> None:
    """The owner of a fixture's leak names the test in whose teardown it was
    found; "and N more" counts tests and fixtures apart (it said "2 more
    tests" in a run of two tests)."""
    pytester.makepyfile(
        test_f="""
        import os
        import pytest

        @pytest.fixture(scope="module")
        def server():
            os.environ["SERVER_URL"] = "http://a"
            yield

        def test_uses(server):
            pass
        """,
        test_g="""
        import os

        def test_sets():
            os.environ["SERVER_URL"] = "http://b"
        """,
    )
    result = pytester.runpytest_subprocess(
        *GUARD_MODES["plain"], "-p", "no:randomly", timeout=TIMEOUT
    )
    result.assert_outcomes(passed=2)
    fixture = "fixture 'server' (scope=module) in the teardown of test_f.py::test_uses"
    result.stdout.fnmatch_lines(
        [literal("[env] os.environ['SERVER_URL'] *"), f"  by {fixture} and 1 more test"]
    )
    result.stdout.no_fnmatch_line("*more tests*")
    result.stdout.fnmatch_lines([f"*{fixture} leaked *"])


def test_one_object_under_many_names_is_one_line(pytester: pytest.Pytester) -> None:
    """A container bound in several modules (``from app.config import
    REGISTRY``) is named where it is defined, once."""
    pytester.makepyfile(
        **{
            "app/__init__.py": "",
            "app/config.py": "REGISTRY = {'a': 1}\n",
            "app/a.py": "from app.config import REGISTRY\n",
            "app/b.py": "from app.config import REGISTRY\n",
        },
        test_x="""
        import app.a, app.b
        from app import config

        def test_p():
            config.REGISTRY["a"] = 2
        """,
    )
    result = pytester.runpytest_subprocess(*GUARD_MODES["plain"], timeout=TIMEOUT)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["[[]container] app.config.REGISTRY (mutated in place) *"])
    result.stdout.no_fnmatch_line("*app.a.REGISTRY*")


def test_a_sys_path_leak_says_what_was_added(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_p="""
        import sys

        def test_p():
            sys.path.insert(0, "/opt/plugins")
        """
    )
    result = pytester.runpytest_subprocess(*GUARD_MODES["plain"], timeout=TIMEOUT)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([literal("[import] sys.path (added '/opt/plugins')")])


def test_the_run_report_counts_leaks_not_routine_state(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        **{
            "proj/__init__.py": "",
            "proj/lazy.py": "_cache = None\ndef get():\n"
            "    global _cache\n    _cache = _cache or {'a': 1}\n    return _cache\n",
        },
        test_r="""
        import os
        import proj.lazy

        def test_routine():
            proj.lazy.get()

        def test_leak():
            os.environ["REPORTED"] = "1"
        """,
    )
    report = pytester.path / "report.json"
    result = pytester.runpytest_subprocess(
        *GUARD_MODES["plain"], f"--isolation-report={report}", timeout=TIMEOUT
    )
    result.assert_outcomes(passed=2)
    data = json.loads(report.read_text())
    assert data["totals"]["leaks"] == 1
    assert [entry["leaks"] for entry in data["files"]] == [1]


REGISTRY_SWAP = {
    "mocklib.py": """
        class Registry:
            def __init__(self):
                self.urls = {}

            def add(self, url):
                if url in self.urls:
                    raise ValueError(f"{url} is registered already")
                self.urls[url] = True

        _registry = Registry()

        def add(url):
            _registry.add(url)

        def reset():
            global _registry
            _registry = Registry()
    """,
    "test_swap.py": """
        import mocklib

        def test_registers_then_resets():
            mocklib.add("http://a")
            mocklib.reset()

        def test_registers_again():
            mocklib.add("http://a")
    """,
}


@pytest.mark.parametrize("mode", sorted(GUARD_MODES))
def test_an_object_swapped_for_a_fresh_one_by_a_library_is_not_put_back(
    pytester: pytest.Pytester, mode: str
) -> None:
    """A mock library swaps in a fresh registry on reset: the old one holds
    what the test registered, so putting it back brings the test's changes
    back (the guard did, and the second test failed)."""
    pytester.makepyfile(**{name: textwrap.dedent(text) for name, text in REGISTRY_SWAP.items()})
    plain = pytester.runpytest_subprocess("-p", "no:isolation", timeout=TIMEOUT)
    plain.assert_outcomes(passed=2)
    for policy in ("warn", "error"):
        result = pytester.runpytest_subprocess(
            *GUARD_MODES[mode], f"--isolation-leaks={policy}", timeout=TIMEOUT
        )
        result.assert_outcomes(passed=2)
