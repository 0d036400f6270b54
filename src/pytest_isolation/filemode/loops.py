"""The suite's own ``pytest_collection`` and ``pytest_runtestloop`` hooks,
in a file's process.

A plain run calls every implementation of these hooks ordered before
pytest's own (a conftest's, a local plugin's): each sets something up (an
environment variable, a global) and returns None, and pytest's collection
or loop follows.  File mode's implementations come first (the child's
collect its file, run its tests and end the process), so a file's process
calls those hooks itself, right before its own collection and right
before its tests (with its own collected items), as ``pytest FILE``
would.  A ``pytest_runtestloop`` that returns a value replaces pytest's
loop: file mode refuses it at start (:func:`replacing`).

Imports: stdlib and pytest only (the child side stays light).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

import pytest

from pytest_isolation.core import pytest_private
from pytest_isolation.core.xdist import is_worker

#: Plugins whose loops are not the suite's: pytest's own, this plugin's, xdist's.
_NOT_THE_SUITES = (f"{pytest_private.PYTEST_PACKAGE}.", "pytest_isolation.", "xdist.")
_NOT_THE_SUITES_TOP = (pytest_private.PYTEST_PACKAGE, "xdist")


def suite_loops(config: pytest.Config, own: object) -> list[Any]:
    """The ``pytest_runtestloop`` implementations a plain run would call after
    ``own``'s and before pytest's loop, in the order it would call them
    (pluggy's ``HookImpl`` objects)."""
    return suite_impls(config, "pytest_runtestloop", own)


def suite_impls(config: pytest.Config, hook: str, own: object) -> list[Any]:
    """The implementations of the firstresult ``hook`` a plain run would call
    after ``own``'s and before pytest's own, in the order it would call them
    (pluggy's ``HookImpl`` objects)."""
    impls = getattr(config.pluginmanager.hook, hook).get_hookimpls()
    interactor = pytest_private.worker_interactor(config) if is_worker(config) else None
    called = list(reversed(impls))  # pluggy calls the last registered first
    mine = [index for index, impl in enumerate(called) if impl.plugin is own]
    start = mine[0] + 1 if mine else 0
    found = []
    for impl in called[start:]:
        if impl.plugin_name == "main":  # pytest's loop: the tests run from here on
            break
        theirs = impl.plugin is interactor or not _the_suites(impl)  # xdist's worker loop
        if impl.hookwrapper or getattr(impl, "wrapper", False) or theirs:
            continue
        found.append(impl)
    return found


def _the_suites(impl: Any) -> bool:
    module = getattr(impl.function, "__module__", "") or ""
    return not module.startswith(_NOT_THE_SUITES) and module not in _NOT_THE_SUITES_TOP


def run_suite_loops(session: pytest.Session, loops: list[Any]) -> None:
    """Call ``loops`` as pluggy would, with this process's session."""
    call_suite_impls(session, loops, "pytest_runtestloop")


def call_suite_impls(session: pytest.Session, impls: list[Any], hook: str) -> None:
    """Call ``impls`` of ``hook`` as pluggy would, with this process's session."""
    arguments = {"session": session}
    for impl in impls:
        result = impl.function(*(arguments[name] for name in impl.argnames))
        if result is not None:
            raise RuntimeError(
                f"isolation: {where(impl)} replaced pytest's own {hook} (it returned "
                f"{result!r}), which file mode does in each file's process"
            )


def where(impl: Any) -> str:
    """The module (a conftest's path) that holds ``impl``."""
    function = impl.function
    try:
        path = inspect.getsourcefile(function)
    except TypeError:
        path = None
    return path or str(getattr(function, "__module__", impl.plugin_name))


def replacing(loops: list[Any]) -> list[Any]:
    """Those of ``loops`` that return a value somewhere: each replaces
    pytest's loop when it does."""
    return [impl for impl in loops if _returns_value(impl.function)]


def _returns_value(function: Any) -> bool:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return False
    body = tree.body[0] if tree.body else None
    if not isinstance(body, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    return any(_valued(node) for node in _own_nodes(body))


def _valued(node: ast.AST) -> bool:
    if not isinstance(node, ast.Return) or node.value is None:
        return False
    return not (isinstance(node.value, ast.Constant) and node.value.value is None)


def _own_nodes(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.AST]:
    """The nodes of ``function``'s body, not of the functions and classes it defines."""
    found: list[ast.AST] = []
    pending: list[ast.AST] = list(function.body)
    nested = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
    while pending:
        node = pending.pop()
        if not isinstance(node, nested):
            found.append(node)
            pending.extend(ast.iter_child_nodes(node))
    return found
