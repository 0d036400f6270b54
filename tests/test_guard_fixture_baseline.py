"""A higher-scoped fixture set up inside a test's window, whose value the
test then changes: the leak is from the fixture's value, and that value is
put back, so the next test using the fixture sees what it would without the
polluter (the guard's oracle).  Put back to the state before the fixture,
the next test found the fixture's work undone."""

from __future__ import annotations

import pytest

from conftest import TIMEOUT
from conftest import literal

CASES = {
    "env": (
        'os.environ["SHARED_K"] = "x"',
        'os.environ["SHARED_K"] = "y"',
        'assert os.environ["SHARED_K"] == "x"',
        "[env] os.environ['SHARED_K'] (was 'x', now 'y')*",
    ),
    "attribute": (
        "appstate.MODE = 'fixture'",
        "appstate.MODE = 'test'",
        "assert appstate.MODE == 'fixture'",
        "[attribute] appstate.MODE (was 'fixture', now 'test')*",
    ),
    # A module made in code (no file): adding it is no leak, replacing it is.
    "sys.modules": (
        'sys.modules["shared_fake"] = types.ModuleType("shared_fake", "fixture")',
        'sys.modules["shared_fake"] = types.ModuleType("shared_fake", "test")',
        'import shared_fake; assert shared_fake.__doc__ == "fixture"',
        "[sys.modules] sys.modules['shared_fake'] (another module object, made in code:*",
    ),
    "sys.modules mock": (
        'sys.modules["shared_mock"] = unittest.mock.MagicMock(name="fixture")',
        'sys.modules["shared_mock"] = unittest.mock.MagicMock(name="test")',
        "import shared_mock; assert shared_mock._mock_name == 'fixture'",
        "[sys.modules] sys.modules['shared_mock'] (was <MagicMock name='fixture'*",
    ),
}


@pytest.mark.parametrize("mode", [(), ("--isolation-mode=file",)], ids=["plain", "file"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_leak_is_from_the_fixture_s_value_and_that_is_put_back(
    pytester: pytest.Pytester, case: str, mode: tuple[str, ...]
) -> None:
    setup, change, check, summary = CASES[case]
    pytester.makepyfile(appstate="MODE = 'import'\n")
    pytester.makeconftest(
        f"""
        import os, sys, types, unittest.mock
        import pytest
        import appstate

        @pytest.fixture(scope="session")
        def shared():
            {setup}
            yield
        """
    )
    pytester.makepyfile(
        test_s=f"""
        import os, sys, types, unittest.mock
        import appstate

        def test_changes_it(shared):
            {change}

        def test_sees_the_fixture_s_value(shared):
            {check}
        """
    )
    plain = pytester.runpytest_subprocess(
        "-p", "no:isolation", "-p", "no:randomly", timeout=TIMEOUT
    )
    plain.assert_outcomes(passed=1, failed=1)  # the polluter, without the guard
    alone = pytester.runpytest_subprocess(
        "-p", "no:isolation", "test_s.py::test_sees_the_fixture_s_value", timeout=TIMEOUT
    )
    alone.assert_outcomes(passed=1)  # the oracle: the victim without the polluter
    guarded = pytester.runpytest_subprocess(
        "-p", "isolation", "-p", "no:randomly", *mode, timeout=TIMEOUT
    )
    guarded.assert_outcomes(passed=2)
    guarded.stdout.fnmatch_lines([literal(summary), "  by test_s.py::test_changes_it"])
