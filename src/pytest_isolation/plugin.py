"""Entry module of the ``isolation`` pytest plugin: options, ini keys and wiring."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from collections.abc import Generator

import pytest

from pytest_isolation import lint
from pytest_isolation.ci import quarantine
from pytest_isolation.ci.split import STRATEGIES
from pytest_isolation.core import hookspecs
from pytest_isolation.core import names
from pytest_isolation.core import options
from pytest_isolation.core import placement
from pytest_isolation.core import startup
from pytest_isolation.core.keys import LAST_WORDS
from pytest_isolation.core.keys import PARENT_PHASE
from pytest_isolation.core.names import CHILD_ENV
from pytest_isolation.core.options import Setting
from pytest_isolation.core.options import flag_of
from pytest_isolation.core.settings import CHOICES
from pytest_isolation.core.settings import MODE_ENV
from pytest_isolation.core.settings import ModeSource
from pytest_isolation.core.settings import Settings
from pytest_isolation.core.settings import run_mode
from pytest_isolation.core.xdist import ControllerInput
from pytest_isolation.core.xdist import WorkerOutput
from pytest_isolation.core.xdist import is_controller
from pytest_isolation.core.xdist import is_worker
from pytest_isolation.guard.allow import MARKER_HELP

#: The isolation fixtures come with the plugin (a conftest can load them alone), and
#: the selector and the polluter finder, inert unless their options are given.
pytest_plugins = [
    "pytest_isolation.fixtures",
    "pytest_isolation.selector.plugin",
    "pytest_isolation.diagnose.plugin",
]

_HELP = {
    "isolation_mode": "file: run every test file in a process of its own.",
    "isolation_start": "How file mode starts a child: fork (from a copy of this process), "
    "spawn (a fresh interpreter per file), forkserver (forked from one fresh interpreter), "
    "or auto (fork on Linux, forkserver when threads run, spawn elsewhere).",
    "isolation_leaks": "Leak guard: warn, error or quiet restore process-wide state a test, "
    "fixture or test module import leaves changed (mock patches, sys.modules, module "
    "attributes, os.environ, cwd, sys.path, logging, signals, ...); warn also warns, error "
    "fails the test; off does nothing.",
    "isolation_preload": "File mode with fork: the fork server does not import what the test "
    "files import (off), or imports it once before the first child (auto; faster, but every "
    "file's child shares what those imports made: a temporary directory, the pid, a lock).",
    "isolation_retry_scope": "With --isolation-retries: rerun only a file's failed tests "
    "(failed) or the whole file (file).",
    "isolation_lint": "Isolation lint of test files and conftests when collected (hard-coded "
    "temporary paths, os.chdir or os.environ writes without a restore, mocks installed at "
    "import time, ...): warn, error (their collection fails) or off.",
    "isolation_record": "Record which project functions each test file's tests execute, for "
    "--isolation-scope=recorded, in pytest's cache and the run report: in file mode (auto), "
    "also in a plain run (on; costlier there), or never (off).",
}


#: Where a path from an ini key starts (see ``options.path``).
_RELATIVE = "an ini value is relative to the ini file"

#: The deep tier, as ``guard/snapshots.py`` and ``guard/watch.py`` switch it on.
_DEEP = Setting(
    "Leak guard, deep tier: also the project's class-level containers mutated in place, "
    "containers held in any module-level one (not only in one bound to an UPPER_CASE name), "
    "and higher-scoped fixture values mutated in place by a test that requested them "
    "(module-level containers, named loggers' handlers and lazily initialised globals are "
    "checked without it).",
    default="false",
)

#: File mode's limits on a child, by dest (= ini key).
_LIMITS = {
    "isolation_timeout": Setting(
        "File mode: a file's child may run this long; then its threads' tracebacks are "
        "dumped, its whole process tree ended and the running test failed.",
        "SECONDS",
        unset="no limit",
    ),
    "isolation_kill_grace": Setting(
        "After --isolation-timeout, how long the processes get between SIGTERM and SIGKILL.",
        "SECONDS",
        "10",
    ),
}

#: Sharding, by dest (= ini key); --isolation-store-durations, an action, has no key.
_SHARDING = {
    "isolation_shard": Setting(
        "Run only shard K of N (1-based) of the test files; 'auto': the shard "
        "CI_NODE_INDEX/CI_NODE_TOTAL, CIRCLE_NODE_INDEX/CIRCLE_NODE_TOTAL or "
        "BUILDKITE_PARALLEL_JOB/BUILDKITE_PARALLEL_JOB_COUNT name (every file when none is set).",
        "K/N|auto",
        unset="no sharding",
    ),
    "isolation_shard_strategy": Setting(
        "How files are split: duration (balance the durations of --isolation-durations), "
        "round-robin, or auto (duration with --isolation-durations, else round-robin).",
        "|".join(STRATEGIES),
        STRATEGIES[0],
    ),
    "isolation_durations": Setting(
        "A JSON file of each test file's duration (committed: every job reads the same) for "
        f"--isolation-shard to balance; {_RELATIVE}.",
        "PATH",
    ),
}

#: Reruns, known failures and the run report, by dest (= ini key).
_OUTCOMES = {
    "isolation_retries": Setting(
        "File mode: run a file whose child failed (failures, errors, crash, timeout) again in a "
        "fresh process, up to N more times; a test that passes on a retry is reported passed "
        "and listed as flaky.",
        "N",
        "0",
    ),
    "isolation_quarantine": Setting(
        "A file of known failures (node ids, paths or globs, '# reason'); they are reported as "
        f"quarantined and do not fail the run; {_RELATIVE}.",
        "PATH",
    ),
    "isolation_report": Setting(
        "Write a JSON run report: each file's outcome, duration, attempts, exit code or signal, "
        f"test and leak counts; flaky and quarantined tests; shard; versions; {_RELATIVE}.",
        "PATH",
    ),
}


#: Options that act on file mode's child processes, by dest, with what they do.
_FILE_MODE_ONLY = {
    "isolation_timeout": "bounds each file's child process",
    "isolation_retries": "reruns a failed file in a fresh process",
}


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)
    if not pluginmanager.has_plugin(names.INPUT_CHECK):
        pluginmanager.register(InputCheck(), names.INPUT_CHECK)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup(*options.GROUP)
    for dest, choices in CHOICES.items():
        Setting(_HELP[dest], "|".join(choices), choices[0]).add(parser, dest)
    _DEEP.add(parser, "isolation_leaks_deep")
    group.addoption(
        "--isolation-twice",
        dest="isolation_twice",
        action="store_true",
        default=False,
        help="Run every test that passes a second time right after the first, in the same "
        "process, before the leak guard puts anything back; a test whose repeat fails is "
        "reported as 'passes once, fails when repeated', with what its first run left changed.",
    )
    for dest, setting in {**_LIMITS, **_SHARDING}.items():
        setting.add(parser, dest)
    group.addoption(
        "--isolation-store-durations",
        dest="isolation_store_durations",
        action="store_true",
        default=False,
        help="Write this run's file durations to --isolation-durations (default "
        "isolation-durations.json in the rootdir), to commit.",
    )
    for dest, setting in _OUTCOMES.items():
        setting.add(parser, dest)
    parser.addini(
        "isolation_paths",
        "File mode: where the files matching a pattern run, one 'GLOB: MODE' per line, "
        "relative to the ini file; MODE is file (a process each), off (together, as in a plain "
        "run) or group=NAME (one process per group); the most specific pattern wins.",
        type="linelist",
        default=[],
    )
    parser.addini(
        "isolation_shared_fixtures",
        "File mode with fork: session fixtures set up once, before the first child, in the "
        "process the children are forked from; each child inherits their values.",
        type="args",
        default=[],
    )
    parser.addini(
        "isolation_allow_leaks",
        "Leaks the guard allows everywhere, one 'category' or 'category:pattern' per line "
        "(e.g. env:MYAPP_*).",
        type="linelist",
        default=[],
    )
    lint.addoption(parser)


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
        from pytest_isolation.core.executed import Recorder

        recorder = Recorder(str(early_config.rootpath))
        recorder.start()
        early_config.stash[PARENT_PHASE] = recorder


def _stop_parent_phase(config: pytest.Config) -> None:
    recorder = config.stash.get(PARENT_PHASE, None)
    if recorder is not None:
        from pytest_isolation.core.executed import unwatch

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
        from pytest_isolation.filemode.child.plugin import adopt_worker_identity
        from pytest_isolation.filemode.wire import ChildSpec

        adopt_worker_identity(config, ChildSpec.from_env(child))
    if run_mode(config)[0] == "file":
        from pytest_isolation.filemode.plugins import before_configure

        before_configure(config)


@pytest.hookimpl(trylast=True)  # after the terminal plugin has registered its reporter
def pytest_configure(config: pytest.Config) -> None:
    child = os.environ.pop(CHILD_ENV, None)
    settings = Settings.from_config(config)
    ignored = []
    for dest, what in _FILE_MODE_ONLY.items():
        if config.getoption(dest) is None or settings.mode == "file":
            continue
        if settings.mode_from.by is not ModeSource.ENV:
            raise pytest.UsageError(f"{flag_of(dest)} {what}: it needs --isolation-mode=file")
        ignored.append(flag_of(dest))  # the variable is how a run is made plain
    if ignored:
        config.pluginmanager.register(_Ignored(ignored), names.IGNORED)
    config.addinivalue_line("markers", MARKER_HELP)
    # The parts are imported when switched on: a spawned file-mode child loads this module too.
    if settings.leaks != "off" or settings.twice:
        from pytest_isolation.guard.watch import GUARD_KEY
        from pytest_isolation.guard.watch import LeakGuard

        # Off, but --isolation-twice asks what each first run left: found, never put back.
        policy = "watch" if settings.leaks == "off" else settings.leaks
        guard = LeakGuard(config, policy, settings.deep)
        config.stash[GUARD_KEY] = guard
        config.pluginmanager.register(guard, names.GUARD)
    if settings.twice:  # in children and xdist workers too: they run the tests
        from pytest_isolation.diagnose.twice import Twice
        from pytest_isolation.diagnose.twice import check_compatible as twice_compatible

        twice_compatible(config)
        config.pluginmanager.register(Twice(config), names.TWICE)
    if settings.lint != "off" and child is None:  # a spawned child's parent linted its file
        from pytest_isolation.lint.check import register as register_lint

        register_lint(config, settings)
    _register_quarantine(config)  # in children too: they make the reports
    lists_fixtures = _lists_fixtures(config)
    if not lists_fixtures:
        from pytest_isolation.diagnose.patches import PatchReach

        config.pluginmanager.register(PatchReach(config), names.PATCHES)
    if child is None and not lists_fixtures:
        _register_run_records(config, settings)
    if child is not None or lists_fixtures or not settings.recording or is_controller(config):
        _stop_parent_phase(config)  # no record, or (an xdist controller) no children of its own
    if settings.mode == "off" and settings.mode_from.by is ModeSource.INI:
        config.pluginmanager.register(LateOptIn(config), names.LATE_OPT_IN)
    if child is not None:
        from pytest_isolation.filemode.child.plugin import install_spawned
        from pytest_isolation.filemode.wire import ChildSpec

        install_spawned(config, ChildSpec.from_env(child))
        return
    if _register_xdist(config, settings.mode == "file"):
        return  # an xdist controller: its workers collect and run the files
    if settings.mode == "file" and not lists_fixtures:
        from pytest_isolation.filemode.parent.controller import FileModeController
        from pytest_isolation.filemode.plugins import check_compatible

        check_compatible(config)
        config.pluginmanager.register(FileModeController(config, settings), names.CONTROLLER)


class _Ignored:
    """The header's line for file-mode options a plain run ignores."""

    def __init__(self, flags: list[str]) -> None:
        self.flags = flags

    def pytest_report_header(self) -> str:
        return f"isolation: {MODE_ENV}=off: {', '.join(self.flags)} ignored (file mode only)"


class LateOptIn:
    """A plain run says when a test module or a late conftest asks for
    processes of their own, which only file mode gives."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.asked: list[placement.Placement] = []

    @pytest.hookimpl(trylast=True)  # the items as the run has them
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.asked = placement.asked_late(self.config, items)

    def pytest_report_collectionfinish(self) -> list[str]:
        return [placement.late_line(self.asked)] if self.asked else []


def _register_run_records(config: pytest.Config, settings: Settings) -> None:
    """The parent's sharding, run report and record of what each file
    executed (never in a file-mode child, which does not import them)."""
    from pytest_isolation.ci.runreport import RunReport
    from pytest_isolation.ci.sharding import SHARDING_KEY
    from pytest_isolation.ci.sharding import Sharding

    sharding = Sharding(config)
    config.stash[SHARDING_KEY] = sharding
    config.pluginmanager.register(sharding, names.SHARDING)
    report = RunReport(config, settings.mode)
    config.pluginmanager.register(report, names.RUN_REPORT)
    if settings.recording:
        from pytest_isolation.ci.recording import PlainRecording
        from pytest_isolation.ci.recording import RecordKeeper

        keeper = RecordKeeper(config, report)
        config.pluginmanager.register(keeper, names.RECORD_KEEPER)
        if settings.mode != "file" and not is_controller(config):
            config.pluginmanager.register(PlainRecording(config, keeper), names.PLAIN_RECORDING)


def _register_xdist(config: pytest.Config, file_mode: bool) -> bool:
    """Under pytest-xdist, the exchange between workers and controller, and file
    mode's part on either side (imported only in file mode); True in the controller."""
    if is_worker(config):
        config.pluginmanager.register(WorkerOutput(config), names.XDIST_OUTPUT)
        if file_mode:
            from pytest_isolation.filemode.parent.xdist import WorkerFileMode

            config.pluginmanager.register(WorkerFileMode(config), names.XDIST_WORKER)
        return False
    if not is_controller(config):
        return False
    config.pluginmanager.register(ControllerInput(config), names.XDIST_OUTPUT)
    if file_mode:
        from pytest_isolation.filemode.parent.xdist import ControllerFileMode
        from pytest_isolation.filemode.plugins import check_compatible

        check_compatible(config)
        config.pluginmanager.register(ControllerFileMode(config), names.XDIST_CONTROLLER)
    return True


def _register_quarantine(config: pytest.Config) -> None:
    found = quarantine.from_config(config)
    if found is not None:
        plugin = quarantine.Quarantine(config, *found)
        config.stash[quarantine.QUARANTINE_KEY] = plugin
        config.pluginmanager.register(plugin, names.QUARANTINE)


def _lists_fixtures(config: pytest.Config) -> bool:
    """``--fixtures`` and ``--fixtures-per-test`` run no test and must import
    the test modules to list their fixtures, so they run as without file mode."""
    option = config.option
    return bool(
        getattr(option, "showfixtures", False) or getattr(option, "show_fixtures_per_test", False)
    )
