"""Session fixtures set up once for all children (``fork``): in the parent,
before the fork server the children come from, and torn down once, by the
parent, after the last file (:class:`SharedFixtures` says when, and which
fixtures a selecting run needs; the functions below say how).

The fixtures are set up through a stand-in test under each directory's first
file, so that each directory sees its own definition of a name, as its tests
would.  What the set-up leaves that a fork does not carry is refused before
any child starts (:mod:`.forkable`); pytest-django's databases and
connections are handled in :mod:`.django`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import threading
import time
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_isolation.core import pytest_private
from pytest_isolation.core.kinds import Started
from pytest_isolation.core.nodeid import name_of
from pytest_isolation.core.settings import Settings
from pytest_isolation.filemode import shared as declared
from pytest_isolation.filemode import wire
from pytest_isolation.filemode.parent import django
from pytest_isolation.filemode.parent import forkable
from pytest_isolation.filemode.parent.ending import end_child
from pytest_isolation.filemode.parent.starting import SESSION
from pytest_isolation.filemode.parent.starting import Starter
from pytest_isolation.filemode.parent.starting import write_line

if sys.version_info >= (3, 11):
    _Group = BaseExceptionGroup  # noqa: F821 - a builtin since 3.11
else:  # pytest's own dependency before 3.11
    from exceptiongroup import BaseExceptionGroup as _Group
from pytest_isolation.filemode.shared import SHARED_CLOSURES
from pytest_isolation.filemode.shared import SHARED_DEFINITIONS
from pytest_isolation.filemode.shared import SHARED_VALUES
from pytest_isolation.filemode.shared import flush_files

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
class SharedSetUp:
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
) -> tuple[list[str], SharedSetUp | None]:
    """The shared fixtures of the run set up in this process (``fork``), and
    the header's lines; a refusal ends the run (exit code 4).  ``used``: the
    ones the selected tests use, when known: only those are set up."""
    wanted = declared.names(session.config)
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
            django.refuse_test_models(session.config, [file.path for file in files], wanted)
        except forkable.Refused:
            shared.tear_down()
            raise
    except forkable.Refused as refusal:
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


def tear_down(shared: SharedSetUp, item: pytest.Item, last_test: str) -> None:
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


def set_up(
    session: pytest.Session,
    files: Sequence[pytest.Collector],
    wanted: list[str],
    used: set[str] | None = None,
) -> SharedSetUp:
    """Set up ``wanted`` as ``files``' tests would see them, before any child.

    Raises :class:`.forkable.Refused` (after tearing down what was set up) when the set-up
    started a thread, left a socket open or gave a value a fork cannot carry,
    and ``pytest.UsageError`` for a name no file sees or a fixture that is not
    session-scoped.
    """
    threads, sockets = set(threading.enumerate()), forkable.sockets()
    shared = SharedSetUp({}, [])
    try:
        with captured(session.config):
            seen = _set_up_each(session, files, wanted, shared, used)
        missing = [name for name in wanted if name not in seen]
        if missing:
            raise pytest.UsageError(
                f"{declared.INI}: no test file sees a fixture named {', '.join(map(repr, missing))}"
            )
        django.close_database_connections()
        forkable.check(shared.values, threads, sockets, session.config)
    except BaseException:
        shared.tear_down()
        raise
    values = shared.values
    flush_files(values)  # before the fork: no child writes the set-up's writes again
    session.config.stash[SHARED_VALUES] = values
    session.config.stash[SHARED_DEFINITIONS] = pytest_private.fixture_definitions_finished_by(
        shared.finalizers
    )
    session.config.stash[SHARED_CLOSURES] = shared.closures
    return shared


@contextlib.contextmanager
def captured(config: pytest.Config) -> Iterator[None]:
    """Capture as pytest does around a test's set-up and teardown (where a
    session fixture runs in a plain run); what was written is shown after."""
    capman: Any = config.pluginmanager.get_plugin("capturemanager")
    running = pytest_private.global_capture(config)
    if capman is None or running is None:  # stopped (Ctrl-C), or never on
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
    session: pytest.Session,
    files: Sequence[pytest.Collector],
    wanted: list[str],
    shared: SharedSetUp,
    used: set[str] | None,
) -> set[str]:
    """Set up ``wanted`` (the ``used`` ones, when known) through a stand-in
    under each directory's first file, into ``shared``; return the names
    some directory sees.  The stand-in's nodes are made active without
    setting any up (no package's ``setup_module``, no autouse fixture
    runs), and taken back off with the finalizers the set-up added (to the
    session: the fixtures are session-scoped), so that neither a child,
    which inherits pytest's set-up stack, nor pytest runs them.  pytest
    handles the set-up's warnings as around the set-up of the first test
    that uses them in a plain run: the run's filters (``-W``,
    ``filterwarnings``, ``error`` included) apply, and what is caught goes
    to the warnings summary."""
    seen: set[str] = set()
    for file in _one_per_directory(files):
        stand_in = _stand_in(file, wanted)
        pushed = pytest_private.push_nodes(session, stand_in.listchain())
        try:
            with (
                django.as_the_tests_would(stand_in),
                pytest_private.catch_warnings_for_item(stand_in),
            ):
                _set_up_names(stand_in, wanted, shared, seen, used)
        finally:
            shared.finalizers += pytest_private.pop_nodes(session, pushed)
    return seen


def _set_up_names(
    stand_in: pytest.Function,
    wanted: list[str],
    shared: SharedSetUp,
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
            value = pytest_private.item_request(stand_in).getfixturevalue(name)
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


def _one_per_directory(files: Sequence[pytest.Collector]) -> list[pytest.Collector]:
    firsts: dict[object, pytest.Collector] = {}
    for file in files:
        firsts.setdefault(file.path.parent, file)
    return list(firsts.values())


def _stand_in(file: pytest.Collector, wanted: list[str]) -> pytest.Function:
    """A test under ``file`` that requests ``wanted``, never run."""

    def nothing() -> None:
        """Stands in for the tests that use the shared fixtures."""

    marked = pytest.mark.usefixtures(*wanted)(nothing)
    return pytest.Function.from_parent(file, name=STAND_IN, callobj=marked)


def _last_definition(stand_in: pytest.Function, name: str) -> Any:
    """The definition of ``name`` the stand-in uses (the closest), or None."""
    definitions = pytest_private.fixture_definitions(stand_in).get(name)
    return definitions[-1] if definitions else None


def _definition(stand_in: pytest.Function, name: str) -> str | None:
    """Where the stand-in's ``name`` is defined (None: not visible there, or
    another fixture of a name only the decorator shares); a fixture that is
    not session-scoped, or is parametrized, is a usage error."""
    definition = _last_definition(stand_in, name)
    if definition is None:
        return None
    if name not in stand_in.config.getini(declared.INI) and not declared.decorated(definition.func):
        return None  # shared by the decorator elsewhere: another fixture of the same name
    where = f"{definition.baseid or '.'}: {name}"
    if definition.scope != "session":
        raise pytest.UsageError(
            f"{declared.INI}: {name!r} is {definition.scope}-scoped ({where}); only a "
            "session-scoped fixture can be set up once for every file's process"
        )
    if definition.params is not None:
        raise pytest.UsageError(
            f"{declared.INI}: {name!r} is parametrized ({where}); pytest sets it up once per "
            "parameter, which one set-up for every file's process cannot be"
        )
    return where


Selectors = Callable[[Path], "tuple[tuple[str, ...], ...] | None"]


class SharedFixtures:
    """The shared fixtures set up in this process, until their teardown."""

    def __init__(
        self, config: pytest.Config, settings: Settings, starter: Starter, selectors: Selectors
    ) -> None:
        self.config = config
        self.timeout = settings.timeout
        self.starter = starter
        self.selectors = selectors
        self.held: SharedSetUp | None = None
        #: The node id of the last test run, whose teardown reports theirs.
        self.last_test = ""

    def set_up(self, files: list[pytest.Collector]) -> None:
        """Set up the shared fixtures here, before the fork server (fork
        only); only the ones the selected tests use, when known."""
        session = self.config.stash[SESSION]
        used = self._in_use(files)
        lines, self.held = share(session, files, self.starter.method, used)
        for line in lines:
            write_line(self.config, line)

    def tear_down(self, item: pytest.Item) -> None:
        """Tear down the shared fixtures once, after the last file (or where
        the run stopped)."""
        held, self.held = self.held, None
        if held is not None:
            tear_down(held, item, self.last_test)

    def _in_use(self, files: list[pytest.Collector]) -> set[str] | None:
        """Which shared fixtures the selected tests that run (not those a
        ``skip`` or ``skipif`` mark skips, ``-k``, ``-m``, paths, node ids,
        ``--lf`` select) use: a throwaway child collects the files, as a
        plain run would before any set-up.  None when that child could not
        tell (said)."""
        wanted = declared.names(self.config)
        if not wanted or self.starter.method != "fork":
            return None
        first, rest = files[0], files[1:]
        assert isinstance(first, pytest.File)
        spec = wire.ChildSpec(
            path=str(first.path),
            selectors=self.selectors(first.path),
            more=tuple((str(file.path), self.selectors(file.path)) for file in rest),
            collect_only=True,
            uses=tuple(wanted),
            named=tuple(str(f.path) for f in files if f.session.isinitpath(f.path)),
        )
        child = self.starter.forking.fork_now(first).activate(spec, -1)
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        used: set[str] | None = None
        told = False
        try:
            for kind, payload in wire.Receiver(child.stream).messages(deadline):
                if kind == wire.USES:
                    names = payload["names"]
                    used, told = None if names is None else set(names), True
                if kind in (wire.USES, wire.FINISHED, wire.INTERRUPTED):
                    break
        except wire.TimedOut:
            pass
        finally:
            end_child(child)
        if not told:
            write_line(
                self.config,
                "isolation: the collection that finds which shared fixtures the selected "
                "tests use did not finish: every shared fixture is set up",
            )
        return used
