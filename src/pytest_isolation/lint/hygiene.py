"""Test hygiene: ISO302, a fixed wait for something a test started, and
ISO303, a test that checks nothing (an empty body, or a comparison whose
result is dropped: a forgotten ``assert``).

Static and best effort: a check made by code of another module is seen only
by its name.  A test without any assertion is not flagged as such: on real
suites nearly all of them were deliberate "does not raise" tests.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from pytest_isolation.lint.findings import Hit
from pytest_isolation.lint.source import TRIES
from pytest_isolation.lint.source import Function
from pytest_isolation.lint.source import Source

#: A call checks something when its name (without leading underscores)
#: starts with one of these, or is one of the names below.
_PREFIXES = ("assert", "check", "verify", "expect")
_CHECKS = frozenset(
    {"fail", "raises", "warns", "deprecated_call", "skip", "xfail", "importorskip", "skipTest"}
)
#: Decorators of tests not expected to check anything here.
_MARKS = ("xfail", "skip", "expectedFailure")
#: Fixtures that check the test's result themselves.
_CHECKING_FIXTURES = frozenset(
    {
        "benchmark",
        "snapshot",
        "data_regression",
        "file_regression",
        "num_regression",
        "dataframe_regression",
        "ndarrays_regression",
        "image_regression",
        "regtest",
    }
)


def empty_tests(src: Source) -> Iterator[Hit]:
    """ISO303 for tests whose body is empty: they pass without running anything."""
    for node in src.nodes:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if src.is_test(node) and _empty(node) and not _exempt(src, node):
            yield Hit.at(
                node,
                "ISO303",
                f"{node.name} has an empty body: it passes without checking anything",
                "write the test, or mark it @pytest.mark.skip(reason=...) until it is written",
            )


def bare_comparison(src: Source, node: ast.AST) -> Iterator[Hit]:
    """ISO303 for ``result == expected`` as a statement in a test: a forgotten ``assert``."""
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Compare)):
        return
    test = src.function_of(node)
    if test is None or not src.is_test(test) or _expects_error(src, node):
        return
    text = " ".join(ast.unparse(node.value).split())[:60]
    yield Hit.at(
        node,
        "ISO303",
        f"comparison without assert in {test.name} ({text}): its result is dropped, so the "
        "test passes whatever it is",
        f"write `assert {text}`",
    )


def sleep(src: Source, node: ast.AST) -> Iterator[Hit]:
    """ISO302: ``time.sleep`` in a test, after it started something (a thread, a process,
    a task) and before it checks the result, outside any polling loop."""
    if not isinstance(node, ast.Call) or src.qual(node.func) != "time.sleep":
        return
    test = src.function_of(node)
    if test is None or not src.is_test(test) or _zero(node) or _in_loop(src, node, test):
        return
    if not _started_before(src, test, node) or not asserts_after(src, test, node):
        return
    if _only_absence_after(test, node):  # no bounded wait can show that nothing happened
        return
    text = " ".join(ast.unparse(node).split())
    yield Hit.at(
        node,
        "ISO302",
        f"{text} in {test.name} waits a fixed time for what it started and then checks it: "
        "slow when it is ready sooner, flaky when the machine is busy",
        "wait for the condition itself with a deadline (poll it in a loop that fails after a "
        "timeout), or on an Event, a join() or a future with a timeout",
    )


#: Calls that start something running beside the test.
_STARTS = frozenset(
    {
        "start",
        "Popen",
        "Thread",
        "Process",
        "Timer",
        "submit",
        "create_task",
        "ensure_future",
        "run_in_executor",
        "run_coroutine_threadsafe",
        "apply_async",
        "start_new_thread",
        "start_soon",
        "call_later",
        "spawn",
        "delay",
    }
)


def _started_before(src: Source, test: Function, node: ast.AST) -> bool:
    line = getattr(node, "lineno", 0)
    for call in ast.walk(test):
        if isinstance(call, ast.Call) and call.lineno < line:
            name = _name(call.func)
            if name in _STARTS or src.qual(call.func).startswith("subprocess."):
                return True
    return False


def _expects_error(src: Source, node: ast.AST) -> bool:
    """In ``with pytest.raises(...)``/``self.assertRaises`` or a ``try``: the
    comparison is there to raise."""
    for parent in src.ancestors(node):
        if isinstance(parent, TRIES):
            return True
        if isinstance(parent, ast.With | ast.AsyncWith) and any(
            _checks(src, item.context_expr, set()) for item in parent.items
        ):
            return True
    return False


def _zero(call: ast.Call) -> bool:
    return bool(call.args) and isinstance(call.args[0], ast.Constant) and not call.args[0].value


def _in_loop(src: Source, node: ast.AST, test: ast.AST) -> bool:
    for parent in src.ancestors(node):
        if parent is test:
            return False
        if isinstance(parent, ast.For | ast.AsyncFor | ast.While):
            return True
    return False


def asserts(src: Source, function: Function, seen: set[int]) -> bool:
    """``function`` asserts, or calls a helper of this file that does."""
    seen.add(id(function))
    return any(_checks(src, node, seen) for node in ast.walk(function))


def _only_absence_after(test: Function, node: ast.AST) -> bool:
    """Every check after ``node`` asserts that something did not happen
    (``assert not sent``, ``assert queue.empty() is True``... ``is None``,
    ``== 0``, ``not in``, ``assert_not_called()``)."""
    line = getattr(node, "lineno", 0)
    checks = [
        child
        for child in ast.walk(test)
        if getattr(child, "lineno", 0) > line
        and (isinstance(child, ast.Assert) or _named_check(child))
    ]
    return bool(checks) and all(_absence(check) for check in checks)


def _named_check(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and _checking_name(_name(node.func).lstrip("_"))


#: Values an assertion compares with to say that nothing happened.
_NOTHING = (None, False, 0, "", b"")


#: Words of a check's name that say it checks an absence
#: (``assert_not_called``, ``assertNotIn``, ``assertFalse``, ``assertIsNone``).
_ABSENT_WORDS = frozenset({"not", "false", "none", "empty"})
#: Checks that compare their first two arguments (``assertEqual(len(sent), 0)``).
_EQUALITY = frozenset({"assertEqual", "assertEquals", "assertIs"})


def _words(name: str) -> set[str]:
    """``assertNotIn`` and ``assert_not_called`` as words."""
    return {word.lower() for word in re.findall(r"[a-z]+|[A-Z][a-z]*", name)}


def _nothing(value: ast.AST) -> bool:
    """``None``, ``False``, ``0``, ``""``, or an empty list, tuple, dict or set."""
    if isinstance(value, ast.List | ast.Tuple | ast.Set):
        return not value.elts
    if isinstance(value, ast.Dict):
        return not value.keys
    return isinstance(value, ast.Constant) and value.value in _NOTHING


def _absence(check: ast.AST) -> bool:
    if isinstance(check, ast.Call):
        name = _name(check.func)
        if name in _EQUALITY and len(check.args) >= 2:
            return _nothing(check.args[1]) or _nothing(check.args[0])
        return bool(_words(name) & _ABSENT_WORDS)
    test = check.test if isinstance(check, ast.Assert) else None
    match test:
        case ast.UnaryOp(op=ast.Not()):
            return True
        case ast.Compare(ops=[ast.NotIn()]):
            return True
        case ast.Compare(ops=[ast.Is() | ast.Eq()], comparators=[right]):
            return _nothing(right)
        case ast.Call(func=func):  # ``assert queue.empty()``
            return bool(_words(_name(func)) & {"empty"})
    return False


def asserts_after(src: Source, test: Function, node: ast.AST) -> bool:
    line = getattr(node, "lineno", 0)
    return any(
        getattr(child, "lineno", 0) > line and _checks(src, child, {id(test)})
        for child in ast.walk(test)
    )


def _checks(src: Source, node: ast.AST, seen: set[int]) -> bool:
    if isinstance(node, ast.Assert | ast.Raise):
        return True
    if not isinstance(node, ast.Call):
        return False
    name = _name(node.func)
    if _checking_name(name.lstrip("_")):
        return True
    func = node.func
    on_self = isinstance(func, ast.Attribute) and ast.unparse(func.value) in ("self", "cls")
    helper = src.functions.get(name) if on_self or isinstance(func, ast.Name) else None
    return helper is not None and id(helper) not in seen and asserts(src, helper, seen)


def _name(func: ast.AST) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _checking_name(name: str) -> bool:
    """``assert_called_once``, ``assertEqual``, ``check_output``, ``fail``; not ``checkpoint``."""
    if name in _CHECKS:
        return True
    for prefix in _PREFIXES:
        rest = name[len(prefix) :] if name.startswith(prefix) else None
        if rest is not None and (not rest or rest[0] == "_" or rest[0].isupper()):
            return True
    return False


def _exempt(src: Source, test: Function) -> bool:
    decorators = [*test.decorator_list]
    owner = src.class_of(test)
    if owner is not None:
        decorators.extend(owner.decorator_list)
    if any(_mark_name(decorator).endswith(_MARKS) for decorator in decorators):
        return True
    arguments = test.args.posonlyargs + test.args.args + test.args.kwonlyargs
    if any(argument.arg in _CHECKING_FIXTURES for argument in arguments):
        return True
    # An empty method in a subclass turns off the test it inherits.
    return owner is not None and bool(owner.bases) and _empty(test)


def _mark_name(decorator: ast.expr) -> str:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return ast.unparse(target)


def _empty(function: Function) -> bool:
    return all(
        isinstance(statement, ast.Pass)
        or (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant))
        for statement in function.body
    )
