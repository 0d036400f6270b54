"""What the lint rules ask of a parsed test file: the dotted name an
expression stands for (through its imports), where a node sits (module level,
a test, a fixture) and whether a change of process state is undone nearby."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

from pytest_isolation.core import pysource

#: The names a change of each kind of state is made or undone with.
KINDS = {
    "environ": frozenset({"os.environ", "os.putenv", "os.unsetenv"}),
    "cwd": frozenset({"os.chdir", "contextlib.chdir"}),
    "modules": frozenset({"sys.modules"}),
}

#: Words in a function's name that say it undoes what another did.
_UNDO_WORDS = ("teardown", "cleanup", "clean_up", "restore", "reset", "final", "undo")
_UNDO_NAMES = frozenset({"__exit__", "__aexit__", "stop", "close", "doCleanups"})
#: Calls that register a callable to run later, when the test or fixture ends.
_REGISTER = frozenset({"addCleanup", "addClassCleanup", "addfinalizer", "callback", "push"})
#: Words in a ``with`` item's text that say it puts the working directory back.
_CWD_WORDS = ("chdir", "cwd", "pushd", "working_dir", "workdir")

Function = ast.FunctionDef | ast.AsyncFunctionDef
#: ``try``, and ``try``/``except*`` (Python 3.11+): both have a ``finally``.
TRIES: tuple[type[ast.stmt], ...] = (ast.Try, getattr(ast, "TryStar", ast.Try))


class Source:
    """A parsed file, with its import aliases and every node's parent."""

    def __init__(self, tree: ast.Module, path: str) -> None:
        self.tree = tree
        self.path = path
        self.conftest = path.replace("\\", "/").rsplit("/", 1)[-1] == "conftest.py"
        self.parents: dict[ast.AST, ast.AST] = {}
        self._mentions: dict[tuple[int, str], bool] = {}
        self._assigned: dict[tuple[int, str], ast.AST] | None = None
        self.aliases: dict[str, str] = {}
        self.imported: set[str] = set()
        #: Every node, parents before children (one walk that the rules share).
        self.nodes = list(ast.walk(tree))
        self.functions: dict[str, Function] = {}
        for node in self.nodes:
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
            if isinstance(node, ast.Import | ast.ImportFrom):
                self._alias(node)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.functions.setdefault(node.name, node)

    def _alias(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            self.imported.add(node.module)
        for name in node.names:
            if isinstance(node, ast.Import):
                self.imported.add(name.name)
            if isinstance(node, ast.Import):
                local = name.asname or name.name.split(".")[0]
                self.aliases[local] = name.name if name.asname else local
            elif node.module and not node.level:
                self.aliases[name.asname or name.name] = f"{node.module}.{name.name}"

    def qual(self, node: ast.AST) -> str:
        """``unittest.mock.patch.object`` for ``mock.patch.object`` after
        ``from unittest import mock``; empty for what has no dotted name."""
        match node:
            case ast.Name(id=name):
                dotted = self.aliases.get(name, name)
            case ast.Attribute(value=value, attr=attr):
                base = self.qual(value)
                dotted = f"{base}.{attr}" if base else ""
            case _:
                return ""
        return "unittest." + dotted if dotted.startswith("mock.") else dotted

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        while node in self.parents:
            node = self.parents[node]
            yield node

    def function_of(self, node: ast.AST) -> Function | None:
        """The innermost function (not lambda) ``node`` is in; None at import time."""
        for parent in self.ancestors(node):
            if isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef):
                return parent
        return None

    def class_of(self, node: ast.AST) -> ast.ClassDef | None:
        parent = self.parents.get(node)
        return parent if isinstance(parent, ast.ClassDef) else None

    def in_main_block(self, node: ast.AST) -> bool:
        """Under ``if __name__ == "__main__":``, which a test run never executes."""
        return any(
            isinstance(parent, ast.If) and "__main__" in ast.unparse(parent.test)
            for parent in self.ancestors(node)
        )

    def is_test(self, function: Function) -> bool:
        """A test function as pytest collects it by default: ``test*`` at module
        level, or a ``test*`` method of a ``Test*`` class or a ``TestCase``."""
        if not function.name.startswith("test") or _fixture(function):
            return False
        parent = self.parents.get(function)
        if isinstance(parent, ast.Module):
            return True
        if not isinstance(parent, ast.ClassDef):
            return False  # a function or class in a function: not collected
        outer = self.parents.get(parent)
        return isinstance(outer, ast.Module | ast.ClassDef) and _test_class(parent)

    def installed(self, module: str) -> bool:
        """``module`` exists for sure: in the standard library, or imported by this file."""
        top = module.split(".")[0]
        return top in sys.stdlib_module_names or any(
            name == module or name.startswith(module + ".") for name in self.imported
        )

    def bound(self, name: str, where: ast.AST) -> ast.AST | None:
        """The value last bound to ``name`` in ``where``'s function, else at module level."""
        if self._assigned is None:
            self._assigned = self._assignments()
        function = self.function_of(where)
        local = self._assigned.get((id(function), name)) if function is not None else None
        return local if local is not None else self._assigned.get((id(None), name))

    def _assignments(self) -> dict[tuple[int, str], ast.AST]:
        """(id of the function, or of None at module level; name) -> last value bound."""
        found: dict[tuple[int, str], tuple[int, ast.AST]] = {}
        for node in self.nodes:
            if not isinstance(node, ast.Assign):
                continue
            scope = id(self.function_of(node))
            for target in node.targets:
                if isinstance(target, ast.Name):
                    key = (scope, target.id)
                    if key not in found or found[key][0] <= node.lineno:
                        found[key] = (node.lineno, node.value)
        return {key: value for key, (_, value) in found.items()}

    def monkeypatched_keys(self, node: ast.AST) -> set[str]:
        """Keys the functions around ``node`` give ``monkeypatch.setenv/delenv``:
        monkeypatch puts them back, whatever else changes them in between.
        So do those an autouse fixture of this file or of a conftest above
        gives it: it runs around every test."""
        keys = set()
        for function in self._functions_around(node):
            keys |= _env_keys(function)
        return keys | self.autouse_env_keys() | conftest_env_keys(self.path)

    def autouse_env_keys(self) -> set[str]:
        return {
            key
            for function in _module_functions(self.tree)
            if _autouse(function)
            for key in _env_keys(function)
        }

    def _functions_around(self, node: ast.AST) -> list[Function]:
        return [
            parent
            for parent in self.ancestors(node)
            if isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef)
        ]

    def is_hook(self, function: Function) -> bool:
        """A pytest hook (``pytest_configure``, ...): it sets up the whole session."""
        return function.name.startswith("pytest_") and isinstance(
            self.parents.get(function), ast.Module
        )

    def mentions(self, node: ast.AST, kind: str) -> bool:
        """``node``'s subtree names the state of ``kind`` (``os.environ``,
        ``"os.environ"`` in ``patch.dict``, ``os.chdir`` as a callback)."""
        key = (id(node), kind)
        if key not in self._mentions:
            self._mentions[key] = self._names(node, KINDS[kind])
        return self._mentions[key]

    def _names(self, node: ast.AST, names: frozenset[str]) -> bool:
        for child in ast.walk(node):
            if isinstance(child, ast.Constant) and child.value in names:
                return True
            if isinstance(child, ast.Name | ast.Attribute) and self.qual(child) in names:
                return True
        return False

    def restored(self, node: ast.AST, kind: str) -> bool:
        """A change of ``kind`` at ``node`` is undone: a ``finally``, the code
        after a fixture's ``yield``, a cleanup callback, a teardown method or
        a context manager or decorator that names the same state."""
        if self._inside_restoring_with(node, kind):
            return True
        functions = self._functions_around(node)
        if not functions:
            return any(self._undoes(f, kind) for f in _module_functions(self.tree))
        if any(self._function_restores(function, kind) for function in functions):
            return True
        return self.autouse_restores(kind) or conftest_restores(self.path, kind)

    def autouse_restores(self, kind: str) -> bool:
        """An autouse fixture of this file puts the state of ``kind`` back
        after every test: after its ``yield``, in a ``finally``, or in a
        ``with`` around its ``yield`` (``mock.patch.dict(os.environ)``)."""
        return any(
            _autouse(function)
            and (
                self._function_restores(function, kind)
                or self._with_around_yield(function, kind)
                or (kind == "environ" and self._replaces_environ(function))
            )
            for function in _module_functions(self.tree)
        )

    def _replaces_environ(self, function: Function) -> bool:
        """``monkeypatch.setattr(os, "environ", {...})`` (or ``"os.environ"``):
        every write the test makes goes to a copy that monkeypatch drops."""
        for call in ast.walk(function):
            if not (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "setattr"
                and call.args
            ):
                continue
            first = call.args[0]
            if isinstance(first, ast.Constant) and first.value == "os.environ":
                return True
            second = call.args[1] if len(call.args) > 1 else None
            if (
                self.qual(first) == "os"
                and isinstance(second, ast.Constant)
                and second.value == "environ"
            ):
                return True
        return False

    def _with_around_yield(self, function: Function, kind: str) -> bool:
        withs = [
            child for child in ast.walk(function) if isinstance(child, ast.With | ast.AsyncWith)
        ]
        return any(
            any(self.mentions(item.context_expr, kind) for item in child.items)
            and any(isinstance(inner, ast.Yield | ast.YieldFrom) for inner in ast.walk(child))
            for child in withs
        )

    def _function_restores(self, function: Function, kind: str) -> bool:
        if _undo_name(function.name):
            return True  # the restoring code itself
        if any(self.mentions(d, kind) for d in self._decorators(function)):
            return True
        if any(self.mentions(block, kind) for block in self._undo_blocks(function)):
            return True
        owner = self.class_of(function)
        return owner is not None and any(self._undoes(method, kind) for method in _methods(owner))

    def _undoes(self, function: Function, kind: str) -> bool:
        return _undo_name(function.name) and self.mentions(function, kind)

    def _inside_restoring_with(self, node: ast.AST, kind: str) -> bool:
        for parent in self.ancestors(node):
            if isinstance(parent, ast.With | ast.AsyncWith):
                for item in parent.items:
                    text = ast.unparse(item.context_expr).lower()
                    if self.mentions(item.context_expr, kind) or (
                        kind == "cwd" and any(word in text for word in _CWD_WORDS)
                    ):
                        return True
        return False

    def _decorators(self, function: Function) -> Iterator[ast.expr]:
        yield from function.decorator_list
        for parent in self.ancestors(function):
            if isinstance(parent, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                yield from parent.decorator_list

    def _undo_blocks(self, function: Function) -> Iterator[ast.AST]:
        """The parts of ``function`` that run when it ends or later."""
        after_yield = _first_yield_line(function)
        for child in ast.walk(function):
            if isinstance(child, TRIES):
                yield from child.finalbody  # type: ignore[attr-defined]
            elif isinstance(child, ast.stmt) and after_yield and child.lineno > after_yield:
                yield child
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                if child is not function and _undo_name(child.name):
                    yield child
            elif isinstance(child, ast.Call) and _registers(child):
                yield from child.args
                yield from self._named_callbacks(child)

    def _named_callbacks(self, call: ast.Call) -> Iterator[ast.AST]:
        for arg in call.args:
            if isinstance(arg, ast.Name) and arg.id in self.functions:
                yield self.functions[arg.id]


#: Files that end the search for conftests: a project's root.
_ROOT_FILES = ("pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini", ".git")
_CONFTESTS: dict[tuple[str, str], bool] = {}


def conftest_restores(path: str, kind: str) -> bool:
    """A ``conftest.py`` above ``path`` (up to the project's root) has an
    autouse fixture that puts the state of ``kind`` back after every test."""
    folder = Path(path).resolve().parent
    for directory in (folder, *folder.parents):
        conftest = directory / "conftest.py"
        if conftest.is_file() and str(conftest) != str(Path(path).resolve()):
            key = (str(conftest), kind)
            if key not in _CONFTESTS:
                _CONFTESTS[key] = _conftest_has(conftest, kind)
            if _CONFTESTS[key]:
                return True
        if any((directory / name).exists() for name in _ROOT_FILES):
            return False
    return False


_CONFTEST_KEYS: dict[str, set[str]] = {}


def conftest_env_keys(path: str) -> set[str]:
    """The environment variables the autouse fixtures of the conftests above
    ``path`` (up to the project's root) give ``monkeypatch.setenv/delenv``."""
    keys: set[str] = set()
    folder = Path(path).resolve().parent
    for directory in (folder, *folder.parents):
        conftest = directory / "conftest.py"
        if conftest.is_file() and str(conftest) != str(Path(path).resolve()):
            known = _CONFTEST_KEYS.get(str(conftest))
            if known is None:
                try:
                    tree = pysource.parse(conftest.read_bytes(), str(conftest))
                except OSError:
                    tree = None
                known = set() if tree is None else Source(tree, str(conftest)).autouse_env_keys()
                _CONFTEST_KEYS[str(conftest)] = known
            keys |= known
        if any((directory / name).exists() for name in _ROOT_FILES):
            break
    return keys


def _env_keys(function: Function) -> set[str]:
    """The constant keys ``function`` gives ``monkeypatch.setenv/delenv``."""
    return {
        str(call.args[0].value)
        for call in ast.walk(function)
        if isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr in ("setenv", "delenv")
        and call.args
        and isinstance(call.args[0], ast.Constant)
    }


def _conftest_has(conftest: Path, kind: str) -> bool:
    try:
        tree = pysource.parse(conftest.read_bytes(), str(conftest))
    except OSError:
        return False
    return tree is not None and Source(tree, str(conftest)).autouse_restores(kind)


def _autouse(function: Function) -> bool:
    return any(
        "fixture" in (text := ast.unparse(decorator)) and "autouse=True" in text
        for decorator in function.decorator_list
    )


def _registers(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Attribute) and call.func.attr in _REGISTER


def _undo_name(name: str) -> bool:
    return name in _UNDO_NAMES or any(word in name.lower() for word in _UNDO_WORDS)


def _fixture(function: Function) -> bool:
    return any("fixture" in ast.unparse(decorator) for decorator in function.decorator_list)


def _test_class(node: ast.ClassDef) -> bool:
    if node.name.startswith("Test"):
        return True
    return any(ast.unparse(base).endswith("TestCase") for base in node.bases)


def _methods(node: ast.ClassDef) -> Iterator[Function]:
    for child in node.body:
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            yield child


def _module_functions(tree: ast.Module) -> Iterator[Function]:
    for child in tree.body:
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            yield child


def _first_yield_line(function: Function) -> int:
    lines = [
        child.lineno
        for child in ast.walk(function)
        if isinstance(child, ast.Yield | ast.YieldFrom) and _own_function(child, function)
    ]
    return min(lines, default=0)


def _own_function(node: ast.AST, function: Function) -> bool:
    """Not inside a nested function (cheap: by line span)."""
    for child in ast.walk(function):
        if child is function or not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        end = child.end_lineno or child.lineno
        if child.lineno <= getattr(node, "lineno", 0) <= end:
            return False
    return True
