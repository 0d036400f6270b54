"""Fences around the private pytest details the child relies on."""

from __future__ import annotations

import json

import pytest

from pytest_isolation.filemode.child import _detach_terminal


def test_detached_terminal_keeps_the_terminal_writer(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfigure()
    writer = config.get_terminal_writer()
    _detach_terminal(config)
    assert config.get_terminal_writer() is writer
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    assert not any(name.startswith("pytest_") for name in vars(reporter))


def test_session_setupstate_can_tear_down_everything(pytester: pytest.Pytester) -> None:
    """``_teardown_all`` needs ``session._setupstate.teardown_exact(None)``."""
    items, _ = pytester.inline_genitems(pytester.makepyfile("def test_1(): pass\n"))
    setupstate = items[0].session._setupstate
    assert callable(setupstate.teardown_exact)


def test_failed_comparison_is_explained_in_a_child(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a="def test_x(): assert [1, 2] == [1, 3]\n")
    result = pytester.runpytest_subprocess(
        "-p", "isolation", "--isolation-mode=file", "--isolation-start=fork", timeout=120
    )
    result.stdout.fnmatch_lines(["*At index 1 diff: 2 != 3*"])


def test_a_forked_child_unregisters_the_parent_s_plugins(pytester: pytest.Pytester) -> None:
    """A forked child unregisters the parent's plugins by the names in
    ``names.PARENT_ONLY``: registered in the parent, gone in the child."""
    check = """
        import json
        from pathlib import Path
        from pytest_isolation.core import names

        def registered(config):
            return [config.pluginmanager.has_plugin(name) for name in names.PARENT_ONLY]
    """
    pytester.makeconftest(
        check
        + """
        def pytest_sessionfinish(session):  # the parent's: a child ends before it
            Path("parent.json").write_text(json.dumps(registered(session.config)))
        """
    )
    pytester.makepyfile(
        test_a="""
        from conftest import registered, json, Path

        def test_x(request):
            Path("child.json").write_text(json.dumps(registered(request.config)))
        """
    )
    result = pytester.runpytest_subprocess(
        "-p", "isolation", "--isolation-mode=file", "--isolation-start=fork", timeout=120
    )
    result.assert_outcomes(passed=1)
    assert json.loads((pytester.path / "parent.json").read_text()) == [True, True, True]
    assert json.loads((pytester.path / "child.json").read_text()) == [False, False, False]
