"""A Python source file's functions, their lines and fingerprints.

The record of what a test file executed names functions by qualified name
(``Class.method``, ``outer.<locals>.inner``).  A function's fingerprint is
a digest of its syntax tree without positions, so moving it, or changing a
comment or blank line, does not change it; its decorators and signature are
part of it.  The module's fingerprint covers the code that runs at import
(imports, constants, class bodies, and each function's decorators and
signature, without its body).  Comparing the fingerprints of two versions of
a file tells which functions changed, and whether its import-time code did.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
from pathlib import Path

from pytest_isolation.core.pysource import parse

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def digest(data: bytes) -> str:
    """The content hash the record keeps for a file."""
    return hashlib.sha1(data, usedforsecurity=False).hexdigest()


def _fingerprint(node: ast.AST) -> str:
    return digest(ast.dump(node).encode())[:16]


@dataclasses.dataclass(frozen=True)
class SourceFacts:
    digest: str
    #: Each function's fingerprint, by qualified name (two definitions of one
    #: name, a property's getter and setter, share one).
    functions: dict[str, str]
    #: ``(first line, last line, qualified name, first line of the body)`` of
    #: each function, from its first decorator on.
    spans: tuple[tuple[int, int, str, int], ...]
    #: The fingerprint of the code outside the functions.
    module: str

    def function_at(self, line: int) -> str | None:
        """The innermost function whose lines hold ``line``; None at module level."""
        found: tuple[int, int, str, int] | None = None
        for span in self.spans:
            if span[0] <= line <= span[1] and (found is None or span[0] >= found[0]):
                found = span
        return None if found is None else found[2]

    def in_header(self, line: int) -> bool:
        """Whether ``line`` is in a function's decorators or signature,
        which run at import (in the outermost function's: nested ones run
        with their function)."""
        return any(
            first <= line < body for first, _, name, body in self.spans if "<locals>" not in name
        )

    def to_json(self) -> dict[str, object]:
        return {
            "functions": self.functions,
            "module": self.module,
            "spans": [list(span) for span in self.spans],
        }

    @classmethod
    def from_json(cls, content: str, data: object) -> SourceFacts | None:
        """The facts a record kept for the version ``content``; None when
        they are not whole."""
        if not isinstance(data, dict):
            return None
        try:
            spans = tuple((int(a), int(b), str(c), int(d)) for a, b, c, d in data["spans"])
            return cls(content, dict(data["functions"]), spans, str(data["module"]))
        except (KeyError, TypeError, ValueError):
            return None


def facts_of(data: bytes, filename: str = "<source>") -> SourceFacts:
    """The facts of one version of a file (an unparsable one: no functions,
    its module fingerprint its content hash, so any change shows)."""
    content = digest(data)
    tree = parse(data, filename)
    if tree is None:
        return SourceFacts(content, {}, (), content)
    functions: dict[str, str] = {}
    spans: list[tuple[int, int, str, int]] = []
    _walk(tree, "", functions, spans)
    outside = _without_functions(tree)
    return SourceFacts(content, functions, tuple(sorted(spans)), _fingerprint(outside))


def read_facts(path: Path) -> SourceFacts | None:
    """The facts of the file at ``path`` now; None when it cannot be read."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return facts_of(data, str(path))


def _walk(
    node: ast.AST,
    prefix: str,
    functions: dict[str, str],
    spans: list[tuple[int, int, str, int]],
) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, _FUNCTIONS):
            name = prefix + child.name
            first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
            body = child.body[0].lineno if child.body else child.lineno
            spans.append((first, child.end_lineno or child.lineno, name, body))
            mark = _fingerprint(child)
            known = functions.get(name)
            functions[name] = mark if known is None else digest(f"{known}{mark}".encode())[:16]
            _walk(child, name + ".<locals>.", functions, spans)
        elif isinstance(child, ast.ClassDef):
            _walk(child, prefix + child.name + ".", functions, spans)
        else:
            _walk(child, prefix, functions, spans)


class _Reduced(ast.NodeTransformer):
    """Each function outside a function loses its body: what is left (its
    decorators, defaults and annotations too) runs at import."""

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.body = [ast.Pass()]
        return node

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        node.body = [ast.Pass()]
        return node


def _without_functions(tree: ast.Module) -> ast.AST:
    """``tree`` reduced in place (its functions' fingerprints were taken before)."""
    reduced: ast.AST = _Reduced().visit(tree)
    return reduced
