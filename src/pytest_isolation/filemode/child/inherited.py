"""What a forked file-mode child does with what it inherited from the
parent: the shared fixtures (never torn down here) and database connections
(never used here: the child opens its own).

Imports: stdlib, pytest and the core only (the child side stays light).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_isolation.core.shared import SHARED_DEFINITIONS


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
        cached = getattr(definition, "cached_result", None)
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
        setattr(definition, "finish", _kept)  # noqa: B010 - an instance's method


def _kept(request: object) -> None:
    """The teardown of a shared fixture in a child: the parent's."""


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
