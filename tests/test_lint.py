"""The isolation lint (``lint/``): each rule on small sources, then the plugin
in real runs (warn, error, off, allow-list, -W error, file mode, xdist, cache)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from conftest import TIMEOUT
from pytest_isolation.lint.__main__ import main as lint_main
from pytest_isolation.lint.check import CACHE_PREFIX
from pytest_isolation.lint.check import glob_pattern
from pytest_isolation.lint.check import parse_allow
from pytest_isolation.lint.rules import CODES
from pytest_isolation.lint.rules import check


def codes(source: str, path: str = "tests/test_x.py") -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in check(textwrap.dedent(source), path)]


# -- each code: a positive and a negative example -----------------------------------

POSITIVE = {
    "ISO101": """\
        import sys, types
        sys.modules["fake"] = types.ModuleType("fake")
        """,
    "ISO102": """\
        from unittest import mock
        patcher = mock.patch("os.getcwd", return_value="/")
        patcher.start()
        """,
    "ISO103": """\
        import os
        os.environ["APP_MODE"] = "test"
        """,
    "ISO201": """\
        def test_write():
            with open("/tmp/out.txt", "w") as f:
                f.write("x")
        """,
    "ISO202": """\
        import os
        def test_here():
            os.chdir("/")
        """,
    "ISO203": """\
        import os
        def test_env():
            os.environ["APP_MODE"] = "x"
        """,
    "ISO301": """\
        import sys
        from unittest.mock import MagicMock
        def test_json(monkeypatch):
            monkeypatch.setitem(sys.modules, "json", MagicMock())
        """,
    "ISO302": """\
        import threading, time
        def test_worker():
            threading.Thread(target=work).start()
            time.sleep(0.5)
            assert done
        """,
    "ISO303": """\
        def test_todo():
            pass
        """,
}

NEGATIVE = {
    "ISO101": """\
        import sys, types
        def test_fake(monkeypatch):
            monkeypatch.setitem(sys.modules, "fake", types.ModuleType("fake"))
        """,
    "ISO102": """\
        from unittest import mock
        patcher = mock.patch("os.getcwd", return_value="/")
        patcher.start()
        def teardown_module():
            patcher.stop()
        """,
    "ISO103": """\
        import os
        if __name__ == "__main__":
            os.environ["APP_MODE"] = "test"
        """,
    "ISO201": """\
        def test_parse(tmp_path):
            assert parse("/tmp/out.txt") == ("/tmp", "out.txt")
            (tmp_path / "out.txt").write_text("x")
        """,
    "ISO202": """\
        import os
        def test_here():
            old = os.getcwd()
            os.chdir("/")
            try:
                assert os.getcwd() == "/"
            finally:
                os.chdir(old)
        """,
    "ISO203": """\
        import os
        from unittest import mock
        @mock.patch.dict(os.environ, {})
        def test_env():
            os.environ["APP_MODE"] = "x"
        """,
    "ISO301": """\
        import sys
        from unittest.mock import MagicMock
        def test_driver(monkeypatch):
            monkeypatch.setitem(sys.modules, "MySQLdb", MagicMock())
        """,
    "ISO302": """\
        import threading, time
        def test_worker():
            threading.Thread(target=work).start()
            for _ in range(100):
                if done:
                    break
                time.sleep(0.01)
            assert done
        """,
    "ISO303": """\
        import pytest
        def test_order():
            with pytest.raises(TypeError):
                object() < object()
        """,
}


@pytest.mark.parametrize("code", sorted(CODES))
def test_each_code_flags_its_pattern(code: str) -> None:
    found = codes(POSITIVE[code])
    assert [c for c, _ in found] == [code]


@pytest.mark.parametrize("code", sorted(CODES))
def test_each_code_leaves_the_correct_form_alone(code: str) -> None:
    assert codes(NEGATIVE[code]) == []


@pytest.mark.parametrize("code", sorted(CODES))
def test_a_comment_naming_the_code_suppresses_it(code: str) -> None:
    source = textwrap.dedent(POSITIVE[code])
    line = check(source, "tests/test_x.py")[0].line
    lines = source.splitlines()
    lines[line - 1] += f"  # isolation: allow {code}"
    assert check("\n".join(lines), "tests/test_x.py") == []


def test_a_comment_naming_another_code_does_not_suppress() -> None:
    source = 'import os\ndef test_e():\n    os.environ["A"] = "1"  # isolation: allow ISO201\n'
    assert codes(source) == [("ISO203", 3)]


def test_a_bare_allow_comment_suppresses_every_code_and_several_codes_are_listed() -> None:
    both = 'import sys, os\nsys.modules["m"] = m; os.environ["A"] = "1"  # isolation: allow\n'
    listed = both.replace("allow", "allow ISO101, ISO103")
    one = both.replace("allow", "allow ISO101")
    assert codes(both) == []
    assert codes(listed) == []
    assert codes(one) == [("ISO103", 2)]


def test_a_comment_on_a_later_line_of_a_statement_suppresses() -> None:
    source = "import os\ndef test_e():\n    os.environ.update(\n"
    source += '        A="1",  # isolation: allow\n    )\n'
    assert codes(source) == []


def test_a_string_that_looks_like_the_comment_does_not_suppress() -> None:
    source = 'import os\ndef test_e():\n    os.environ["A"] = "# isolation: allow"\n'
    assert codes(source) == [("ISO203", 3)]


# -- details of the rules --------------------------------------------------------------


def test_module_level_sys_modules_mock_is_both_a_leak_and_a_whole_module_mock() -> None:
    source = "import sys\nfrom unittest import mock\nsys.modules['json'] = mock.MagicMock()\n"
    assert codes(source) == [("ISO101", 3), ("ISO301", 3)]
    assert codes(source.replace("MagicMock()", "MagicMock(spec=[])")) == [("ISO101", 3)]


def test_a_conftest_module_level_is_session_set_up() -> None:
    assert codes(POSITIVE["ISO103"], "tests/conftest.py") == []
    assert codes(POSITIVE["ISO103"], "tests/test_a.py") == [("ISO103", 2)]


def test_a_patch_started_inline_at_import_is_stopped_only_by_stopall() -> None:
    source = "from unittest.mock import patch\npatch('a.b').start()\n"
    assert codes(source) == [("ISO102", 2)]
    assert codes(source + "def teardown_module():\n    patch.stopall()\n") == []


@pytest.mark.parametrize(
    "body",
    [
        "with mock.patch.dict('os.environ'):\n        os.environ['A'] = '1'",
        "monkeypatch.delenv('A', raising=False)\n    os.environ['A'] = '1'",
        "env = os.environ.copy()\n    env['A'] = '1'",
        "old = dict(os.environ)\n    os.environ['A'] = '1'\n    try:\n        pass\n"
        "    finally:\n        os.environ.clear()\n        os.environ.update(old)",
    ],
)
def test_environ_writes_that_are_undone(body: str) -> None:
    source = f"import os\nfrom unittest import mock\ndef test_e(monkeypatch):\n    {body}\n"
    assert codes(source) == []


def test_a_fixture_that_changes_back_after_yield_is_fine() -> None:
    source = """\
        import os, pytest
        @pytest.fixture
        def inside(tmp_path):
            old = os.getcwd()
            os.chdir(tmp_path)
            yield tmp_path
            os.chdir(old)
        """
    assert codes(source) == []


def test_a_unittest_set_up_undone_in_tear_down_is_fine() -> None:
    source = """\
        import os, unittest
        class T(unittest.TestCase):
            def setUp(self):
                os.environ["A"] = "1"
            def tearDown(self):
                del os.environ["A"]
            def test_a(self):
                self.assertEqual(os.environ["A"], "1")
        """
    assert codes(source) == []


def test_a_change_back_at_the_end_without_finally_is_still_flagged_once() -> None:
    source = """\
        import os
        def test_latex():
            old = os.getcwd()
            os.chdir("/")
            run()
            os.chdir(old)
        """
    assert codes(source) == [("ISO202", 4)]


@pytest.mark.parametrize(
    "expression",
    [
        '"/var/tmp/data.db"',
        'f"/tmp/{name}.txt"',
        'os.path.join(tempfile.gettempdir(), "x")',
        'Path(tempfile.gettempdir()) / "x"',
        r'"C:\\Temp\\x.txt"',
    ],
)
def test_temporary_paths_that_reach_the_file_system(expression: str) -> None:
    source = f"import os, tempfile\nfrom pathlib import Path\nTARGET = {expression}\n"
    source += "def test_w():\n    Path(TARGET).write_text('x')\n"
    assert codes(source) == [("ISO201", 5)]


def test_sleep_without_something_started_is_letting_time_pass() -> None:
    source = "import time\ndef test_mtime():\n    a = now()\n"
    source += "    time.sleep(1)\n    assert now() > a\n"
    assert codes(source) == []


def test_an_empty_method_overriding_an_inherited_test_is_fine() -> None:
    source = "class TestB(Base):\n    def test_not_here(self):\n        pass\n"
    assert codes(source) == []
    assert codes(source.replace("(Base)", "")) == [("ISO303", 2)]


def test_a_dropped_comparison_is_a_forgotten_assert() -> None:
    source = "def test_same():\n    x = make()\n    x is make()\n"
    found = check(source, "tests/test_x.py")
    assert [(f.code, f.line) for f in found] == [("ISO303", 3)]
    assert "assert x is make()" in found[0].fix


def test_nested_classes_and_fixtures_named_test_are_not_tests() -> None:
    source = """\
        import pytest
        def test_outer():
            class TestInner:
                def test_method(self):
                    pass
            assert TestInner
        @pytest.fixture
        def testdata():
            pass
        """
    assert codes(source) == []


def test_a_file_that_does_not_parse_has_no_findings() -> None:
    assert check("def test(:\n", "tests/test_x.py") == []


# -- the allow-list and the command line ---------------------------------------------


def test_allow_list_lines() -> None:
    allowances = parse_allow(["ISO303", "ISO201: tests/legacy/**"])
    assert allowances[0].allows("ISO303", "anything.py")
    assert allowances[1].allows("ISO201", "tests/legacy/a/test_x.py")
    assert not allowances[1].allows("ISO201", "tests/test_x.py")
    assert not allowances[1].allows("ISO202", "tests/legacy/test_x.py")


@pytest.mark.parametrize("line", ["ISO999", "ISO201:", "env:FOO"])
def test_a_bad_allow_list_line_is_a_usage_error(line: str) -> None:
    with pytest.raises(pytest.UsageError, match=rf"isolation_lint_allow \(ini\).*{line!r}"):
        parse_allow([line])


def test_glob_double_star_matches_any_directories_and_none() -> None:
    pattern = glob_pattern("tests/**/test_*.py", "test")
    assert pattern.match("tests/test_a.py")
    assert pattern.match("tests/a/b/test_a.py")
    assert not pattern.match("tests/a/other.py")


def test_the_command_line_lints_test_files_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "test_a.py").write_text(textwrap.dedent(POSITIVE["ISO203"]))
    (tmp_path / "helpers.py").write_text(textwrap.dedent(POSITIVE["ISO203"]))
    assert lint_main([str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"{tmp_path}/test_a.py:3: ISO203 os.environ changed" in out
    assert "helpers.py" not in out
    assert "1 finding (ISO203 1)" in out
    assert lint_main([str(tmp_path / "helpers.py"), "--select", "ISO201"]) == 0


def test_the_command_line_reads_a_coding_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 46, item 14: a valid file with a PEP 263 coding line was
    "not read (utf-8 codec ...)"."""
    source = "# -*- coding: latin-1 -*-\nimport os\n\ndef test_a():\n    os.environ['Ä'] = 'é'\n"
    (tmp_path / "test_a.py").write_bytes(source.encode("latin-1"))
    assert lint_main([str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "not read" not in captured.err
    assert f"{tmp_path}/test_a.py:5: ISO203 os.environ changed" in captured.out


@pytest.mark.parametrize(
    ("fixture", "flagged"),
    [
        ('monkeypatch.setenv("APP_MODE", "test")', ["OTHER"]),
        ('monkeypatch.delenv("APP_MODE", raising=False)', ["OTHER"]),
        ('monkeypatch.setattr(os, "environ", dict(os.environ))', []),
        ('monkeypatch.setattr("os.environ", dict(os.environ))', []),
    ],
)
def test_environment_writes_an_autouse_monkeypatch_fixture_restores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fixture: str, flagged: list[str]
) -> None:
    """Issue 46, item 14: a conftest's autouse fixture that gives a variable
    to ``monkeypatch`` (or replaces ``os.environ`` through it) restores what
    a test writes there after every test: no ISO203 for it."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text(
        "import os\nimport pytest\n\n@pytest.fixture(autouse=True)\n"
        f"def env(monkeypatch):\n    {fixture}\n"
    )
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_a.py").write_text(
        "import os\n\ndef test_a():\n    os.environ['APP_MODE'] = 'x'\n"
        "    os.environ['OTHER'] = 'y'\n"
    )
    lint_main([str(tests)])
    out = capsys.readouterr().out
    found = [
        key for key in ("APP_MODE", "OTHER") if "ISO203 os.environ changed" in out and key in out
    ]
    assert found == flagged, out


# -- the plugin in real runs -----------------------------------------------------------

LEAKY = {
    "test_env": """\
        import os
        def test_env():
            os.environ["LINT_A"] = "1"
            assert True
        """,
    "test_clean": """\
        def test_clean():
            assert True
        """,
}


def lint_run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "isolation", *args, timeout=TIMEOUT)


def test_warn_shows_each_finding_at_its_line_and_in_the_summary(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(**LEAKY)
    result = lint_run(pytester, "--isolation-lint=warn", "--isolation-leaks=off")
    result.assert_outcomes(passed=2, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*test_env.py:3: IsolationLintWarning: ISO203 os.environ changed without a restore*"
            "use monkeypatch.setenv/delenv*",
            "*= isolation lint =*",
            "test_env.py:3 ISO203 os.environ changed without a restore*",
            "ISO203 (*): 1",
            "1 finding in 1 file;*",
        ]
    )


def test_error_fails_the_collection_and_runs_no_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(**LEAKY)
    result = lint_run(pytester, "--isolation-lint=error")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*ERROR collecting test_env.py*", "test_env.py:3: ISO203 *"])
    result.stdout.no_fnmatch_line("*passed*")


def test_off_by_default(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(**LEAKY)
    result = lint_run(pytester, "--isolation-leaks=off")
    result.assert_outcomes(passed=2)
    result.stdout.no_fnmatch_line("*IsolationLintWarning*")
    result.stdout.no_fnmatch_line("*isolation lint*")


def test_ini_key_and_allow_list(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        "[pytest]\nisolation_lint = error\nisolation_lint_allow =\n    ISO203: legacy/**\n"
    )
    pytester.mkdir("legacy")
    pytester.path.joinpath("legacy", "test_old.py").write_text(textwrap.dedent(LEAKY["test_env"]))
    pytester.makepyfile(test_new=POSITIVE["ISO303"])
    result = lint_run(pytester)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["test_new.py:1: ISO303 test_todo has an empty body*"])
    result.stdout.no_fnmatch_line("*ISO203*")


def test_a_bad_allow_line_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nisolation_lint_allow = ISO999\n")
    pytester.makepyfile(**LEAKY)
    result = lint_run(pytester, "--isolation-lint=warn")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*isolation_lint_allow (ini): invalid line 'ISO999'*"])


def test_a_blanket_error_filter_does_not_crash_warn_mode(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(**LEAKY)
    result = lint_run(pytester, "--isolation-lint=warn", "--isolation-leaks=off", "-W", "error")
    result.assert_outcomes(passed=2, warnings=1)
    result.stdout.fnmatch_lines(["*IsolationLintWarning: ISO203*"])


def test_a_filter_naming_the_warning_fails_the_collection(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(**LEAKY)
    named = "error::pytest_isolation.IsolationLintWarning"
    result = lint_run(pytester, "--isolation-lint=warn", "-W", named)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["test_env.py:3: ISO203 *"])


def test_file_mode_lints_once_in_the_parent(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("import os\ndef helper():\n    os.chdir('/')\n")
    pytester.makepyfile(**LEAKY)
    args = ("--isolation-mode=file", "--isolation-start=fork", "--isolation-leaks=off")
    result = lint_run(pytester, *args, "--isolation-lint=warn")
    result.assert_outcomes(passed=2, warnings=2)
    output = result.stdout.str()
    assert output.count("IsolationLintWarning: ISO203") == 1
    assert output.count("IsolationLintWarning: ISO202") == 1
    result.stdout.fnmatch_lines(["conftest.py:3 ISO202 *", "test_env.py:3 ISO203 *"])


def test_xdist_reports_each_finding_once(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(**LEAKY)
    xdist = ("-p", "xdist", "-n", "2", "--isolation-leaks=off")
    result = lint_run(pytester, *xdist, "--isolation-lint=warn")
    result.assert_outcomes(passed=2, warnings=1)
    output = result.stdout.str()
    assert output.count("IsolationLintWarning: ISO203") == 1
    assert output.count("test_env.py:3 ISO203") == 1
    result.stdout.fnmatch_lines(["*= isolation lint =*", "1 finding in 1 file;*"])


def test_xdist_error_mode_fails_the_file_as_a_collection_error(pytester: pytest.Pytester) -> None:
    """Every worker fails the file's collection, reported once; as with any
    collection error under pytest-xdist, the other files still run, and the
    run fails."""
    pytester.makepyfile(**LEAKY)
    xdist = ("-p", "xdist", "-n", "2", "--isolation-leaks=off")
    result = lint_run(pytester, *xdist, "--isolation-lint=error")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*ERROR collecting test_env.py*", "test_env.py:3: ISO203 *"])
    assert result.stdout.str().count("ERROR collecting test_env.py") == 1


def test_findings_come_from_the_cache_on_a_rerun(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(**LEAKY)
    lint_run(pytester, "--isolation-lint=warn").assert_outcomes(passed=2)
    folder = pytester.path / ".pytest_cache" / "v" / CACHE_PREFIX.rstrip("/")
    entries = sorted(folder.iterdir())
    assert len(entries) == 2  # one per linted content
    for entry in entries:  # a finding only the cache knows: the rerun parses nothing
        found = json.loads(entry.read_text())
        found.append(["ISO303", 1, "from the cache", "nothing"])
        entry.write_text(json.dumps(found))
    again = lint_run(pytester, "--isolation-lint=warn", "--isolation-leaks=off")
    again.stdout.fnmatch_lines(["test_clean.py:1 ISO303 from the cache"])


def test_without_the_cache_plugin(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(**LEAKY)
    args = ("--isolation-lint=warn", "--isolation-leaks=off", "-p", "no:cacheprovider")
    result = lint_run(pytester, *args)
    result.assert_outcomes(passed=2, warnings=1)
    assert not (pytester.path / ".pytest_cache").exists()


@pytest.mark.parametrize(
    "check",
    [
        "assert not sent",
        "assert sent == []",
        "assert handler.calls == 0",
        "assert result is None",
        "assert 'x' not in seen",
        "handler.assert_not_called()",
        # issue 46, item 14: unittest's checks and a queue found empty
        "self.assertFalse(sent)",
        "self.assertIsNone(result)",
        "self.assertNotIn('x', seen)",
        "self.assertEqual(len(sent), 0)",
        "self.assertEqual(handler.calls, [])",
        "assert events.empty()",
    ],
)
def test_a_sleep_before_checking_that_nothing_happened_is_fine(check: str) -> None:
    """Issue 31, item 9: ``time.sleep(0.05)`` and then an assertion that
    something did *not* happen: no bounded wait can replace that sleep."""
    source = "import threading, time\ndef test_quiet():\n"
    source += "    threading.Thread(target=work).start()\n"
    source += f"    time.sleep(0.05)\n    {check}\n"
    assert codes(source) == []
    positive = source + "    assert sent\n"  # and then something did: waiting for it
    assert [code for code, _ in codes(positive)] == ["ISO302"]


AUTOUSE_RESTORES = {
    "yield": """\
        @pytest.fixture(autouse=True)
        def _environ():
            saved = dict(os.environ)
            yield
            os.environ.clear()
            os.environ.update(saved)
    """,
    "with": """\
        @pytest.fixture(autouse=True)
        def _environ():
            with mock.patch.dict(os.environ):
                yield
    """,
}


@pytest.mark.parametrize("how", sorted(AUTOUSE_RESTORES))
def test_an_environ_write_an_autouse_fixture_of_the_file_undoes_is_fine(how: str) -> None:
    """Issue 31, item 9: ISO203 on an ``os.environ`` write that an autouse
    fixture of the same file restores after every test."""
    fixture = textwrap.dedent(AUTOUSE_RESTORES[how])
    test = "def test_sets():\n    os.environ['MODE'] = 'x'\n"
    source = f"import os, pytest\nfrom unittest import mock\n{fixture}\n{test}"
    assert codes(source) == []
    without = f"import os, pytest\nfrom unittest import mock\n{test}"
    assert [code for code, _ in codes(without)] == ["ISO203"]


def test_an_environ_write_an_autouse_fixture_of_a_conftest_undoes_is_fine(
    tmp_path: Path,
) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    fixture = textwrap.dedent(AUTOUSE_RESTORES["yield"])
    (tmp_path / "conftest.py").write_text(f"import os, pytest\n{fixture}")
    tests = tmp_path / "tests"
    tests.mkdir()
    test = "import os\ndef test_sets():\n    os.environ['MODE'] = 'x'\n"
    assert codes(test, str(tests / "test_x.py")) == []
    assert [code for code, _ in codes(test, str(tmp_path.parent / "test_y.py"))] == ["ISO203"]
