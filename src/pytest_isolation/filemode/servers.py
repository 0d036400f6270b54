"""The run's fork servers: one that preloads what the test files import, and
one without preloads, for the files that must not start from it
(:mod:`.preload` says which, and why)."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_isolation.core.words import counted
from pytest_isolation.filemode import childcov
from pytest_isolation.filemode import preload
from pytest_isolation.filemode.child import ChildPlugin
from pytest_isolation.filemode.child import prepare_forked
from pytest_isolation.filemode.child import start_forked
from pytest_isolation.filemode.launch import ForkServer
from pytest_isolation.filemode.launch import Origin
from pytest_isolation.filemode.launch import ServerOrder
from pytest_isolation.filemode.launch import serve
from pytest_isolation.filemode.nodes import module_name

#: Bound at import: a module the server preloads may replace ``json.dumps``
#: (the server then reports that, and is not used).
_dumps = json.dumps

#: How many servers a run starts to find the modules it can preload: each
#: refused module costs one (the server in which it was imported is not used).
ATTEMPTS = 4
#: How long the parent waits for the preloading server (an import that hangs
#: would otherwise hang the run before its first file).
PRELOAD_SECONDS = 120.0
#: Printed whenever a server preloads: how its children differ from a fresh `pytest FILE`'s.
PRELOAD_CAVEAT = (
    "isolation: every file's child shares what the preloaded imports made (a temporary "
    "directory, the pid, a lock), where a fresh `pytest FILE` makes its own; "
    "--isolation-preload=off does not preload"
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
        #: How long the preloading server may take: as a file's child, if less.
        self.seconds = PRELOAD_SECONDS if timeout is None else min(timeout, PRELOAD_SECONDS)
        self.plan: preload.Plan | None = None
        #: Module -> why the server left it out.
        self.refused: dict[str, str] = {}
        #: What the preloading server imported; None until it started.
        self.preloaded: preload.Loaded | None = None
        #: Why nothing is preloaded, when that was found at run time.
        self.stopped = ""
        self._servers: dict[bool, ForkServer] = {}

    def make_plan(self, files: Sequence[Path]) -> None:
        """What to preload for ``files`` (in run order); nothing when off."""
        if not self.on or not files:
            return
        tests = {module_name(path) for path in files}
        self.plan = preload.plan(files, sys.modules, preload.local_names(files, sys.path), tests)

    def preloads(self, *paths: Path) -> bool:
        """Whether the child for ``paths`` (a shared process runs several files)
        comes from the preloading server."""
        plan = self.plan
        if plan is None or not plan.modules or self.stopped:
            return False
        return not any(path in plan.kept_out for path in paths)

    def replace_ended(self) -> bool:
        """Close the servers that have gone (a test killed one), so the next
        child comes from a new one; whether any had."""
        ended = [key for key, server in self._servers.items() if server.ended()]
        for key in ended:
            self._servers.pop(key).close()
        return bool(ended)

    def server_for(self, *paths: Path) -> ForkServer:
        self.replace_ended()
        want = self.preloads(*paths)
        if want and True not in self._servers:
            server = self._start_preloading()
            if server is None:
                want = False
            else:
                self._servers[True] = server
        if not want and False not in self._servers:
            self._servers[False] = self._start(None)
        return self._servers[want]

    def _start_preloading(self) -> ForkServer | None:
        """The preloading server; each module it refuses costs a server (the one
        in which it was imported is not used).  None when nothing can be
        preloaded."""
        assert self.plan is not None
        modules = list(self.plan.modules)
        careful = False
        why = f"{ATTEMPTS} servers found modules to refuse"
        for _ in range(ATTEMPTS):
            try:
                server = self._start(modules, careful)
            except TimeoutError:
                why = f"the imports took more than {self.seconds:g} s"
                break
            try:
                loaded = preload.Loaded(**json.loads(server.hello))
            except (ValueError, TypeError):
                loaded = preload.Loaded([], "", "the fork server ended while preloading")
            if not loaded.why:
                self.preloaded = loaded
                self.plan.narrow(loaded.modules)
                return server
            server.close()
            if loaded.refused:
                # The files that start from the server import the preloaded
                # modules first, in order: none of them imports the ones after
                # a refused module before it.
                self.refused[loaded.refused] = loaded.why
                modules = modules[: modules.index(loaded.refused)]
                if not modules:
                    why = loaded.reason()
                    break
            elif careful or not server.hello:
                why = loaded.why
                break
            careful = not loaded.refused  # find which module made the change
        self.stopped = why
        return None

    def _start(self, modules: list[str] | None, careful: bool = False) -> ForkServer:
        origin = self.origin
        if origin is None or origin.ended():
            raise OriginEnded("isolation: the origin of the fork servers has ended")
        seconds = None if modules is None else self.seconds
        return origin.start_server(modules, careful, seconds)

    def lines(self, verbose: int) -> list[str]:
        """What was preloaded and what was kept out; the reasons with ``-v``."""
        plan, loaded = self.plan, self.preloaded
        if plan is None or not plan.modules:
            return []
        if loaded is None:
            line = f"isolation: nothing preloaded: {self.stopped}"
        else:
            line = (
                f"isolation: the fork server preloads {len(loaded.modules)} modules that the "
                f"test files import ({loaded.total} with theirs)"
            )
            kept, refused = len(plan.kept_out), len(self.refused)
            if kept or refused:
                line += (
                    f"; {counted(kept, 'file')} start without them, "
                    f"{counted(refused, 'module')} {'is' if refused == 1 else 'are'} left out"
                )
                line += " (-v says why)" if verbose < 1 else ""
        lines = [line]
        if loaded is not None:
            lines.append(PRELOAD_CAVEAT)
        if verbose >= 1:
            where = self.session.config.invocation_params.dir
            if loaded is not None:
                for path, why in plan.kept_out.items():
                    lines.append(f"isolation:   {os.path.relpath(path, where)}: {why}")
            for module, why in self.refused.items():
                lines.append(f"isolation:   {module} not preloaded: {why}")
        return lines

    def close(self) -> None:
        for server in self._servers.values():
            server.close()
        self._servers = {}


class OriginEnded(RuntimeError):
    """No fork server can start: the origin has gone (a test killed it)."""


def serve_order(
    session: pytest.Session, order: ServerOrder, environ: dict[str, str] | None
) -> ChildPlugin:
    """In a new fork server: prepare as each child will be, preload what
    ``order`` says, then serve.  Returns in each child it forks, started for
    its file; ``environ`` is the one every child starts from."""
    plugin = prepare_forked(session)
    hello = b""
    if order.modules is not None:
        childcov.measure_in_fork()
        loaded = preload.load(order.modules, order.careful)
        childcov.save_so_far()
        hello = _dumps(dataclasses.asdict(loaded)).encode()
    control, fd = serve(order.channel, hello)
    return start_forked(session, plugin, control, fd, None, environ)
