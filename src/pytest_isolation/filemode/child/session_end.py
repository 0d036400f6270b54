"""How a file-mode child ends its pytest session: like a pytest-xdist worker.

The plugins that live in the child (fixtures' session teardown, logging's
file handler, syrupy, the unraisable-exception check, ...) get their
``pytest_sessionfinish`` and ``pytest_unconfigure`` there, as they would at
the end of a plain run.  The plugins whose end-of-run work is the parent's,
because the parent holds the whole run's results (terminal, junit XML,
``--lf``/``--nf``/``--sw`` cache, tmp_path retention, pastebin, pytest-cov's
report, this plugin's run records), are left out: the parent runs them once
for the whole run.

Imports: stdlib and pytest only (the child side stays light).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

import pytest

from pytest_isolation.core import frozen
from pytest_isolation.core import names

#: pytest's and other plugins' names whose end-of-run work the parent does.
PARENT_OWNED = (
    "terminalreporter",
    "junitxml",
    "lfplugin",
    "nfplugin",
    "stepwise",
    "stepwiseplugin",
    "tmpdir",
    "pastebin",
    "_cov",
    names.XDIST_OUTPUT,
    *names.PARENT_ONLY,
)


def parent_owned(config: pytest.Config) -> list[object]:
    """The registered plugins of :data:`PARENT_OWNED` (junit's XML writer has
    already left the child: :mod:`.junit`)."""
    manager = config.pluginmanager
    found = [manager.get_plugin(name) for name in PARENT_OWNED]
    return [plugin for plugin in found if plugin is not None]


def end_session(session: pytest.Session, status: int) -> int:
    """Run the child-side plugins' ``pytest_sessionfinish``; return the exit
    status they leave.

    A plugin may raise the status in its ``pytest_sessionfinish`` (syrupy
    does for unused snapshots); the parent applies the raised value.
    """
    config = session.config
    excluded = parent_owned(config)
    manager = config.pluginmanager
    session.exitstatus = status
    finish: Any = manager.subset_hook_caller("pytest_sessionfinish", excluded)
    finish(session=session, exitstatus=status)
    return int(session.exitstatus)


def unconfigure(session: pytest.Session, done: Sequence[object] = ()) -> int:
    """Run the child-side plugins' ``pytest_unconfigure`` (but those of
    ``done``, run by :func:`unconfigure_own`); return the process's exit
    code (3, pytest's internal error, when it raised).

    The child runs it after telling the parent it finished, while the parent
    goes on with the next file.  pytest's unraisable-exception check collects
    garbage there: the objects the file made, not the frozen ones the child
    inherited, unless the file thawed them (:mod:`pytest_isolation.core.frozen`).
    """
    config = session.config
    frozen.session_ends()
    unconfigure: Any = config.pluginmanager.subset_hook_caller(
        "pytest_unconfigure", [*parent_owned(config), *done]
    )
    try:
        unconfigure(config=config)
    except BaseException:  # reported by the exit code and on stderr
        traceback.print_exc()
        return int(pytest.ExitCode.INTERNAL_ERROR)
    return 0


def unconfigure_own(
    session: pytest.Session, own: Callable[[object], bool]
) -> tuple[list[object], int]:
    """Run the ``pytest_unconfigure`` of the project's own plugins (its
    conftests, the plugins whose hook ``own`` says is the project's code)
    before the child reports what its file executed: what they run is the
    file's too.  Return those plugins, and the exit code (3 when one
    raised: then the rest is not run, as in one hook call).

    pytest calls most of them before the others anyway (conftests are
    registered late); the others' follow once the parent goes on
    (:func:`unconfigure`), pytest's last garbage collection among them."""
    config = session.config
    manager = config.pluginmanager
    hook = manager.hook.pytest_unconfigure
    ours = [impl.plugin for impl in hook.get_hookimpls() if own(impl.function)]
    if not ours:
        return [], 0
    others = [plugin for plugin in manager.get_plugins() if plugin not in ours]
    unconfigure: Any = manager.subset_hook_caller("pytest_unconfigure", others)
    try:
        unconfigure(config=config)
    except BaseException:  # reported by the exit code and on stderr
        traceback.print_exc()
        return ours, int(pytest.ExitCode.INTERNAL_ERROR)
    return ours, 0


def session_status(session: pytest.Session, interrupted: bool) -> int:
    """The exit status a plain session of this one file would finish with."""
    if interrupted:
        return int(pytest.ExitCode.INTERRUPTED)
    if session.testsfailed:
        return int(pytest.ExitCode.TESTS_FAILED)
    return int(pytest.ExitCode.OK)
