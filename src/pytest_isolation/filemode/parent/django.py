"""pytest-django and the shared fixtures: the test databases the parent
creates for every child, models a test file defines, and connections no
child may share."""

from __future__ import annotations

import ast
import contextlib
import os
import sys
from collections.abc import Iterator
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_isolation.core import pysource
from pytest_isolation.filemode.parent.forkable import Refused


@contextlib.contextmanager
def as_the_tests_would(stand_in: pytest.Function) -> Iterator[None]:
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


def close_database_connections() -> None:
    """pytest-django (any Django project): close the parent's database
    connections before the first child is forked, so each child opens its
    own to the test database.  Django keeps an in-memory SQLite database
    open (its close is a no-op there): each child gets a copy of it."""
    database = sys.modules.get("django.db")
    if database is not None:
        database.connections.close_all()
