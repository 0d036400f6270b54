"""What a test file's process executed, for the selector's ``recorded`` scope.

On Python 3.12+ a ``sys.monitoring`` tool (PEP 669) sees each code object
start once: its callback keeps the code object and disables the event at
that place, so the code runs at full speed from its second call on.  What
is kept is, per project file, the first line of each code object that ran;
the parent maps lines to functions (:mod:`pytest_isolation.record.sourcefacts`).

The event is set on the project's code objects only
(``set_local_events``): a global event makes CPython rewrite every code
object the process runs (pytest's and the standard library's too), and in a
forked child each rewrite copies a page it shares with its parent.  The
project's code objects are known from the moment :func:`watch` is first
called (from the entry plugin, before the first conftest): the functions
the garbage collector finds then, and, through the audit hook, the body of
each project module imported after, whose code holds every code object the
module defines.  A forked child inherits that list, and the events too:
the parent sets them once, before its first fork, and hands its tool id on
(:meth:`Recorder.hand_over`); a child's recorder only registers its
callback, and, as the process ends right after, leaves what it disabled
(:meth:`Recorder.finish`).

On 3.10/3.11 there is no such cheap hook (a profile or trace function slows
every call, and coverage.py owns the trace slot), so a record there holds
the project modules the process had loaded: every function of each counts
as run.  That is a superset of what ran (never a test missed), coarser.

Either way the record also lists the project modules loaded (when watching
started, or since): their module-level code (constants, imports, class
bodies) ran at import, possibly in the parent a forked child came from.

Imports: stdlib only (the child side stays light).
"""

from __future__ import annotations

import contextlib
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
#: This plugin's own code: never the project's hooks, even in its own repository.
_PLUGIN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "")


class _Known:
    """The project's code objects this process knows: module-level, so a
    forked child inherits them (see :func:`watch`)."""

    files: ClassVar[ProjectFiles | None] = None
    #: Code objects of the project: functions found when watching started,
    #: and the body of each project module imported since.
    codes: ClassVar[list[CodeType]] = []
    #: The project's module files loaded when watching started, and each
    #: whose module code ran since (a module a test imports and the leak
    #: guard takes out of ``sys.modules`` again counts too).  Kept as it goes,
    #: so that a record does not read every module of ``sys.modules``: in a
    #: forked child that copies the pages of each module its parent loaded.
    loaded: ClassVar[set[str]] = set()


class _Tool:
    """The ``sys.monitoring`` tool id this process records with, and the
    project's code objects that carry its ``PY_START`` event.

    Module-level, so that a forked child inherits both: the parent sets the
    event on every code object it knows once, before its first fork (see
    :meth:`Recorder.hand_over`), and a recorder in the child only registers
    its callback.  Setting the event rewrites a code object, which in a
    forked child copies every page the code shares with its parent: done in
    each child, that was about 1,500 page faults per test file."""

    id: ClassVar[int | None] = None
    #: The code objects carrying the event (cleared when the id is given back).
    armed: ClassVar[list[CodeType]] = []
    #: How many of ``_Known.codes`` (with the code each defines) are armed.
    covered: ClassVar[int] = 0
    #: The recorder whose callback sees the events; None while the id is
    #: held between recorders (no callback: an event then does nothing).
    owner: ClassVar[Recorder | None] = None
    #: A recorder ended without setting again the events it disabled
    #: (:meth:`Recorder.finish`): the next one starts over.
    spent: ClassVar[bool] = False
    #: ``sys.monitoring.use_tool_id`` as it was, while the id is held.
    claim: ClassVar[Any] = None


def _monitoring() -> Any:
    return getattr(sys, "monitoring")  # noqa: B009  (3.12+; typed for 3.10)


def _module_run(event: str, args: tuple[Any, ...]) -> None:
    """An audit hook: a body of code run by ``exec`` (every import does that).
    A project module's body is kept (its code holds each code object the
    module defines), and carries the event before it runs."""
    if event != "exec" or _Known.files is None:
        return
    code = args[0]
    path = _Known.files.of(code.co_filename) if isinstance(code, CodeType) else None
    if path is None:
        return
    _Known.codes.append(code)
    if code.co_name == "<module>":
        _Known.loaded.add(path)
    if _Tool.id is not None and not _Tool.spent:
        _arm_known()


def _hold(taken: int | None = None) -> bool:
    """Take a free tool id (not ``taken``) and set its event on every known
    code object; False when every id this module may use is taken."""
    monitoring = _monitoring()
    free = [t for t in _FREE_IDS if t != taken and monitoring.get_tool(t) is None]
    if not free:
        return False
    if _Tool.claim is None:
        _Tool.claim = monitoring.use_tool_id
        monitoring.use_tool_id = _use_tool_id
    _Tool.claim(free[0], _NAME)
    _Tool.id = free[0]
    _Tool.armed = []
    _Tool.covered = 0
    _Tool.spent = False
    _arm_known()
    return True


def _arm_known() -> None:
    """Set the event on the known code objects not armed yet."""
    fresh = _nested(_Known.codes[_Tool.covered :])
    _Tool.covered = len(_Known.codes)
    monitoring = _monitoring()
    arm, tool, event = monitoring.set_local_events, _Tool.id, monitoring.events.PY_START
    for code in fresh:
        arm(tool, code, event)
    _Tool.armed.extend(fresh)


def _give_back() -> None:
    """Give the id back, with no code object carrying its event, and put
    ``use_tool_id`` back."""
    if _Tool.id is not None:
        monitoring = _monitoring()
        for code in _Tool.armed:  # a tool that takes the id later sees none of them
            monitoring.set_local_events(_Tool.id, code, 0)
        monitoring.register_callback(_Tool.id, monitoring.events.PY_START, None)
        monitoring.free_tool_id(_Tool.id)
    _Tool.id = None
    _Tool.armed = []
    _Tool.covered = 0
    _Tool.owner = None
    _Tool.spent = False
    if _Tool.claim is not None:
        _monitoring().use_tool_id = _Tool.claim
        _Tool.claim = None


def _use_tool_id(tool_id: int, name: str, /) -> None:
    """``sys.monitoring.use_tool_id`` while this process holds an id: a test
    (or a tool it starts) that claims that id gets it, as in a run without
    the recorder; the recorder moves to another id, or, with none left,
    stops, and its record is lost (:attr:`Recorder.lost`)."""
    claim = _Tool.claim
    if tool_id == _Tool.id:
        owner = _Tool.owner
        _give_back()
        if owner is not None:
            owner.lost = not owner.watching(taken=tool_id)
    claim(tool_id, name)


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
    _Known.loaded = files.loaded(list(sys.modules.values()))
    if how() == MONITORING:  # 3.10/3.11 record modules only: no code objects needed
        _Known.codes = [
            found.__code__
            for found in gc.get_objects()
            if isinstance(found, FunctionType) and files.of(found.__code__.co_filename) is not None
        ]
        if _Tool.id is not None:  # held for another root: starts over
            _give_back()


def unwatch() -> None:
    """This process makes no record: keep no code objects and no tool id
    (the audit hook stays, doing nothing)."""
    _Known.files = None
    _Known.codes = []
    _Known.loaded = set()
    if _Tool.id is not None and _Tool.owner is None:
        _give_back()


def _nested(codes: Iterable[CodeType]) -> list[CodeType]:
    """``codes`` and every code object defined inside them, each once (this
    runs for every module a file's process imports: kept lean)."""
    found = list(codes)
    for code in found:  # the list grows as it goes: each one's own code objects in turn
        found.extend([const for const in code.co_consts if type(const) is CodeType])
    return list({id(code): code for code in found}.values())


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
    to :meth:`take` (or :meth:`hand_over`, :meth:`finish`); :meth:`restart`
    starts a new span in the same process (a plain run's next file),
    :meth:`so_far` reads what ran without stopping, and what runs within
    :meth:`left_out` is not counted.  One recorder watches at a time."""

    def __init__(self, root: str) -> None:
        watch(root)
        assert _Known.files is not None
        self.files = _Known.files
        self.codes: set[CodeType] = set()
        #: A test took every id this recorder may use (or another recorder
        #: watches): what it saw is incomplete.
        self.lost = False

    @property
    def tool(self) -> int | None:
        """The tool id this recorder watches with, if it does."""
        return _Tool.id if _Tool.owner is self else None

    def start(self) -> None:
        if how() == MONITORING:
            self.lost = not self.watching()

    def watching(self, taken: int | None = None) -> bool:
        """Watch with the id this process holds (its events already set, by
        the parent of a forked child), or with a free one (not ``taken``);
        False when there is none."""
        if _Tool.owner is not None and _Tool.owner is not self:
            return False
        if _Tool.spent:
            _give_back()
        if _Tool.id is None and not _hold(taken):
            return False
        _arm_known()
        monitoring = _monitoring()
        codes = self.codes
        disable = monitoring.DISABLE

        def started(code: CodeType, offset: int) -> object:
            codes.add(code)
            return disable

        monitoring.register_callback(_Tool.id, monitoring.events.PY_START, started)
        _Tool.owner = self
        return True

    def _rearm(self, codes: Iterable[CodeType]) -> None:
        """Set the event again on each of ``codes`` (its callback disabled
        the event there)."""
        monitoring = _monitoring()
        for code in codes:
            monitoring.set_local_events(_Tool.id, code, 0)
            monitoring.set_local_events(_Tool.id, code, monitoring.events.PY_START)

    def so_far(self) -> dict[str, Any]:
        """What ran since the start (as :meth:`take`), watching on."""
        return self._taken()

    @contextlib.contextmanager
    def left_out(self) -> Iterator[None]:
        """What runs inside is not this recorder's: each code object first
        seen there is forgotten, and seen again at its next start."""
        before = set(self.codes)
        try:
            yield
        finally:
            fresh = self.codes - before
            self.codes -= fresh  # in place: the callback holds this set
            if self.tool is not None:
                self._rearm(fresh)

    def owns(self, function: object) -> bool:
        """Whether ``function`` (a hook implementation) is the project's own
        code: a conftest's, or a plugin of the project's (not this plugin's)."""
        code = getattr(function, "__code__", None)
        if not isinstance(code, CodeType) or code.co_filename.startswith(_PLUGIN):
            return False
        return self.files.of(code.co_filename) is not None

    def restart(self) -> dict[str, Any]:
        """What ran since the start or the last restart; from now on each
        code object is seen again at its next start."""
        taken = self._taken()
        if self.tool is not None:
            self._rearm(self.codes)
        self.codes.clear()
        return taken

    def take(self) -> dict[str, Any]:
        """Stop, give the tool id back, and return what ran: ``{"how",
        "lines": {file: [first lines]}, "modules": [files]}``, absolute paths
        of project files."""
        taken = self._stop()
        if _Tool.owner is None:
            _give_back()
        return taken

    def hand_over(self) -> dict[str, Any]:
        """Stop, and return what ran (as :meth:`take`), keeping the tool id
        with its events set, again, on what ran: the next recorder of this
        process, or of a child it forks, watches without setting any."""
        if self.tool is not None:
            self._rearm(self.codes)
        return self._stop()

    def finish(self) -> dict[str, Any]:
        """Stop, and return what ran (as :meth:`take`), for a process about
        to end: the events it disabled stay so, and the id stays held until
        the process ends or something claims it."""
        spent = self.tool is not None
        taken = self._stop()
        _Tool.spent = _Tool.spent or spent
        return taken

    def _stop(self) -> dict[str, Any]:
        taken = self._taken()
        if self.tool is not None:
            monitoring = _monitoring()
            monitoring.register_callback(_Tool.id, monitoring.events.PY_START, None)
            _Tool.owner = None
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
            "modules": sorted(_Known.loaded),
        }
