"""isolated_env, mock_module and isolated_fs, with and without the plugin loaded."""

from __future__ import annotations

import pytest

from conftest import TIMEOUT
from conftest import literal

ENV = """
    import os, pathlib, tempfile
    import pytest
    from pytest_isolation import IsolatedEnv
    from pytest_isolation.fixtures.env import REDIRECTED

    def environment():
        return {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}

    BEFORE = environment()

    def test_redirects_every_variable(isolated_env: IsolatedEnv):
        for name, kind in REDIRECTED.items():
            assert os.environ[name] == str(isolated_env.path(kind)), name
            assert isolated_env.path(kind).is_dir()
        assert pathlib.Path.home() == isolated_env.home
        assert os.path.expanduser("~") == str(isolated_env.home)
        assert tempfile.gettempdir() == str(isolated_env.path("tmp"))
        assert oct(isolated_env.path("runtime").stat().st_mode & 0o777) == "0o700"
        with pytest.raises(ValueError, match="unknown kind 'music'; choose from home, config"):
            isolated_env.path("music")

    def test_scrubs_credentials_and_keeps_the_rest(isolated_env):
        assert "MY_API_KEY" not in os.environ and "AWS_REGION" not in os.environ
        assert "PIP_INDEX_URL" not in os.environ and "EXTRA_SCRUBBED" not in os.environ
        assert os.environ["KEEP_THIS_TOKEN"] == "k" and os.environ["HARMLESS"] == "h"

    def test_set_and_delete(isolated_env):
        isolated_env.set("NEW_VAR", "1")
        isolated_env.delete("HARMLESS")
        assert os.environ["NEW_VAR"] == "1" and "HARMLESS" not in os.environ

    def test_everything_restored_per_variable():
        assert environment() == BEFORE
        assert "NEW_VAR" not in os.environ  # did not exist before: deleted again
        assert tempfile.gettempdir() != "" and "env" not in tempfile.gettempdir()
"""


def test_isolated_env(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "MY_API_KEY": "secret",
        "AWS_REGION": "eu",
        "PIP_INDEX_URL": "http://x",
        "KEEP_THIS_TOKEN": "k",
        "EXTRA_SCRUBBED": "e",
        "HARMLESS": "h",
    }.items():
        monkeypatch.setenv(name, value)
    pytester.makeini("[pytest]\nisolation_env_scrub = EXTRA_*\nisolation_env_keep = KEEP_THIS_*\n")
    pytester.makepyfile(test_env=ENV)
    result = pytester.runpytest_subprocess("-p", "isolation", "-p", "no:randomly", timeout=TIMEOUT)
    result.assert_outcomes(passed=4)
    result.stdout.no_fnmatch_line("*leaked*")
    result.stdout.no_fnmatch_line("*= isolation: * leak* by * =*")  # no leak section


HOME_CACHED = """
    import os, pathlib

    # Computed when the module is imported, before any fixture redirects HOME.
    CACHE = pathlib.Path.home() / ".isolation-test-cache"

    def test_write_to_a_home_path_cached_at_import(isolated_env):
        try:
            CACHE.write_text("x")
        except OSError:
            pass  # even a caught refusal fails the test

    def test_write_through_a_symlink_into_the_home(isolated_env, tmp_path):
        link = tmp_path / "link"
        link.symlink_to(CACHE.parent, target_is_directory=True)
        try:
            (link / "through-link").write_text("x")
        except OSError:
            pass

    def test_writes_inside_the_isolated_home_are_fine(isolated_env, tmp_path):
        (isolated_env.home / ".config").mkdir()
        (tmp_path / "f").write_text("x")
"""


def test_write_to_the_real_home_fails_the_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A home outside the temp directories the inner run may write to.
    home = pytester.mkdir("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("TMPDIR", str(pytester.mkdir("system-tmp")))
    pytester.makepyfile(test_home=HOME_CACHED)
    result = pytester.runpytest_subprocess("-p", "isolation", "-p", "no:randomly", timeout=TIMEOUT)
    result.assert_outcomes(passed=3, errors=2)
    result.stdout.fnmatch_lines(
        ["*ERROR at teardown of test_write_through_a_symlink_into_the_home*"]
    )
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_write_to_a_home_path_cached_at_import*",
            "*isolated_env: refused writing '*.isolation-test-cache' in the real home directory*"
            "Usual cause: a module computed a path from the home directory when it was "
            "imported*",
        ]
    )
    assert not (home / ".isolation-test-cache").exists()
    assert not (home / "through-link").exists()


NETWORK = """
    import socket
    import pytest
    from pytest_isolation import NetworkDeniedError

    def test_network_denied(isolated_env):
        isolated_env(network=False)
        with pytest.raises(NetworkDeniedError, match="network access refused .*example.invalid"):
            socket.getaddrinfo("example.invalid", 80)
        with socket.socket() as sock, pytest.raises(NetworkDeniedError, match="connect to"):
            sock.connect(("192.0.2.1", 9))

    def test_loopback_allowed(isolated_env):
        isolated_env(network=False)
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen()
        client = socket.create_connection(server.getsockname(), timeout=5)
        client.close()
        server.close()

    def test_network_allowed_by_default(isolated_env):
        socket.getaddrinfo("localhost", 80)
"""


def test_network_denial(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_net=NETWORK)
    result = pytester.runpytest_subprocess("-p", "isolation", "-p", "no:randomly", timeout=TIMEOUT)
    result.assert_outcomes(passed=3)


def test_network_denial_from_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nisolation_env_network = false\n")
    pytester.makepyfile(
        test_net="import socket, pytest\n"
        "def test_x(isolated_env):\n"
        "    isolated_env()  # no arguments: the ini setting stays\n"
        "    with pytest.raises(ConnectionRefusedError, match='network=False'):\n"
        "        socket.create_connection(('192.0.2.1', 9), timeout=0.1)\n"
    )
    result = pytester.runpytest_subprocess("-p", "isolation", timeout=TIMEOUT)
    result.assert_outcomes(passed=1)


MOCK_MODULE = """
    import sys
    import pytest
    from pytest_isolation import ModuleMocker, check_module_stub

    def test_keeps_the_real_attributes(mock_module: ModuleMocker):
        fake = mock_module("email.utils", formatdate=lambda *a, **k: "never")
        import email.utils
        from email.utils import parseaddr
        assert email.utils is fake and sys.modules["email.utils"] is fake
        assert email.utils.formatdate() == "never"
        assert parseaddr("A <a@b.c>") == ("A", "a@b.c")  # unrelated names still work

    def test_undone_afterwards():
        import email.utils
        assert email.utils.formatdate() != "never"
        assert type(sys.modules["email.utils"].formatdate).__name__ == "function"

    def test_refuses_unknown_names(mock_module):
        message = r"mock_module\\('json'\\): the real module has no 'dumpz'"
        with pytest.raises(AttributeError, match=message):
            mock_module("json", dumpz=None)

    def test_check_module_stub():
        class Stub:
            dumps = loads = None
        missing = check_module_stub(Stub(), "json")
        assert "dump" in missing and "dumps" not in missing and "JSONDecodeError" in missing
        assert check_module_stub({"dumps": 1}, "json") == sorted(missing + ["loads"])
"""


def test_mock_module(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mock=MOCK_MODULE)
    result = pytester.runpytest_subprocess("-p", "isolation", "-p", "no:randomly", timeout=TIMEOUT)
    result.assert_outcomes(passed=4)
    result.stdout.no_fnmatch_line("*leaked*")
    result.stdout.no_fnmatch_line("*= isolation: * leak* by * =*")  # no leak section


FS = """
    import os
    from pytest_isolation.fixtures.env import REDIRECTED

    def test_fake_home(isolated_fs):
        home = os.environ["HOME"]
        assert os.path.isdir(home) and os.path.isdir(os.environ["XDG_CONFIG_HOME"])
        with open(os.path.join(home, "settings.ini"), "w") as f:
            f.write("x")
        assert isolated_fs.exists(os.path.join(home, "settings.ini"))

    def test_real_file_system_afterwards():
        assert not os.path.exists("/isolated/home/settings.ini")
        assert os.environ.get("HOME") != "/isolated/home"
"""


def test_isolated_fs(pytester: pytest.Pytester) -> None:
    pytest.importorskip("pyfakefs")
    pytester.makepyfile(test_fs=FS)
    result = pytester.runpytest_subprocess("-p", "isolation", "-p", "no:randomly", timeout=TIMEOUT)
    result.assert_outcomes(passed=2)


def test_isolated_fs_skips_without_pyfakefs(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("import sys\nsys.modules['pyfakefs'] = None  # as if not installed\n")
    pytester.makepyfile(test_fs="def test_x(isolated_fs): pass\n")
    result = pytester.runpytest_subprocess("-p", "isolation", "-rs", timeout=TIMEOUT)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*isolated_fs needs pyfakefs: pip install pyfakefs*"])


def test_fixtures_from_a_conftest_without_the_plugin(pytester: pytest.Pytester) -> None:
    pytester.makeconftest('pytest_plugins = ["pytest_isolation.fixtures"]\n')
    pytester.makepyfile(
        test_all="""
            import os, sys
            def test_tmp(isolated_tmp, isolated_tmp_path):
                assert isolated_tmp(files={"a": "1"}).path.is_dir() and isolated_tmp_path.is_dir()
            def test_env(isolated_env):
                assert os.environ["HOME"] == str(isolated_env.home)
            def test_mock(mock_module):
                assert mock_module("json", dumps=len).dumps("ab") == 2
            def test_fs(isolated_fs):
                assert isolated_fs.exists(os.environ["HOME"])
            def test_guard_and_file_mode_are_not_loaded(request):
                assert request.config.pluginmanager.get_plugin("isolation-guard") is None
        """
    )
    pytest.importorskip("pyfakefs")
    result = pytester.runpytest_subprocess(
        "-p", "no:isolation", "--isolation-keep-tmp=always", timeout=TIMEOUT
    )
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(["*= isolation: kept 2 temporary directories =*"])


def test_fixtures_from_a_conftest_with_the_plugin_too(pytester: pytest.Pytester) -> None:
    pytester.makeconftest('pytest_plugins = ["pytest_isolation.fixtures"]\n')
    pytester.makepyfile(test_a="def test_x(isolated_tmp_path): assert isolated_tmp_path.is_dir()\n")
    result = pytester.runpytest_subprocess("-p", "isolation", timeout=TIMEOUT)
    result.assert_outcomes(passed=1)


def test_fixtures_are_listed(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("-p", "isolation", "--fixtures", timeout=TIMEOUT)
    for name in ("isolated_tmp", "isolated_tmp_path", "isolated_env", "mock_module", "isolated_fs"):
        result.stdout.fnmatch_lines([literal(f"{name}*")])
