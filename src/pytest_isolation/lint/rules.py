"""The isolation lint's rules: a static look at one test file's source.

Codes, stable (a rule that is dropped leaves its code unused):

* ``ISO1xx`` -- state changed at import time, which outlives the file and
  reaches every test file collected after it;
* ``ISO2xx`` -- state a test or fixture changes and does not put back;
* ``ISO3xx`` -- test hygiene: mocks wider than needed, fixed waits, tests
  that check nothing.

A comment ``# isolation: allow ISO201`` (codes separated by commas; none
means every code) on a flagged line keeps it quiet.  Pure ``ast`` analysis,
no import of the file and no pytest: :func:`check` is all there is.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Callable
from collections.abc import Iterator

from pytest_isolation.core import pysource
from pytest_isolation.lint import hygiene
from pytest_isolation.lint import temp
from pytest_isolation.lint.findings import Finding
from pytest_isolation.lint.findings import Hit
from pytest_isolation.lint.source import Source

#: Part of the cache key of a file's findings: raise it whenever a rule changes.
RULES_VERSION = "1"

#: Every code, with what it flags.
CODES = {
    "ISO101": "sys.modules changed at import time",
    "ISO102": "mock patch started at import time and never stopped",
    "ISO103": "os.environ changed at import time",
    "ISO201": "hard-coded temporary path",
    "ISO202": "os.chdir without changing back",
    "ISO203": "os.environ changed in a test or fixture without a restore",
    "ISO301": "whole-module MagicMock in sys.modules",
    "ISO302": "time.sleep waiting for something in a test",
    "ISO303": "test that checks nothing (empty, or a comparison without assert)",
}


def check(source: str, path: str) -> list[Finding]:
    """The findings in one file's ``source``, by line; none for a file that
    does not parse (pytest reports its syntax error when it imports it)."""
    tree = pysource.parse(source, path)
    if tree is None:
        return []
    src = Source(tree, path)
    hits = [hit for node in src.nodes for hit in _node_hits(src, node)]
    hits.extend(hygiene.empty_tests(src))
    allowed = allow_comments(source)
    kept = {hit.finding for hit in hits if not _suppressed(hit, allowed)}
    return sorted(kept, key=lambda finding: (finding.line, finding.code))


def _node_hits(src: Source, node: ast.AST) -> Iterator[Hit]:
    for rule in _RULES.get(type(node), ()):
        yield from rule(src, node)


# -- suppression -----------------------------------------------------------------

_ALLOW = re.compile(r"#\s*isolation\s*:\s*allow\b(?P<codes>.*)", re.IGNORECASE)
_CODE = re.compile(r"\bISO\d{3}\b", re.IGNORECASE)


def allow_comments(source: str) -> dict[int, frozenset[str]]:
    """Line -> the codes its ``# isolation: allow`` comment allows (empty: all)."""
    allowed: dict[int, frozenset[str]] = {}
    if not _ALLOW.search(source):
        return allowed  # no such comment, nothing to tokenize
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            match = _ALLOW.search(token.string) if token.type == tokenize.COMMENT else None
            if match:
                codes = _CODE.findall(match["codes"])
                allowed[token.start[0]] = frozenset(code.upper() for code in codes)
    except (tokenize.TokenError, SyntaxError):
        pass
    return allowed


def _suppressed(hit: Hit, allowed: dict[int, frozenset[str]]) -> bool:
    for line in range(hit.finding.line, hit.last + 1):
        codes = allowed.get(line)
        if codes is not None and (not codes or hit.finding.code in codes):
            return True
    return False


# -- state changes: sys.modules, os.environ, the working directory ---------------

_MUTATORS = frozenset(
    {"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__"}
)
_CONTAINERS = {"os.environ": "environ", "sys.modules": "modules"}
_CALLS = {"os.putenv": "environ", "os.unsetenv": "environ", "os.chdir": "cwd"}

#: The code of a change of each kind, at import time and in a function.
_AT_IMPORT = {"environ": "ISO103", "modules": "ISO101", "cwd": "ISO202"}
_IN_FUNCTION = {"environ": "ISO203", "cwd": "ISO202"}

_MESSAGES = {
    "ISO101": (
        "sys.modules changed at import time ({what}): the change outlives this file and "
        "reaches every test file collected after it",
        "make the change in a fixture (monkeypatch.setitem(sys.modules, ...) or the "
        "mock_module fixture), which undoes it after each test",
    ),
    "ISO103": (
        "os.environ changed at import time ({what}): the variable stays changed for every "
        "test file collected after this one",
        "set it in a fixture with monkeypatch.setenv/delenv (or mock.patch.dict(os.environ, "
        "...)), or in a conftest.py for the whole suite",
    ),
    "ISO202": (
        "os.chdir without changing back ({what}): the working directory stays changed for "
        "every later test",
        "use monkeypatch.chdir(path) or `with contextlib.chdir(path):`, or change back in a "
        "finally or after the fixture's yield",
    ),
    "ISO203": (
        "os.environ changed without a restore ({what}): the variable stays changed for "
        "every later test",
        "use monkeypatch.setenv/delenv, or mock.patch.dict(os.environ, ...) as a decorator "
        "or context manager",
    ),
}


def _state_change(src: Source, node: ast.AST) -> Iterator[Hit]:
    kind = _change_kind(src, node)
    if kind is None or src.in_main_block(node):
        return
    function = src.function_of(node)
    if function is None:
        code = None if src.conftest else _AT_IMPORT[kind]
    else:
        code = None if src.is_hook(function) else _IN_FUNCTION.get(kind)
    if code is None or src.restored(node, kind) or _undone_by_name(src, node, kind):
        return
    message, fix = _MESSAGES[code]
    yield Hit.at(node, code, message.format(what=_short(node)), fix)


#: Words in the argument of ``os.chdir`` that say it changes back.
_SAVED = ("old", "orig", "prev", "saved", "cwd", "initial", "start", "back", "here")


def _undone_by_name(src: Source, node: ast.AST, kind: str) -> bool:
    """``os.chdir(old_cwd)`` is the change back, not a change; a key the
    enclosing test also gives to ``monkeypatch.setenv/delenv`` is restored
    by monkeypatch at teardown."""
    if kind == "cwd" and isinstance(node, ast.Call) and node.args:
        argument = node.args[0]
        if isinstance(argument, ast.Name) and _getcwd(src, src.bound(argument.id, node)):
            return True
        return any(word in ast.unparse(argument).lower() for word in _SAVED)
    key = _environ_key(node) if kind == "environ" else ""
    return bool(key) and key in src.monkeypatched_keys(node)


def _getcwd(src: Source, value: ast.AST | None) -> bool:
    if not isinstance(value, ast.Call):
        return False
    return src.qual(value.func) in ("os.getcwd", "os.getcwdb", "pathlib.Path.cwd", "Path.cwd")


def _environ_key(node: ast.AST) -> str:
    match node:
        case (
            ast.Assign(targets=[ast.Subscript(slice=key)])
            | ast.Delete(targets=[ast.Subscript(slice=key)])
        ):
            return _literal(key)
        case ast.Call(func=ast.Attribute(attr="setdefault" | "pop"), args=[key, *_]):
            return _literal(key)
    return ""


def _change_kind(src: Source, node: ast.AST) -> str | None:
    """``environ``, ``modules`` or ``cwd`` when ``node`` changes that state."""
    match node:
        case ast.Assign(targets=targets) | ast.Delete(targets=targets):
            return next(filter(None, (_container(src, t) for t in targets)), None)
        case ast.AugAssign(target=target) | ast.AnnAssign(target=target):
            return _container(src, target)
        case ast.Call(func=ast.Attribute(value=value, attr=attr)) if attr in _MUTATORS:
            return _CONTAINERS.get(src.qual(value))
        case ast.Call(func=func):
            return _CALLS.get(src.qual(func))
    return None


def _container(src: Source, target: ast.AST) -> str | None:
    if isinstance(target, ast.Subscript):
        return _CONTAINERS.get(src.qual(target.value))
    return _CONTAINERS.get(src.qual(target))  # ``os.environ = {...}``


# -- ISO102: patch(...).start() at import time -----------------------------------


def _patch_start(src: Source, node: ast.AST) -> Iterator[Hit]:
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "start"
        and not node.args
    ):
        return
    if src.function_of(node) is not None or src.conftest or src.in_main_block(node):
        return
    receiver = node.func.value
    name = receiver.id if isinstance(receiver, ast.Name) else ""
    patcher = _is_patch(src, receiver) or name in _module_patchers(src)
    if not patcher or _stopped(src, name):
        return
    how = f"call {name}.stop()" if name else "keep the patcher and call its stop()"
    yield Hit.at(
        node,
        "ISO102",
        f"mock patch started at import time ({_short(node)}) and never stopped: it stays "
        "active in every test file collected after this one",
        f"start it in a fixture and stop it after the yield, use patch as a decorator or "
        f"context manager, or {how} in teardown_module",
    )


def _is_patch(src: Source, node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    dotted = src.qual(node.func)
    return dotted.split(".")[-1] == "patch" or ".patch." in f".{dotted}"


def _module_patchers(src: Source) -> set[str]:
    """Names bound to a patcher at import time."""
    return {
        target.id
        for node in src.nodes
        if isinstance(node, ast.Assign)
        and src.function_of(node) is None
        and _is_patch(src, node.value)
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def _stopped(src: Source, name: str) -> bool:
    for node in src.nodes:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "stopall":
                return True
            receiver = node.func.value
            if node.func.attr == "stop" and isinstance(receiver, ast.Name) and receiver.id == name:
                return True
    return False


# -- ISO301: a whole-module MagicMock in sys.modules -------------------------------

_MOCKS = frozenset({"MagicMock", "Mock", "NonCallableMock", "NonCallableMagicMock", "AsyncMock"})


def _module_mock(src: Source, node: ast.AST) -> Iterator[Hit]:
    for name, value in _modules_entries(src, node):
        if _whole_mock(src, value, node) and src.installed(name):
            module = name or "pkg.mod"
            yield Hit.at(
                node,
                "ISO301",
                f"whole-module {_short(value)} as sys.modules[{module!r}]: any attribute "
                "exists on a mock, so a misspelt or removed name still passes",
                f"override only the names the test needs on the real module: "
                f"mock_module({module!r}, name=fake) (the mock_module fixture), or give the "
                "mock a spec",
            )


def _modules_entries(src: Source, node: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    """(module name or '', value) of each entry ``node`` puts in ``sys.modules``."""
    match node:
        case ast.Assign(targets=[ast.Subscript(value=container, slice=key)], value=value):
            if src.qual(container) == "sys.modules":
                yield _literal(key), value
        case ast.Call(func=func, args=[container, key, value, *_]) if (
            isinstance(func, ast.Attribute) and func.attr == "setitem"
        ):
            if src.qual(container) == "sys.modules":
                yield _literal(key), value
        case ast.Call(func=func, args=[container, *rest], keywords=keywords) if _updates_modules(
            src, func, container
        ):
            for entries in rest[:1]:
                yield from _dict_entries(entries)
            for keyword in keywords:
                if keyword.arg is not None:
                    yield keyword.arg, keyword.value
        case ast.Call(func=ast.Attribute(value=container, attr="update"), args=[entries]):
            if src.qual(container) == "sys.modules":
                yield from _dict_entries(entries)


def _updates_modules(src: Source, func: ast.AST, container: ast.AST) -> bool:
    """``patch.dict(sys.modules, {...})`` or ``patch.dict("sys.modules", ...)``."""
    if not src.qual(func).endswith("patch.dict"):
        return False
    target = container.value if isinstance(container, ast.Constant) else src.qual(container)
    return target == "sys.modules"


def _dict_entries(node: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    if isinstance(node, ast.Dict):
        for key, value in zip(node.keys, node.values, strict=True):
            if key is not None:
                yield _literal(key), value


def _whole_mock(src: Source, value: ast.AST, where: ast.AST) -> bool:
    """A mock without a spec, made here or bound to a name in the same scope."""
    if isinstance(value, ast.Name):
        bound = src.bound(value.id, where)
        return bound is not None and _whole_mock(src, bound, where)
    if not isinstance(value, ast.Call) or src.qual(value.func).split(".")[-1] not in _MOCKS:
        return False
    specs = {"spec", "spec_set", "wraps"}
    return not value.args and not any(keyword.arg in specs for keyword in value.keywords)


# -- helpers and dispatch -----------------------------------------------------------


def _literal(node: ast.AST) -> str:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""


def _short(node: ast.AST, limit: int = 60) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


Rule = Callable[[Source, ast.AST], Iterator[Hit]]

#: The rules that look at each type of node.
_RULES: dict[type[ast.AST], tuple[Rule, ...]] = {
    ast.Assign: (_state_change, _module_mock),
    ast.AugAssign: (_state_change,),
    ast.AnnAssign: (_state_change,),
    ast.Delete: (_state_change,),
    ast.Call: (_state_change, _patch_start, temp.temp_path, _module_mock, hygiene.sleep),
    ast.Expr: (hygiene.bare_comparison,),
}


def decode_source(content: bytes) -> str:
    """The source as Python reads it (a coding cookie, else UTF-8)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(content).readline)
        return content.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError):
        return content.decode("utf-8", "replace")
