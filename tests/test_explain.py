"""Failure explanations: a patch that did not reach the module that uses the
patched name."""

from __future__ import annotations

import sys

import pytest

from conftest import run_file_mode
from conftest import run_guard

MODULE = """
from subprocess import run


def call():
    return run(["definitely-not-a-command-xyz"])
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    package = pytester.mkpydir("mypkg")
    (package / "util.py").write_text(MODULE)
    pytester.syspathinsert()
    return pytester


SECTION = [
    "*- isolation: patch did not reach mypkg.util.run -*",
    "mock.patch replaced subprocess.run while the test ran, but these names still refer "
    "to the original:",
    "  mypkg.util.run (bound before the patch, e.g. by 'from subprocess import run' in mypkg.util)",
    "Code that uses these names never sees the patch: patch where the name is used, e.g. "
    "mock.patch('mypkg.util.run') instead of mock.patch('subprocess.run').",
]


@pytest.mark.parametrize(
    "patching",
    [
        "with mock.patch('subprocess.run'):\n        mypkg.util.call()",
        "mock.patch('subprocess.run').start()\n    mypkg.util.call()",
        "mock.patch.object(subprocess, 'run').start()\n    mypkg.util.call()",
    ],
)
def test_a_patch_that_missed_is_explained(project: pytest.Pytester, patching: str) -> None:
    project.makepyfile(
        test_call=f"""
import subprocess
from unittest import mock

import mypkg.util


def test_call():
    {patching}
"""
    )
    result = run_guard(project, "--isolation-leaks=off")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(SECTION)


def test_monkeypatch_setattr(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_call="""
import subprocess

import mypkg.util


def test_call(monkeypatch):
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: "faked")
    assert mypkg.util.call() == "faked"
"""
    )
    result = run_guard(project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*- isolation: patch did not reach mypkg.util.run -*",
            "monkeypatch.setattr replaced subprocess.run while the test ran, *",
        ]
    )


def test_file_mode_children_explain_too(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_call="""
from unittest import mock

import mypkg.util


def test_call():
    with mock.patch("subprocess.run"):
        mypkg.util.call()
"""
    )
    result = run_file_mode(project, "fork")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(SECTION[:1])


def test_nothing_on_passing_tests_or_patches_that_reached(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_call="""
import subprocess
from unittest import mock

import mypkg.util


def test_passes_with_a_missed_patch():
    with mock.patch("subprocess.run"):
        pass


def test_right_target_then_fails():
    with mock.patch("mypkg.util.run", return_value="ok"):
        assert mypkg.util.call() == "ok"
        assert False, "unrelated"
"""
    )
    result = run_guard(project, "--isolation-leaks=off")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.no_fnmatch_line("*patch did not reach*")


def test_nothing_on_a_failure_the_missed_patch_did_not_cause(project: pytest.Pytester) -> None:
    """The mock was called and the failure never went through the module that
    holds the original: the missed patch is not the explanation."""
    project.makepyfile(
        test_call="""
import subprocess
from unittest import mock

import mypkg.util


def test_unrelated_failure():
    with mock.patch("subprocess.run") as run:
        subprocess.run(["x"])
        assert run.called
        assert 1 == 2
"""
    )
    result = run_guard(project, "--isolation-leaks=off")
    result.assert_outcomes(failed=1)
    result.stdout.no_fnmatch_line("*patch did not reach*")


def test_a_re_export_patched_points_at_the_defining_module(pytester: pytest.Pytester) -> None:
    package = pytester.mkpydir("app")
    (package / "core.py").write_text(
        "def helper():\n    return 'real'\n\ndef work():\n    return helper()\n"
    )
    (package / "api.py").write_text("from app.core import helper, work\n")
    pytester.syspathinsert()
    pytester.makepyfile(
        test_api="""
from unittest import mock

import app.api


def test_work():
    with mock.patch("app.api.helper", return_value="fake"):
        assert app.api.work() == "fake"
"""
    )
    result = run_guard(pytester, "--isolation-leaks=off")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*- isolation: patch did not reach app.core.helper -*",
            "mock.patch replaced app.api.helper while the test ran, *",
            "  app.core.helper (where it is defined; app.api imports it from app.core, "
            "and code in app.core uses its own name)",
            "*e.g. mock.patch('app.core.helper') instead of mock.patch('app.api.helper').",
        ]
    )


def test_mock_patch_internals_are_still_there() -> None:
    """The fence of ``explain._wrap_patch_exit``: breaks loudly if
    ``unittest.mock._patch`` stops keeping these while it is active."""
    import os
    from unittest import mock

    original = os.getcwd
    patcher = mock.patch("os.getcwd")
    patcher.start()
    try:
        assert isinstance(patcher, mock._patch)  # type: ignore[attr-defined]
        assert patcher.target is sys.modules["os"]  # type: ignore[attr-defined]
        assert patcher.attribute == "getcwd"  # type: ignore[attr-defined]
        assert patcher.temp_original is original  # type: ignore[attr-defined]
    finally:
        patcher.stop()
