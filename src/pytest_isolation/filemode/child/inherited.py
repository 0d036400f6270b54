"""What a forked file-mode child does with what it inherited from the
parent: the shared fixtures (never torn down here) and database connections
(never used here: the child opens its own).

Imports: stdlib, pytest and the core only (the child side stays light).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_isolation.core import pytest_private
from pytest_isolation.filemode.shared import SHARED_CLOSURES
from pytest_isolation.filemode.shared import SHARED_DEFINITIONS


def django_models() -> set[Any]:
    """The models Django knows (none without Django)."""
    registry = sys.modules.get("django.apps")
    try:
        return set(registry.apps.get_models()) if registry else set()
    except Exception:  # the registry is not ready: no database either
        return set()


def make_tables(config: pytest.Config, before: set[Any], path: Path) -> str | None:
    """Make the tables of the models that importing the test file at ``path``
    defined, as pytest-django's ``django_db_setup`` would have (the apps
    without migrations, ``--no-migrations`` included), in this child's own
    copy of an in-memory SQLite test database; say why not otherwise."""
    new = [model for model in django_models() - before if not model._meta.auto_created]
    if not new:
        return None
    # Django is imported (it made the models); through importlib: it has no types.
    database: Any = importlib.import_module("django.db")
    loader: Any = importlib.import_module("django.db.migrations.loader")
    connections, router = database.connections, database.router
    aliases = list(connections)
    if not all(getattr(connections[a], "is_in_memory_db", lambda: False)() for a in aliases):
        return (
            f"{path} defines Django models, and the shared test database, made before any "
            "test file was imported, has no tables for them; move the models into an app's "
            "models.py, use an in-memory SQLite test database, or leave django_db_setup out "
            "of isolation_shared_fixtures"
        )
    with _unblocked(config):
        for alias in aliases:
            connection = connections[alias]
            migrations = loader.MigrationLoader(connection, ignore_no_migrations=True)
            existing = set(connection.introspection.table_names())
            with connection.schema_editor() as editor:
                for model in new:
                    meta = model._meta
                    wanted = meta.app_label in migrations.unmigrated_apps
                    wanted = wanted and meta.can_migrate(connection)
                    wanted = wanted and router.allow_migrate_model(alias, model)
                    if wanted and meta.db_table not in existing:
                        editor.create_model(model)
    return None


def _unblocked(config: pytest.Config) -> Any:
    """pytest-django's database blocker, unblocked (the shared fixtures
    include its ``django_db_blocker``, set up in the parent)."""
    for definition in config.stash.get(SHARED_DEFINITIONS, []):
        cached = pytest_private.cached_result(definition)
        if getattr(definition, "argname", "") == "django_db_blocker" and cached:
            blocker = cached[0]
            if blocker is not None:
                return blocker.unblock()
    return contextlib.nullcontext()


def keep_shared_fixtures(config: pytest.Config) -> None:
    """The parent alone tears the shared fixtures down.  pytest before 8.2
    registers a fixture's teardown again each time a test asks for its
    cached value, so a child would tear them down at its session's end: in
    a child, their ``finish`` does nothing (``tests/test_shared.py`` runs
    on pytest 8.0)."""
    for definition in config.stash.get(SHARED_DEFINITIONS, []):
        pytest_private.replace_finish(definition, _kept)


def _kept(request: object) -> None:
    """The teardown of a shared fixture in a child: the parent's."""


def set_up_where_resolved_otherwise(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A shared fixture that this child's tests resolve otherwise than the
    parent did (a dependency that a subdirectory's conftest or the test
    module overrides), or that is built on such a fixture, is set up by
    this child, as ``pytest FILE`` would set it up: its inherited value is
    dropped (never torn down here: the parent tears it down)."""
    closures = config.stash.get(SHARED_CLOSURES, {})
    differing = {
        name for name, closure in closures.items() if _resolved_otherwise(name, closure, items)
    }
    grown = True
    while grown:  # one built on a dropped fixture is dropped too
        built_on = {
            name
            for name, closure in closures.items()
            if name not in differing and any(other in closure for other in differing)
        }
        differing |= built_on
        grown = bool(built_on)
    for name in differing:
        _drop_inherited(closures[name][name])


def _resolved_otherwise(fixture: str, closure: dict[str, object], items: list[pytest.Item]) -> bool:
    """Whether a test of ``items`` that uses ``fixture`` resolves a name of
    its ``closure`` to another definition."""
    for item in items:
        seen = _definitions_of(item)
        if fixture in seen and any(
            seen.get(name, closure[name]) is not closure[name] for name in closure
        ):
            return True
    return False


def _definitions_of(item: pytest.Item) -> dict[str, object]:
    """The fixture definitions an item resolves, by name (the closest of each)."""
    found = pytest_private.fixture_definitions(item)
    return {name: definitions[-1] for name, definitions in found.items() if definitions}


def _drop_inherited(definition: Any) -> None:
    """Forget the parent's value of ``definition`` in this child, so that the
    child computes and tears down its own (the parent's teardown steps never
    run here)."""
    pytest_private.forget_cached_value(definition)
    pytest_private.restore_finish(definition)  # this child's own teardown, not the parent's


#: Inherited database connections a child leaves unused: closing one would end
#: the parent's session on the database server (PostgreSQL's client sends
#: Terminate); kept referenced, so that no garbage collection closes them.
_ABANDONED: list[object] = []


def leave_connections() -> None:
    """pytest-django (any Django project): a child opens its own database
    connections; an in-memory SQLite database is the child's own copy."""
    database = sys.modules.get("django.db")
    if database is None:
        return
    try:
        wrappers = database.connections.all(initialized_only=True)
    except TypeError:  # Django before 4.1
        wrappers = database.connections.all()
    for wrapper in wrappers:
        in_memory = getattr(wrapper, "is_in_memory_db", None)
        if wrapper.connection is not None and not (in_memory is not None and in_memory()):
            _ABANDONED.append(wrapper.connection)
            wrapper.connection = None


def skipped_by_marks(item: pytest.Item) -> bool:
    """Whether a ``skip`` or ``skipif`` mark (its condition evaluated now),
    or an ``xfail(run=False)`` mark, keeps ``item`` from running, so that a
    plain run never sets up its fixtures."""
    try:
        if pytest_private.skip_marks_apply(item):
            return True
        stops = pytest_private.xfail_mark_stops_run(item)
    except BaseException:  # a condition that fails: the test's set-up will say so
        return False
    return stops and not item.config.option.runxfail


def shared_in_use(asked: Sequence[str], collected: Sequence[pytest.Item]) -> list[str] | None:
    """The shared fixtures of ``asked`` that the tests that run (not those a
    mark skips) request; None (each of them may be used) when one of those
    tests, or a fixture it uses, may ask for a fixture by name at run time
    (``request.getfixturevalue``: pytest-django asks for ``django_db_setup``
    so)."""
    running = [item for item in collected if not skipped_by_marks(item)]
    if any(_asks_at_run_time(item) for item in running):
        return None
    used = {name for item in running for name in _fixture_names(item)}
    return sorted(name for name in asked if name in used)


def _fixture_names(item: pytest.Item) -> list[str]:
    """The fixtures an item uses (a test function's closure: autouse ones,
    and those the ones it asks for ask for)."""
    names: list[str] = getattr(item, "fixturenames", [])
    return names


def _asks_at_run_time(item: pytest.Item) -> bool:
    functions = [getattr(item, "function", None)]
    functions += [getattr(d, "func", None) for d in _definitions_of(item).values()]
    return any(_calls_getfixturevalue(function) for function in functions if function is not None)


_ASKS: dict[object, bool] = {}


def _calls_getfixturevalue(function: object) -> bool:
    """Whether ``function``'s source names ``getfixturevalue`` (unknown: yes)."""
    code = getattr(inspect.unwrap(function), "__code__", None)  # type: ignore[arg-type]
    if code is None:
        return True
    if code not in _ASKS:
        try:
            _ASKS[code] = "getfixturevalue" in inspect.getsource(code)
        except (OSError, TypeError):
            _ASKS[code] = True
    return _ASKS[code]
