"""The leak guard never breaks a correct suite, never floods, and catches
what real projects leak (issue 15).  Each case runs in a plain run and in a
file-mode child (the ``mode`` fixture)."""

from __future__ import annotations

import sysconfig
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import TIMEOUT
from conftest import literal
from conftest import warned


def run(pytester: pytest.Pytester, mode: tuple[str, ...], *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*mode, "-p", "no:randomly", *args, timeout=TIMEOUT)


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


# -- a fixture's own setup and teardown is never a leak -----------------------


@pytest.mark.parametrize("scope", ["module", "class", "session"])
def test_a_scoped_fixture_s_logging_handler_is_the_fixture_s(
    pytester: pytest.Pytester, mode: tuple[str, ...], scope: str
) -> None:
    """pytest adds its own handlers around each phase: the fixture's change is
    "added H", which the test's window must not call a leak."""
    pytester.makepyfile(
        test_log=f"""
        import logging, pytest
        H = logging.NullHandler()
        @pytest.fixture(scope="{scope}")
        def handler():
            logging.getLogger().addHandler(H); yield; logging.getLogger().removeHandler(H)
        class TestBoth:
            def test_1(self, handler): assert H in logging.getLogger().handlers
            def test_2(self, handler): assert H in logging.getLogger().handlers
        """,
        test_other=f"""
        import logging
        def test_3():
            nulls = [h for h in logging.getLogger().handlers if type(h) is logging.NullHandler]
            assert len(nulls) == {int(scope == "session" and "--isolation-mode=file" not in mode)}
        """,
    )
    result = run(pytester, mode)
    result.assert_outcomes(passed=3)
    result.stdout.no_fnmatch_line("*LeakedStateWarning*")


def test_a_module_fixture_s_logger_level_is_not_put_back_after_the_module(
    pytester: pytest.Pytester, mode: tuple[str, ...]
) -> None:
    pytester.makepyfile(
        test_a="""
        import logging, pytest
        @pytest.fixture(scope="module")
        def debug():
            logger = logging.getLogger("app")
            old = logger.level
            logger.setLevel(logging.DEBUG); yield; logger.setLevel(old)
        def test_1(debug): assert logging.getLogger("app").level == logging.DEBUG
        def test_2(debug): assert logging.getLogger("app").level == logging.DEBUG
        """,
        test_b="""
        import logging
        def test_3(): assert logging.getLogger("app").level == logging.NOTSET
        """,
    )
    result = run(pytester, mode)
    result.assert_outcomes(passed=3)
    result.stdout.no_fnmatch_line("*LeakedStateWarning*")


def test_deep_tier_keeps_a_module_fixture_s_in_place_change(
    pytester: pytest.Pytester, mode: tuple[str, ...]
) -> None:
    write(pytester.path, {"appcfg/__init__.py": 'SETTINGS = {"mode": "prod"}\n'})
    pytester.makepyfile(
        test_cfg="""
        import pytest, appcfg
        @pytest.fixture(scope="module")
        def testmode():
            appcfg.SETTINGS["mode"] = "test"; yield; appcfg.SETTINGS["mode"] = "prod"
        def test_1(testmode): assert appcfg.SETTINGS["mode"] == "test"
        def test_2(testmode): assert appcfg.SETTINGS["mode"] == "test"
        """,
        test_later="""
        import appcfg
        def test_3(): appcfg.SETTINGS["mode"] = "changed by a test"
        def test_4(): assert appcfg.SETTINGS["mode"] == "prod"
        """,
    )
    result = run(pytester, mode, "--isolation-leaks-deep")
    result.assert_outcomes(passed=4)
    assert warned(result) == 1
    # The message says which key changed.
    result.stdout.fnmatch_lines(
        ["*test_3 leaked appcfg.SETTINGS (mutated in place) (changed 'mode'), at *; copy it*"]
    )


def test_mocker_spy_on_a_tracked_module_is_no_internal_error(
    pytester: pytest.Pytester, mode: tuple[str, ...]
) -> None:
    pytester.makepyfile(
        test_spy="""
        import os
        def test_spy(mocker):
            spy = mocker.spy(os.path, "join")
            assert os.path.join("a", "b") == os.sep.join("ab")
            assert spy.call_count == 1
        def test_after():
            assert not hasattr(os.path.join, "spy_return")
        """
    )
    result = run(pytester, mode, "-p", "pytest_mock", "--isolation-leaks-deep")
    result.assert_outcomes(passed=2)
    result.stdout.no_fnmatch_line("*INTERNALERROR*")
    result.stdout.no_fnmatch_line("*LeakedStateWarning*")


# -- toward the import-time state, never away from it -------------------------

POOL = {
    "proj/__init__.py": "",
    "proj/scheduler.py": """
        from concurrent.futures import ThreadPoolExecutor
        _parallel_pool = None
        EAGER = ThreadPoolExecutor(1)

        def pool():
            global _parallel_pool
            if _parallel_pool is None:
                _parallel_pool = ThreadPoolExecutor(2)
            return _parallel_pool

        def shutdown():
            global _parallel_pool
            if _parallel_pool is not None:
                _parallel_pool.shutdown()
            _parallel_pool = None

        def restart_eager():
            global EAGER
            EAGER.shutdown()
            EAGER = ThreadPoolExecutor(1)
    """,
}


def test_a_clean_up_is_no_leak_and_a_closed_resource_is_never_put_back(
    pytester: pytest.Pytester, mode: tuple[str, ...]
) -> None:
    write(pytester.path, POOL)
    pytester.makepyfile(
        test_pool="""
        from proj import scheduler
        def test_a(): assert scheduler.pool().submit(lambda: 1).result() == 1
        def test_b(): scheduler.pool(); scheduler.shutdown()
        def test_c(): assert scheduler.pool().submit(lambda: 2).result() == 2
        def test_d(): scheduler.restart_eager()
        def test_e(): assert scheduler.EAGER.submit(lambda: 3).result() == 3
        """
    )
    result = run(pytester, mode, "-v")
    result.assert_outcomes(passed=5)
    assert warned(result) == 1
    result.stdout.fnmatch_lines(
        [
            "*test_d leaked proj.scheduler.EAGER (was <*ThreadPoolExecutor*, now <*"
            "ThreadPoolExecutor*>); the old value is closed, so it was not put back (not undone)*",
            "  [[]attribute] proj.scheduler._parallel_pool, created lazily"
            " (now <*ThreadPoolExecutor"
            "*>), kept: it holds a resource (2 tests, first test_pool.py::test_a)",
        ],
        consecutive=False,
    )
    # A pool's idle workers are the pool's, not a leaked thread of the test.
    result.stdout.no_fnmatch_line("*leaked thread*")
    result.stdout.no_fnmatch_line("*test_b leaked*")


# -- noise ---------------------------------------------------------------------

COUNTER = {
    "proj/__init__.py": "",
    "proj/fields.py": """
        class Field:
            _creation_counter = 0
            def __init__(self):
                self.order = Field._creation_counter
                Field._creation_counter += 1
    """,
}


def test_a_counter_advanced_by_every_test_is_one_line_and_no_warning(
    pytester: pytest.Pytester, mode: tuple[str, ...]
) -> None:
    write(pytester.path, COUNTER)
    pytester.makepyfile(
        test_many="""
        import pytest
        from proj.fields import Field
        @pytest.mark.parametrize("n", range(30))
        def test_defines_fields(n):
            class Form:
                a, b = Field(), Field()
            assert Form.a.order < Form.b.order
        def test_sequence_starts_over():
            assert Field().order == 0
        """
    )
    result = run(pytester, mode, "-W", "error::pytest_isolation.LeakedStateWarning")
    # The counter is kept, as a plain run keeps it (objects it numbered live on):
    # the test that wants it from 0 fails there too.
    result.assert_outcomes(passed=30, failed=1)
    result.stdout.fnmatch_lines(["FAILED test_many.py::test_sequence_starts_over - *"])
    result.stdout.no_fnmatch_line("*LeakedStateWarning*")
    lines = [line for line in result.outlines if "isolation:" in line and "file" not in line]
    assert lines == [
        "isolation: routine state of 31 tests kept (1 counter advanced; not leaks; -v lists them)"
    ]


LEXERS = {
    "lexers/__init__.py": """
        class LexerMeta(type):
            def __call__(cls, *args, **kwargs):
                cls._all_tokens = {}  # pygments' RegexLexerMeta, with token variants
                return type.__call__(cls, *args, **kwargs)
        class Lexer(metaclass=LexerMeta):
            _all_tokens = {}
            def __init__(self, level="basic"):
                self.tokens = self._all_tokens.setdefault(level, [level.upper()])
        class Registry:
            PLUGINS = {}
        """,
}


def test_a_private_cache_rebuilt_is_routine_and_a_public_one_a_leak(
    pytester: pytest.Pytester, mode: tuple[str, ...]
) -> None:
    write(pytester.path, LEXERS)
    pytester.makepyfile(
        test_lexers="""
        import pytest
        from lexers import Lexer, Registry
        @pytest.mark.parametrize("level", ["basic", "full", "none"])
        def test_lexes(level):
            assert Lexer(level).tokens == [level.upper()]
        def test_resets_the_registry():
            Registry.PLUGINS = {"fake": object()}
        def test_registry_is_clean():
            assert Registry.PLUGINS == {}
        """,
        test_zz_after="""
        from lexers import Lexer
        def test_cache_kept_in_its_process():
            assert Lexer._all_tokens == {}
        """,
    )
    result = run(pytester, mode, "-v")
    # The rebuilt cache is kept in its process (a plain run keeps it): the next
    # file sees it there, not in file mode.
    if "--isolation-mode=file" in mode:
        result.assert_outcomes(passed=6)
    else:
        result.assert_outcomes(passed=5, failed=1)
    assert warned(result) == 1
    result.stdout.fnmatch_lines(
        [
            "*test_resets_the_registry leaked lexers.Registry.PLUGINS*",
            "*routine state of 3 tests kept (1 private cache rebuilt; not leaks)*",
            "  [[]attribute[]] lexers.Lexer._all_tokens * (3 tests, first *test_lexes[[]basic[]])",
        ]
    )
    result.stdout.no_fnmatch_line("*leaked lexers.Lexer._all_tokens*")


def test_one_warning_per_key_and_the_summary_counts_the_tests(
    pytester: pytest.Pytester, mode: tuple[str, ...]
) -> None:
    pytester.makepyfile(
        test_env="""
        import os, pytest
        @pytest.mark.parametrize("n", range(5))
        def test_sets(n):
            os.environ["SAME_KEY"] = str(n)
        """
    )
    result = run(pytester, mode)
    result.assert_outcomes(passed=5)
    assert warned(result) == 1
    result.stdout.fnmatch_lines(
        [
            "*= isolation: * by 5 tests =*",
            literal("[env] os.environ['SAME_KEY'] (was unset, now '0'), at test_env.py:4"),
            literal("  by test_env.py::test_sets[0] and 4 more tests"),
        ]
    )


def test_a_re_import_is_one_line(pytester: pytest.Pytester, mode: tuple[str, ...]) -> None:
    write(
        pytester.path,
        {
            "proj/__init__.py": "",
            "proj/big.py": "".join(f"def f{n}(): return {n}\n" for n in range(20))
            + "class C:\n    pass\n\nPARSER = C()\n",
        },
    )
    pytester.makepyfile(
        test_reimport="""
        import importlib, sys
        import proj.big
        def test_reloads():
            importlib.reload(proj.big)
        def test_fresh_import():
            del sys.modules["proj.big"]
            import proj.big
        """
    )
    result = run(pytester, mode)
    result.assert_outcomes(passed=2)
    assert warned(result) == 2
    result.stdout.fnmatch_lines(
        [
            "*test_reloads leaked proj.big re-imported: 22 of its names are new "
            "objects of the same definitions (C, PARSER, f0, f1, f10 and 17 more) (not undone);"
            " import it once*",
            "*test_fresh_import leaked sys.modules: 1 module re-imported (proj.big)"
            " (not undone); import it once*",
        ],
        consecutive=False,
    )
    result.stdout.no_fnmatch_line("*leaked proj.big.f1 *")


def test_messages_say_what_differs(pytester: pytest.Pytester, mode: tuple[str, ...]) -> None:
    write(
        pytester.path, {"proj/__init__.py": "", "proj/config.py": "DISABLE = []\nOPTS = {'a': 1}\n"}
    )
    pytester.makepyfile(
        test_msgs="""
        import proj.config as config
        def test_equal_list(): config.DISABLE = []
        def test_new_dict(): config.OPTS = {"a": 2, "b": 3}
        """
    )
    result = run(pytester, mode)
    result.assert_outcomes(passed=2)
    # A name rebound to an equal value is no change (issue 45: it was reported
    # with two addresses and nothing to act on); an object whose ``__eq__``
    # always answers True is another matter (tests/test_guard_named.py).
    assert warned(result) == 1
    result.stdout.fnmatch_lines(
        ["*leaked proj.config.OPTS (rebound to a new dict: added 'b'; changed 'a'), at *;*"]
    )
    result.stdout.no_fnmatch_line("*proj.config.DISABLE*")


def test_library_loggers_and_freezegun_are_quiet_in_the_deep_tier(
    pytester: pytest.Pytester, mode: tuple[str, ...]
) -> None:
    """A library's loggers set up at its import or lazily (requests' NullHandlers,
    werkzeug's level) and freezegun's ``time.clock`` are no leak."""
    pytest.importorskip("freezegun")
    write(
        pytester.path,
        {
            "lib/__init__.py": "import logging\n"
            "logging.getLogger('lib').addHandler(logging.NullHandler())\n",
            "lazylib/__init__.py": """
                import logging
                def serve():
                    logger = logging.getLogger("lazylib")
                    if logger.level == logging.NOTSET:
                        logger.setLevel(logging.INFO)
                        logger.addHandler(logging.StreamHandler())
            """,
        },
    )
    pytester.makepyfile(
        test_libs="""
        import lib, lazylib, time
        from freezegun import freeze_time
        def test_serves():
            lazylib.serve()
        def test_serves_again():
            lazylib.serve()
        @freeze_time("2020-01-01")
        def test_frozen():
            assert time.strftime("%Y") == "2020"
        """
    )
    result = run(
        pytester, mode, "--isolation-leaks-deep", "-W", "error::pytest_isolation.LeakedStateWarning"
    )
    result.assert_outcomes(passed=3)
    result.stdout.no_fnmatch_line("*LeakedStateWarning*")


def test_hostile_objects_never_break_the_guard(
    pytester: pytest.Pytester, mode: tuple[str, ...]
) -> None:
    """A dict subclass whose methods raise and a proxy whose ``__dict__``
    raises (werkzeug's LocalProxy outside an app context) in a project
    module: no error, no internal error; the change is still put back."""
    write(
        pytester.path,
        {
            "proj/__init__.py": "",
            "proj/things.py": """
                class Hostile(dict):
                    def keys(self): raise RuntimeError("no keys for you")
                    def __iter__(self): raise RuntimeError("no iter")
                    def __len__(self): raise RuntimeError("no len")

                class Proxy:
                    @property
                    def __dict__(self): raise RuntimeError("outside of the app context")
                    def __getattr__(self, name): raise RuntimeError("outside of the app context")

                TABLE = Hostile(a=1)
                current = Proxy()
            """,
        },
    )
    pytester.makepyfile(
        test_w="""
        from proj import things
        def test_a(): dict.__setitem__(things.TABLE, "a", 2)
        def test_c(): things.current.x = 1
        """,
        test_x="""
        from proj import things
        def test_b(): assert dict.get(things.TABLE, "a") == 1
        """,
    )
    result = run(pytester, mode)
    result.assert_outcomes(passed=3)
    result.stdout.no_fnmatch_line("*INTERNALERROR*")
    result.stdout.no_fnmatch_line("*could not compare*")


def _site_packages_module(prefix: str, source: str) -> Iterator[str]:
    """A module of ``source`` in this interpreter's site-packages, as an
    installed library's would be; removed after."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    path = Path(sysconfig.get_paths()["purelib"], f"{name}.py")
    path.write_text(source)
    try:
        yield name
    finally:
        path.unlink()


@pytest.fixture
def installed_library() -> Iterator[str]:
    """A module in site-packages whose import replaces ``json.dumps`` (as
    forbiddenfruit replaces ``builtins.dir``)."""
    yield from _site_packages_module(
        "isolation_fake_library",
        "import json\n_real = json.dumps\n"
        "def dumps(*args, **kwargs):\n    return _real(*args, **kwargs)\n"
        "json.dumps = dumps\n",
    )


def test_what_a_library_s_import_sets_during_a_test_is_import_time_state(
    pytester: pytest.Pytester, mode: tuple[str, ...], installed_library: str
) -> None:
    """A fixture that imports a library lazily (anyio's blockbuster fixture
    imports forbiddenfruit): what the library's import sets is not the
    first test's leak, neither per test nor at the file's end."""
    pytester.makeconftest(
        f"""
        import pytest
        @pytest.fixture(autouse=True)
        def uses_the_library():
            import {installed_library}
            yield
        """
    )
    pytester.makepyfile(
        test_a="def test_1(): pass\ndef test_2(): pass\n",
        test_b="""
        import json
        def test_3():
            json.loads = lambda *args, **kwargs: None
        """,
    )
    result = run(pytester, mode, "-W", "error::pytest_isolation.LeakedStateWarning")
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(["*test_3*leaked json.loads*"])
    result.stdout.no_fnmatch_line("*json.dumps*")


def test_a_warning_at_import_names_the_same_file(
    pytester: pytest.Pytester, mode: tuple[str, ...]
) -> None:
    """A project module imported inside a test gets a watching loader; a
    warning its import raises with ``stacklevel=2`` still names the importer
    (jsonschema's ``test_import_cli`` checks the file of its warning)."""
    write(
        pytester.path,
        {
            "proj/__init__.py": "",
            "proj/old.py": """
                import warnings
                warnings.warn("proj.old is deprecated", DeprecationWarning, stacklevel=2)
                LEVEL = 1
            """,
        },
    )
    pytester.makepyfile(
        test_old="""
        import importlib
        import pytest
        def test_import_warns():
            with pytest.warns(DeprecationWarning) as first:
                import proj.old
            assert first[0].filename == __file__
            with pytest.warns(DeprecationWarning) as again:
                importlib.reload(proj.old)
            assert again[0].filename == importlib.__file__
        """
    )
    plain = pytester.runpytest_subprocess("-p", "no:isolation", timeout=TIMEOUT)
    plain.assert_outcomes(passed=1)
    result = run(pytester, mode)
    result.assert_outcomes(passed=1)


def test_a_blanket_error_filter_does_not_fail_a_leak(
    pytester: pytest.Pytester, mode: tuple[str, ...]
) -> None:
    """``filterwarnings = error`` (click's, anyio's, attrs' suites have it)
    turns every other warning into an error, not the guard's; naming the
    guard's warning does."""
    pytester.makeini("[pytest]\nfilterwarnings =\n    error\n")
    pytester.makepyfile(
        test_a="""
        import logging, warnings
        def test_new_logger():
            logging.getLogger("made_by_the_test").setLevel(logging.DEBUG)
        def test_other_warnings_still_fail():
            warnings.warn("boom", UserWarning)
        """
    )
    result = run(pytester, mode)
    result.assert_outcomes(passed=1, failed=1)
    assert warned(result) == 1
    result.stdout.fnmatch_lines(["*test_new_logger leaked logger 'made_by_the_test'*"])
    named = run(pytester, mode, "-W", "error::pytest_isolation.LeakedStateWarning")
    named.assert_outcomes(passed=1, failed=1, errors=1)


def test_a_test_module_that_is_not_a_module_is_no_internal_error(
    pytester: pytest.Pytester, mode: tuple[str, ...]
) -> None:
    """A test module that replaces itself in ``sys.modules`` with an object
    without a ``__dict__`` (pygments' suite has a collector whose ``obj`` is
    no module): the same outcome as without the guard."""
    pytester.makepyfile(
        test_weird="import sys\ndef test_x(): pass\nclass Slots:\n    __slots__ = ()\n"
        "sys.modules[__name__] = Slots()\n"
    )
    plain = pytester.runpytest_subprocess("-p", "no:isolation", timeout=TIMEOUT)
    result = run(pytester, mode)
    assert result.parseoutcomes().get("errors") == plain.parseoutcomes().get("errors") == 1
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


def test_a_test_module_s_own_class_is_the_file_s_business(
    pytester: pytest.Pytester, mode: tuple[str, ...]
) -> None:
    """A test class whose attributes a test sets for a later test of the file
    (as Django's test cases keep clients and signal records on the class)."""
    pytester.makepyfile(
        test_a="""
        class Recorder:
            seen = {}
        def test_1():
            Recorder.seen = {"x": 1}
        def test_2():
            assert Recorder.seen == {"x": 1}
        """
    )
    result = run(pytester, mode)
    result.assert_outcomes(passed=2)
    result.stdout.no_fnmatch_line("*LeakedStateWarning*")


def test_a_lambda_set_again_by_each_test_is_no_re_import(
    pytester: pytest.Pytester, mode: tuple[str, ...]
) -> None:
    write(
        pytester.path, {"proj/__init__.py": "", "proj/throttle.py": "class T:\n    timer = None\n"}
    )
    pytester.makepyfile(
        test_t="""
        import pytest
        from proj.throttle import T
        def set_timer():
            T.timer = lambda: 0
        @pytest.mark.parametrize("n", [1, 2])
        def test_sets(n):
            set_timer()
            T.timer = lambda: n
        """
    )
    result = run(pytester, mode)
    result.assert_outcomes(passed=2)
    assert warned(result) == 1
    result.stdout.fnmatch_lines(["*test_sets[[]1] leaked proj.throttle.T.timer (was None, now <*"])
    result.stdout.no_fnmatch_line("*re-imported*")


def test_a_child_s_own_start_is_no_leak_after_items_run_in_the_parent(
    pytester: pytest.Pytester,
) -> None:
    """Items of a non-Python file run in the parent (pygments' ``.txt``
    snippets); the child of the next test file starts from its own state
    (its capture, SIGTERM's handler), not from the parent's last snapshot."""
    pytester.makeconftest(
        """
        import pytest

        class TxtItem(pytest.Item):
            def runtest(self):
                assert self.path.read_text().strip() == "ok"

        class TxtFile(pytest.File):
            def collect(self):
                yield TxtItem.from_parent(self, name="snippet")

        def pytest_collect_file(file_path, parent):
            if file_path.suffix == ".txt":
                return TxtFile.from_parent(parent, path=file_path)
        """
    )
    pytester.makefile(".txt", a_snippet="ok")
    pytester.makepyfile(test_b="def test_b():\n    pass\n")
    result = pytester.runpytest_subprocess(
        "-p", "isolation", "--isolation-mode=file", "-p", "no:randomly", timeout=TIMEOUT
    )
    result.assert_outcomes(passed=2)
    assert "LeakedStateWarning" not in result.stdout.str()


def test_pytest_s_own_package_set_up_is_no_leak(
    pytester: pytest.Pytester, mode: tuple[str, ...]
) -> None:
    """The set-up of a package's first test imports its ``__init__.py``, and
    pytest puts the directory above the package at the front of ``sys.path``
    (pygments' snippets, after a rootless conftest took the front: 590
    warnings in file mode, one per file); a test's own insert still leaks."""
    write(
        pytester.path,
        {
            "pkg/__init__.py": "",
            "pkg/conftest.py": """
                import pytest

                class TxtItem(pytest.Item):
                    def runtest(self):
                        if self.name == "inserts":
                            import sys
                            sys.path.insert(0, "/nonexistent/elsewhere")

                class TxtFile(pytest.File):
                    def collect(self):
                        for name in self.path.read_text().split():
                            yield TxtItem.from_parent(self, name=name)

                def pytest_collect_file(file_path, parent):
                    if file_path.suffix == ".txt":
                        return TxtFile.from_parent(parent, path=file_path)
                """,
            "pkg/snippets/conftest.py": "",  # rootless: its directory goes first in sys.path
            "pkg/snippets/a.txt": "clean",
            "pkg/snippets/b.txt": "inserts",
            "pkg/test_c.py": "def test_c():\n    pass\n",
        },
    )
    result = run(pytester, mode)
    result.assert_outcomes(passed=3)
    assert warned(result) == 1
    result.stdout.fnmatch_lines(
        ["*LeakedStateWarning: pkg/snippets/b.txt::inserts leaked sys.path*"]
    )
    assert "a.txt::clean leaked" not in result.stdout.str()


@pytest.fixture
def displayhook_library() -> Iterator[str]:
    """A module in site-packages whose import sets ``sys.displayhook`` (``sys``
    has no write tracking, so no site tells the guard who set it)."""
    yield from _site_packages_module(
        "isolation_fake_display",
        "import sys\ndef hook(value):\n    pass\nsys.displayhook = hook\n",
    )


def test_a_library_s_import_in_a_test_is_not_the_test_s_leak(
    pytester: pytest.Pytester, mode: tuple[str, ...], displayhook_library: str
) -> None:
    """Whichever file imports the library first, in a plain run and in file
    mode: what its import put in place is import-time state (issue 29)."""
    pytester.makepyfile(
        test_d=f"def test_a():\n    import {displayhook_library}\ndef test_b():\n    pass\n",
        test_e=f"import {displayhook_library}\ndef test_c():\n    pass\n",
    )
    result = run(pytester, mode)
    result.assert_outcomes(passed=3)
    result.stdout.no_fnmatch_line("*displayhook*")


def test_the_logging_plugin_s_handlers_are_the_run_s(
    pytester: pytest.Pytester, mode: tuple[str, ...]
) -> None:
    """Flask's suite: a fixture that saves the root logger's handlers during a
    phase and puts them back leaves the logging plugin's own handlers there
    until the next phase takes them off; that is neither the first test of
    the next file's leak nor something to put back (issue 29)."""
    pytester.makepyfile(
        test_logging="""
        import logging
        import pytest

        @pytest.fixture(autouse=True)
        def reset_logging(pytestconfig):
            root_handlers = logging.root.handlers[:]
            logging.root.handlers = []
            plugin = pytestconfig.pluginmanager.unregister(name="logging-plugin")
            yield
            logging.root.handlers[:] = root_handlers
            if plugin:
                pytestconfig.pluginmanager.register(plugin, "logging-plugin")

        def test_one():
            logging.getLogger("app").warning("x")
        """,
        test_basic="def test_basic():\n    pass\n",
    )
    result = run(pytester, mode)
    result.assert_outcomes(passed=2)
    result.stdout.no_fnmatch_line("*leaked*")


def test_a_longer_lived_fixture_set_up_inside_another_is_its_own(
    pytester: pytest.Pytester, mode: tuple[str, ...]
) -> None:
    """A session fixture set up from inside a class fixture's set-up
    (pytest-django's ``_django_setup_unittest`` asks for ``django_db_setup``,
    which renames the test database in ``settings.DATABASES``) owns what it
    sets: the class fixture's finalization neither puts it back nor is
    blamed for it, and the session fixture's teardown is what undoes it."""
    write(
        pytester.path,
        {
            "proj/__init__.py": "",
            "proj/settings.py": "DATABASES = {'default': {'NAME': 'app'}}\n",
            "conftest.py": """
                import pytest
                import proj.settings as s

                @pytest.fixture(scope="session")
                def db_setup():
                    s.DATABASES["default"]["NAME"] = "test_app"
                    yield
                    s.DATABASES["default"]["NAME"] = "app"

                @pytest.fixture(scope="class", autouse=True)
                def unittest_setup(request):
                    request.getfixturevalue("db_setup")
                    yield
            """,
            "test_db.py": """
                import proj.settings as s

                class TestA:
                    def test_one(self):
                        assert s.DATABASES["default"]["NAME"] == "test_app"

                class TestB:
                    def test_two(self):
                        assert s.DATABASES["default"]["NAME"] == "test_app"
            """,
        },
    )
    result = run(pytester, mode, "-v")
    result.assert_outcomes(passed=2)
    result.stdout.no_fnmatch_line("*LeakedStateWarning*")
    result.stdout.no_fnmatch_line("*unittest_setup*")
