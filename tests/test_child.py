"""Fences around the private pytest details the child relies on."""

from __future__ import annotations

import json

import pytest

from pytest_isolation.filemode import junit
from pytest_isolation.filemode.child.terminal import detach_terminal as _detach_terminal


def test_detached_terminal_keeps_the_terminal_writer(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfigure()
    writer = config.get_terminal_writer()
    _detach_terminal(config)
    assert config.get_terminal_writer() is writer
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    assert not any(name.startswith("pytest_") for name in vars(reporter))


def test_junit_s_writer_is_under_xml_key(pytester: pytest.Pytester) -> None:
    """:mod:`filemode.junit` finds junit's writer under ``xml_key`` (through
    its one fenced import, ``_xml_key``) and calls ``add_global_property``,
    ``node_reporter(nodeid).add_attribute`` and ``family``."""
    config = pytester.parseconfigure(f"--junitxml={pytester.path / 'out.xml'}")
    writer = config.stash[junit._xml_key()]
    assert config.pluginmanager.is_registered(writer)
    assert callable(writer.add_global_property)
    assert callable(writer.node_reporter("test_a.py::test_x").add_attribute)
    assert writer.family in ("xunit1", "xunit2", "legacy")


def test_the_fd_capture_is_where_the_child_looks(pytester: pytest.Pytester) -> None:
    """:func:`filemode.child._fd_capture_files` finds pytest's global fd
    capture of stdout and stderr (its one fenced private detail): the files
    under ``sys.stdout`` and ``sys.stderr`` during a test, for fds 1 and 2."""
    pytester.makepyfile(
        test_fence="""
        import sys
        from pytest_isolation.core.pytest_private import fd_capture_files as _fd_capture_files

        def test_found(pytestconfig):
            found = _fd_capture_files(pytestconfig)
            assert [target for _, target, _ in found] == [1, 2]
            assert found[0][0] == sys.stdout.fileno()
            assert found[1][0] == sys.stderr.fileno()
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:isolation", timeout=120)
    result.assert_outcomes(passed=1)


def test_collection_hook_is_an_attribute_of_the_hook_relay(pytester: pytest.Pytester) -> None:
    """:mod:`filemode.conftests` swaps ``config.hook.pytest_collection_modifyitems``."""
    config = pytester.parseconfigure()
    caller = config.hook.pytest_collection_modifyitems
    assert caller.has_spec()
    assert "pytest_collection_modifyitems" in vars(config.hook)


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
        def pytest_sessionfinish(session):  # the parent's runs last (after the children's)
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
    # CONTROLLER, SHARDING, RUN_REPORT, RECORD_KEEPER; PLAIN_RECORDING only in a plain run
    assert json.loads((pytester.path / "parent.json").read_text()) == [True] * 4 + [False]
    assert json.loads((pytester.path / "child.json").read_text()) == [False] * 5


def test_the_python_collector_asks_isinitpath() -> None:
    """:func:`filemode.child.named_as_in_the_run` relies on pytest's Python
    collector asking ``Session.isinitpath`` before ``python_files``."""
    import inspect

    from _pytest import python

    assert "isinitpath" in inspect.getsource(python.pytest_collect_file)


@pytest.mark.parametrize("start", ["fork", "forkserver", "spawn"])
def test_a_module_only_doctest_collects_is_collected_as_in_the_run(
    pytester: pytest.Pytester, start: str
) -> None:
    """A module reached through a directory that does not match
    ``python_files``: only ``--doctest-modules`` collects it, in every start
    method as in a plain run (a spawned child got it as an argument, and
    imported it as a test module too)."""
    pytester.makeini("[pytest]\naddopts = --doctest-modules --doctest-ignore-import-errors\n")
    pytester.mkpydir("pkg")
    (pytester.path / "pkg" / "broken_script.py").write_text("import not_installed_anywhere\n")
    (pytester.path / "pkg" / "helpers.py").write_text(
        'def double(x):\n    """\n    >>> double(2)\n    4\n    """\n    return 2 * x\n'
    )
    plain = pytester.runpytest_subprocess("-p", "no:isolation", "pkg", timeout=120)
    result = pytester.runpytest_subprocess(
        "-p",
        "isolation",
        "--isolation-mode=file",
        f"--isolation-start={start}",
        "pkg",
        timeout=120,
    )
    assert result.parseoutcomes() == plain.parseoutcomes()
    result.assert_outcomes(passed=1, skipped=1)
