"""What the guard hears while a window is open: where the environment, the
working directory and the tracked standard library modules were written
(``file:line``), which keys a library's own import set (import-time state,
not the window's leak), that a process was started, and which project
modules were imported.  Installed once per session, and undone at its end.
"""

from __future__ import annotations

import types
from typing import Any

from pytest_isolation.guard import imports
from pytest_isolation.guard import tracked
from pytest_isolation.guard.leftovers import Leftovers
from pytest_isolation.guard.mocks import record_start_sites
from pytest_isolation.guard.process import text
from pytest_isolation.guard.sites import CWD_EVENTS
from pytest_isolation.guard.sites import ENV_EVENTS
from pytest_isolation.guard.sites import PROCESS_EVENTS
from pytest_isolation.guard.sites import Sites
from pytest_isolation.guard.sites import listen
from pytest_isolation.guard.windows import Found
from pytest_isolation.guard.windows import Seen

_CURRENT_TEST = (b"PYTEST_CURRENT_TEST", "PYTEST_CURRENT_TEST")


class Recorders:
    """The audit hook's listener, the tracked modules' write hook, the start
    sites of mock patches and the finder that watches project imports."""

    def __init__(
        self,
        sites: Sites,
        leftovers: Leftovers,
        project_origin: imports.Wanted,
        loaded: imports.Loaded,
    ) -> None:
        self.sites = sites
        self.leftovers = leftovers
        #: Sites of writes seen in the open window: (category, key) -> file:line.
        self.seen: Seen = {}
        #: Keys a library's import set during the current file (import-time state).
        self.imported: set[tuple[str, str]] = set()
        self.listening = False
        self.imports = imports.ImportWatch(project_origin)
        self._loaded = loaded
        self._outer: tuple[Any, Any, Any, Any] | None = None

    def install(self) -> None:
        tracked.start()
        self._outer = (
            listen(self._heard),
            record_start_sites(self.sites.caller),
            tracked.on_write,
            imports.install(self.imports, self._loaded),
        )
        tracked.on_write = self._module_written

    def uninstall(self) -> None:
        """Put back what an outer run had (an in-process inner run nests)."""
        if self._outer is not None:
            listen(self._outer[0])
            record_start_sites(self._outer[1])
            tracked.on_write = self._outer[2]
            imports.uninstall(self.imports, self._outer[3])
            tracked.stop()

    def start(self, *, imports_too: bool = True) -> None:
        """A window opens: listen (and watch project imports, for a test)."""
        self.listening = True
        self.imports.listening = imports_too

    def stop(self) -> None:
        self.listening = False
        self.imports.listening = False

    def _module_written(self, module: types.ModuleType, name: str) -> None:
        if not self.listening:
            return
        key = ("attribute", f"{module.__name__}.{name}")
        if key in self.seen:
            # The window's first write of a key names where it was made: a
            # time patcher writes the same names at every start and stop, too
            # often to walk the stack for each write.
            return
        try:  # inside the test's own setattr: never raise into it
            site, importing = self.sites.locate()
        except Exception:
            return
        if importing:
            self.imported.add(key)
        elif site:
            self.seen[key] = site

    def _heard(self, event: str, args: tuple[Any, ...]) -> None:
        if event in PROCESS_EVENTS:
            self.leftovers.spawned = True
        elif not self.listening:
            return
        elif event in ENV_EVENTS:
            if args and args[0] not in _CURRENT_TEST:
                key = ("env", text(args[0]))
                site, importing = self.sites.locate()
                if importing:
                    self.imported.add(key)
                elif site:
                    self.seen[key] = site
        elif event in CWD_EVENTS:
            site = self.sites.caller()
            if site:
                self.seen[("cwd", "cwd")] = site

    def site_of(self, item: Found, started: str | None = None, seen: Seen | None = None) -> str:
        """Where a change was made: a patch's ``start()``, or the site the
        recorders saw for the key (``seen`` for a fixture's window)."""
        if item.category.name == "mock":
            return started or ""
        return (self.seen if seen is None else seen).get((item.category.name, item.key), "")
