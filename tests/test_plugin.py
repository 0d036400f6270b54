"""Loading the plugin, and what it does when loaded but off."""

from __future__ import annotations

import pytest

from conftest import TIMEOUT


def test_entry_point_loads_by_name(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("-p", "isolation", "--help", timeout=TIMEOUT)
    result.stdout.fnmatch_lines(
        ["*test isolation (pytest-isolation):*", "*--isolation-mode=*", "*--isolation-start=*"]
    )
    result.stdout.fnmatch_lines(["*isolation_mode (string)*", "*isolation_start (string)*"])


def test_loaded_plugin_is_off_by_default(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a="import os\ndef test_pid(): print(os.getpid())\n")
    result = pytester.runpytest_subprocess("-p", "isolation", timeout=TIMEOUT)
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("isolation: *")


def test_ini_enables_file_mode(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nisolation_mode = file\nisolation_start = spawn\n")
    pytester.makepyfile(test_a="def test_1(): pass\n")
    result = pytester.runpytest_subprocess("-p", "isolation", timeout=TIMEOUT)
    result.stdout.fnmatch_lines(["isolation: file mode, * (start method spawn: requested)"])
    result.assert_outcomes(passed=1)


def test_command_line_overrides_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nisolation_mode = file\n")
    pytester.makepyfile(test_a="def test_1(): pass\n")
    result = pytester.runpytest_subprocess(
        "-p", "isolation", "--isolation-mode=off", timeout=TIMEOUT
    )
    result.stdout.no_fnmatch_line("isolation: *")
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize("flag", ["--fixtures", "--fixtures-per-test"])
def test_fixture_listings_see_test_module_fixtures(pytester: pytest.Pytester, flag: str) -> None:
    pytester.makepyfile(
        test_a="import pytest\n@pytest.fixture\ndef local_thing():\n    return 1\n"
        "def test_1(local_thing): pass\n"
    )
    result = pytester.runpytest_subprocess(
        "-p", "isolation", "--isolation-mode=file", flag, timeout=TIMEOUT
    )
    result.stdout.fnmatch_lines(["*local_thing*"])
    assert result.ret == pytest.ExitCode.OK


def test_markers_show_each_marker_s_whole_signature(pytester: pytest.Pytester) -> None:
    # pytest --markers takes what comes before a help line's first ':' as the
    # marker: "allow_leaks=['env: NAME'" showed a signature cut in two (issue 49 item 5).
    result = pytester.runpytest_subprocess("-p", "isolation", "--markers", timeout=TIMEOUT)
    lines = [line for line in result.outlines if line.startswith("@pytest.mark.isolation")]
    assert len(lines) == 2, lines
    for line in lines:
        signature = line.split(":", 1)[0]
        assert signature.endswith(")"), line
        assert signature.count("(") == signature.count(")"), line
        assert signature.count("[") == signature.count("]"), line
        assert signature.count("'") % 2 == 0, line
