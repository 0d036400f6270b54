"""What a test file's process executed, for the selector's ``recorded`` scope.

On Python 3.12+ a ``sys.monitoring`` tool (PEP 669) sees each code object
start once: its callback keeps the code object and disables the event at
that place, so the code runs at full speed from its second call on.  What
is kept is, per project file, the first line of each code object that ran;
the parent maps lines to functions (:mod:`pytest_isolation.ci.sourcefacts`).

The event is set on the project's code objects only
(``set_local_events``): a global event makes CPython rewrite every code
object the process runs (pytest's and the standard library's too), and in a
forked child each rewrite copies a page it shares with its parent.  The
project's code objects are known from the moment :func:`watch` is first
called (from the entry plugin, before the first conftest): the functions
the garbage collector finds then, and, through the audit hook, the body of
each project module imported after, whose code holds every code object the
module defines.  A forked child inherits that list.

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

import gc
import os
import sys
import sysconfig
from collections.abc import Iterable
from collections.abc import Iterator
from types import CodeType
from types import FunctionType
from typing import Any
from typing import ClassVar

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


#: The recorders that record (the last one sees new code), see :meth:`Recorder.start`.
_ACTIVE: list[Recorder] = []


class _Known:
    """The project's code objects this process knows: module-level, so a
    forked child inherits them (see :func:`watch`)."""

    files: ClassVar[ProjectFiles | None] = None
    #: Code objects of the project: functions found when watching started,
    #: and the body of each project module imported since.
    codes: ClassVar[list[CodeType]] = []


def _module_run(event: str, args: tuple[Any, ...]) -> None:
    """An audit hook: a body of code run by ``exec`` (every import does that).
    A project module's body is kept (its code holds each code object the
    module defines), and the recorder that records starts watching it before
    it runs.  The module may be taken out of ``sys.modules`` again before the
    record is taken (the leak guard puts back a module first imported by a test)."""
    if event != "exec" or _Known.files is None:
        return
    code = args[0]
    if not isinstance(code, CodeType) or _Known.files.of(code.co_filename) is None:
        return
    _Known.codes.append(code)
    if _ACTIVE:
        recorder = _ACTIVE[-1]
        if code.co_name == "<module>":
            recorder.loaded.add(code.co_filename)
        recorder.watch_code(code)


_hooked: list[bool] = []


def watch(root: str) -> None:
    """From now on, know the project's code objects in this process (and the
    processes it forks): the project functions defined so far, found by the
    garbage collector, and each project module imported from now on."""
    if _Known.files is not None and _Known.files.root == root:
        return  # a forked child: what its parent knew, without touching the whole heap
    _Known.files = files = ProjectFiles(root)
    if not _hooked:  # an audit hook stays for good: one per process
        sys.addaudithook(_module_run)
        _hooked.append(True)
    _Known.codes = []
    if how() == MONITORING:  # 3.10/3.11 record modules only: no code objects needed
        _Known.codes = [
            found.__code__
            for found in gc.get_objects()
            if isinstance(found, FunctionType) and files.of(found.__code__.co_filename) is not None
        ]


def unwatch() -> None:
    """This process makes no record: keep no code objects (the audit hook
    stays, doing nothing)."""
    _Known.files = None
    _Known.codes = []


def _nested(codes: Iterable[CodeType]) -> Iterator[CodeType]:
    """``codes`` and every code object defined inside them, each once."""
    seen: set[int] = set()
    todo = list(codes)
    while todo:
        code = todo.pop()
        if id(code) in seen:
            continue
        seen.add(id(code))
        yield code
        todo.extend(const for const in code.co_consts if isinstance(const, CodeType))


def how() -> str:
    """How this interpreter records: with ``sys.monitoring`` or by modules."""
    return MONITORING if sys.version_info >= (3, 12) else MODULES


class ProjectFiles:
    """Which files are the project's under ``root``: a file under it (not in
    the standard library or site-packages), or an installed copy of one."""

    def __init__(self, root: str) -> None:
        self.roots = tuple({os.path.join(p, "") for p in (root, os.path.realpath(root))})
        #: The standard library and installed code: never the project's.
        libraries = ("stdlib", "platstdlib", "purelib", "platlib")
        paths = sysconfig.get_paths()
        self.outside = tuple({os.path.join(paths[name], "") for name in libraries})
        #: Where installed distributions are (a copy of the project may be one).
        self.installed = tuple({os.path.join(paths[name], "") for name in ("purelib", "platlib")})
        self.root = root
        self.mapped: dict[str, str | None] = {}
        self.bases: dict[str, str | None] = {}

    def of(self, path: str) -> str | None:
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

    def loaded(self, modules: Iterable[object]) -> set[str]:
        found = set()
        for module in modules:
            try:  # a test may have put anything into sys.modules (a Mock)
                path = module.__dict__.get("__file__")
            except Exception:
                continue
            ours = self.of(path) if isinstance(path, str) else None
            if ours is not None:
                found.add(ours)
        return found


class Recorder:
    """Sees which code of the project under ``root`` runs, from :meth:`start`
    to :meth:`take`; :meth:`restart` starts a new span in the same process
    (a plain run's next file)."""

    def __init__(self, root: str) -> None:
        watch(root)
        assert _Known.files is not None
        self.files = _Known.files
        self.codes: set[CodeType] = set()
        self.tool: int | None = None
        #: The code objects this recorder set its event on (cleared again on release).
        self.watched: list[CodeType] = []
        #: Files of the module bodies run since the start (:func:`_module_run`).
        self.loaded: set[str] = set()
        #: ``sys.monitoring.use_tool_id`` as it was, while this recorder stands in for it.
        self.claim: Any = None
        #: A test took every id this recorder may use: what it saw is incomplete.
        self.lost = False

    def start(self) -> None:
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
        self.tool = tool
        self.watched = []
        for code in _nested(_Known.codes):
            self._watch(monitoring, code)
        return True

    def watch_code(self, code: CodeType) -> None:
        """See the code objects of ``code`` (a project module about to run) start."""
        if self.tool is not None:
            monitoring: Any = getattr(sys, "monitoring")  # noqa: B009
            for each in _nested([code]):
                self._watch(monitoring, each)

    def _watch(self, monitoring: Any, code: CodeType) -> None:
        monitoring.set_local_events(self.tool, code, monitoring.events.PY_START)
        self.watched.append(code)

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
            for code in self.watched:  # a tool that takes the id later sees none of them
                monitoring.set_local_events(self.tool, code, 0)
            self.watched = []
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
            path = self.files.of(code.co_filename)
            if path is not None:
                lines.setdefault(path, set()).add(code.co_firstlineno)
        return {
            "how": MONITORING if self.tool is not None else MODULES,
            "lines": {path: sorted(found) for path, found in sorted(lines.items())},
            "modules": sorted(
                self.files.loaded(list(sys.modules.values()))
                | {p for path in self.loaded if (p := self.files.of(path))}
            ),
        }
