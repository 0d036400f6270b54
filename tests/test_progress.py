"""The terminal's progress in file mode (filemode/progress.py)."""

from __future__ import annotations

import re

import pytest

from conftest import run_file_mode
from conftest import run_plain


def percentages(result: pytest.RunResult) -> list[int]:
    return [int(p) for p in re.findall(r"\[\s*(\d+)%\]", result.stdout.str())]


def test_a_repeat_run_shows_the_plain_run_s_progress(pytester: pytest.Pytester, start: str) -> None:
    many = "".join(f"def test_{i}():\n    pass\n" for i in range(5))
    pytester.makepyfile(test_1="def test_a(): pass\n", test_2=many, test_3="def test_c(): pass\n")
    plain = percentages(run_plain(pytester, "-v", "-p", "no:cacheprovider"))
    assert plain == [14, 28, 42, 57, 71, 85, 100]
    first = percentages(run_file_mode(pytester, start, "-v"))
    assert first[-1] == 100
    assert percentages(run_file_mode(pytester, start, "-v")) == plain


def test_a_file_that_gained_tests_is_counted_when_its_child_reports(
    pytester: pytest.Pytester, start: str
) -> None:
    pytester.makepyfile(test_1="def test_a(): pass\n", test_2="def test_b(): pass\n")
    run_file_mode(pytester, start).assert_outcomes(passed=2)
    pytester.makepyfile(test_2="def test_b(): pass\ndef test_c(): pass\n")
    result = run_file_mode(pytester, start, "-v")
    result.assert_outcomes(passed=3)
    assert percentages(result)[-1] == 100
    assert percentages(run_file_mode(pytester, start, "-v")) == [33, 66, 100]


PARAMETRIZED = """
import pytest

@pytest.mark.parametrize("n", range(10))
def test_x(n):
    pass
"""


@pytest.mark.parametrize("verbose", ["-v", "-q"])
def test_a_first_run_s_progress_never_steps_back(
    pytester: pytest.Pytester, start: str, verbose: str
) -> None:
    """Item 10: on a first run each file counted as one test until its child
    reported, so the percentage fell at every new file (83 %, then 52 %)."""
    pytester.makepyfile(test_a=PARAMETRIZED, test_b=PARAMETRIZED, test_c=PARAMETRIZED)
    result = run_file_mode(pytester, start, verbose, "-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=30)
    shown = percentages(result)
    assert shown == sorted(shown)
    assert shown[-1] == 100


def test_a_first_run_counts_the_test_functions_a_file_defines(
    pytester: pytest.Pytester,
) -> None:
    """Before a child reports, a file counts as the test functions its
    source defines: without parametrization, a first run's progress is
    the plain run's."""
    many = "".join(f"def test_{i}():\n    pass\n" for i in range(5))
    methods = "class TestK:\n" + "".join(
        f"    def test_{i}(self):\n        pass\n" for i in range(3)
    )
    pytester.makepyfile(test_1="def test_a(): pass\n", test_2=many, test_3=methods)
    plain = percentages(run_plain(pytester, "-v", "-p", "no:cacheprovider"))
    first = run_file_mode(pytester, "fork", "-v", "-p", "no:randomly", "-p", "no:cacheprovider")
    assert percentages(first) == plain


def test_a_collection_hook_s_terminal_line_starts_a_line_of_its_own(
    pytester: pytest.Pytester,
) -> None:
    """Issue 46 item 9: what a conftest's collection hook writes to the
    terminal in a file's child landed inside the previous file's progress
    line (``test_a.py .modifyitems saw 1``); it starts a line of its own,
    after the previous file's percentage, as the next file's line would."""
    pytester.makeconftest(
        """
        def pytest_collection_modifyitems(config, items):
            config.get_terminal_writer().line(f"modifyitems saw {len(items)}")
        """
    )
    for name in ("test_a", "test_b"):
        pytester.makepyfile(**{name: "def test_x():\n    pass\n"})
    result = run_file_mode(pytester, "fork")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "modifyitems saw 1",
            "",
            "test_a.py .* 50%]",
            "modifyitems saw 1",
            "",
            "test_b.py .*100%]",
        ]
    )
    result.stdout.no_fnmatch_line("*.modifyitems*")


def test_the_private_terminal_details_a_file_s_line_ends_with(pytester: pytest.Pytester) -> None:
    """``progress.end_line`` writes the percentage as pytest does when the
    next file begins; this fails loudly when pytest changes that."""
    config = pytester.parseconfigure()
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    assert reporter is not None
    assert callable(reporter._write_progress_information_filling_space)
    assert isinstance(reporter._show_progress_info, (bool, str))
    assert hasattr(reporter, "currentfspath")
    # progress._counted_by_terminal: what the percentage counts.
    assert isinstance(reporter._progress_nodeids_reported, set)


@pytest.mark.parametrize("verbose", ["-v", "-q"])
def test_under_xdist_the_progress_never_steps_back(pytester: pytest.Pytester, verbose: str) -> None:
    """Issue 46 item 15: under ``-n 2`` the controller counted each file as
    one test until its first report, then added the rest at once, so the
    percentage fell (``[ 44%]`` then ``[ 41%]``); here the slow file's 60
    tests arrive after the quick files were shown at 100 % of their count."""
    pytest.importorskip("xdist")
    quick = "def test_one():\n    pass\n"
    slow = (
        "import time\n\nimport pytest\n\ntime.sleep(1)\n\n"
        "@pytest.mark.parametrize('n', range(60))\ndef test_many(n):\n    pass\n"
    )
    pytester.makepyfile(test_a=quick, test_b=quick, test_c=quick, test_d=slow)
    result = run_file_mode(
        pytester, "fork", "-p", "xdist", "-n", "2", verbose, "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=63)
    shown = percentages(result)
    assert shown == sorted(shown)
    assert shown[-1] == 100


def test_under_xdist_a_file_that_fails_to_import_ends_the_progress_at_100(
    pytester: pytest.Pytester,
) -> None:
    """Issue 46 item 9: under ``-n 2`` a file that failed to import stayed
    counted as one test, so the progress ended below 100 % and pytest's last
    line, reckoned from it, left out ``1 leaked`` (now ``1 leak``)."""
    pytest.importorskip("xdist")
    parametrized = (
        "import pytest\n\n@pytest.mark.parametrize('n', range(3))\ndef test_x(n):\n    pass\n"
    )
    pytester.makepyfile(
        test_a=parametrized,
        test_b=parametrized,
        test_c="import not_a_module_anywhere\n",
        test_d="import os\n\ndef test_leak():\n    os.environ['LEAKED_X'] = '1'\n",
    )
    result = run_file_mode(pytester, "fork", "-p", "xdist", "-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=7, errors=1)
    assert percentages(result)[-1] == 100
    result.stdout.fnmatch_lines(["*= 7 passed, 1 error, 1 leak in *"])
