"""The leak guard: detect, restore and attribute leaked state."""

from __future__ import annotations

import os
from unittest import mock

import pytest

from conftest import TIMEOUT
from pytest_isolation.guard.categories import _active_patches
from pytest_isolation.guard.categories import _environ_data
from pytest_isolation.guard.categories import _text

LEAKERS = """
    import os, sys, time
    from unittest import mock

    def test_env_leak():
        os.environ["LEAKY"] = "1"

    def test_cwd_leak(tmp_path):
        os.chdir(tmp_path)

    def test_sysmodules_leak():
        sys.modules["json"] = mock.MagicMock()

    def test_patch_leak():
        mock.patch.object(time, "time", return_value=0).start()

    def test_after_the_leaks_state_is_clean():
        import json
        assert "LEAKY" not in os.environ
        assert os.getcwd() == START
        assert not isinstance(json, mock.MagicMock)
        assert time.time() > 0

    START = os.getcwd()
"""

CLEAN = """
    import os, sys, time
    from unittest import mock
    import pytest

    @pytest.fixture(scope="module")
    def module_env():
        os.environ["MODULE_FIXTURE"] = "1"
        yield
        del os.environ["MODULE_FIXTURE"]

    def test_monkeypatch(monkeypatch, tmp_path):
        monkeypatch.setenv("FINE", "1")
        monkeypatch.chdir(tmp_path)
        monkeypatch.setitem(sys.modules, "yaml", mock.MagicMock())

    def test_patch_as_context_manager():
        with mock.patch.object(time, "time", return_value=0):
            assert time.time() == 0

    @mock.patch.dict(os.environ, {"DECORATED": "1"})
    def test_patch_dict_decorator():
        assert os.environ["DECORATED"] == "1"

    def test_module_fixture(module_env):
        assert os.environ["MODULE_FIXTURE"] == "1"

    def test_module_fixture_again(module_env):
        assert os.environ["MODULE_FIXTURE"] == "1"

    def test_lazy_import():
        import decimal

    def test_capture_fixtures(capsys, caplog):
        print("x")
        assert capsys.readouterr().out == "x\\n"
"""


def literal(pattern: str) -> str:
    """An fnmatch pattern whose ``[`` is literal (``*`` stays a wildcard)."""
    return pattern.replace("[", "[[]")


def run_guard(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "isolation", "-p", "no:randomly", *args, timeout=TIMEOUT
    )


def test_warn_reports_each_leak_and_restores_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_leaks=LEAKERS)
    result = run_guard(pytester, "--isolation-leaks=warn")
    result.assert_outcomes(passed=5, warnings=4)
    result.stdout.fnmatch_lines(
        [
            literal(
                "*LeakedStateWarning: test_leaks.py::test_env_leak leaked os.environ['LEAKY'] "
                "(was unset, now '1'); use monkeypatch.setenv/delenv"
            ),
            "*LeakedStateWarning: test_leaks.py::test_cwd_leak leaked the working directory*",
            literal(
                "*LeakedStateWarning: test_leaks.py::test_sysmodules_leak leaked "
                "sys.modules['json']*"
            ),
            "*LeakedStateWarning: test_leaks.py::test_patch_leak leaked an unstopped mock patch "
            "of time.time*",
        ]
    )
    result.stdout.fnmatch_lines(
        ["*= isolation: 4 tests or fixtures leaked state =*", "test_leaks.py::test_env_leak: *"]
    )


def test_warning_escalates_with_w_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_leaks="import os\ndef test_x(): os.environ['LEAKY'] = '1'\n")
    result = run_guard(
        pytester, "--isolation-leaks=warn", "-W", "error::pytest_isolation.LeakedStateWarning"
    )
    result.assert_outcomes(passed=1, errors=1)


def test_error_fails_the_leaking_test_in_teardown(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_leaks=LEAKERS)
    result = run_guard(pytester, "--isolation-leaks=error")
    result.assert_outcomes(passed=5, errors=4)
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_env_leak*"])


def test_quiet_restores_without_warnings(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_leaks=LEAKERS)
    result = run_guard(pytester, "--isolation-leaks=quiet")
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(["*= isolation: 4 tests or fixtures leaked state =*"])
    result.stdout.no_fnmatch_line("*LeakedStateWarning*")


def test_off_by_default(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_leaks=LEAKERS)
    result = run_guard(pytester)
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.no_fnmatch_line("*leaked*")


def test_clean_suite_has_no_reports(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_clean=CLEAN)
    result = run_guard(pytester, "--isolation-leaks=warn")
    result.assert_outcomes(passed=7)
    result.stdout.no_fnmatch_line("*leaked*")


def test_higher_scoped_fixture_leak_is_the_fixture_s(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import os, pytest

        @pytest.fixture(scope="session")
        def sloppy():
            os.environ["SLOPPY"] = "x"
            yield
        """
    )
    pytester.makepyfile(
        test_a="import os\ndef test_1(sloppy): assert os.environ['SLOPPY'] == 'x'\n"
        "def test_2(sloppy): pass\n"
    )
    result = run_guard(pytester, "--isolation-leaks=warn")
    result.assert_outcomes(passed=2, warnings=1)
    result.stdout.fnmatch_lines(
        [
            literal(
                "*fixture 'sloppy' (scope=session) leaked os.environ['SLOPPY'] "
                "(was unset, now 'x')*"
            )
        ]
    )
    result.stdout.no_fnmatch_line("*test_a.py::test_1 leaked*")


def test_guard_runs_in_file_mode_children(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_leaks=LEAKERS)
    result = run_guard(pytester, "--isolation-leaks=warn", "--isolation-mode=file")
    result.assert_outcomes(passed=5, warnings=4)
    result.stdout.fnmatch_lines(
        [literal("*test_leaks.py::test_env_leak leaked os.environ['LEAKY']*")]
    )


def test_bad_policy_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = run_guard(pytester, "--isolation-leaks=loud")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --isolation-leaks: invalid value 'loud'; choose from*"])


def test_active_patches_fence() -> None:
    """Breaks loudly if unittest.mock stops tracking started patches where we look."""
    patcher = mock.patch("os.getcwd", return_value="/nowhere")
    patcher.start()
    try:
        assert patcher in _active_patches()
    finally:
        patcher.stop()
    assert patcher not in _active_patches()


MORE_LEAKERS = """
    import logging, os, signal, socket, sys

    def test_sys_path():
        sys.path.insert(0, "/nowhere")

    def test_sys_argv():
        sys.argv = ["prog", "--flag"]

    def test_root_handler():
        logging.root.addHandler(logging.NullHandler())

    def test_disabled_logger():
        logging.getLogger("app.db").disabled = True

    def test_socket_timeout():
        socket.setdefaulttimeout(3.0)

    def test_signal_handler():
        signal.signal(signal.SIGUSR1, lambda *args: None)

    def test_recursion_limit():
        sys.setrecursionlimit(sys.getrecursionlimit() + 7)

    def test_clean_afterwards():
        assert "/nowhere" not in sys.path
        assert sys.argv != ["prog", "--flag"]
        assert not any(type(h) is logging.NullHandler for h in logging.root.handlers)
        assert not logging.getLogger("app.db").disabled
        assert socket.getdefaulttimeout() is None
        assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
"""


def test_interpreter_logging_and_process_state(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_more=MORE_LEAKERS)
    result = run_guard(pytester, "--isolation-leaks=warn")
    result.assert_outcomes(passed=8, warnings=7)
    result.stdout.fnmatch_lines(
        [
            "*test_more.py::test_sys_path leaked sys.path (was *, now *'/nowhere'*",
            "*test_more.py::test_sys_argv leaked sys.argv*",
            "*test_more.py::test_root_handler leaked the root logger's handlers*",
            "*test_more.py::test_disabled_logger leaked disabled loggers*",
            "*test_more.py::test_socket_timeout leaked socket.getdefaulttimeout() "
            "(was None, now 3.0)*",
            "*test_more.py::test_signal_handler leaked the handler of SIGUSR1 "
            "(was <Handlers.SIG_DFL: 0>, now <function *",
            "*test_more.py::test_recursion_limit leaked sys.getrecursionlimit()*",
        ]
    )


def test_environ_data_fence(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast environment copy must see what ``os.environ`` sees."""
    monkeypatch.setenv("ISOLATION_FENCE", "é")
    data = _environ_data()
    assert {_text(key) for key in data} == set(os.environ)
    assert {_text(key): _text(value) for key, value in data.items()}["ISOLATION_FENCE"] == "é"
