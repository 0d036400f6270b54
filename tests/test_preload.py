"""The preloading fork server (issue 17): each child starts with the modules
its test files import already loaded, and no outcome changes: a file whose
code could see the difference starts from a server without them, and a
module whose import could change another file's state is not preloaded."""

from __future__ import annotations

import re
import textwrap

import pytest

from conftest import FILE_MODE
from conftest import TIMEOUT

#: A project package beside the tests, on sys.path through ``pythonpath``.
MYLIB = {
    # Imported by a test module, or before any (by a fork server)?
    "mylib/__init__.py": "import sys\nBY_A_TEST = any(n[:5] == 'test_' for n in sys.modules)\n",
    "mylib/settings.py": "import os\nMODE = os.environ.get('MYLIB_MODE', 'default')\n",
    "mylib/heavy.py": "VALUE = 'real'\n",
    "mylib/user.py": "from mylib import heavy\n",
    "mylib/cwd.py": "import os\nAT_IMPORT = os.getcwd()\n",
}

#: Files that import the package at the top, as most do.
PLAIN = """
    import mylib
    import mylib.settings
    import mylib.user
    import mylib.cwd

    def test_imported_before_this_process_started():
        assert (not mylib.BY_A_TEST) == PRELOADED
"""
#: Two files (a server preloads for at least two).
PLAIN_FILES = {"tests/test_plain.py": PLAIN, "tests/test_plain_too.py": PLAIN}


def write(pytester: pytest.Pytester, files: dict[str, str], preloaded: bool) -> None:
    pytester.makeini("[pytest]\npythonpath = .\n")
    for name, source in {**MYLIB, **files}.items():
        path = pytester.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        source = textwrap.dedent(source)
        if name.startswith("tests/"):
            source += f"\nPRELOADED = {preloaded}\n"
        path.write_text(source)


def run(pytester: pytest.Pytester, preload: str, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        *FILE_MODE,
        "--isolation-start=fork",
        f"--isolation-preload={preload}",
        "-p",
        "no:cacheprovider",
        *args,
        timeout=TIMEOUT,
    )


def test_the_server_imports_what_the_test_files_import(pytester: pytest.Pytester) -> None:
    write(pytester, PLAIN_FILES, preloaded=True)
    result = run(pytester, "auto")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["isolation: the fork server preloads 4 modules that the test files import (5 with theirs)"]
    )


def test_off_imports_in_each_child(pytester: pytest.Pytester) -> None:
    write(pytester, PLAIN_FILES, preloaded=False)
    result = run(pytester, "off")
    result.assert_outcomes(passed=2)
    assert "preloads" not in result.stdout.str()


#: Files whose code runs before, around or instead of their imports.  Each
#: passes only if what it imports is imported in its own child, after it.
SENSITIVE = {
    "tests/test_env_first.py": (
        """
        import os
        os.environ["MYLIB_MODE"] = "set by the file"
        import mylib.settings

        def test_settings_read_the_file_s_environment():
            assert mylib.settings.MODE == "set by the file"
        """,
        "module-level code on line 3 runs before an import (line 4)",
    ),
    "tests/test_mocked_module.py": (
        """
        import sys
        from unittest import mock
        sys.modules["mylib.heavy"] = mock.MagicMock()
        import mylib.user

        def test_the_user_gets_the_mock():
            assert isinstance(mylib.user.heavy, mock.MagicMock)
        """,
        "module-level code on line 4 runs before an import (line 5)",
    ),
    "tests/test_patch_started.py": (
        """
        from unittest import mock
        mock.patch("os.getcwd", return_value="/patched").start()
        import mylib.cwd

        def test_the_import_saw_the_patch():
            assert mylib.cwd.AT_IMPORT == "/patched"
        """,
        "module-level code on line 3 runs before an import (line 4)",
    ),
    "tests/test_lazy.py": (
        """
        def test_a_lazy_import_reads_the_test_s_environment(monkeypatch):
            monkeypatch.setenv("MYLIB_MODE", "lazy")
            import mylib.settings
            assert mylib.settings.MODE == "lazy"
        """,
        "it imports nothing that the parent has not loaded",
    ),
    "tests/test_reload.py": (
        """
        import importlib
        import mylib.settings

        def test_reloaded_under_the_test_s_environment(monkeypatch):
            monkeypatch.setenv("MYLIB_MODE", "reloaded")
            importlib.reload(mylib.settings)
            assert mylib.settings.MODE == "reloaded"
            monkeypatch.delenv("MYLIB_MODE")
            importlib.reload(mylib.settings)
        """,
        "it touches the import system (reload(), line 7)",
    ),
    "tests/test_sys_modules_later.py": (
        """
        import sys
        from unittest import mock
        import mylib

        def test_a_test_mocks_a_module_before_importing_its_user(monkeypatch):
            monkeypatch.setitem(sys.modules, "mylib.heavy", mock.MagicMock())
            monkeypatch.delitem(sys.modules, "mylib.user", raising=False)
            import mylib.user
            assert isinstance(mylib.user.heavy, mock.MagicMock)
        """,
        "it touches the import system (sys.modules, line 7)",
    ),
}


def test_a_file_that_could_see_the_difference_starts_without_preloads(
    pytester: pytest.Pytester,
) -> None:
    files = {**PLAIN_FILES, **{name: source for name, (source, _) in SENSITIVE.items()}}
    write(pytester, files, preloaded=True)
    result = run(pytester, "auto", "-v")
    result.assert_outcomes(passed=2 + len(SENSITIVE))
    result.stdout.fnmatch_lines(
        [
            "isolation: the fork server preloads 4 modules * 6 files start without them, "
            "0 modules are left out"
        ]
    )
    for name, (_, why) in SENSITIVE.items():
        result.stdout.fnmatch_lines([f"isolation:   {name}: {why}"])


#: Modules whose import must not happen in the server, and why.
REFUSED = {
    "warns": (
        "import warnings\nwarnings.warn('mylib.warns is old', DeprecationWarning)\n",
        "its import warns (DeprecationWarning: mylib.warns is old)",
    ),
    "threads": (
        "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n",
        "its import starts a thread",
    ),
    "broken": ("raise RuntimeError('broken at import')\n", "its import raised RuntimeError"),
    "patcher": (
        "import json\njson.dumps = lambda *args, **kwargs: 'patched'\n",
        "preloading changes json.dumps",
    ),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_module_whose_import_could_change_another_file_is_not_preloaded(
    pytester: pytest.Pytester, name: str
) -> None:
    """Outcomes as without preloading; the module is named with the reason,
    and the file that does not import it starts from the server all the same."""
    source, why = REFUSED[name]
    uses = f"import mylib.settings\nimport mylib.user\nimport mylib.{name}\n"
    files = {
        "tests/test_uses.py": f"{uses}\ndef test_it():\n    pass\n",
        "tests/test_uses_too.py": f"{uses}\ndef test_it():\n    pass\n",
        "tests/test_other.py": """
            import json
            import threading
            import mylib
            import mylib.settings
            import mylib.user

            def test_no_other_file_s_import_shows():
                assert json.dumps(1) == "1"
                assert threading.active_count() == 1
                assert mylib.BY_A_TEST is False  # preloaded all the same
        """,
        f"mylib/{name}.py": source,
    }
    write(pytester, files, preloaded=True)
    preloaded = run(pytester, "auto", "-v")
    outcomes = {"passed": 1, "errors": 2} if name == "broken" else {"passed": 3}
    preloaded.assert_outcomes(**outcomes)
    preloaded.stdout.fnmatch_lines(
        [
            "isolation: the fork server preloads 3 modules * 0 files start without them, "
            "1 module is left out",
            f"isolation:   mylib.{name} not preloaded: {why}",
        ]
    )
    other = pytester.path / "tests" / "test_other.py"
    other.write_text(other.read_text().replace("is False  # preloaded", "is True  #"))
    assert preloaded.parseoutcomes() == run(pytester, "off").parseoutcomes()


def test_a_warning_at_import_is_reported_as_in_a_plain_run(pytester: pytest.Pytester) -> None:
    source, _ = REFUSED["warns"]
    imports = "import mylib\nimport mylib.settings\nimport mylib.user\nimport mylib.cwd\n"
    files = {"tests/test_warns.py": f"{imports}import mylib.warns\n\ndef test_it():\n    pass\n"}
    write(pytester, {**PLAIN_FILES, **files, "mylib/warns.py": source}, preloaded=True)
    result = run(pytester, "auto", "-W", "error::DeprecationWarning")
    result.assert_outcomes(passed=2, errors=1)  # as plain: the import fails at collection
    assert re.search(r"DeprecationWarning: mylib.warns is old", result.stdout.str())


def test_coverage_counts_the_lines_run_at_preload(pytester: pytest.Pytester) -> None:
    write(pytester, PLAIN_FILES, preloaded=True)
    result = run(pytester, "auto", "-p", "pytest_cov", "--cov=mylib", "--cov-report=term")
    result.assert_outcomes(passed=2)
    result.stdout.re_match_lines([r"mylib[/\\]settings.py\s+2\s+0\s+100%"])


def test_an_import_that_hangs_costs_the_file_s_timeout_not_the_run(
    pytester: pytest.Pytester,
) -> None:
    hangs = "import mylib.settings\nimport mylib.hangs\n\ndef test_it():\n    pass\n"
    files = {
        "tests/test_hangs.py": hangs,
        "tests/test_hangs_too.py": hangs,
        "tests/test_fine.py": "import mylib.settings\n\ndef test_it():\n    pass\n",
        "mylib/hangs.py": "import time\ntime.sleep(600)\n",
    }
    write(pytester, files, preloaded=True)
    preloaded = run(pytester, "auto", "--isolation-timeout=2", "--isolation-kill-grace=1", "-v")
    preloaded.stdout.fnmatch_lines(
        [
            # The server for the file that does not import mylib.hangs preloads.
            "isolation: the fork server preloads 2 modules *; 2 files start without them, "
            "1 module is left out",
            "isolation:   mylib, mylib.settings, mylib.hangs not preloaded: "
            "the imports took more than 2 s",
        ]
    )
    off = run(pytester, "off", "--isolation-timeout=2", "--isolation-kill-grace=1")
    assert preloaded.parseoutcomes() == off.parseoutcomes()
    preloaded.assert_outcomes(passed=1, errors=2)  # the hanging files time out, as without


def test_a_file_that_relies_on_another_file_s_import_fails_as_without(
    pytester: pytest.Pytester,
) -> None:
    """click's ``test_echo_via_pager.py`` reads ``click._termui_impl``, which
    only other files import: the server holds only what each file that
    starts from it imports itself, so such a file fails, as it does alone."""
    uses = "import mylib.settings\nimport mylib.user\n\ndef test_it():\n    pass\n"
    files = {
        "tests/test_a.py": uses,
        "tests/test_b.py": uses,
        "tests/test_relies.py": """
            import mylib

            def test_reads_a_module_it_never_imports():
                assert mylib.user.heavy.VALUE == "real"
        """,
    }
    write(pytester, files, preloaded=True)
    preloaded = run(pytester, "auto", "-v")
    preloaded.assert_outcomes(passed=2, failed=1)
    # Its own server preloads what it imports first: mylib, not mylib.user.
    preloaded.stdout.fnmatch_lines(["isolation: 2 fork servers preload 3 modules *"])
    assert preloaded.parseoutcomes() == run(pytester, "off").parseoutcomes()
