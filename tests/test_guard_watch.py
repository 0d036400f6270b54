"""The leak guard's windows, policies, opt-outs and summary."""

from __future__ import annotations

import pytest

from conftest import literal
from conftest import run_file_mode
from conftest import run_guard
from conftest import warned

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


def test_warn_is_the_default_and_restores(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_leaks=LEAKERS)
    result = run_guard(pytester, "-p", "no:randomly")
    result.assert_outcomes(passed=5)
    assert warned(result) == 4
    result.stdout.fnmatch_lines(
        [
            literal(
                "*LeakedStateWarning: test_leaks.py::test_env_leak leaked os.environ['LEAKY'] "
                "(was unset, now '1'), at test_leaks.py:5; use monkeypatch.setenv/delenv"
            ),
            "*LeakedStateWarning: test_leaks.py::test_cwd_leak leaked the working directory*",
            literal("*test_leaks.py::test_sysmodules_leak leaked sys.modules['json']*"),
            "*test_leaks.py::test_patch_leak leaked an unstopped mock patch of time.time*",
        ]
    )
    # The summary names each key once, by category, with who changed it.
    result.stdout.fnmatch_lines(
        [
            "*= isolation: * by 4 tests =*",
            literal("[cwd] the working directory (was *"),
            "  by test_leaks.py::test_cwd_leak",
            literal("[env] os.environ['LEAKY'] (was unset, now '1'), at test_leaks.py:5"),
            "  by test_leaks.py::test_env_leak",
        ]
    )


def test_no_summary_without_leaks(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fine="def test_x(): pass\n")
    result = run_guard(pytester)
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*isolation:*")


def test_warning_escalates_with_w_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_leaks="import os\ndef test_x(): os.environ['LEAKY'] = '1'\n")
    result = run_guard(pytester, "-W", "error::pytest_isolation.LeakedStateWarning")
    result.assert_outcomes(passed=1, errors=1)


def test_error_fails_the_leaking_test_in_teardown(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_leaks=LEAKERS)
    result = run_guard(pytester, "-p", "no:randomly", "--isolation-leaks=error")
    result.assert_outcomes(passed=5, errors=4)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_env_leak*",
            literal("leaked os.environ['LEAKY'] *"),  # the header names the test
        ]
    )


def test_quiet_restores_and_counts(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_leaks=LEAKERS)
    result = run_guard(pytester, "-p", "no:randomly", "--isolation-leaks=quiet")
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(
        [
            "*= isolation: * by 4 tests =*",
            "restored quietly; run with --isolation-leaks=warn for details",
        ]
    )
    result.stdout.no_fnmatch_line("*LeakedStateWarning*")


def test_off_does_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_leaks=LEAKERS)
    result = run_guard(pytester, "-p", "no:randomly", "--isolation-leaks=off")
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.no_fnmatch_line("*leaked*")


def test_ini_sets_the_policy(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nisolation_leaks = error\n")
    pytester.makepyfile(test_leaks="import os\ndef test_x(): os.environ['LEAKY'] = '1'\n")
    result = run_guard(pytester)
    result.assert_outcomes(passed=1, errors=1)


def test_bad_policy_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = run_guard(pytester, "--isolation-leaks=loud")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --isolation-leaks: invalid value 'loud'; choose from*"])


def test_higher_scoped_fixture_leak_is_the_fixture_s(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import os, pytest

        @pytest.fixture(scope="session")
        def sloppy():
            os.environ["SLOPPY"] = "x"
            yield

        @pytest.fixture(scope="module")
        def sloppy_module():
            os.environ["SLOPPY_MODULE"] = "x"
            yield

        @pytest.fixture(scope="class")
        def tidy():
            os.environ["TIDY"] = "1"
            yield
            del os.environ["TIDY"]
        """
    )
    pytester.makepyfile(
        test_a="""
            import os
            def test_1(sloppy):
                assert os.environ["SLOPPY"] == "x"
            def test_2(sloppy):
                pass
            class TestTidy:
                def test_3(self, tidy):
                    assert os.environ["TIDY"] == "1"
                def test_4(self, tidy, sloppy):
                    os.environ["SLOPPY"] = "changed by the test"
            def test_5(sloppy_module):
                pass
        """,
        test_b="def test_6(): pass\n",
    )
    result = run_guard(pytester, "-p", "no:randomly", "-v")
    result.assert_outcomes(passed=6)
    assert warned(result) == 2
    result.stdout.fnmatch_lines(
        [
            literal(
                "*LeakedStateWarning: fixture 'sloppy_module' (scope=module) in the teardown of"
                " test_a.py::test_5 leaked "
                "os.environ['SLOPPY_MODULE'] (was unset, now 'x'), at conftest.py:10*"
            ),
        ]
    )
    result.stdout.fnmatch_lines(
        [literal("*test_a.py::TestTidy::test_4 leaked os.environ['SLOPPY'] (was 'x', now 'chan*")]
    )
    result.stdout.fnmatch_lines(["*= isolation: * by 1 test and 1 fixture =*"])
    # A session fixture finalized after the last test leaks into no test:
    # put back, listed, not warned about.
    result.stdout.fnmatch_lines(
        [
            "isolation: routine state of 1 fixture put back "
            "(1 left by a fixture after the last test; not leaks)",
            literal(
                "  [env] os.environ['SLOPPY'] (was unset, now 'x'), at conftest.py:5 "
                "(fixture 'sloppy' (scope=session) in the teardown of test_b.py::test_6)"
            ),
        ]
    )
    result.stdout.no_fnmatch_line("*test_a.py::test_1 leaked*")
    result.stdout.no_fnmatch_line("*fixture 'tidy'*leaked*")


IMPORT_TIME = """
    import os, sys, time
    from unittest import mock

    os.environ["AT_IMPORT"] = "1"
    sys.modules["yaml"] = mock.MagicMock()
    mock.patch.object(time, "sleep").start()

    def test_relies_on_it():
        import yaml
        assert os.environ["AT_IMPORT"] == "1" and isinstance(yaml, mock.MagicMock)
"""


def test_import_time_leaks_are_reported_for_the_file_not_restored(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_imports=IMPORT_TIME)
    result = run_guard(pytester, "-p", "no:randomly")
    result.assert_outcomes(passed=1)
    assert warned(result) == 3
    hint = "run with --isolation-mode=file to keep it in this file, or move it into a fixture"
    result.stdout.fnmatch_lines(
        [
            literal(
                "*LeakedStateWarning: test_imports.py (at import) leaked os.environ['AT_IMPORT'] "
                f"(was unset, now '1'), at test_imports.py:4 (not undone); {hint}"
            ),
        ]
    )
    result.stdout.fnmatch_lines(
        [literal("*test_imports.py (at import) leaked sys.modules['yaml'] (was unset, now <Magi*")]
    )
    result.stdout.fnmatch_lines(
        # unittest.mock is first imported by this very module: no start() site was
        # recorded, the line is read from the module's top level.
        [
            "*test_imports.py (at import) leaked an unstopped mock patch of time.sleep,"
            " at test_imports.py:6 (not undone);*"
        ]
    )
    result.stdout.fnmatch_lines(["*= isolation: * by 1 file =*"])


def test_import_time_patch_site_has_its_line_once_mock_is_loaded(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest("from unittest import mock  # loaded before the test modules\n")
    pytester.makepyfile(test_imports=IMPORT_TIME)
    result = run_guard(pytester, "-p", "no:randomly")
    result.stdout.fnmatch_lines(
        [
            "*(at import) leaked an unstopped mock patch of time.sleep,"
            " at test_imports.py:6 (not undone);*"
        ]
    )


def test_import_time_leak_is_a_collection_error_under_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_imports=IMPORT_TIME)
    result = run_guard(pytester, "--isolation-leaks=error")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        ["*ERROR collecting test_imports.py*", literal("*(at import) leaked os.environ[*")]
    )


def test_import_time_state_is_contained_in_file_mode(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(test_imports=IMPORT_TIME)
    result = run_file_mode(pytester, start, "-p", "no:randomly")
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*leaked*")


def test_pytest_s_own_changes_are_never_reported(pytester: pytest.Pytester) -> None:
    """Import modes insert sys.path entries; warnings capture, logging and
    PYTEST_CURRENT_TEST change around every test; -x, -s and log options."""
    pytester.makepyfile(
        **{
            "pkg/__init__.py": "",
            "pkg/test_in_package.py": "import logging\n"
            "def test_logs(): logging.getLogger('x').warning('hi')\n",
            "test_top.py": "import warnings\ndef test_warns():\n"
            "    warnings.warn(UserWarning('w'))\n",
        }
    )
    for args in (
        ("--import-mode=prepend",),
        ("--import-mode=append",),
        ("--import-mode=importlib", "-s"),
        ("--log-cli-level=INFO", "--log-file=out.log"),
    ):
        result = run_guard(pytester, *args)
        result.assert_outcomes(passed=2, warnings=1)
        result.stdout.no_fnmatch_line("*leaked*")


def test_pytest_socket_swaps_are_never_reported(pytester: pytest.Pytester) -> None:
    pytest.importorskip("pytest_socket")
    pytester.makepyfile(
        test_sockets="""
            import socket, pytest
            def test_blocked():
                with pytest.raises(Exception):
                    socket.socket()
            @pytest.mark.enable_socket
            def test_enabled():
                socket.socket().close()
            def test_after():
                pass
        """
    )
    result = run_guard(pytester, "-p", "pytest_socket", "--disable-socket", "-p", "no:randomly")
    result.assert_outcomes(passed=3, warnings=1)  # pytest-socket's own warning
    result.stdout.no_fnmatch_line("*leaked*")


def test_guard_runs_in_file_mode_children_and_the_parent_summarizes(
    pytester: pytest.Pytester, start: str
) -> None:
    pytester.makepyfile(test_leaks=LEAKERS)
    result = run_file_mode(pytester, start, "-p", "no:randomly")
    result.assert_outcomes(passed=5)
    assert warned(result) == 4
    result.stdout.fnmatch_lines(
        [
            literal("*test_leaks.py::test_env_leak leaked os.environ['LEAKY']*"),
            "*= isolation: * by 4 tests =*",
            literal("[env] os.environ['LEAKY'] (was unset, now '1'), at test_leaks.py:5"),
            "  by test_leaks.py::test_env_leak",
        ]
    )


ALLOWED = """
    import os, sys
    import pytest
    from unittest import mock

    pytestmark = pytest.mark.isolation(allow_leaks=["cwd"])

    @pytest.mark.isolation(allow_leaks=["env:MYAPP_*", "sys.modules:yaml"])
    def test_allowed(tmp_path):
        os.environ["MYAPP_MODE"] = "x"
        sys.modules["yaml"] = mock.MagicMock()
        os.chdir(tmp_path)

    def test_allowed_leaks_stay(tmp_path):
        assert os.environ["MYAPP_MODE"] == "x"

    @pytest.mark.isolation(allow_leaks=["env:MYAPP_*"])
    def test_other_keys_are_still_reported():
        os.environ["OTHER"] = "1"
        os.environ["GLOBAL_OK"] = "1"
"""


def test_marker_and_ini_allow_leaks(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nisolation_allow_leaks =\n    env:GLOBAL_OK\n")
    pytester.makepyfile(test_allowed=ALLOWED)
    result = run_guard(pytester, "-p", "no:randomly")
    result.assert_outcomes(passed=3)
    assert warned(result) == 1
    result.stdout.fnmatch_lines(
        [literal("*test_other_keys_are_still_reported leaked os.environ['OTHER']*")]
    )
    result.stdout.no_fnmatch_line("*leaked*MYAPP*")
    result.stdout.no_fnmatch_line("*leaked*GLOBAL_OK*")
    result.stdout.no_fnmatch_line("*leaked the working directory*")


def test_unknown_category_in_ini_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nisolation_allow_leaks = environ:FOO\n")
    pytester.makepyfile(test_a="def test_x(): pass\n")
    result = run_guard(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: isolation_allow_leaks (ini): unknown leak category 'environ' in "
            "'environ:FOO'; choose from mock, sys.modules, attribute, env, *"
        ]
    )


def test_unknown_category_in_a_marker_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_a="import pytest\n"
        "@pytest.mark.isolation(allow_leaks=['enviro:FOO'])\ndef test_x(): pass\n"
    )
    result = run_guard(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: test_a.py::test_x: @pytest.mark.isolation: unknown leak category 'enviro' "
            "in 'enviro:FOO'; choose from *"
        ]
    )


def test_marker_with_other_arguments_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a="import pytest\n@pytest.mark.isolation('env')\ndef test_x(): pass\n")
    result = run_guard(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            literal(
                "ERROR: test_a.py::test_x: @pytest.mark.isolation takes allow_leaks=[...], mode= "
                "and group=, got *"
            )
        ]
    )


def test_marker_is_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("-p", "isolation", "--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.isolation(allow_leaks=*"])


def test_escalated_import_time_leak_fails_the_file_s_collection(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_imports=IMPORT_TIME)
    result = run_guard(pytester, "-W", "error::pytest_isolation.LeakedStateWarning")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # not an internal error
    result.stdout.fnmatch_lines(["*ERROR collecting test_imports.py*"])
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


def test_escalated_warnings_still_record_every_leak(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_two="import os\ndef test_x():\n    os.environ['ONE'] = '1'\n"
        "    os.environ['TWO'] = '2'\ndef test_y():\n    assert 'ONE' not in os.environ\n"
    )
    result = run_guard(pytester, "-W", "error::pytest_isolation.LeakedStateWarning")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            # ONE escalated: the test's error shows it; TWO is only recorded
            literal("LeakedStateWarning: leaked os.environ['ONE'] *"),
            "*= isolation: * by 1 test =*",
            literal("[env] os.environ['TWO'] *"),
            "  by test_two.py::test_x",
            "and 1 leak shown as an error above",
        ]
    )


def test_ini_allowance_covers_fixtures_and_module_markers_cover_the_file_scan(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\nisolation_allow_leaks = env:SESSION_*\n")
    pytester.makeconftest(
        "import os, pytest\n@pytest.fixture(scope='session')\ndef sloppy():\n"
        "    os.environ['SESSION_TOKEN'] = 'x'\n"
    )
    pytester.makepyfile(
        test_a="""
            import email.utils
            import pytest
            pytestmark = pytest.mark.isolation(allow_leaks=["attribute:email.utils.*"])
            def test_replaces(sloppy):
                email.utils.formatdate = lambda *a, **k: "never"
        """
    )
    result = run_guard(pytester)
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*leaked*")


def test_bad_marker_in_file_mode_errors_the_test(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(
        test_a="import pytest\n"
        "@pytest.mark.isolation(allow_leaks=['enviro:FOO'])\ndef test_x(): pass\n"
        "def test_y(): pass\n"
    )
    result = run_file_mode(pytester, start)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        ["*test_a.py::test_x: @pytest.mark.isolation: unknown leak category 'enviro'*"]
    )
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


def test_what_a_fixture_s_teardown_changes_is_the_fixture_s(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import os, pytest

        @pytest.fixture(scope="module")
        def noisy_teardown():
            yield
            os.environ["SET_IN_TEARDOWN"] = "1"

        @pytest.fixture(scope="module")
        def cleaner():
            yield
            os.environ.pop("LEFT_BY_A_TEST", None)
        """
    )
    pytester.makepyfile(
        test_a="""
            import os
            def test_1(noisy_teardown, cleaner):
                os.environ["LEFT_BY_A_TEST"] = "1"
            def test_2():
                assert "SET_IN_TEARDOWN" not in os.environ
        """,
        test_b="def test_3(): pass\n",
    )
    result = run_guard(pytester, "-p", "no:randomly")
    result.assert_outcomes(passed=3)
    assert warned(result) == 2
    result.stdout.fnmatch_lines(
        [
            "*= isolation: * by 1 test and 1 fixture =*",
            literal("[env] os.environ['LEFT_BY_A_TEST'] (was unset, now '1'), at test_a.py:3"),
            "  by test_a.py::test_1",
            literal("[env] os.environ['SET_IN_TEARDOWN'] (was unset, now '1'), at conftest.py:6"),
            "  by fixture 'noisy_teardown' (scope=module) in the teardown of test_a.py::test_2",
        ]
    )
    result.stdout.no_fnmatch_line("*fixture 'cleaner'*")


def test_a_leak_of_an_item_without_a_line_is_warned(pytester: pytest.Pytester) -> None:
    """pytest's ``Node.warn`` refuses items whose location has no line (a
    non-Python collector's, such as pygments' snippet files)."""
    pytester.makeconftest(
        """
        import os
        import pytest

        class SetsEnv(pytest.Item):
            def runtest(self):
                os.environ["FROM_TXT_ITEM"] = "1"

            def reportinfo(self):
                return self.path, None, self.name

        class TxtFile(pytest.File):
            def collect(self):
                yield SetsEnv.from_parent(self, name="sets")

        def pytest_collect_file(file_path, parent):
            if file_path.suffix == ".txt":
                return TxtFile.from_parent(parent, path=file_path)
        """
    )
    pytester.path.joinpath("case.txt").write_text("")
    result = pytester.runpytest_subprocess("-p", "isolation", "-p", "leakwarnings", timeout=120)
    result.assert_outcomes(passed=1)
    assert warned(result) == 1
    result.stdout.fnmatch_lines(["*LeakedStateWarning: case.txt::sets leaked os.environ*"])


def test_finding_a_patch_s_site_makes_no_file_system_call(pytester: pytest.Pytester) -> None:
    """blockbuster (anyio's suite) forbids blocking calls such as
    ``os.path.realpath`` inside an event loop, where tests start patches."""
    pytester.makepyfile(
        test_p="""
        import os
        from unittest import mock

        def forbidden(*args, **kwargs):
            raise RuntimeError("blocking call")

        def test_patch_inside_a_loop():
            with mock.patch.object(os.path, "realpath", forbidden), mock.patch.object(
                os.path, "abspath", forbidden
            ):
                patcher = mock.patch("json.dumps")
                patcher.start()
                patcher.stop()
        """
    )
    result = run_guard(pytester)
    result.assert_outcomes(passed=1)
