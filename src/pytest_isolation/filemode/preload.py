"""Preloading: the fork server imports what the test files import.

Without it every file's child imports its project and third-party modules
again (rich and pygments take 0.2 s cold).  With it the fork server imports
them once, before the first child, and each child starts with them loaded,
from a state no test has touched; the child still imports its own test
module.

Two things keep this from changing an outcome:

* **Which files, which modules.**  :func:`plan` reads each test file's
  syntax tree.  The server preloads a list of modules that every file
  starting from it imports first, at its top, in that order, so a child
  holds nothing its file would not have loaded before its first test, and
  loaded in the order its file loads them.  An import inside ``if`` or
  ``try`` (``if TYPE_CHECKING:``, ``try: import a / except ImportError:
  import b``) may not run, so the list stops before it.  A file whose
  imports do not begin with the list, whose module-level code runs before
  its imports, or that touches the import system (``sys.modules``,
  ``sys.path``, ``importlib.reload``...) gets its child from a server
  without preloads.

Preloading is opt-in (``--isolation-preload=auto``): what a preloaded
module makes at import (a temporary directory, the pid, a lock, a random
seed, a connection) is one object that every file's child shares, where a
fresh ``pytest FILE`` makes its own; nothing observable at import tells
that apart for certain, so the header says so when preloading is on.
* **Which imports.**  :func:`load` imports the modules in the server one by
  one and stops at the first whose import fails, warns, starts a thread or
  changes state outside its own package (a module that existed before, the
  environment, the working directory, signal handlers, warning filters,
  logging...).  The parent then starts a new server without that module
  (:class:`Attempts`): a server in which a refused import ran is never used.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import importlib
import io
import logging
import os
import signal
import socket
import sys
import threading
import types
import warnings
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_isolation.core import pysource
from pytest_isolation.filemode import purity

#: The ``sys`` attributes through which a file can change what an import finds.
_IMPORT_SYSTEM = {"modules", "path", "meta_path", "path_hooks", "path_importer_cache"}
#: Modules whose public state any import changes: ``sys`` (its import-system
#: state is compared on its own), ``__main__``, ``linecache``, where
#: generated code (attrs, dataclasses) registers its source, and coverage.py,
#: which measures the imports.
_VOLATILE = {"sys", "__main__", "linecache"}
_VOLATILE_PACKAGES = ("coverage.",)
#: Calls that import, or re-import, a module by a computed name.
_IMPORT_CALLS = {"reload", "import_module", "__import__", "invalidate_caches", "syspath_prepend"}


@dataclasses.dataclass
class FileImports:
    """What one test file imports at module level."""

    top: list[str] = dataclasses.field(default_factory=list)
    #: Why the file must start from a server without preloads, or None.
    reason: str | None = None


def read_file(path: Path) -> FileImports:
    """The imports of one test file, read from its syntax tree."""
    if path.suffix != ".py":
        return FileImports(reason="a plugin collects it: what its code imports is not known")
    try:
        tree = pysource.parse(path.read_bytes(), str(path))
    except OSError:
        tree = None
    if tree is None:
        return FileImports(reason="its source cannot be read or parsed here")
    found = FileImports()
    code_line = 0
    for index, statement in enumerate(tree.body):
        names = _import_statement(statement)
        if names is None:
            if not (index == 0 and _is_docstring(statement)) and not code_line:
                code_line = statement.lineno
            continue
        if code_line and found.reason is None:
            found.reason = (
                f"module-level code on line {code_line} runs before an import "
                f"(line {statement.lineno})"
            )
        found.top.extend(names)
    for node in ast.walk(tree):
        touched = _touches_import_system(node)
        if touched and found.reason is None:
            found.reason = f"it touches the import system ({touched}, line {node.lineno})"  # type: ignore[attr-defined]
    return found


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def _import_statement(statement: ast.stmt) -> list[str] | None:
    """The modules a module-level statement imports, or None if it is not an
    import: ``import``, ``from ... import``, ``pytest.importorskip("x")``, and
    ``try``/``if`` blocks of those (with ``pass``, ``raise`` or plain assignments
    as the fallback).  Such a block may not run all it holds: it is one
    :func:`conditional` entry, never preloaded, and nothing after it is."""
    names = _imported(statement)
    if names:
        return names
    if isinstance(statement, (ast.Import, ast.ImportFrom)):  # relative or __future__
        return []
    if isinstance(statement, (ast.Try, ast.If)) or type(statement).__name__ == "TryStar":
        blocks: list[list[ast.stmt]] = [statement.body, statement.orelse]  # type: ignore[attr-defined]
        blocks += [handler.body for handler in getattr(statement, "handlers", ())]
        blocks.append(getattr(statement, "finalbody", []))
        imports = False
        for block in blocks:
            for inner in block:
                if _import_statement(inner) is not None:
                    imports = True
                elif not _is_fallback(inner):
                    return None
        return [conditional(statement.lineno)] if imports else None
    return None


def conditional(line: int) -> str:
    """The entry for imports inside an ``if`` or ``try`` block: not a module name."""
    return f"<the imports inside the if or try block on line {line}>"


def _is_fallback(statement: ast.stmt) -> bool:
    """``pass``, ``raise``, or a name bound to a constant or another name
    (``np = None``): what an import's fallback does, and nothing else."""
    if isinstance(statement, (ast.Pass, ast.Raise)):
        return True
    if isinstance(statement, (ast.Assign, ast.AnnAssign)):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        value = statement.value
        return all(isinstance(target, ast.Name) for target in targets) and (
            value is None or isinstance(value, (ast.Constant, ast.Name, ast.Attribute))
        )
    return False


def _imported(node: ast.AST) -> list[str]:
    """The absolute modules one node imports (relative imports name the test
    package itself, never preloaded)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level or not node.module or node.module == "__future__":
            return []
        return [node.module]
    if isinstance(node, (ast.Expr, ast.Assign)) and isinstance(node.value, ast.Call):
        call = node.value
        name = call.func.attr if isinstance(call.func, ast.Attribute) else ""
        if name == "importorskip" and call.args and isinstance(call.args[0], ast.Constant):
            return [str(call.args[0].value)]
    return []


def _touches_import_system(node: ast.AST) -> str:
    if (
        isinstance(node, ast.Attribute)
        and node.attr in _IMPORT_SYSTEM
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    ):
        return f"sys.{node.attr}"
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in _IMPORT_CALLS:
            return f"{name}()"
    if isinstance(node, ast.Constant) and node.value in ("sys.modules", "sys.path"):
        return repr(node.value)
    return ""


def _is_test_module(name: str, tests: set[str]) -> bool:
    """``name`` is a test module, or a module inside one (never preloaded)."""
    return name in tests or any(name.startswith(test + ".") for test in tests)


#: At most this many preloading fork servers in a run (each is a process,
#: and each imports its modules once).
MOST_SERVERS = 6
#: A server preloads for at least this many files: one file would import its
#: modules once either way.
LEAST_FILES = 2

Start = tuple[str, ...]


@dataclasses.dataclass
class Plan:
    """Which modules the fork servers preload, and which file starts from which."""

    #: Test file -> the modules its child starts with loaded: a start of its
    #: sequence, in its order (``()``: from the server without preloads).
    starts: dict[Path, Start]
    #: Test file -> why it starts from a server without preloads.
    kept_out: dict[Path, str]
    #: Test file -> the modules its imports at its top load, in order,
    #: without those loaded already (see :func:`plan`).
    imports: dict[Path, list[str]] = dataclasses.field(default_factory=dict)

    @property
    def servers(self) -> list[Start]:
        """The preloading servers the files need, in the order of their first file."""
        return list(dict.fromkeys(start for start in self.starts.values() if start))

    def narrow(self, planned: Start, loaded: Start) -> None:
        """The server planned with ``planned`` preloads ``loaded`` (a start of
        it) only: the rest was refused."""
        for path, start in self.starts.items():
            if start == planned:
                self.starts[path] = loaded

    def refuse(self, module: str) -> None:
        """No server preloads ``module``, nor what a file imports after it."""
        for path, start in self.starts.items():
            if module in start:
                self.starts[path] = start[: start.index(module)]

    def why_not(self, path: Path) -> str:
        """Why ``path``'s child starts without preloads ("": it does not)."""
        if path in self.kept_out:
            return self.kept_out[path]
        if self.starts.get(path):
            return ""
        sequence = self.imports.get(path, [])
        if not sequence:
            return "it imports nothing that the parent has not loaded"
        return f"no server preloads its first import, {sequence[0]}"


def plan(
    files: Sequence[Path],
    loaded: Iterable[str],
    local: set[str],
    tests: set[str],
    most: int = MOST_SERVERS,
) -> Plan:
    """Which modules to preload for ``files`` (in run order), and for which files.

    The modules each file's imports at its top load, in order (a package
    before its modules), once each, without the modules the parent has
    loaded already (``loaded``), make its sequence.  A sequence is cut
    before the first import that must not be preloaded: an ``if`` or ``try``
    block of imports, a module of a test file's own directory (``local``:
    its child finds it there, a server might find another of the same name)
    or a test module (``tests``).

    Each server preloads a start of some files' sequences, and a file's
    child comes from the server with the longest start of its own sequence:
    so a child holds no module its file would not have loaded before its
    first test, loaded in the order its file would load it.  The starts are
    the longest that :data:`LEAST_FILES` files share; while there are more
    than ``most``, the one the fewest files share gives way to its own start
    one module shorter.
    """
    already = set(loaded)
    read = {path: read_file(path) for path in files}
    kept_out = {path: found.reason for path, found in read.items() if found.reason is not None}
    sequences = {
        path: [name for name in _loading_order(found.top) if name not in already]
        for path, found in read.items()
        if path not in kept_out
    }
    usable = {path: _preloadable(sequence, local, tests) for path, sequence in sequences.items()}
    shared: dict[Start, int] = {}
    for start in usable.values():
        for end in range(1, len(start) + 1):
            shared[start[:end]] = shared.get(start[:end], 0) + 1
    chosen = {_longest(start, shared) for start in usable.values()} - {()}
    while len(chosen) > most:
        fewest = min(chosen, key=lambda start: (shared[start], -len(start)))
        chosen.remove(fewest)
        if len(fewest) > 1:
            chosen.add(fewest[:-1])
    starts = {path: _longest(start, shared, chosen) for path, start in usable.items()}
    return Plan(starts, kept_out, sequences)


def _preloadable(sequence: Sequence[str], local: set[str], tests: set[str]) -> Start:
    """The start of ``sequence`` a server may preload."""
    for end, name in enumerate(sequence):
        if name.startswith("<") or name.partition(".")[0] in local or _is_test_module(name, tests):
            return tuple(sequence[:end])
    return tuple(sequence)


def _longest(start: Start, shared: dict[Start, int], among: set[Start] | None = None) -> Start:
    """The longest start of ``start`` that enough files share (and that is
    ``among`` the chosen ones)."""
    for end in range(len(start), 0, -1):
        candidate = start[:end]
        if shared.get(candidate, 0) >= LEAST_FILES and (among is None or candidate in among):
            return candidate
    return ()


def _loading_order(top: Sequence[str]) -> list[str]:
    """The modules that importing ``top`` in order loads, once each: a
    package before its modules (``import a.b`` loads ``a``, then ``a.b``)."""
    order: dict[str, None] = {}
    for name in top:
        parts = [name] if name.startswith("<") else name.split(".")
        for end in range(1, len(parts) + 1):
            order.setdefault(".".join(parts[:end]), None)
    return list(order)


def local_names(files: Iterable[Path], search_path: Sequence[str]) -> set[str]:
    """The top-level module names that the test files' own directories
    provide and that are not on ``search_path`` already (pytest's ``prepend``
    import mode puts such a directory first when it imports the file)."""
    on_path = {os.path.realpath(entry or os.getcwd()) for entry in search_path}
    names: set[str] = set()
    for directory in {_basedir(path) for path in files}:
        if os.path.realpath(directory) in on_path:
            continue
        with contextlib.suppress(OSError):
            for entry in os.scandir(directory):
                name = entry.name.partition(".")[0]
                if entry.name.endswith((".py", ".so", ".pyd")) or entry.is_dir():
                    names.add(name)
    return names


def _basedir(path: Path) -> Path:
    """The first directory above ``path`` that is not a package."""
    directory = path.parent
    while (directory / "__init__.py").exists() and directory.parent != directory:
        directory = directory.parent
    return directory


# -- in the fork server ---------------------------------------------------------


@dataclasses.dataclass
class Loaded:
    """What the server imported, or the module that stopped it and why."""

    modules: list[str]
    refused: str = ""
    why: str = ""
    #: Modules imported in all, those they import included.
    total: int = 0

    def reason(self, unnamed: str = "") -> str:
        """Why the server refused: the refused module (else ``unnamed``) and why."""
        who = self.refused or unnamed
        return f"{who}: {self.why}" if who else self.why


def load(modules: Sequence[str], careful: bool = False, watched: bool = True) -> Loaded:
    """Import ``modules`` in order; stop at the first refused one.

    ``watched``: an import that ties itself to its process is refused
    (:mod:`.purity`); the zygote's plugins are not watched, as a forked
    child's plugins are the parent's.

    The modules that existed before are compared once, at the end; when
    that finds a change, ``careful`` (the next server) compares after each
    import, to name the module that made it.  Output written while importing
    is dropped, as a plain run's capture drops what an import writes during
    collection.
    """
    done: list[str] = []
    count = len(sys.modules)
    every = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    loggers = [logger for logger in every if isinstance(logger, logging.Logger)]
    before = _fingerprint(loggers)
    states = _module_states(sys.modules.items())
    watch = purity.Watch() if watched else None
    with _quiet():
        for name in modules:
            known = set(sys.modules)
            why = _import_one(name, watch) or _compare(before, _fingerprint(loggers))
            if not why and careful:
                why = _changed_modules(states)
            if why:
                return Loaded(done, name, why)
            done.append(name)
            states.update(_module_states((n, sys.modules[n]) for n in set(sys.modules) - known))
    why = _changed_modules(states)
    if why:
        return Loaded([], "", why)
    return Loaded(done, total=len(sys.modules) - count)


def _import_one(name: str, watch: purity.Watch | None) -> str:
    threads = _thread_count()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with watch.watching() if watch else contextlib.nullcontext():
                importlib.import_module(name)
        except BaseException as error:  # any failure refuses the module
            return f"its import raised {type(error).__name__}"
    if caught:
        first = caught[0]
        return f"its import warns ({first.category.__name__}: {str(first.message)[:80]})"
    if _thread_count() != threads:
        return "its import starts a thread"
    if watch and watch.found:
        return f"its import {watch.found}"
    return ""


def _thread_count() -> int:
    """Threads of this process, native ones included (Linux)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Drop what is written to fds 1 and 2 and to ``sys.stdout``/``stderr``."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    streams = sys.stdout, sys.stderr
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        sys.stdout = sys.stderr = io.StringIO()
        yield
    finally:
        sys.stdout, sys.stderr = streams
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


def _fingerprint(loggers: Sequence[logging.Logger]) -> dict[str, object]:
    """Process-wide state outside any one module that an import may change
    (of the ``loggers`` that existed before: a new package's own logger, and
    the handler it gives it, are its own)."""
    handlers = {}
    for number in signal.valid_signals():
        with contextlib.suppress(OSError, ValueError):
            handlers[int(number)] = signal.getsignal(number)
    return {
        "the environment": dict(os.environ),
        "the working directory": os.getcwd(),
        "sys.path": list(sys.path),
        "sys.meta_path": list(sys.meta_path),
        "sys.path_hooks": list(sys.path_hooks),
        "the warning filters": list(warnings.filters),
        "signal handlers": handlers,
        "logging handlers": [(list(logger.handlers), logger.level) for logger in loggers],
        "sys.stdin, stdout or stderr": (sys.stdin, sys.__stdout__, sys.__stderr__),
        "a sys hook": (sys.excepthook, sys.displayhook, sys.gettrace(), sys.getprofile()),
        "the recursion limit": sys.getrecursionlimit(),
        "threading's hooks": (threading.excepthook, threading.gettrace(), threading.getprofile()),
        "the socket timeout": socket.getdefaulttimeout(),
    }


def _compare(before: dict[str, object], after: dict[str, object]) -> str:
    for what, value in before.items():
        if after[what] != value:
            return f"its import changes {what}"
    return ""


#: A module's public names, each with its value and the length of a dict,
#: list or set (a registry filled in); values are compared by identity.
State = tuple[dict[str, Any], list[tuple[str, Any, int]]]


def _module_states(modules: Iterable[tuple[str, Any]]) -> dict[str, State]:
    states = {}
    for name, module in modules:
        if not isinstance(module, types.ModuleType) or name in _VOLATILE:
            continue
        if name.startswith(_VOLATILE_PACKAGES) or name + "." in _VOLATILE_PACKAGES:
            continue
        namespace = module.__dict__
        states[name] = (namespace, _public(namespace))
    return states


def _public(namespace: dict[str, Any]) -> list[tuple[str, Any, int]]:
    """A cache (a container named so) may grow: only its identity counts."""
    return [
        (key, value, _length(key, value))
        for key, value in list(namespace.items())
        if not key.startswith("_") and not isinstance(value, types.ModuleType)
    ]


def _length(key: str, value: object) -> int:
    if type(value) not in (dict, list, set) or "cache" in key.lower():
        return -1
    return len(value)  # type: ignore[arg-type]


def _changed_modules(states: dict[str, State]) -> str:
    """The first module (of ``states``) whose public names changed since."""
    missing = object()
    for name, (namespace, names) in states.items():
        for key, value, length in names:
            now = namespace.get(key, missing)
            if now is not value or (length >= 0 and len(now) != length):
                return f"preloading changes {name}.{key}"
        if len(_public(namespace)) != len(names):
            return f"preloading adds names to {name}"
    return ""
