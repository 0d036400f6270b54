"""Where a write that no hook sees was made: read from the test's source.

The environment, the working directory, the tracked standard library
modules and ``mock`` patches tell the guard where they were written while
the test runs (:mod:`.sites`, :mod:`.tracked`, :mod:`.mocks`).  A class
attribute, a project module's global, an item of ``sys.modules`` or of a
watched container has no such hook that costs nothing while no leak happens
(a class's ``__setattr__`` raises no audit event; ``sys.modules`` is a plain
dict).  So once such a leak is found, its site is looked for in the source
of the test that leaked it: the statements of its function, then of its
function-scoped fixtures (or, for a leak at import, of its module's top
level) that write the changed thing (``Cls.name = ...``, ``setattr(Cls,
"name", ...)``, ``del mod.NAME``, ``sys.modules["x"] = ...``,
``REGISTRY["k"] = ...``, ``REGISTRY.append(...)``, ``patch("a.b").start()``).
The last such statement is the site; none, or a write made elsewhere (a
helper, the project's own function), leaves the site unknown and the summary
says which test it was set during.  Nothing of this runs unless a leak was
found.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import types
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_isolation.core import pysource
from pytest_isolation.core import pytest_private
from pytest_isolation.core.records import Leak

#: Methods that change a container in place.
MUTATORS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "remove",
        "pop",
        "popitem",
        "clear",
        "update",
        "setdefault",
        "add",
        "discard",
        "__setitem__",
        "__delitem__",
    }
)
#: The categories whose writes no hook sees, and the form of their keys; and
#: ``mock``, whose ``start()`` has no recorded line when it ran while
#: ``unittest.mock`` was first imported (the guard does not import it).
LOCATED = frozenset({"attribute", "sys.modules", "container", "mock"})
#: A site with a line (``FILE:LINE``), not only a file.
_WITH_LINE = re.compile(r":\d+")


@dataclasses.dataclass(frozen=True)
class Write:
    """A statement at ``line`` that writes: ``attr`` ``owner.name``, an
    ``item`` of ``owner`` (``name``: its key, ``None`` when not a literal),
    or starts a ``patch`` of ``owner.name``."""

    line: int
    form: str
    owner: str
    name: str | None


@dataclasses.dataclass(frozen=True)
class Scope:
    """Where in a file to look: a function's lines, or the module's top level."""

    path: Path
    #: The function whose lines to look in (its code's first line); ``None``:
    #: the module's top level.
    first: int | None = None


@dataclasses.dataclass(frozen=True)
class Parsed:
    """What a file's source says: every write, each with whether it is at the
    module's top level, and each function's lines by its code's first line
    (its first decorator's or its ``def``'s)."""

    writes: list[tuple[Write, bool]]
    functions: dict[int, tuple[int, int]]


class Sources:
    """Test files read once each, when a leak asks (the syntax tree is not kept)."""

    def __init__(self) -> None:
        self._parsed: dict[Path, Parsed] = {}

    def parsed(self, path: Path) -> Parsed:
        known = self._parsed.get(path)
        if known is None:
            try:
                tree = pysource.parse(path.read_bytes(), str(path))
                collector = _Collector()
                if tree is not None:
                    collector.visit(tree)
                known = Parsed(collector.found, collector.functions)
            except (OSError, RecursionError):  # unreadable, or too deep to walk: no site
                known = Parsed([], {})
            self._parsed[path] = known
        return known

    def lines(self, scope: Scope) -> tuple[int, int] | None:
        """The lines of the scope's function (from its ``def`` to its end)."""
        if scope.first is None:
            return None
        found = self.parsed(scope.path).functions.get(scope.first)
        return found or (scope.first, scope.first)

    def site(self, leak: Leak, scopes: list[Scope], relative: Callable[[str], str]) -> str:
        """``FILE:LINE`` of the last write that matches ``leak`` in the first
        of ``scopes`` that has one; ''."""
        wanted = _wanted(leak) if leak.category in LOCATED else None
        if wanted is None:
            return ""
        for scope in scopes:
            span = self.lines(scope)
            lines = [
                write.line
                for write, top in self.parsed(scope.path).writes
                if (top if span is None else span[0] <= write.line <= span[1])
                and _matches(write, *wanted)
            ]
            if lines:
                return f"{relative(str(scope.path))}:{max(lines)}"
        return ""


def scopes_of(item: pytest.Item | None) -> list[Scope]:
    """The lines of a test's function, then of its function-scoped fixtures'."""
    if not isinstance(item, pytest.Function):
        return []
    functions = [item.obj]
    for name in item.fixturenames:
        definitions = pytest_private.fixture_definitions(item).get(name) or ()
        if definitions and definitions[-1].scope == "function":
            functions.append(definitions[-1].func)
    return [scope for function in functions if (scope := _scope(function)) is not None]


def _scope(function: object) -> Scope | None:
    code = getattr(getattr(function, "__func__", function), "__code__", None)
    if not isinstance(code, types.CodeType) or code.co_filename.startswith("<"):
        return None
    return Scope(Path(code.co_filename), code.co_firstlineno)


def located(
    leaks: list[Leak],
    sources: Sources,
    scopes: Callable[[], list[Scope]],
    relative: Callable[[str], str],
) -> list[Leak]:
    """``leaks``, each without a site given the one read from ``scopes()``
    (asked only when a leak needs one: most windows have none)."""
    wanting = [_wants_site(leak) for leak in leaks]
    places = scopes() if any(wanting) else []
    if not places:
        return leaks
    return [
        dataclasses.replace(leak, site=site)
        if wants and (site := sources.site(leak, places, relative))
        else leak
        for leak, wants in zip(leaks, wanting, strict=True)
    ]


def _wants_site(leak: Leak) -> bool:
    """A leak of a category read from the source, reported without a line."""
    return leak.category in LOCATED and not (leak.routine or _WITH_LINE.search(leak.site))


def _wanted(leak: Leak) -> tuple[str, str, str | None] | None:
    """What a matching write looks like: the form, the owner's last name, the name or key."""
    if leak.category == "sys.modules":
        return ("item", "sys.modules", leak.key)
    if leak.category == "mock":
        if leak.key.endswith("(patch.multiple)"):
            return None  # one patch of many names: no single target to read
        owner, dot, name = leak.key.removesuffix(" (patch.dict)").rpartition(".")
        return ("patch", owner.rpartition(".")[2], name) if dot else None
    if leak.category == "attribute":
        owner, dot, name = leak.key.rpartition(".")
        return ("attr", owner.rpartition(".")[2], name) if dot else None
    # A container: ``mod.NAME`` or ``mod.Cls.NAME``, maybe an item of it (``NAME['k']``).
    container = leak.key.split("[", 1)[0]
    return ("item", container.rpartition(".")[2], None)


def _matches(write: Write, form: str, owner: str, name: str | None) -> bool:
    if write.form != form:
        return False
    if form in ("attr", "patch"):
        return write.name == name and write.owner.rpartition(".")[2] == owner
    if owner == "sys.modules":
        return write.owner == "sys.modules" and write.name in (name, None)
    return write.owner.rpartition(".")[2] == owner


class _Collector(ast.NodeVisitor):
    """The writes of a module, each with whether it is at its top level, and
    its functions' lines (see :class:`Parsed`)."""

    def __init__(self) -> None:
        self.found: list[tuple[Write, bool]] = []
        self.functions: dict[int, tuple[int, int]] = {}
        self._depth = 0
        #: What each name a patcher was assigned to patches (``p = patch("x.y")``).
        self._patchers: dict[str, tuple[str, str]] = {}

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        lines = (node.lineno, node.end_lineno or node.lineno)
        for first in (node.lineno, *(d.lineno for d in node.decorator_list)):
            self.functions.setdefault(first, lines)
        self._nested(node)

    def _nested(self, node: ast.AST) -> None:
        self._depth += 1
        self.generic_visit(node)
        self._depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = _function
    visit_Lambda = _nested

    def _add(self, line: int, form: str, owner: str | None, name: str | None) -> None:
        if owner:
            self.found.append((Write(line, form, owner, name), self._depth == 0))

    def _target(self, target: ast.expr) -> None:
        if isinstance(target, ast.Attribute):
            self._add(target.lineno, "attr", _dotted(target.value), target.attr)
            self._add(target.lineno, "item", _dotted(target), None)  # NAME = [] rebinds it too
        elif isinstance(target, ast.Subscript):
            self._add(target.lineno, "item", _dotted(target.value), _literal(target.slice))
        elif isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self._target(element)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._target(target)
        patched = _patched(node.value)
        if patched is not None:
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self._patchers[target.id] = patched
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._target(node.target)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._target(node.target)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._target(target)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        function = node.func
        if isinstance(function, ast.Name) and function.id in ("setattr", "delattr"):
            if len(node.args) >= 2:
                name = _literal(node.args[1])
                self._add(node.lineno, "attr", _dotted(node.args[0]), name)
        elif isinstance(function, ast.Attribute) and function.attr == "start":
            value = function.value
            patched = (
                self._patchers.get(value.id) if isinstance(value, ast.Name) else _patched(value)
            )
            if patched is not None:
                self._add(node.lineno, "patch", *patched)
        elif isinstance(function, ast.Attribute) and function.attr in MUTATORS:
            key = _literal(node.args[0]) if node.args else None
            self._add(node.lineno, "item", _dotted(function.value), key)
        self.generic_visit(node)


def _patched(node: ast.expr) -> tuple[str, str] | None:
    """What a ``patch(...)`` call patches, as (owner, name): ``patch("a.b")``,
    ``patch.object(a, "b")``, ``patch.dict(a.b, ...)``."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    function = _dotted(node.func) or ""
    first = node.args[0]
    if function.endswith("patch.object") and len(node.args) >= 2:
        owner, name = _dotted(first), _literal(node.args[1])
    elif function.endswith("patch.dict"):
        owner, _, name = (_dotted(first) or "").rpartition(".")
    elif function == "patch" or function.endswith(".patch"):
        owner, _, name = (_literal(first) or "").rpartition(".")
    else:
        return None
    return (owner, name) if owner and name else None


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for a chain of names, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _literal(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
