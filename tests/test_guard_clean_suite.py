"""A realistic suite that cleans up after itself gets no leak report: pytest's
own fixtures, pytest-mock, pyfakefs, unittest TestCases, higher-scoped
fixtures that patch or set the environment, with pytest-randomly shuffling."""

from __future__ import annotations

import pytest

from conftest import run_file_mode
from conftest import run_guard
from conftest import warned

PLUGINS = ("-p", "randomly", "-p", "pytest_mock", "-p", "pyfakefs.pytest_plugin")

PROJECT = {
    "app/__init__.py": "",
    "app/config.py": """
        import functools, os

        DEBUG = False
        _settings = None
        _cache = {}

        class Service:
            instance = None
            calls = 0

            @classmethod
            def get(cls):
                if cls.instance is None:
                    cls.instance = cls()
                return cls.instance

        def settings():
            global _settings
            if _settings is None:
                _settings = {"home": os.environ.get("HOME", "")}
            return _settings

        @functools.lru_cache
        def expensive(n):
            _cache[n] = n * 2
            return n * 2

        def read(path):
            with open(path) as f:
                return f.read()
    """,
}

CONFTEST = """
    import os
    from unittest import mock
    import pytest

    @pytest.fixture(scope="session", autouse=True)
    def session_env():
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("APP_ENV", "test")
            yield

    @pytest.fixture(scope="module")
    def patched_clock():
        patcher = mock.patch("time.time", return_value=1000.0)
        patcher.start()
        yield
        patcher.stop()

    @pytest.fixture(scope="session")
    def data_dir(tmp_path_factory):
        path = tmp_path_factory.mktemp("data")
        (path / "a.txt").write_text("a")
        return path
"""

TESTS = {
    "tests/test_builtin_fixtures.py": """
        import logging, os, sys, warnings
        import pytest
        import app.config as config

        def test_monkeypatch(monkeypatch, tmp_path):
            monkeypatch.setenv("FOO", "1")
            monkeypatch.delenv("HOME", raising=False)
            monkeypatch.chdir(tmp_path)
            monkeypatch.setattr(config, "DEBUG", True)
            monkeypatch.setattr(config.Service, "instance", "fake")
            monkeypatch.setitem(sys.modules, "yaml", object())
            monkeypatch.syspath_prepend(str(tmp_path))
            monkeypatch.setattr(os, "getcwd", lambda: "/fake")

        def test_capture(capsys, caplog):
            print("out")
            caplog.set_level(logging.DEBUG)
            logging.getLogger("app").debug("hello")
            assert capsys.readouterr().out == "out\\n"
            assert "hello" in caplog.text

        def test_caplog_at_level(caplog):
            with caplog.at_level(logging.INFO, logger="app.db"):
                logging.getLogger("app.db").info("x")

        def test_warnings_and_raises(recwarn):
            warnings.warn("w", UserWarning)
            with pytest.warns(DeprecationWarning):
                warnings.warn("d", DeprecationWarning)
            with pytest.raises(ZeroDivisionError):
                1 / 0

        def test_tmp(tmp_path, tmp_path_factory, data_dir):
            (tmp_path / "f").write_text("x")
            assert (data_dir / "a.txt").read_text() == "a"

        def test_session_env():
            assert os.environ["APP_ENV"] == "test"

        @pytest.mark.parametrize("n", [1, 2, 3])
        def test_lazy_state(n):
            assert config.settings()["home"] is not None
            assert config.Service.get() is config.Service.get()
            assert config.expensive(n) == 2 * n
            import decimal, fractions
    """,
    "tests/test_mocker.py": """
        import json, os, time
        from unittest import mock
        import app.config as config

        def test_mocker(mocker):
            mocker.patch("os.getcwd", return_value="/nowhere")
            mocker.patch.object(config.Service, "get", return_value="fake")
            mocker.patch.dict(os.environ, {"MOCKED": "1"})
            spy = mocker.spy(json, "dumps")
            json.dumps(1)
            assert spy.call_count == 1

        def test_mocker_started_patches(mocker):
            mocker.patch("time.sleep")
            time.sleep(100)

        @mock.patch("app.config.read", return_value="fake")
        def test_decorator(read):
            assert config.read("x") == "fake"

        def test_context_manager():
            with mock.patch.object(config, "DEBUG", True):
                with mock.patch.dict("sys.modules", yaml=None):
                    assert config.DEBUG

        def test_module_fixture(patched_clock):
            assert time.time() == 1000.0

        def test_module_fixture_again(patched_clock):
            assert time.time() == 1000.0
    """,
    "tests/test_fakefs.py": """
        import os
        import pytest
        import app.config as config

        def test_fs(fs):
            fs.create_file("/data/x.txt", contents="fake")
            assert config.read("/data/x.txt") == "fake"
            os.chdir("/data")

        def test_fs_again(fs):
            assert not os.path.exists("/data/x.txt")
    """,
    "tests/test_fakefs_module.py": """
        import pytest
        import app.config as config

        @pytest.fixture(scope="module")
        def prepared(fs_module):
            fs_module.create_file("/shared.txt", contents="s")
            return fs_module

        def test_fs_module(prepared):
            assert config.read("/shared.txt") == "s"

        def test_fs_module_again(prepared):
            assert config.read("/shared.txt") == "s"
    """,
    "tests/test_unittest.py": """
        import os, threading, subprocess, sys, unittest
        from unittest import mock
        import app.config as config

        class TestCaseStyle(unittest.TestCase):
            @classmethod
            def setUpClass(cls):
                os.environ["CLASS_LEVEL"] = "1"

            @classmethod
            def tearDownClass(cls):
                del os.environ["CLASS_LEVEL"]

            def setUp(self):
                self.patcher = mock.patch.object(config, "DEBUG", True)
                self.patcher.start()
                self.addCleanup(self.patcher.stop)
                os.environ["SET_UP"] = "1"

            def tearDown(self):
                del os.environ["SET_UP"]

            def test_one(self):
                assert config.DEBUG and os.environ["CLASS_LEVEL"] == "1"

            @mock.patch.dict(os.environ, {"DECORATED": "1"})
            def test_two(self):
                assert os.environ["DECORATED"] == "1"

        @mock.patch.object(config, "DEBUG", True)
        class TestDecoratedClass(unittest.TestCase):
            def test_three(self):
                assert config.DEBUG

        def test_thread_joined():
            thread = threading.Thread(target=lambda: None)
            thread.start()
            thread.join()

        def test_subprocess_waited():
            subprocess.run([sys.executable, "-c", "pass"], check=True)
    """,
}


def _write_suite(pytester: pytest.Pytester) -> None:
    pytest.importorskip("pytest_mock")
    pytest.importorskip("pyfakefs")
    pytest.importorskip("pytest_randomly")
    pytester.makepyfile(**PROJECT)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(**TESTS)


#: The suite's lazily created state (app.config's ``settings()`` and
#: ``Service.get()``) and its lazily filled cache: kept as a plain run keeps
#: them, never a leak.
ROUTINE = (
    "isolation: routine state of 3 tests kept"
    " (2 created lazily, 1 filled lazily; not leaks; -v lists them)"
)


@pytest.mark.parametrize("seed", ["1", "2", "3"])
def test_clean_suite_has_no_leak_reports(pytester: pytest.Pytester, seed: str) -> None:
    _write_suite(pytester)
    result = run_guard(pytester, *PLUGINS, f"--randomly-seed={seed}")
    result.assert_outcomes(passed=24)
    result.stdout.no_fnmatch_line("*leaked*")
    result.stdout.no_fnmatch_line("*= isolation: * leak* by * =*")  # no leak section
    result.stdout.no_fnmatch_line("*LeakedStateWarning*")
    assert [line for line in result.outlines if "isolation:" in line] == [ROUTINE]


def test_clean_suite_s_routine_state_is_listed_with_v(pytester: pytest.Pytester) -> None:
    _write_suite(pytester)
    result = run_guard(pytester, *PLUGINS, "--randomly-seed=1", "-v")
    result.assert_outcomes(passed=24)
    result.stdout.fnmatch_lines(
        [
            "isolation: routine state of 3 tests kept (2 created lazily, 1 filled lazily;"
            " not leaks)",
            "  [[]attribute] app.config.Service.instance, created lazily"
            " (now <app.config.Service object at *>)"
            " (tests/test_builtin_fixtures.py::test_lazy_state[[]1])",
            "  [[]attribute] app.config._settings, created lazily (now {'home': *})"
            " (tests/test_builtin_fixtures.py::test_lazy_state[[]1])",
            "  [[]container] app.config._cache (mutated in place), filled lazily (added 1)"
            " (3 tests, first tests/test_builtin_fixtures.py::test_lazy_state[[]1])",
        ]
    )


def test_clean_suite_deep_tier_adds_nothing(pytester: pytest.Pytester) -> None:
    _write_suite(pytester)
    result = run_guard(pytester, *PLUGINS, "--randomly-seed=1", "--isolation-leaks-deep")
    result.assert_outcomes(passed=24)
    result.stdout.no_fnmatch_line("*LeakedStateWarning*")
    assert [line for line in result.outlines if "isolation:" in line] == [ROUTINE]


def test_clean_suite_in_file_mode(pytester: pytest.Pytester, start: str) -> None:
    _write_suite(pytester)
    result = run_file_mode(pytester, start, *PLUGINS, "--randomly-seed=1")
    result.assert_outcomes(passed=24)
    result.stdout.no_fnmatch_line("*leaked*")
    result.stdout.no_fnmatch_line("*= isolation: * leak* by * =*")  # no leak section


def test_pytest_s_cache_directory_in_the_making_is_not_a_leak(pytester: pytest.Pytester) -> None:
    """pytest's cache is made through a ``pytest-cache-files-*`` directory in
    the working directory, which another xdist worker may create while a test
    runs; a directory of another name still counts."""
    pytester.makepyfile(
        test_dirs="""
        import os

        def test_cache_in_the_making():
            os.mkdir("pytest-cache-files-1a2b3c")

        def test_own_directory():
            os.mkdir("made-by-a-test")
        """
    )
    result = run_guard(pytester, "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    assert warned(result) == 1
    result.stdout.fnmatch_lines(["*test_own_directory leaked file 'made-by-a-test'*"])
    result.stdout.no_fnmatch_line("*pytest-cache-files-*")


def test_clean_suite_under_q_prints_no_isolation_line(pytester: pytest.Pytester) -> None:
    # Routine state is no leak: -q shows only what needs a look (issue 49 item 4).
    _write_suite(pytester)
    result = run_guard(pytester, *PLUGINS, "--randomly-seed=1", "-q")
    result.assert_outcomes(passed=24)
    assert [line for line in result.outlines if "isolation" in line] == []
