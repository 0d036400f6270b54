"""Parsing a test file's source without importing it."""

from __future__ import annotations

import ast

#: What ``ast.parse`` raises for source it cannot read: a syntax error, a null
#: byte, or nesting too deep for the parser (a 6,000-term expression), which
#: pytest itself reports as that file's collection error when it imports it.
UNPARSABLE = (SyntaxError, ValueError, RecursionError, MemoryError)


def parse(source: str | bytes, filename: str) -> ast.Module | None:
    """The module's syntax tree, or None when it cannot be parsed here."""
    try:
        return ast.parse(source, filename)
    except UNPARSABLE:
        return None
