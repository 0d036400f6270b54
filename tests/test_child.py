"""Fences around the private pytest details the child relies on."""

from __future__ import annotations

import pytest

from pytest_isolation.child import _detach_terminal


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


def test_parent_plugin_names_match_the_plugins() -> None:
    """A forked child unregisters the parent's plugins by these names."""
    from pytest_isolation import child
    from pytest_isolation import runlog
    from pytest_isolation import sharding

    assert child.PARENT_PLUGIN_NAMES == (sharding.PLUGIN_NAME, runlog.PLUGIN_NAME)
