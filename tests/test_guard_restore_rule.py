"""The guard's restore rule: what is safe to put back is put back before the
next test starts, in the same file as in another, in a plain run and in file
mode; what a test created (a counter advanced, a registry filled, a lazily
created object, a first import, a logger) is kept in its process and named;
the summary says only what is true; a patch's stand-in is never put back
(issues 29 and 45)."""

from __future__ import annotations

import textwrap

import pytest
from tests.conftest import GUARD_MODES
from tests.conftest import TIMEOUT
from tests.conftest import literal
from tests.conftest import warned

PROJECT = """
import logging
ITEMS = []
CONFIG = {"db": {"host": "localhost"}}
class Base:
    pass
class Model:
    @classmethod
    def setup(cls):
        cls._fields = ["a"]
class Service:
    _instance = None
    value = 0
    @classmethod
    def get(cls):
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance
class Factory:
    _seq = 0
    @classmethod
    def make(cls):
        cls._seq += 1
        return f"user{cls._seq}"
class Thing:
    def __init__(self):
        self.__initialised__ = False
THING = Thing()
class Rule:
    def __init__(self):
        self.hits = 0
RULES = [Rule(), Rule()]
named = logging.getLogger("proj.named")
named.addHandler(logging.NullHandler())
def output():
    import sys
    return "json" if "proj.extra" in sys.modules else "plain"
"""

#: name: (polluter body, victim body, whether it is a leak the polluter is named for, whether
#: the guard puts it back: what a test created stays in its process, named).
PATTERNS = {
    "registry-appended": ("s.ITEMS.append(1)", "assert s.ITEMS == []", False, False),
    "class-attribute-new": ("s.Base.extra = 1", "assert not hasattr(s.Base, 'extra')", True, True),
    "classmethod-sets-fields": (
        "s.Model.setup()",
        "assert '_fields' not in vars(s.Model)",
        False,
        False,
    ),
    "singleton-changed": (
        "s.Service.get().value = 5",
        "assert s.Service.get().value == 0",
        False,
        False,
    ),
    "third-party-class": (
        "mock.MagicMock.content = 5",
        "assert 'content' not in vars(mock.MagicMock)",
        True,
        True,
    ),
    "test-constant-nested": (
        "CONST['a'].append(3)",
        "assert CONST['a'] == [1, 2]",
        True,
        True,
    ),
    "project-dict-nested": (
        "s.CONFIG['db']['host'] = 'prod'",
        "assert s.CONFIG['db']['host'] == 'localhost'",
        True,
        True,
    ),
    "factory-sequence": ("s.Factory.make()", "assert s.Factory.make() == 'user1'", False, False),
    "initialised-flag": (
        "s.THING.__initialised__ = True",
        "assert s.THING.__initialised__ is False",
        True,
        True,
    ),
    "handler-formatter": (
        "s.named.handlers[0].setFormatter(logging.Formatter('X %(message)s'))",
        "assert s.named.handlers[0].formatter is None",
        True,
        True,
    ),
    "logger-created-disabled": (
        "logging.getLogger('proj.fresh').disabled = True",
        "assert not logging.getLogger('proj.fresh').disabled",
        True,
        True,
    ),
    "object-in-module-list": (
        "s.RULES[0].hits += 5",
        "assert s.RULES[0].hits == 0",
        False,  # a counter: routine
        False,
    ),
    "module-imported": ("import proj.extra", "assert s.output() == 'plain'", False, False),
}

HEADER = """
import logging
from unittest import mock
import proj.state as s
CONST = {"a": [1, 2]}
"""


def _suite(pytester: pytest.Pytester, polluter: str, victim: str, same_file: bool) -> str:
    """Write the project and the tests; the polluter's node id."""
    pytester.makepyfile(
        **{"proj/__init__.py": "", "proj/state.py": PROJECT, "proj/extra.py": "X = 1\n"}
    )
    first = f"{HEADER}\ndef test_polluter():\n    {polluter}\n"
    second = f"\ndef test_victim():\n    {victim}\n"
    if same_file:
        pytester.makepyfile(test_a=first + second)
    else:
        pytester.makepyfile(test_a=first, test_b=HEADER + second)
    return "test_a.py::test_polluter"


@pytest.mark.parametrize("same_file", [True, False], ids=["same-file", "two-files"])
@pytest.mark.parametrize("name", sorted(PATTERNS))
@pytest.mark.parametrize("mode", sorted(GUARD_MODES))
def test_the_victim_sees_the_state_of_before(
    pytester: pytest.Pytester, name: str, same_file: bool, mode: str
) -> None:
    polluter, victim, leak, restored = PATTERNS[name]
    owner = _suite(pytester, polluter, victim, same_file)
    result = pytester.runpytest_subprocess(*GUARD_MODES[mode], "-v", timeout=TIMEOUT)
    if restored or (mode == "file" and not same_file):
        result.assert_outcomes(passed=2)
    else:  # kept in the process, as a plain run keeps it: the victim fails there too
        result.assert_outcomes(passed=1, failed=1)
    done = "put back" if restored else "kept"
    if leak:
        result.stdout.fnmatch_lines([literal(f"*LeakedStateWarning: {owner} leaked *")])
        # by, or set during where no line is known
        result.stdout.fnmatch_lines(["*isolation: * by 1 test*", f"  * {owner}"])
        if not restored:
            result.stdout.fnmatch_lines(["* (not undone)"])
    else:
        result.stdout.no_fnmatch_line("*LeakedStateWarning*")
        result.stdout.fnmatch_lines(
            [f"isolation: routine state of * {done} (*; not leaks)", f"*{owner})"]
        )


def test_the_polluter_runs_alone_as_the_oracle(pytester: pytest.Pytester) -> None:
    """The oracle of every pattern: without the plugin, the victim fails
    after its polluter (so each case above is a real pollution)."""
    failed = []
    for name, (polluter, victim, _, _) in sorted(PATTERNS.items()):
        for path in pytester.path.glob("test_*.py"):
            path.unlink()
        _suite(pytester, polluter, victim, same_file=True)
        result = pytester.runpytest_subprocess("-p", "no:isolation", timeout=TIMEOUT)
        if result.parseoutcomes().get("failed") == 1:
            failed.append(name)
    assert failed == sorted(PATTERNS)


FREEZEGUN = {
    "late_mod.py": "from datetime import date\n",
    "test_fg.py": """
        import sys, datetime
        from freezegun import freeze_time

        def test_import_inside_freeze():
            with freeze_time("2012-01-14"):
                import late_mod
            assert late_mod.date is datetime.date

        def test_later_test_sees_real_date():
            assert sys.modules["late_mod"].date is datetime.date
    """,
}

MOCK_DURING_IMPORT = {
    "helpers.py": "def fetch():\n    return 'real'\n",
    "late_client.py": "from helpers import fetch\n\ndef go():\n    return fetch()\n",
    "test_mock.py": """
        import sys
        from unittest import mock
        import helpers

        def test_import_inside_patch():
            patcher = mock.patch("helpers.fetch", return_value="fake")
            patcher.start()
            import late_client
            assert late_client.go() == "fake"
            patcher.stop()
            late_client.fetch = helpers.fetch  # the test puts the real one back itself
            assert late_client.go() == "real"

        def test_later_test_sees_real_fetch():
            assert sys.modules["late_client"].go() == "real"
    """,
}

MOCK_CONTEXT_DURING_IMPORT = {
    "late_date.py": "from datetime import date\n",
    "test_mock_cm.py": """
        import sys, datetime
        from unittest import mock

        class FakeDate(datetime.date):
            pass

        def test_import_inside_patch():
            with mock.patch("datetime.date", FakeDate):
                import late_date
            late_date.date = datetime.date

        def test_later_test_sees_real_date():
            assert sys.modules["late_date"].date is datetime.date
    """,
}


@pytest.mark.parametrize(
    "files",
    [FREEZEGUN, MOCK_DURING_IMPORT, MOCK_CONTEXT_DURING_IMPORT],
    ids=["freezegun", "mock-start", "mock-context"],
)
@pytest.mark.parametrize("mode", sorted(GUARD_MODES))
def test_a_patch_active_at_import_is_never_put_back(
    pytester: pytest.Pytester, files: dict[str, str], mode: str
) -> None:
    pytester.makepyfile(**{name: textwrap.dedent(text) for name, text in files.items()})
    plain = pytester.runpytest_subprocess("-p", "no:isolation", timeout=TIMEOUT)
    plain.assert_outcomes(passed=2)
    result = pytester.runpytest_subprocess(*GUARD_MODES[mode], timeout=TIMEOUT)
    result.assert_outcomes(passed=2)
    result.stdout.no_fnmatch_line("*LeakedStateWarning*")
    result.stdout.no_fnmatch_line("*= isolation: * leak* by * =*")


def test_patching_both_names_by_hand_is_still_a_leak(pytester: pytest.Pytester) -> None:
    """A name bound by ``from x import y`` that holds ``x.y`` is left alone
    only when ``x.y`` itself did not change in the window."""
    pytester.makepyfile(
        helpers="def fetch():\n    return 'real'\n",
        client="from helpers import fetch\n\ndef go():\n    return fetch()\n",
        test_h="""
            import helpers, client

            def fake():
                return "fake"

            def test_polluter():
                helpers.fetch = fake
                client.fetch = fake

            def test_victim():
                assert client.go() == "real"
        """,
    )
    result = pytester.runpytest_subprocess("-p", "isolation", "-p", "leakwarnings", timeout=TIMEOUT)
    result.assert_outcomes(passed=2)
    assert warned(result) == 2
    result.stdout.fnmatch_lines(["*test_polluter leaked client.fetch*"])


def test_a_module_a_stayer_holds_is_not_taken_out(pytester: pytest.Pytester) -> None:
    """A module first imported in a test that a module which stays then
    holds (here the test module) stays in ``sys.modules``: taking it out
    would leave two copies of it."""
    pytester.makepyfile(
        **{"proj/__init__.py": "", "proj/extra.py": "class Error(Exception):\n    pass\n"},
        test_a="""
            import sys

            def test_loads():
                global extra
                import proj.extra as extra

            def test_same_module():
                assert sys.modules["proj.extra"] is extra
        """,
    )
    result = pytester.runpytest_subprocess(
        "-p", "isolation", "-p", "no:randomly", "-v", timeout=TIMEOUT
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "isolation: routine state of 1 test kept (2 modules first imported; not leaks)",
            literal("  [sys.modules] sys.modules['proj'], first imported (test_a.py::test_loads)"),
            literal(
                "  [sys.modules] sys.modules['proj.extra'], first imported (test_a.py::test_loads)"
            ),
        ]
    )


def test_nested_containers_below_a_lowercase_name_are_the_deep_tiers(
    pytester: pytest.Pytester,
) -> None:
    """One level down is watched below UPPER_CASE names after every test
    (configuration by convention); below any name in the deep tier, where
    a module's data tables (thousands of small lists) are worth the cost."""
    pytester.makepyfile(
        **{
            "proj/__init__.py": "",
            "proj/tables.py": "settings = {'db': {'host': 'localhost'}}\n",
            "test_t.py": """
                import proj.tables as t

                def test_polluter():
                    t.settings['db']['host'] = 'prod'

                def test_victim():
                    assert t.settings['db']['host'] == 'localhost'
            """,
        }
    )
    default = pytester.runpytest_subprocess(
        "-p", "isolation", "-p", "leakwarnings", timeout=TIMEOUT
    )
    default.assert_outcomes(failed=1, passed=1)
    deep = pytester.runpytest_subprocess(
        "-p", "isolation", "-p", "leakwarnings", "--isolation-leaks-deep", timeout=TIMEOUT
    )
    deep.assert_outcomes(passed=2)
    assert warned(deep) == 1
    deep.stdout.fnmatch_lines([literal("*test_polluter leaked proj.tables.settings['db']*")])
