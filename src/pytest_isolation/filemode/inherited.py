"""What a forked file-mode child does with what it inherited from the
parent: the shared fixtures (never torn down here) and database connections
(never used here: the child opens its own).

Imports: stdlib, pytest and the core only (the child side stays light).
"""

from __future__ import annotations

import sys

import pytest

from pytest_isolation.core.shared import SHARED_DEFINITIONS


def django_models() -> int:
    """How many models Django knows (0 without Django)."""
    registry = sys.modules.get("django.apps")
    try:
        return len(registry.apps.get_models(include_auto_created=True)) if registry else 0
    except Exception:  # the registry is not ready: no database either
        return 0


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
