"""Where a leak was made: the first frame outside libraries, as ``file:line``.

Environment writes and ``chdir`` raise audit events
(PEP 578), so one audit hook records their sites while a window is open;
``mock`` patches record the site of ``start()`` themselves (see
:mod:`pytest_isolation.guard.mocks`).  An audit hook cannot be removed, so it
is installed once per process and does nothing but a set lookup while no
guard listens.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_isolation.core import pytest_private

#: Audit events whose site is worth recording.
ENV_EVENTS = frozenset({"os.putenv", "os.unsetenv"})
CWD_EVENTS = frozenset({"os.chdir", "os.fchdir"})
PROCESS_EVENTS = frozenset(
    {"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.startfile"}
)
_EVENTS = ENV_EVENTS | CWD_EVENTS | PROCESS_EVENTS

_MONKEYPATCH_FILE = pytest_private.MONKEYPATCH_FILE
#: Marks a site reached through ``pytest.MonkeyPatch`` (which undoes its own
#: changes, so a leak made through one means it was never undone).
BY_MONKEYPATCH = " [MonkeyPatch]"

Listener = Callable[[str, tuple[Any, ...]], None]
_listener: Listener | None = None
_installed = False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event in _EVENTS and _listener is not None:
        _listener(event, args)


def listen(listener: Listener | None) -> Listener | None:
    """Send the watched audit events to ``listener`` (``None`` stops); returns
    the previous listener, to put back (an in-process inner run nests)."""
    global _listener, _installed
    if not _installed and listener is not None:
        sys.addaudithook(_audit)
        _installed = True
    previous, _listener = _listener, listener
    return previous


def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {
        paths[name] for name in ("stdlib", "platstdlib", "purelib", "platlib") if name in paths
    }
    roots.add(str(Path(__file__).resolve().parent.parent))  # this plugin
    for module in ("pytest", pytest_private.PYTEST_PACKAGE, "pluggy"):
        spec_file = getattr(sys.modules.get(module), "__file__", None)
        if spec_file:
            roots.add(str(Path(spec_file).resolve().parent))
    # As given and resolved: frames name files by either path.
    both = roots | {os.path.realpath(root) for root in roots}
    return tuple(sorted(os.path.join(os.path.normpath(root), "") for root in both))


#: Folders of a rootdir that hold tests or documents, never the project's code.
_NOT_CODE = frozenset({"tests", "test", "testing", "docs", "doc", "examples", "benchmarks"})


def installed_copies(rootdir: Path) -> tuple[str, ...]:
    """Where an installed copy of the project's own code would live: for each
    top-level package or module of the rootdir (``pkg/__init__.py``,
    ``src/pkg/__init__.py``, ``mod.py``), its path in site-packages.  A suite
    run by tox, nox or a CI job that ran ``pip install .`` imports that copy,
    not the tree: it is the project's code all the same."""
    names: set[str] = set()
    for folder in (rootdir, rootdir / "src"):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            name, dot, suffix = entry.name.partition(".")
            if entry.is_dir() and not dot and name not in _NOT_CODE and name.isidentifier():
                # Under src/ every folder is code (a namespace package too).
                if folder != rootdir or os.path.exists(os.path.join(entry.path, "__init__.py")):
                    names.add(os.path.join(name, ""))
            elif suffix == "py" and name.isidentifier() and name != "conftest":
                names.add(entry.name)
    paths = sysconfig.get_paths()
    sites = {paths[key] for key in ("purelib", "platlib") if key in paths}
    sites |= {os.path.realpath(site) for site in sites}
    return tuple(
        sorted(os.path.join(os.path.normpath(site), name) for site in sites for name in names)
    )


class Sites:
    """Turns frames into ``file:line`` relative to the rootdir.

    Only string operations run while a test runs (no ``os.path.realpath``
    or ``Path.resolve``): sites are looked up inside the test's own code,
    such as an event loop that blockbuster forbids blocking calls in.
    """

    def __init__(self, rootdir: Path) -> None:
        self.rootdir = rootdir
        self.roots = _library_roots()
        #: The project's own code installed in site-packages: not a library.
        self.installed = installed_copies(rootdir)
        self._root = os.path.join(os.path.normpath(str(rootdir)), "")
        self._is_library: dict[str, bool] = {}

    def library(self, filename: str) -> bool:
        known = self._is_library.get(filename)
        if known is None:
            # Code made at run time (``<string>``) is a library's, except a
            # doctest's examples (``<doctest mod.f[1]>``): those are tests.
            generated = filename.startswith("<") and not filename.startswith("<doctest ")
            normal = os.path.normpath(filename)
            known = generated or (
                normal.startswith(self.roots) and not normal.startswith(self.installed)
            )
            self._is_library[filename] = known
        return known

    def caller(self, depth: int = 1) -> str | None:
        """The first frame outside the stdlib, site-packages, pytest and this plugin."""
        return self.locate(depth + 1)[0]

    def locate(self, depth: int = 1) -> tuple[str | None, bool]:
        """In one walk up the stack: the caller's site (see :meth:`caller`),
        and whether it runs inside a library module's import, a ``<module>``
        frame among the library frames before that site.  What a library's
        import sets (forbiddenfruit replaces ``builtins.dir``) is import-time
        state, even when a test's fixture triggered the import; its site is
        then ``None``."""
        frame: types.FrameType | None = sys._getframe(depth + 1)
        through_monkeypatch = False
        while frame is not None:
            filename = frame.f_code.co_filename
            if not self.library(filename):
                site = f"{self.relative(filename)}:{frame.f_lineno}"
                return (site + BY_MONKEYPATCH if through_monkeypatch else site), False
            if frame.f_code.co_name == "<module>" and not filename.startswith("<"):
                return None, True
            through_monkeypatch = through_monkeypatch or filename.endswith(_MONKEYPATCH_FILE)
            frame = frame.f_back
        return None, False

    def relative(self, filename: str) -> str:
        normal = os.path.normpath(filename)
        return normal[len(self._root) :] if normal.startswith(self._root) else filename

    def defined(self, value: object) -> str | None:
        """Where a function or class was defined."""
        code = getattr(value, "__code__", None)
        if isinstance(code, types.CodeType):
            return f"{self.relative(code.co_filename)}:{code.co_firstlineno}"
        module = sys.modules.get(getattr(value, "__module__", "") or "")
        filename = getattr(module, "__file__", None)
        if isinstance(value, type) and filename:
            return self.relative(filename)
        return None
