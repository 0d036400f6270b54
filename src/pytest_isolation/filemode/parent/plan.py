"""Which modules a fork server preloads, planned in the parent from the
test files' syntax trees (the server imports them: :mod:`..server.preload`).

Without preloading every file's child imports its project and third-party
modules again (rich and pygments take 0.2 s cold).  With it a fork server
imports them once, before the first child, and each child starts with them
loaded, from a state no test has touched; the child still imports its own
test module.

:func:`plan` reads each test file's syntax tree.  A server preloads a list
of modules that every file starting from it imports first, at its top, in
that order, so a child holds nothing its file would not have loaded before
its first test, and loaded in the order its file loads them.  An import
inside ``if`` or ``try`` (``if TYPE_CHECKING:``, ``try: import a / except
ImportError: import b``) may not run, so the list stops before it.  A file
whose imports do not begin with the list, whose module-level code runs
before its imports, or that touches the import system (``sys.modules``,
``sys.path``, ``importlib.reload``...) gets its child from a server without
preloads.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import os
from collections.abc import Iterable
from collections.abc import Sequence
from pathlib import Path

from pytest_isolation.core import pysource

#: The ``sys`` attributes through which a file can change what an import finds.
_IMPORT_SYSTEM = {"modules", "path", "meta_path", "path_hooks", "path_importer_cache"}
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
    hooked: dict[Path, str] | None = None,
) -> Plan:
    """Which modules to preload for ``files`` (in run order), and for which files.

    The modules each file's imports at its top load, in order (a package
    before its modules), once each, without the modules the parent has
    loaded already (``loaded``), make its sequence.  A sequence is cut
    before the first import that must not be preloaded: an ``if`` or ``try``
    block of imports, a module of a test file's own directory (``local``:
    its child finds it there, a server might find another of the same name)
    or a test module (``tests``).  A file in ``hooked`` (why: a conftest
    hook that runs before its module is imported) has no start.

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
    kept_out = {**(hooked or {}), **kept_out}
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
