"""Session fixtures set up once for all children (``fork``): in the parent,
before the fork server the children come from, and torn down once, by the
parent, after the last file.

The fixtures are set up through a stand-in test under each directory's first
file, so that each directory sees its own definition of a name, as its tests
would.  What the set-up leaves that a fork does not carry (a thread, an open
socket, a value that is a thread, a socket, an executor, an event loop or a
process) is refused before any child starts; database connections of
pytest-django are closed here and never used by a child, which opens its own.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_isolation.core import pysource
from pytest_isolation.core import shared as names
from pytest_isolation.core.kinds import Started
from pytest_isolation.core.nodeid import name_of

if sys.version_info >= (3, 11):
    _Group = BaseExceptionGroup  # noqa: F821 - a builtin since 3.11
else:  # pytest's own dependency before 3.11
    from exceptiongroup import BaseExceptionGroup as _Group
from pytest_isolation.core.shared import SHARED_CLOSURES
from pytest_isolation.core.shared import SHARED_DEFINITIONS
from pytest_isolation.core.shared import SHARED_VALUES
from pytest_isolation.core.shared import flush_files
from pytest_isolation.filemode.child.plugin import global_capture

#: How a fixture's set-up can fail; pytest keeps the failure as its value.
_SET_UP_FAILED = (Exception, pytest.skip.Exception, pytest.fail.Exception)
#: Printed whenever shared fixtures are set up: how they differ from a plain run's.
SHARED_CAVEAT = (
    "isolation: shared fixtures are set up before any test module is imported (what one "
    "registers at import is not in them)"
)
#: Added to it when the run selects nothing: which fixtures are used was not looked up.
EVEN_UNUSED = "even if no test uses them"
#: Name of the stand-in test that requests the shared fixtures.
STAND_IN = "<shared fixtures>"


@dataclasses.dataclass
class Shared:
    """The shared fixtures of a run: their values, and the parent's teardown of them."""

    values: dict[str, object]
    #: The session's finalizers the set-up added, run last-in first-out at the end.
    finalizers: list[Callable[[], object]]
    #: Session fixtures pytest sets up before the shared ones (autouse ones,
    #: or those a shared one comes after in pytest's order), set up first
    #: here too, and so shared as well.
    before: list[str] = dataclasses.field(default_factory=list)
    #: Each shared fixture's definitions (its own and its dependencies') by name.
    closures: dict[str, dict[str, object]] = dataclasses.field(default_factory=dict)

    def tear_down(self) -> None:
        """Run the teardown once; raise what failed (all of it, as pytest would)."""
        errors: list[BaseException] = []
        while self.finalizers:
            finalizer = self.finalizers.pop()
            try:
                finalizer()
            except BaseException as error:  # every teardown runs
                errors.append(error)
        if len(errors) == 1:
            raise errors[0]
        if errors:
            raise _Group("errors while tearing down the shared fixtures", errors)


def share(
    session: pytest.Session,
    files: Sequence[pytest.Collector],
    method: Started,
    used: set[str] | None = None,
) -> tuple[list[str], Shared | None]:
    """The shared fixtures of the run set up in this process (``fork``), and
    the header's lines; a refusal ends the run (exit code 4).  ``used``: the
    ones the selected tests use, when known: only those are set up."""
    wanted = names.names(session.config)
    if not wanted:
        return [], None
    if method != "fork":
        return [
            f"isolation: the shared fixtures ({', '.join(wanted)}) are set up in each child: "
            f"children of the start method {method} do not inherit them"
        ], None
    started = time.monotonic()
    unused = [] if used is None else [name for name in wanted if name not in used]
    try:
        shared = set_up(session, files, wanted, used)
        try:
            refuse_test_models(session.config, [file.path for file in files], wanted)
        except Refused:
            shared.tear_down()
            raise
    except Refused as refusal:
        pytest.exit(
            f"isolation: {refusal}; leave it out of isolation_shared_fixtures (or the "
            "shared_fixture decorator), or start it in each child: in a function-scoped "
            "fixture, or in a pytest_isolation_child_started hook",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )
    except pytest.UsageError as error:
        pytest.exit(f"isolation: {error}", returncode=pytest.ExitCode.USAGE_ERROR)
    seconds = time.monotonic() - started
    lines = []
    if unused:
        lines.append(f"isolation: no selected test uses the shared fixtures {', '.join(unused)}")
    if not shared.values:
        return lines, None
    line = (
        f"isolation: shared fixtures set up once for every child, in {seconds:.2f} s: "
        f"{', '.join(shared.values)}"
    )
    if shared.before:
        line += f" (after {', '.join(shared.before)}, which pytest sets up first)"
    caveat = SHARED_CAVEAT if used is not None else f"{SHARED_CAVEAT}, {EVEN_UNUSED}"
    return [*lines, line, caveat], shared


def tear_down(shared: Shared, item: pytest.Item, last_test: str) -> None:
    """Tear the shared fixtures down once, after the last file; a failure is
    an error at the teardown of ``last_test``, the run's last, as in a plain
    run (``item`` is its file's placeholder)."""
    with captured(item.config):
        call = pytest.CallInfo.from_call(shared.tear_down, when="teardown")
    if call.excinfo is None:
        return
    report = pytest.TestReport.from_item_and_call(item, call)
    if last_test:
        report.nodeid = last_test
        report.location = (report.location[0], None, name_of(last_test))
    item.ihook.pytest_runtest_logreport(report=report)


class Refused(Exception):
    """A shared fixture's set-up left something a forked child cannot inherit."""


def set_up(
    session: pytest.Session,
    files: Sequence[pytest.Collector],
    wanted: list[str],
    used: set[str] | None = None,
) -> Shared:
    """Set up ``wanted`` as ``files``' tests would see them, before any child.

    Raises :class:`Refused` (after tearing down what was set up) when the set-up
    started a thread, left a socket open or gave a value a fork cannot carry,
    and ``pytest.UsageError`` for a name no file sees or a fixture that is not
    session-scoped.
    """
    threads, sockets = set(threading.enumerate()), _sockets()
    shared = Shared({}, [])
    try:
        with captured(session.config):
            seen = _set_up_each(_setup_state(session), files, wanted, shared, used)
        missing = [name for name in wanted if name not in seen]
        if missing:
            raise pytest.UsageError(
                f"{names.INI}: no test file sees a fixture named {', '.join(map(repr, missing))}"
            )
        close_database_connections()
        _check(shared.values, threads, sockets, session.config)
    except BaseException:
        shared.tear_down()
        raise
    values = shared.values
    flush_files(values)  # before the fork: no child writes the set-up's writes again
    session.config.stash[SHARED_VALUES] = values
    session.config.stash[SHARED_DEFINITIONS] = _definitions(shared.finalizers)
    session.config.stash[SHARED_CLOSURES] = shared.closures
    return shared


@contextlib.contextmanager
def captured(config: pytest.Config) -> Iterator[None]:
    """Capture as pytest does around a test's set-up and teardown (where a
    session fixture runs in a plain run); what was written is shown after."""
    capman: Any = config.pluginmanager.get_plugin("capturemanager")
    if capman is None or global_capture(config) is None:  # stopped (Ctrl-C), or never on
        yield
        return
    capman.resume_global_capture()
    try:
        yield
    finally:
        capman.suspend_global_capture()
        out, err = capman.read_global_capture()
        for text, stream in ((out, sys.stdout), (err, sys.stderr)):
            if text:
                stream.write(text)
                stream.flush()


def _set_up_each(
    state: Any,
    files: Sequence[pytest.Collector],
    wanted: list[str],
    shared: Shared,
    used: set[str] | None,
) -> set[str]:
    """Set up ``wanted`` (the ``used`` ones, when known) through a stand-in
    under each directory's first file, into ``shared``; return the names
    some directory sees."""
    seen: set[str] = set()
    for file in _one_per_directory(files):
        stand_in = _stand_in(file, wanted)
        pushed = _push(state, stand_in)
        try:
            with _as_the_tests_would(stand_in), _warnings_of(stand_in):
                _set_up_names(stand_in, wanted, shared, seen, used)
        finally:
            shared.finalizers += _pop(state, pushed)
    return seen


def _set_up_names(
    stand_in: pytest.Function,
    wanted: list[str],
    shared: Shared,
    seen: set[str],
    used: set[str] | None,
) -> None:
    """Set up ``wanted`` (the ``used`` ones, when known) in pytest's order
    for the stand-in (``fixturenames``: autouse fixtures first, higher scopes
    first), with the session fixtures that come before them in it, as every
    test's set-up would."""
    visible = [name for name in wanted if _definition(stand_in, name) is not None]
    seen.update(visible)
    visible = [name for name in visible if used is None or name in used]
    order = list(stand_in.fixturenames)
    last = max((order.index(name) for name in visible if name in order), default=-1)
    needed = _needed_by(stand_in, visible)
    for name in [*order[: last + 1], *visible]:
        if name in shared.values or name in shared.before:
            continue
        found = _last_definition(stand_in, name)
        if name not in visible and (found is None or found.scope != "session"):
            continue
        try:
            value = _request(stand_in).getfixturevalue(name)
        except _SET_UP_FAILED:  # kept by pytest: each test that uses it fails with it
            continue
        if name in visible:
            shared.values[name] = value
            closure = [name, *_needed_by(stand_in, [name])]
            shared.closures[name] = {n: _last_definition(stand_in, n) for n in closure}
        elif name not in needed:  # not set up through them anyway
            shared.before.append(name)


def _needed_by(stand_in: pytest.Function, names: list[str]) -> set[str]:
    """The fixtures that ``names`` request, directly or through others."""
    found: set[str] = set()
    todo = list(names)
    while todo:
        definition = _last_definition(stand_in, todo.pop())
        for argname in definition.argnames if definition is not None else ():
            if argname not in found:
                found.add(argname)
                todo.append(argname)
    return found


def _warnings_of(stand_in: pytest.Function) -> contextlib.AbstractContextManager[None]:
    """pytest's own handling of a test's warnings around the shared set-up,
    as around the set-up of the first test that uses them in a plain run:
    the run's filters (``-W``, ``filterwarnings``, ``error`` included) apply,
    and what is caught goes to the warnings summary.  Private pytest API,
    unavoidable (``_pytest.warnings.catch_warnings_for_item``);
    ``tests/test_shared.py::test_a_warning_of_the_shared_set_up_is_in_the_summary``
    fails loudly if it changes."""
    from _pytest.warnings import catch_warnings_for_item

    manager: contextlib.AbstractContextManager[None] = catch_warnings_for_item(
        stand_in.config, stand_in.ihook, "runtest", stand_in
    )
    return manager


@contextlib.contextmanager
def _as_the_tests_would(stand_in: pytest.Function) -> Iterator[None]:
    """pytest-django creates the test databases that the run's tests use,
    which it reads from ``session.items``: in the parent, placeholders that
    use none.  While the shared fixtures are set up, a stand-in that uses
    every database, with serialized rollback, takes their place."""
    session = stand_in.session
    if not session.config.pluginmanager.has_plugin("django"):
        yield
        return
    items = session.items
    stand_in.add_marker(pytest.mark.django_db(databases="__all__", serialized_rollback=True))
    session.items = [stand_in]
    try:
        yield
    finally:
        session.items = items


def django_models_in(path: Path) -> str | None:
    """``path:line (Name)`` of the first Django model a test file defines at
    its top level (``class Name(models.Model)``, ``class Name(Model)``)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if b"Model" not in data:
        return None
    tree = pysource.parse(data, str(path))
    if tree is None:
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and any(map(_is_model_base, node.bases)):
            return f"{path}:{node.lineno} ({node.name})"
    return None


def _is_model_base(base: ast.expr) -> bool:
    if isinstance(base, ast.Attribute):
        return (
            base.attr == "Model" and isinstance(base.value, ast.Name) and base.value.id == "models"
        )
    return isinstance(base, ast.Name) and base.id == "Model"


def refuse_test_models(config: pytest.Config, paths: Sequence[Path], wanted: list[str]) -> None:
    """pytest-django creates the test database's tables for the models known
    when ``django_db_setup`` runs; in a plain run every test file has been
    imported by then, here none has: a test file that defines a model would
    find no table for it.  A child makes the table in its own copy of an
    in-memory SQLite database (:func:`.inherited.make_tables`); a database
    the children share is refused."""
    if "django_db_setup" not in wanted or not config.pluginmanager.has_plugin("django"):
        return
    if _in_memory_only():
        return
    loaded = {
        os.path.realpath(file)
        for module in list(sys.modules.values())
        if isinstance(file := getattr(module, "__file__", None), str)
    }
    for path in paths:
        if os.path.realpath(path) in loaded:  # an app's models, which Django has loaded
            continue
        found = django_models_in(path)
        if found is not None:
            raise Refused(
                f"{found} defines a Django model, and the shared django_db_setup creates the "
                "test database, which every child shares, before any test file is imported, "
                "so it would have no table for it; move the model into an app's models.py, "
                "use an in-memory SQLite test database, or leave django_db_setup out"
            )


def _in_memory_only() -> bool:
    """Whether every test database is an in-memory SQLite one (each child's own copy)."""
    database = sys.modules.get("django.db")
    if database is None:
        return False
    connections = database.connections
    return all(
        getattr(connections[alias], "is_in_memory_db", lambda: False)() for alias in connections
    )


def _definitions(finalizers: list[Callable[[], object]]) -> list[object]:
    """The fixture definitions whose teardown the finalizers are (pytest
    registers ``functools.partial(definition.finish, request=...)``)."""
    found = []
    for finalizer in finalizers:
        method = getattr(finalizer, "func", None)
        owner = getattr(method, "__self__", None)
        if owner is not None and getattr(method, "__name__", "") == "finish":
            found.append(owner)
    return found


def _one_per_directory(files: Sequence[pytest.Collector]) -> list[pytest.Collector]:
    firsts: dict[object, pytest.Collector] = {}
    for file in files:
        firsts.setdefault(file.path.parent, file)
    return list(firsts.values())


def _setup_state(session: pytest.Session) -> Any:
    """pytest's stack of set-up nodes and their finalizers.  Private pytest
    API, unavoidable: a fixture set up outside a test registers its teardown
    there (``session._setupstate``, its ``stack`` of ``node: (finalizers,
    exception)``); ``tests/test_shared.py`` fails loudly if it changes."""
    return session._setupstate


def _push(state: Any, stand_in: pytest.Function) -> list[object]:
    """Make the stand-in's nodes active without setting any up (no package's
    ``setup_module``, no autouse fixture runs); return those it added."""
    pushed: list[object] = [n for n in stand_in.listchain() if n not in state.stack]
    for node in pushed:
        state.stack[node] = ([], None)
    return pushed


def _pop(state: Any, pushed: list[object]) -> list[Callable[[], object]]:
    """Take the nodes back off the stack, and with them the finalizers the
    set-up added (to the session: the fixtures are session-scoped), so that
    neither a child, which inherits the stack, nor pytest runs them."""
    taken: list[Callable[[], object]] = []
    for node in pushed:
        finalizers, _ = state.stack.pop(node)
        taken += finalizers
    return taken


def _stand_in(file: pytest.Collector, wanted: list[str]) -> pytest.Function:
    """A test under ``file`` that requests ``wanted``, never run."""

    def nothing() -> None:
        """Stands in for the tests that use the shared fixtures."""

    marked = pytest.mark.usefixtures(*wanted)(nothing)
    return pytest.Function.from_parent(file, name=STAND_IN, callobj=marked)


def _request(stand_in: pytest.Function) -> pytest.FixtureRequest:
    """The stand-in's fixture request.  Private pytest API, unavoidable: a
    test's request is ``item._request``; ``tests/test_shared.py`` fails
    loudly if it changes."""
    request: pytest.FixtureRequest = stand_in._request
    return request


def _last_definition(stand_in: pytest.Function, name: str) -> Any:
    """The definition of ``name`` the stand-in uses (the closest), or None.
    Private pytest API, unavoidable: a test's fixture definitions by name are
    in ``item._fixtureinfo.name2fixturedefs``; ``tests/test_shared.py``
    fails loudly if it changes."""
    definitions = stand_in._fixtureinfo.name2fixturedefs.get(name)
    return definitions[-1] if definitions else None


def _definition(stand_in: pytest.Function, name: str) -> str | None:
    """Where the stand-in's ``name`` is defined (None: not visible there, or
    another fixture of a name only the decorator shares); a fixture that is
    not session-scoped, or is parametrized, is a usage error."""
    definition = _last_definition(stand_in, name)
    if definition is None:
        return None
    if name not in stand_in.config.getini(names.INI) and not names.decorated(definition.func):
        return None  # shared by the decorator elsewhere: another fixture of the same name
    where = f"{definition.baseid or '.'}: {name}"
    if definition.scope != "session":
        raise pytest.UsageError(
            f"{names.INI}: {name!r} is {definition.scope}-scoped ({where}); only a "
            "session-scoped fixture can be set up once for every file's process"
        )
    if definition.params is not None:
        raise pytest.UsageError(
            f"{names.INI}: {name!r} is parametrized ({where}); pytest sets it up once per "
            "parameter, which one set-up for every file's process cannot be"
        )
    return where


def _sockets() -> set[int]:
    """This process's open sockets (Linux: ``/proc/self/fd``)."""
    try:
        fds = [int(entry) for entry in os.listdir("/proc/self/fd")]
    except OSError:
        return set()
    found = set()
    for fd in fds:
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                found.add(fd)
        except OSError:
            continue
    return found


#: Values a forked child cannot use as its own: the type and why.
_UNSAFE: tuple[tuple[type, str], ...] = (
    (threading.Thread, "a thread does not survive a fork"),
    (socket.socket, "a forked child would talk on the same connection"),
    (subprocess.Popen, "only the process that started a process can wait for it"),
)


def _unsafe_types() -> tuple[tuple[type, str], ...]:
    """:data:`_UNSAFE` and those of modules already imported (never imported here)."""
    found = list(_UNSAFE)
    futures = sys.modules.get("concurrent.futures")
    if futures is not None:
        found.append((futures.Executor, "its workers do not survive a fork"))
    asyncio = sys.modules.get("asyncio")
    if asyncio is not None:
        found.append((asyncio.AbstractEventLoop, "an event loop does not survive a fork"))
    pool = sys.modules.get("multiprocessing.pool")
    if pool is not None:
        found.append((pool.Pool, "its workers do not survive a fork"))
    return tuple(found)


def unsafe_part(value: object) -> str | None:
    """What in ``value`` (itself, or one level of a container) a fork cannot carry."""
    parts: list[object] = [value]
    if isinstance(value, (list, tuple, set, frozenset)):
        parts.extend(list(value)[:100])
    elif isinstance(value, dict):
        parts.extend(list(value.values())[:100])
    for part in parts:
        for kind, why in _unsafe_types():
            if isinstance(part, kind):
                return f"a {type(part).__qualname__} ({why})"
    return None


def _check(
    values: dict[str, object],
    threads: set[threading.Thread],
    sockets: set[int],
    config: pytest.Config,
) -> None:
    fixtures = ", ".join(map(repr, values))
    started = [t.name for t in threading.enumerate() if t not in threads and t.is_alive()]
    if started:
        raise Refused(
            f"the set-up of the shared fixtures {fixtures} started the thread "
            f"{', '.join(started)}, which a forked child would not have"
        )
    for name, value in values.items():
        part = unsafe_part(value)
        if part is not None:
            raise Refused(f"the shared fixture {name!r} gives {part}")
    opened = sorted(_sockets() - sockets)
    renews = config.pluginmanager.hook.pytest_isolation_child_started.get_hookimpls()
    if opened and not renews:
        raise Refused(
            f"the set-up of the shared fixtures {fixtures} left {len(opened)} socket(s) open, "
            "which every forked child would share; close them, or renew them in each child in "
            "a pytest_isolation_child_started hook (which says the project takes care of it)"
        )


def close_database_connections() -> None:
    """pytest-django (any Django project): close the parent's database
    connections before the first child is forked, so each child opens its
    own to the test database.  Django keeps an in-memory SQLite database
    open (its close is a no-op there): each child gets a copy of it."""
    database = sys.modules.get("django.db")
    if database is not None:
        database.connections.close_all()
