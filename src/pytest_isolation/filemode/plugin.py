"""File mode's options and ini keys, and its parts registered by the entry
plugin: the controller in the parent (:mod:`.parent`), its halves under
pytest-xdist, and a plain run's notices.  Everything else of file mode is
imported only when it runs.

PYTEST_DONT_REWRITE (see the package's docstring).
"""

from __future__ import annotations

import pytest

from pytest_isolation.core import names
from pytest_isolation.core.options import Setting
from pytest_isolation.core.options import add_lines
from pytest_isolation.core.options import flag_of
from pytest_isolation.core.settings import MODE_ENV
from pytest_isolation.core.settings import MODES
from pytest_isolation.core.settings import PRELOAD
from pytest_isolation.core.settings import START_METHODS
from pytest_isolation.core.settings import ModeSource
from pytest_isolation.core.settings import Settings
from pytest_isolation.filemode import placement

#: File mode's settings with a fixed set of values, by dest (= ini key).
CHOICES = {
    "isolation_mode": Setting(
        "Run each test file (file) or each test (test) in a process of its own, or neither (off).",
        "|".join(MODES),
        MODES[0],
    ),
    "isolation_start": Setting(
        "How a test file's process starts: fork, spawn, forkserver, or auto (fork on "
        "Linux, forkserver when threads run, spawn elsewhere).",
        "|".join(START_METHODS),
        START_METHODS[0],
    ),
    "isolation_preload": Setting(
        "File mode with fork: import what the test files import once, before the first "
        "file's process (auto: faster, but they share what it made), or not (off).",
        "|".join(PRELOAD),
        PRELOAD[0],
    ),
}

#: File mode's limits on a child, by dest (= ini key).
LIMITS = {
    "isolation_timeout": Setting(
        "File mode: after a test file's process has run SECONDS, fail its running test "
        "(with every thread's traceback) and end its process tree.",
        "SECONDS",
        unset="no limit",
        number="float",
    ),
    "isolation_kill_grace": Setting(
        "At a timeout, the SECONDS between SIGTERM and SIGKILL.",
        "SECONDS",
        "10",
        number="float",
    ),
}

#: Options that act on file mode's child processes, by dest, with what they do.
FILE_MODE_ONLY = {
    "isolation_timeout": "bounds each file's child process",
    "isolation_retries": "reruns a failed file (or, in test mode, test) in a fresh process",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    for dest, setting in {**CHOICES, **LIMITS}.items():
        setting.add(parser, dest)
    add_lines(
        parser,
        "isolation_paths",
        "File mode: where the files matching a pattern run, one 'GLOB: MODE' per line, "
        "relative to the ini file; MODE is file (a process each), off (together, as in a plain "
        "run) or group=NAME (one process per group); the most specific pattern wins.",
    )
    add_lines(
        parser,
        "isolation_shared_fixtures",
        "File mode with fork: session fixtures set up once, before the first child, in the "
        "process the children are forked from; each child inherits their values.",
        kind="args",
    )


def check_file_mode_only(config: pytest.Config, settings: Settings) -> None:
    """An option that acts on file mode's children needs file mode; with
    ``PYTEST_ISOLATION_MODE=off`` (how a run is made plain) it is ignored,
    and the header says so."""
    ignored = []
    for dest, what in FILE_MODE_ONLY.items():
        if config.getoption(dest) is None or settings.mode == "file":
            continue
        if dest == "isolation_retries" and settings.mode == "test":
            continue
        if settings.mode_from.by is not ModeSource.ENV:
            needs = "file or test" if dest == "isolation_retries" else "file"
            raise pytest.UsageError(f"{flag_of(dest)} {what}: it needs --isolation-mode={needs}")
        ignored.append(flag_of(dest))
    if ignored:
        config.pluginmanager.register(Ignored(ignored), names.IGNORED)


def register_late_opt_in(config: pytest.Config, settings: Settings) -> None:
    """A plain run by the ini key: say when files ask for file mode too late."""
    if settings.mode == "off" and settings.mode_from.by is ModeSource.INI:
        config.pluginmanager.register(LateOptIn(config), names.LATE_OPT_IN)


def register(config: pytest.Config, settings: Settings) -> None:
    """The parent's controller, which runs each file in a child."""
    from pytest_isolation.filemode.compat import check_compatible
    from pytest_isolation.filemode.parent.controller import FileModeController

    check_compatible(config)
    config.pluginmanager.register(FileModeController(config, settings), names.CONTROLLER)


def register_xdist_worker(config: pytest.Config) -> None:
    """An xdist worker in file mode: its files run in children of its own."""
    from pytest_isolation.filemode.parent.xdist import WorkerFileMode

    config.pluginmanager.register(WorkerFileMode(config), names.XDIST_WORKER)


def register_xdist_controller(config: pytest.Config) -> None:
    """The xdist controller in file mode: it hands out whole files."""
    from pytest_isolation.filemode.compat import check_compatible
    from pytest_isolation.filemode.parent.xdist import ControllerFileMode

    check_compatible(config)
    config.pluginmanager.register(ControllerFileMode(config), names.XDIST_CONTROLLER)


class Ignored:
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
