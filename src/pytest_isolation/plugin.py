"""Entry module of the ``isolation`` pytest plugin: options, ini keys and wiring."""

from __future__ import annotations

import os

import pytest

from pytest_isolation.settings import CHOICES
from pytest_isolation.settings import Settings
from pytest_isolation.wire import CHILD_ENV

_HELP = {
    "isolation_mode": "file: run every test file in a process of its own.",
    "isolation_start": "How file mode starts a child: fork, spawn, or auto (fork on Linux "
    "unless threads run, spawn elsewhere).",
    "isolation_leaks": "Leak guard (experimental): warn, error or quiet restore process-wide "
    "state a test or fixture leaves changed (os.environ, cwd, sys.modules, mock patches, "
    "sys.path, logging, signals, ...); off does nothing.",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("isolation", "test isolation (pytest-isolation)")
    for dest, choices in CHOICES.items():
        flag = "--" + dest.replace("_", "-")
        group.addoption(
            flag,
            dest=dest,
            default=None,
            metavar="|".join(choices),
            help=f"{_HELP[dest]} Default: {choices[0]} (ini {dest}).",
        )
        parser.addini(dest, f"Default of {flag} ({', '.join(choices)}).", default=choices[0])


@pytest.hookimpl(trylast=True)  # after the terminal plugin has registered its reporter
def pytest_configure(config: pytest.Config) -> None:
    child = os.environ.pop(CHILD_ENV, None)
    settings = Settings.from_config(config)
    if settings.leaks != "off":
        from pytest_isolation.guard.watch import LeakGuard

        config.pluginmanager.register(LeakGuard(settings.leaks), "isolation-guard")
    if child is not None:
        from pytest_isolation.child import install_spawned
        from pytest_isolation.wire import ChildSpec

        install_spawned(config, ChildSpec.from_env(child))
        return
    if settings.mode == "file" and not _lists_fixtures(config):
        from pytest_isolation.controller import CONTROLLER_NAME
        from pytest_isolation.controller import FileModeController
        from pytest_isolation.controller import check_compatible
        from pytest_isolation.placeholder import CONTROLLER_KEY

        check_compatible(config)
        controller = FileModeController(config, settings)
        config.stash[CONTROLLER_KEY] = controller
        config.pluginmanager.register(controller, CONTROLLER_NAME)


def _lists_fixtures(config: pytest.Config) -> bool:
    """``--fixtures`` and ``--fixtures-per-test`` run no test and must import
    the test modules to list their fixtures, so they run as without file mode."""
    option = config.option
    return bool(
        getattr(option, "showfixtures", False) or getattr(option, "show_fixtures_per_test", False)
    )
