"""Entry module of the ``isolation`` pytest plugin: it lists the features'
plugin modules (each declares its own options and ini keys) and wires what
runs in ``pytest_configure``."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from collections.abc import Generator

import pytest

from pytest_isolation.ci import plugin as ci
from pytest_isolation.core import hookspecs
from pytest_isolation.core import names
from pytest_isolation.core import options
from pytest_isolation.core import startup
from pytest_isolation.core.keys import LAST_WORDS
from pytest_isolation.core.keys import PARENT_PHASE
from pytest_isolation.core.names import CHILD_ENV
from pytest_isolation.core.settings import Settings
from pytest_isolation.core.xdist import ControllerInput
from pytest_isolation.core.xdist import WorkerOutput
from pytest_isolation.core.xdist import is_controller
from pytest_isolation.core.xdist import is_worker
from pytest_isolation.diagnose import plugin as diagnose
from pytest_isolation.filemode import plugin as filemode
from pytest_isolation.filemode.placement import run_mode
from pytest_isolation.guard import plugin as guard
from pytest_isolation.guard.allow import MARKER_HELP
from pytest_isolation.lint import plugin as lint
from pytest_isolation.pertest import plugin as pertest

#: Each feature's options and ini keys, with its hooks, in the order ``pytest --help``
#: lists them, by topic: file mode (the mode, how a process starts, its limits), a test's
#: process (its limits), the CI features (retries, quarantine, shards, the run report),
#: the record of what each file executed, the leak guard, the lint; the isolation
#: fixtures (a conftest can load them alone); the selector and the diagnoses, inert
#: unless their options are given.  What runs is registered in ``pytest_configure``
#: (only the fixtures, the selector and the diagnoses have hooks here, in this order).
pytest_plugins = [
    "pytest_isolation.filemode.plugin",
    "pytest_isolation.pertest.plugin",
    "pytest_isolation.ci.plugin",
    "pytest_isolation.record.plugin",
    "pytest_isolation.guard.plugin",
    "pytest_isolation.lint.plugin",
    "pytest_isolation.fixtures",
    "pytest_isolation.selector.plugin",
    "pytest_isolation.diagnose.plugin",
]


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)
    if not pluginmanager.has_plugin(names.INPUT_CHECK):
        pluginmanager.register(InputCheck(), names.INPUT_CHECK)


class InputCheck:
    """Registered as ``isolation-input``: checks what holds for every option
    before any part reads its own (the selector and the finder answer
    ``pytest_cmdline_main`` first, and may end the run there)."""

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_cmdline_main(self, config: pytest.Config) -> Generator[None, object, object]:
        blank = options.blank_options(config)
        if blank:
            raise pytest.UsageError(
                f"{', '.join(blank)}: empty value; give a value, or leave the option out"
            )
        return (yield)


@pytest.hookimpl(tryfirst=True)  # before the first conftest is imported
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """What the process has before any conftest changes it, which file
    mode's children start from (``startup``, ``forks``).  Python 3.12+, not
    in a file-mode child: record what the parent runs from here until its
    first child starts (its conftests' imports), for the record of what each
    test file executed; stopped at configure when the run makes no record."""
    from pytest_isolation.filemode import forks

    startup.record(early_config)
    forks.watch()
    if sys.version_info >= (3, 12) and CHILD_ENV not in os.environ:
        from pytest_isolation.record.executed import Recorder

        recorder = Recorder(str(early_config.rootpath))
        recorder.start()
        early_config.stash[PARENT_PHASE] = recorder


def _stop_parent_phase(config: pytest.Config) -> None:
    recorder = config.stash.get(PARENT_PHASE, None)
    if recorder is not None:
        from pytest_isolation.record.executed import unwatch

        del config.stash[PARENT_PHASE]
        recorder.take()
        unwatch()


def _say_last_words(words: list[Callable[[], None]]) -> None:
    for say in words:
        say()


@pytest.hookimpl(tryfirst=True)  # before the plugins' configure reads the options
def pytest_cmdline_main(config: pytest.Config) -> None:
    child = os.environ.get(CHILD_ENV)
    if child is None:  # before any conftest's configure adds a cleanup: this one runs after
        words: list[Callable[[], None]] = []
        config.stash[LAST_WORDS] = words
        config.add_cleanup(functools.partial(_say_last_words, words))
    if child is not None:  # before any plugin's configure asks if it is an xdist worker
        from pytest_isolation.filemode.child.start import adopt_worker_identity
        from pytest_isolation.filemode.wire import ChildSpec

        adopt_worker_identity(config, ChildSpec.from_env(child))
    mode = run_mode(config)[0]
    if mode == "file":
        from pytest_isolation.filemode.compat import before_configure

        before_configure(config)
    elif mode == "test":
        from pytest_isolation.pertest import compat

        compat.before_configure(config)


@pytest.hookimpl(trylast=True)  # after the terminal plugin has registered its reporter
def pytest_configure(config: pytest.Config) -> None:
    """Each feature's parts that this process runs, in this order (a plugin
    registered later has its hooks called earlier)."""
    child = os.environ.pop(CHILD_ENV, None)
    settings = Settings.from_config(config, run_mode(config))
    filemode.check_file_mode_only(config, settings)
    config.addinivalue_line("markers", MARKER_HELP)
    # The parts are imported when switched on: a spawned file-mode child loads this module too.
    guard.register(config, settings)
    diagnose.register_twice(config, settings)
    lint.register(config, settings, in_child=child is not None)
    ci.register_quarantine(config)  # in children too: they make the reports
    lists_fixtures = _lists_fixtures(config)
    if not lists_fixtures:
        diagnose.register_patch_reach(config)
    if child is None and not lists_fixtures:
        ci.register_run_records(config, settings)
    if child is not None or lists_fixtures or not settings.recording or is_controller(config):
        _stop_parent_phase(config)  # no record, or (an xdist controller) no children of its own
    filemode.register_late_opt_in(config, settings)
    if not lists_fixtures:  # last: first to run a test
        pertest.register(config, settings, runs_tests=not is_controller(config))
    if child is not None:
        from pytest_isolation.filemode.child.start import install_spawned
        from pytest_isolation.filemode.wire import ChildSpec

        install_spawned(config, ChildSpec.from_env(child))
        return
    if _register_xdist(config, settings.mode == "file"):
        return  # an xdist controller: its workers collect and run the files
    if settings.mode == "file" and not lists_fixtures:
        filemode.register(config, settings)


def _register_xdist(config: pytest.Config, file_mode: bool) -> bool:
    """Under pytest-xdist, the exchange between workers and controller, and file
    mode's part on either side (imported only in file mode); True in the controller."""
    if is_worker(config):
        config.pluginmanager.register(WorkerOutput(config), names.XDIST_OUTPUT)
        if file_mode:
            filemode.register_xdist_worker(config)
        return False
    if not is_controller(config):
        return False
    config.pluginmanager.register(ControllerInput(config), names.XDIST_OUTPUT)
    if file_mode:
        filemode.register_xdist_controller(config)
    return True


def _lists_fixtures(config: pytest.Config) -> bool:
    """``--fixtures`` and ``--fixtures-per-test`` run no test and must import
    the test modules to list their fixtures, so they run as without file mode."""
    option = config.option
    return bool(
        getattr(option, "showfixtures", False) or getattr(option, "show_fixtures_per_test", False)
    )
