"""When the parent sets up the shared fixtures (once, before the first
file's child) and tears them down (after the last file), and which of them
a selecting run needs (:mod:`.shared` is how)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_isolation.core.settings import Settings
from pytest_isolation.core.shared import names as shared_names
from pytest_isolation.filemode import wire
from pytest_isolation.filemode.parent import shared
from pytest_isolation.filemode.parent.relaying import end_child
from pytest_isolation.filemode.parent.starting import SESSION
from pytest_isolation.filemode.parent.starting import Starter
from pytest_isolation.filemode.parent.starting import write_line

Selectors = Callable[[Path], "tuple[tuple[str, ...], ...] | None"]


class SharedFixtures:
    """The shared fixtures set up in this process, until their teardown."""

    def __init__(
        self, config: pytest.Config, settings: Settings, starter: Starter, selectors: Selectors
    ) -> None:
        self.config = config
        self.timeout = settings.timeout
        self.starter = starter
        self.selectors = selectors
        self.held: shared.Shared | None = None
        #: The node id of the last test run, whose teardown reports theirs.
        self.last_test = ""

    def set_up(self, files: list[pytest.Collector]) -> None:
        """Set up the shared fixtures here, before the fork server (fork
        only); only the ones the selected tests use, when known."""
        session = self.config.stash[SESSION]
        used = self._in_use(files)
        lines, self.held = shared.share(session, files, self.starter.method, used)
        for line in lines:
            write_line(self.config, line)

    def tear_down(self, item: pytest.Item) -> None:
        """Tear down the shared fixtures once, after the last file (or where
        the run stopped)."""
        held, self.held = self.held, None
        if held is not None:
            shared.tear_down(held, item, self.last_test)

    def _in_use(self, files: list[pytest.Collector]) -> set[str] | None:
        """Which shared fixtures the selected tests that run (not those a
        ``skip`` or ``skipif`` mark skips, ``-k``, ``-m``, paths, node ids,
        ``--lf`` select) use: a throwaway child collects the files, as a
        plain run would before any set-up.  None when that child could not
        tell (said)."""
        wanted = shared_names(self.config)
        if not wanted or self.starter.method != "fork":
            return None
        first, rest = files[0], files[1:]
        assert isinstance(first, pytest.File)
        spec = wire.ChildSpec(
            path=str(first.path),
            selectors=self.selectors(first.path),
            more=tuple((str(file.path), self.selectors(file.path)) for file in rest),
            collect_only=True,
            uses=tuple(wanted),
            named=tuple(str(f.path) for f in files if f.session.isinitpath(f.path)),
        )
        child = self.starter.forking.fork_now(first).activate(spec, -1)
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        used: set[str] | None = None
        told = False
        try:
            for kind, payload in wire.Receiver(child.stream).messages(deadline):
                if kind == wire.USES:
                    names = payload["names"]
                    used, told = None if names is None else set(names), True
                if kind in (wire.USES, wire.FINISHED, wire.INTERRUPTED):
                    break
        except wire.TimedOut:
            pass
        finally:
            end_child(child)
        if not told:
            write_line(
                self.config,
                "isolation: the collection that finds which shared fixtures the selected "
                "tests use did not finish: every shared fixture is set up",
            )
        return used
