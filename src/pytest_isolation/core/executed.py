"""What a test file's process executed, for the selector's ``recorded`` scope.

On Python 3.12+ a ``sys.monitoring`` tool (PEP 669) sees each code object
start once: its callback keeps the code object and disables the event at
that place, so the code runs at full speed from its second call on.  What
is kept is, per project file, the first line of each code object that ran;
the parent maps lines to functions (:mod:`pytest_isolation.ci.sourcefacts`).

On 3.10/3.11 there is no such cheap hook (a profile or trace function slows
every call, and coverage.py owns the trace slot), so a record there holds
the project modules the process had loaded: every function of each counts
as run.  That is a superset of what ran (never a test missed), coarser.

Either way the record also lists the project modules loaded at the end:
their module-level code (constants, imports, class bodies) ran at import,
possibly in the parent a forked child came from.

Imports: stdlib only (the child side stays light).
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Iterable
from types import CodeType
from typing import Any

#: How a record was made: functions seen start (3.12+), or modules loaded.
MONITORING = "monitoring"
MODULES = "modules"
#: ``sys.monitoring`` ids free for tools like this one (0-2 and 5 are named:
#: debugger, coverage, profiler, optimizer).
_FREE_IDS = (4, 3)
_NAME = "pytest-isolation"
#: Path parts of installed code, never the project's.
_INSTALLED = ("site-packages", "dist-packages")
#: Where a project keeps its importable packages, relative to its root.
_SOURCE_DIRS = ("", "src", "lib")


#: The recorder that sees module bodies run (the audit hook below), if one records.
_ACTIVE: list[Recorder] = []


def _module_run(event: str, args: tuple[Any, ...]) -> None:
    """An audit hook: a module's body run by ``exec`` (every import does
    that) while a recorder records.  Such a module may be taken out of
    ``sys.modules`` again before the record is taken (the leak guard puts
    back a module first imported by a test)."""
    if event == "exec" and _ACTIVE:
        code = args[0]
        if isinstance(code, CodeType) and code.co_name == "<module>":
            _ACTIVE[-1].loaded.add(code.co_filename)


_hooked: list[bool] = []


def how() -> str:
    """How this interpreter records: with ``sys.monitoring`` or by modules."""
    return MONITORING if sys.version_info >= (3, 12) else MODULES


class Recorder:
    """Sees which code of the project under ``root`` runs, from :meth:`start`
    to :meth:`take`; :meth:`restart` starts a new span in the same process
    (a plain run's next file)."""

    def __init__(self, root: str) -> None:
        self.roots = tuple({os.path.join(p, "") for p in (root, os.path.realpath(root))})
        self.codes: set[CodeType] = set()
        self.tool: int | None = None
        #: The standard library and installed code: never the project's.
        libraries = ("stdlib", "platstdlib", "purelib", "platlib")
        paths = sysconfig.get_paths()
        self.outside = tuple({os.path.join(paths[name], "") for name in libraries})
        #: Where installed distributions are (a copy of the project may be one).
        self.installed = tuple({os.path.join(paths[name], "") for name in ("purelib", "platlib")})
        self.root = root
        self.mapped: dict[str, str | None] = {}
        #: Files of the module bodies run since the start (:func:`_module_run`).
        self.loaded: set[str] = set()
        #: ``sys.monitoring.use_tool_id`` as it was, while this recorder stands in for it.
        self.claim: Any = None
        #: A test took every id this recorder may use: what it saw is incomplete.
        self.lost = False
        self.bases: dict[str, str | None] = {}

    def start(self) -> None:
        if not _hooked:  # an audit hook stays for good: one per process
            sys.addaudithook(_module_run)
            _hooked.append(True)
        _ACTIVE.append(self)
        if how() != MONITORING:
            return
        monitoring: Any = getattr(sys, "monitoring")  # noqa: B009  (3.12+; typed for 3.10)
        self.claim = monitoring.use_tool_id
        if self._claimed(monitoring):
            monitoring.use_tool_id = self._use_tool_id

    def _claimed(self, monitoring: Any, taken: int | None = None) -> bool:
        """Take a free tool id and start seeing code start; False when every
        id this recorder may use is taken (the record is then by modules)."""
        free = [t for t in _FREE_IDS if t != taken and monitoring.get_tool(t) is None]
        tool = free[0] if free else None
        if tool is None:
            return False
        self.claim(tool, _NAME)
        codes = self.codes
        disable = monitoring.DISABLE

        def started(code: CodeType, offset: int) -> object:
            codes.add(code)
            return disable

        monitoring.register_callback(tool, monitoring.events.PY_START, started)
        monitoring.set_events(tool, monitoring.events.PY_START)
        self.tool = tool
        return True

    def _use_tool_id(self, tool_id: int, name: str, /) -> None:
        """``sys.monitoring.use_tool_id`` while recording: a test (or a tool
        it starts) that claims this recorder's id gets it, as in a run without
        the recorder; the recorder moves to another id, or, with none left,
        stops, and its record is lost (:attr:`lost`)."""
        if tool_id == self.tool:
            self._release()
            monitoring: Any = getattr(sys, "monitoring")  # noqa: B009
            self.lost = not self._claimed(monitoring, taken=tool_id)
        self.claim(tool_id, name)

    def _release(self) -> None:
        if self.tool is not None:
            monitoring: Any = getattr(sys, "monitoring")  # noqa: B009
            monitoring.set_events(self.tool, 0)
            monitoring.register_callback(self.tool, monitoring.events.PY_START, None)
            monitoring.free_tool_id(self.tool)
            self.tool = None

    def restart(self) -> dict[str, Any]:
        """What ran since the start or the last restart; from now on each
        code object is seen again at its next start."""
        taken = self._taken()
        self.codes.clear()
        self.loaded.clear()
        if self.tool is not None:
            getattr(sys, "monitoring").restart_events()  # noqa: B009
        return taken

    def take(self) -> dict[str, Any]:
        """Stop, and return what ran: ``{"how", "lines": {file: [first
        lines]}, "modules": [files]}``, absolute paths of project files."""
        taken = self._taken()
        self._release()
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        if self.claim is not None:
            getattr(sys, "monitoring").use_tool_id = self.claim  # noqa: B009
            self.claim = None
        self.codes = set()
        return taken

    def _taken(self) -> dict[str, Any]:
        lines: dict[str, set[int]] = {}
        for code in list(self.codes):
            path = self._project_file(code.co_filename)
            if path is not None:
                lines.setdefault(path, set()).add(code.co_firstlineno)
        return {
            "how": MONITORING if self.tool is not None else MODULES,
            "lines": {path: sorted(found) for path, found in sorted(lines.items())},
            "modules": sorted(
                self._ours_loaded(list(sys.modules.values()))
                | {p for path in self.loaded if (p := self._project_file(path))}
            ),
        }

    def _project_file(self, path: str) -> str | None:
        """The project source file ``path`` is: itself under the root, or,
        for a copy of the project installed into site-packages (a
        non-editable install, as tox makes), the project's file of the same
        package path (``src/pkg/mod.py`` for ``site-packages/pkg/mod.py``)."""
        if path in self.mapped:
            return self.mapped[path]
        found: str | None = None
        installed = path.startswith(self.outside) or any(
            part in _INSTALLED for part in path.split(os.sep)
        )
        if not path.endswith(".py"):
            pass
        elif not installed:
            found = path if path.startswith(self.roots) else None
        else:
            for library in self.installed:
                if path.startswith(library):
                    inside = path[len(library) :]
                    base = self._base_of(inside.split(os.sep, 1)[0])
                    candidate = None if base is None else os.path.join(base, inside)
                    if candidate is not None and os.path.isfile(candidate):
                        found = candidate
                    break
        self.mapped[path] = found
        return found

    def _base_of(self, top: str) -> str | None:
        """Where the project keeps the top-level package or module ``top``:
        the root or its ``src``/``lib`` directory; None when it does not."""
        if top not in self.bases:
            self.bases[top] = next(
                (
                    base
                    for base in (os.path.join(self.root, d) for d in _SOURCE_DIRS)
                    if os.path.exists(os.path.join(base, top))
                ),
                None,
            )
        return self.bases[top]

    def _ours_loaded(self, modules: Iterable[object]) -> set[str]:
        found = set()
        for module in modules:
            try:  # a test may have put anything into sys.modules (a Mock)
                path = module.__dict__.get("__file__")
            except Exception:
                continue
            ours = self._project_file(path) if isinstance(path, str) else None
            if ours is not None:
                found.add(ours)
        return found
