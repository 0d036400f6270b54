"""What one Python file imports and defines, read from its syntax tree.

The facts are plain JSON-able data, so the import graph can cache them per
file.  Nothing is imported or executed.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Any

from pytest_isolation.core import pysource

#: ``importlib.import_module`` and ``__import__``, by the names they are called by.
_IMPORT_CALLS = {"import_module", "__import__"}


@dataclasses.dataclass
class Import:
    """``import a.b`` (names None), ``from a.b import c as d`` (names [("c", "d")]),
    ``from . import x`` (level 1, module "")."""

    module: str
    level: int
    names: list[tuple[str, str]] | None
    line: int
    #: At module level (also inside a top-level ``if``/``try``), so it binds a
    #: name of the module that others can import from it.
    top: bool
    #: ``import a.b as c``: the name it binds.
    alias: str | None = None


@dataclasses.dataclass
class Dynamic:
    """An import whose module name is computed."""

    line: int
    #: The literal package it lies under (``import_module(x, "pkg.sub")``,
    #: ``f"pkg.sub.{x}"``), or None when nothing is known.
    prefix: str | None


@dataclasses.dataclass
class Facts:
    imports: list[Import] = dataclasses.field(default_factory=list)
    #: Names the module itself defines at top level (functions, classes, assignments).
    defines: list[str] = dataclasses.field(default_factory=list)
    #: A literal ``__all__``, if any.
    exports: list[str] | None = None
    dynamic: list[Dynamic] = dataclasses.field(default_factory=list)
    #: ``(line, message)`` when the file does not parse.
    error: tuple[int, str] | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Facts:
        return cls(
            imports=[
                Import(
                    i["module"],
                    i["level"],
                    None if i["names"] is None else [(n, a) for n, a in i["names"]],
                    i["line"],
                    i["top"],
                    i["alias"],
                )
                for i in data["imports"]
            ],
            defines=list(data["defines"]),
            exports=data["exports"],
            dynamic=[Dynamic(d["line"], d["prefix"]) for d in data["dynamic"]],
            error=None if data["error"] is None else (data["error"][0], data["error"][1]),
        )


def parse(source: bytes, filename: str) -> Facts:
    try:
        tree = ast.parse(source, filename)
    except pysource.UNPARSABLE as error:
        line = getattr(error, "lineno", None) or 0
        message = getattr(error, "msg", None) or str(error)
        return Facts(error=(int(line), str(message)))
    visitor = _Visitor()
    visitor.visit(tree)
    return visitor.facts


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _literal_strings(node: ast.expr | None) -> list[str] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.List, ast.Tuple)):
        values = [e.value for e in node.elts if isinstance(e, ast.Constant)]
        if len(values) == len(node.elts) and all(isinstance(v, str) for v in values):
            return [str(v) for v in values]
    return None


def _prefix(node: ast.expr) -> str | None:
    """The literal package of a computed name: ``f"pkg.sub.{x}"``, ``"pkg.sub." + x``."""
    head: object = None
    if isinstance(node, ast.JoinedStr) and node.values:
        first = node.values[0]
        head = first.value if isinstance(first, ast.Constant) else None
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        head = node.left.value if isinstance(node.left, ast.Constant) else None
    if isinstance(head, str) and "." in head:
        package = head.rpartition(".")[0]
        return package or None
    return None


class _Visitor(ast.NodeVisitor):
    def __init__(self) -> None:
        self.facts = Facts()
        self.depth = 0  # inside a function or class

    # -- scopes ------------------------------------------------------------------

    def _nested(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if self.depth == 0:
            self.facts.defines.append(node.name)
        self._nested(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        if self.depth == 0:
            self.facts.defines.append(node.name)
        self._nested(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if self.depth == 0:
            self.facts.defines.append(node.name)
        self._nested(node)

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):  # never runs: only its else branch counts
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    # -- names -------------------------------------------------------------------

    def _assigned(self, target: ast.expr, value: ast.expr | None) -> None:
        if self.depth:
            return
        if isinstance(target, ast.Name):
            self.facts.defines.append(target.id)
            if target.id == "__all__":
                self.facts.exports = _literal_strings(value)
            elif target.id == "pytest_plugins":
                for name in _literal_strings(value) or ():
                    self._import(name, 0, None, target.lineno)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._assigned(element, None)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._assigned(target, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._assigned(node.target, node.value)
        self.generic_visit(node)

    # -- imports -----------------------------------------------------------------

    def _import(
        self,
        module: str,
        level: int,
        names: list[tuple[str, str]] | None,
        line: int,
        alias: str | None = None,
    ) -> None:
        self.facts.imports.append(Import(module, level, names, line, self.depth == 0, alias))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._import(alias.name, 0, None, node.lineno, alias.asname)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        names = [(alias.name, alias.asname or alias.name) for alias in node.names]
        self._import(node.module or "", node.level or 0, names, node.lineno)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name in _IMPORT_CALLS and node.args:
            self._dynamic_import(node)
        self.generic_visit(node)

    def _dynamic_import(self, node: ast.Call) -> None:
        first = node.args[0]
        by_name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
        package = node.args[1] if len(node.args) > 1 and by_name == "import_module" else None
        for keyword in node.keywords:
            if keyword.arg == "package":
                package = keyword.value
        package_name = _literal_strings(package)
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            text = first.value
            if text.startswith(".") and package_name:  # import_module(".sub", "pkg")
                dots = len(text) - len(text.lstrip("."))
                base = package_name[0].rsplit(".", dots - 1)[0] if dots > 1 else package_name[0]
                text = f"{base}.{text.lstrip('.')}"
            if not text.startswith("."):
                self._import(text, 0, None, node.lineno)
            return
        prefix = _prefix(first)
        if prefix is None and package_name:
            prefix = package_name[0]
        self.facts.dynamic.append(Dynamic(node.lineno, prefix))
