"""What the lint finds: a code broken at a line, with what and how to fix it."""

from __future__ import annotations

import ast
import dataclasses


@dataclasses.dataclass(frozen=True)
class Finding:
    """One rule broken at one line of a file."""

    code: str
    line: int
    message: str
    fix: str

    def text(self) -> str:
        return f"{self.code} {self.message}; {self.fix}"


@dataclasses.dataclass(frozen=True)
class Hit:
    """A finding and the last line of what it flags (a suppression comment
    may sit on any of its lines)."""

    finding: Finding
    last: int

    @classmethod
    def at(cls, node: ast.AST, code: str, message: str, fix: str) -> Hit:
        line = getattr(node, "lineno", 1)
        last = getattr(node, "end_lineno", None) or line
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            last = line  # the ``def`` line, not the whole body
        return cls(Finding(code, line, message, fix), last)
