"""Names a module binds with ``from x import y``, and whether such a name
holds its real value.

A module first imported while a patch is active binds the patch's stand-in:
``from datetime import date`` under ``freeze_time`` binds freezegun's
``FakeDate``, under ``mock.patch("proj.helpers.fetch")`` a ``MagicMock``.  A
snapshot taken then is not a clean state, and freezegun's ``stop()`` (or the
test itself) later puts the real value into the module.  The guard must
never put the stand-in back.  So a name bound by ``from x import y`` that
holds, at the window's end, what ``x.y`` holds then is taken as the name's
real state: not a leak, nothing to restore.

The module's source is read only when one of its names changed (rare), once
per module.
"""

from __future__ import annotations

import ast
import sys
import types
from typing import cast

from pytest_isolation.core import pysource

#: Bound at import, before any test: a test may patch ``builtins.open`` or
#: ``compile`` while a module is imported, and the guard must not call its stand-in.
_OPEN = open
_COMPILE = compile

#: By module name: {bound name: (source module, attribute)}.
_cache: dict[str, dict[str, tuple[str, str]]] = {}


def from_imports(module: types.ModuleType) -> dict[str, tuple[str, str]]:
    """What ``module``'s own code binds with ``from x import y [as z]``, at
    any depth of its module-level code (``try``/``if`` blocks included)."""
    name = module.__name__
    known = _cache.get(name)
    if known is None:
        known = _cache[name] = _read(module)
    return known


def _read(module: types.ModuleType) -> dict[str, tuple[str, str]]:
    path = getattr(module, "__file__", None)
    if not isinstance(path, str) or not path.endswith(".py"):
        return {}
    try:
        with _OPEN(path, encoding="utf-8") as file:
            tree = cast(ast.Module, _COMPILE(file.read(), path, "exec", ast.PyCF_ONLY_AST))
    except (OSError, UnicodeDecodeError, *pysource.UNPARSABLE):
        return {}
    package = getattr(module, "__package__", None) or ""
    bound: dict[str, tuple[str, str]] = {}
    for node in _module_level(tree.body):
        if not isinstance(node, ast.ImportFrom):
            continue
        source = _absolute(node.module or "", node.level, package)
        for alias in node.names:
            if alias.name != "*" and source:
                bound[alias.asname or alias.name] = (source, alias.name)
    return bound


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements of module-level code, into compound statements but not
    into functions or classes."""
    found: list[ast.stmt] = []
    for node in body:
        found.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            found += _module_level(getattr(node, field, []) or [])
        for handler in getattr(node, "handlers", []) or []:
            found += _module_level(handler.body)
    return found


def _absolute(module: str, level: int, package: str) -> str:
    if level == 0:
        return module
    parts = package.split(".") if package else []
    if level - 1 > len(parts):
        return ""
    base = parts[: len(parts) - (level - 1)]
    return ".".join([*base, module] if module else base)


def holds_real_value(owner: object, name: str, value: object) -> bool:
    """Whether ``owner.name``, a name the module ``owner`` binds with
    ``from x import y``, holds what ``x.y`` holds now."""
    if not isinstance(owner, types.ModuleType):
        return False
    binding = from_imports(owner).get(name)
    if binding is None:
        return False
    source = sys.modules.get(binding[0])
    if source is None:
        return False
    missing = object()
    return getattr(source, binding[1], missing) is value
