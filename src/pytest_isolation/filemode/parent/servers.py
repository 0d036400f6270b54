"""The run's fork servers: one that preloads what the test files import, and
one without preloads, for the files that must not start from it
(:mod:`.plan` says which, and why)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_isolation.core.words import agreeing
from pytest_isolation.core.words import counted
from pytest_isolation.filemode.parent import plan
from pytest_isolation.filemode.parent.nodes import module_name
from pytest_isolation.filemode.parent.verdicts import CACHE_KEY
from pytest_isolation.filemode.parent.verdicts import Verdicts
from pytest_isolation.filemode.server import preload
from pytest_isolation.filemode.server.forkserver import ForkServer
from pytest_isolation.filemode.server.forkserver import PendingServer
from pytest_isolation.filemode.server.origin import Origin

#: How many servers a run starts to find the modules it can preload: each
#: refused module costs one (the server in which it was imported is not used).
ATTEMPTS = 4


#: How long the parent waits for the preloading server (an import that hangs
#: would otherwise hang the run before its first file).
PRELOAD_SECONDS = 120.0


#: Printed whenever a server preloads: how its children differ from a fresh `pytest FILE`'s.
PRELOAD_CAVEAT = (
    "isolation: a preloaded module is imported once, in a fork server, and each file's child "
    "gets a copy: an import that read the pid, the clock or random bytes, or made a temporary "
    "file, a socket or a process, was refused, but what a C extension does at import is not "
    "seen; --isolation-preload=off does not preload"
)


class Servers:
    """Starts the fork servers as the run needs them, and says what was preloaded."""

    def __init__(
        self,
        session: pytest.Session,
        origin: Origin | None,
        on: bool,
        timeout: float | None = None,
    ) -> None:
        self.session = session
        #: Forks the servers (``None``: they cannot start).
        self.origin = origin
        self.on = on
        #: How long a preloading server may take: as a file's child, if less.
        self.seconds = PRELOAD_SECONDS if timeout is None else min(timeout, PRELOAD_SECONDS)
        self.plan: plan.Plan | None = None
        #: Module -> why no server preloads it.
        self.refused: dict[str, str] = {}
        #: What each preloading server imported, by the modules it preloads.
        self.preloaded: dict[plan.Start, preload.Loaded] = {}
        #: Planned start -> why nothing of it is preloaded, found at run time.
        self.stopped: dict[plan.Start, str] = {}
        #: The running servers, by what they preload (``()``: nothing).
        self._servers: dict[plan.Start, ForkServer] = {}
        #: The refusals of earlier runs (made with the plan), and the modules
        #: this run refused on their word.
        self.verdicts: Verdicts | None = None
        self.remembered: set[str] = set()

    def make_plan(self, files: Sequence[Path]) -> None:
        """What to preload for ``files`` (in run order); nothing when off."""
        if not self.on or not files:
            return
        tests = {module_name(path) for path in files}
        hooked = collection_hooks(self.session, files)
        local = plan.local_names(files, sys.path)
        self.plan = plan.plan(files, sys.modules, local, tests, hooked=hooked)
        self.verdicts = Verdicts(self.session.config)

    def start_planned(self) -> None:
        """Start every preloading server the plan asks for, all preparing at
        once (so that the header can say what they preload)."""
        if self.plan is not None:
            self._preload(set(self.plan.servers))

    def key_for(self, *paths: Path) -> plan.Start:
        """What the child for ``paths`` (a shared process runs several files)
        starts with loaded: the longest start all their plans share."""
        plan = self.plan
        if plan is None:
            return ()
        starts = [plan.starts.get(path, ()) for path in paths]
        common = starts[0]
        for start in starts[1:]:
            end = 0
            while end < min(len(common), len(start)) and common[end] == start[end]:
                end += 1
            common = common[:end]
        return common

    def replace_ended(self) -> bool:
        """Close the servers that have gone (a test killed one), so the next
        child comes from a new one; whether any had."""
        ended = [key for key, server in self._servers.items() if server.ended()]
        for key in ended:
            self._servers.pop(key).close()
        return bool(ended)

    def server_for(self, *paths: Path) -> ForkServer:
        self.replace_ended()
        key = self.key_for(*paths)
        if key and key not in self._servers:
            self._preload({key})
            key = self.key_for(*paths)  # what of it could be preloaded
        if key not in self._servers:
            self._servers[key] = self._order(None).ready(None)
        return self._servers[key]

    def _preload(self, wanted: set[plan.Start]) -> None:
        """Start a server for each of ``wanted``, all preparing at once.  A
        server that refuses a module is not used: the plan then preloads
        what comes before it (for every file), and a new server starts, up
        to :data:`ATTEMPTS` rounds; what still has none preloads nothing."""
        assert self.plan is not None
        careful: set[plan.Start] = set()
        wanted = self._cut_remembered({self._cut(start) for start in wanted})
        for _ in range(ATTEMPTS):
            wanted = self._undecided(wanted)
            if not wanted:
                break
            pending = [(s, self._order(list(s), s in careful)) for s in sorted(wanted)]
            for start, server in pending:
                try:
                    ready = server.ready(self.seconds)
                except TimeoutError:
                    self._give_up(start, f"the imports took more than {self.seconds:g} s")
                    continue
                try:
                    loaded = preload.Loaded(**json.loads(ready.hello))
                except (ValueError, TypeError):
                    loaded = preload.Loaded([], "", "the fork server ended while preloading")
                if not loaded.why:
                    self.preloaded[start] = loaded
                    self._servers[start] = ready
                    continue
                ready.close()
                if loaded.refused:
                    # A file that starts from it imports its modules first,
                    # in order: none imports those after a refused one before it.
                    self._refuse(loaded.refused, loaded.why)
                    if self.verdicts is not None:
                        self.verdicts.remember(start, loaded)
                elif start in careful or not ready.hello:
                    self._give_up(start, loaded.why)
                else:
                    careful.add(start)  # find which module made the change
            wanted = {self._cut(start) for start in wanted}
        for start in self._undecided(wanted):
            self._give_up(start, f"{ATTEMPTS} servers found modules to refuse")
        if self.verdicts is not None:
            self.verdicts.save()

    def _refuse(self, module: str, why: str) -> None:
        assert self.plan is not None
        self.refused[module] = why
        self.plan.refuse(module)

    def _cut_remembered(self, wanted: set[plan.Start]) -> set[plan.Start]:
        """``wanted``, each cut before a module an earlier run refused, when
        that run's verdict still holds: no server is spent on finding it
        again.  (Only refusals are remembered: preloading less never
        changes an outcome, as the file's child then imports the module
        itself; a module is preloaded only when this run watched its import.)"""
        if self.verdicts is None:
            return wanted
        cut = set()
        for start in wanted:
            verdict = self.verdicts.known(start)
            while verdict is not None and verdict.refused in start:
                self.remembered.add(verdict.refused)
                self._refuse(verdict.refused, verdict.why)
                start = self._cut(start)
                verdict = self.verdicts.known(start) if start else None
            cut.add(start)
        return cut

    def _undecided(self, wanted: set[plan.Start]) -> set[plan.Start]:
        """The starts of ``wanted`` that have neither a server nor a reason for none."""
        return {start for start in wanted if start} - self._servers.keys() - self.stopped.keys()

    def _cut(self, start: plan.Start) -> plan.Start:
        """``start`` up to its first refused module."""
        for index, name in enumerate(start):
            if name in self.refused:
                return start[:index]
        return start

    def _order(self, modules: list[str] | None, careful: bool = False) -> PendingServer:
        """A new server from the origin, preloading ``modules`` (``None``: nothing)."""
        origin = self.origin
        if origin is None or origin.ended():
            raise OriginEnded("isolation: the origin of the fork servers has ended")
        return origin.order_server(modules, careful)

    def _give_up(self, start: plan.Start, why: str) -> None:
        """Nothing of ``start`` is preloaded: its files start without preloads."""
        assert self.plan is not None
        self.stopped[start] = why
        self.plan.narrow(start, ())

    def lines(self, verbose: int) -> list[str]:
        """What was preloaded and what was kept out; the reasons with ``-v``."""
        plan = self.plan
        if plan is None or not (self.preloaded or self.refused or self.stopped):
            return []
        preloaded = [self.preloaded[start] for start in plan.servers if start in self.preloaded]
        if not preloaded:
            reasons = [*self.stopped.values()] or [
                f"{module}: {why}" for module, why in self.refused.items()
            ]
            return [f"isolation: nothing preloaded: {reasons[0]}"]
        modules = len({name for loaded in preloaded for name in loaded.modules})
        total = sum(loaded.total for loaded in preloaded)
        servers = (
            "the fork server preloads"
            if len(preloaded) == 1
            else (f"{len(preloaded)} fork servers preload")
        )
        line = (
            f"isolation: {servers} {counted(modules, 'module')} that the test files import "
            f"({total} with theirs)"
        )
        kept = [path for path in plan.starts if not plan.starts[path]] + list(plan.kept_out)
        loaded = {name for start in self.preloaded for name in start}
        stopped = {name for start in self.stopped for name in start} - loaded
        refused = len(self.refused.keys() | stopped)
        if kept or refused:
            line += (
                f"; {counted(len(kept), 'file')} {agreeing(len(kept), 'starts', 'start')} "
                "without them, "
                f"{counted(refused, 'module')} {agreeing(refused, 'is', 'are')} left out"
            )
            line += " (-v says why)" if verbose < 1 else ""
        lines = [line, PRELOAD_CAVEAT]
        if verbose >= 1:
            where = self.session.config.invocation_params.dir
            for path in kept:
                lines.append(f"isolation:   {os.path.relpath(path, where)}: {plan.why_not(path)}")
            for module, why in self.refused.items():
                lines.append(f"isolation:   {module} not preloaded: {why}")
            for start, why in self.stopped.items():
                lines.append(f"isolation:   {', '.join(start)} not preloaded: {why}")
            if self.remembered:
                lines.append(
                    f"isolation:   {counted(len(self.remembered), 'refusal')} taken from an "
                    f"earlier run with the same files: {', '.join(sorted(self.remembered))} "
                    f"(pytest's cache: {CACHE_KEY}; --cache-clear forgets them)"
                )
        return lines

    def close(self) -> None:
        for server in self._servers.values():
            server.close()
        self._servers = {}


class OriginEnded(RuntimeError):
    """No fork server can start: the origin has gone (a test killed it)."""


#: The hooks a file's process calls before it imports the test module.
_BEFORE_IMPORT = (
    "pytest_collection",
    "pytest_collect_directory",
    "pytest_collect_file",
    "pytest_collectstart",
    "pytest_ignore_collect",
    "pytest_make_collect_report",
    "pytest_pycollect_makemodule",
)


def collection_hooks(session: pytest.Session, files: Sequence[Path]) -> dict[Path, str]:
    """The files whose conftests implement a hook that runs before the test
    module is imported, and why each has no preloads: in ``pytest FILE``
    the hook runs before the module's imports, and what it sets up (an
    environment variable a module reads at import) would come after a
    preloaded import."""
    hooked = [
        (Path(str(plugin.__file__)).parent, Path(str(plugin.__file__)), name)
        for plugin in session.config.pluginmanager.get_plugins()
        if _is_conftest(plugin)
        for name in _BEFORE_IMPORT
        if callable(getattr(plugin, name, None))
    ]
    found: dict[Path, str] = {}
    for path in files:
        for folder, conftest, name in hooked:
            if folder in path.parents:
                found[path] = f"{conftest} implements {name}, which runs before the file's imports"
                break
    return found


def _is_conftest(plugin: object) -> bool:
    return Path(str(getattr(plugin, "__file__", "") or "")).name == "conftest.py"
