"""pytest-django with file mode: ``django_db_setup`` shared creates the test
database once for every child, and each child uses its own connection
(the real plugin, on the project of ``benchmarks/django_suite.py``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from conftest import run_file_mode

pytest.importorskip("pytest_django")

SHARED = ("-p", "django", "-o", "isolation_shared_fixtures=django_db_setup", "--setup-show")

#: A transactional test commits; the other file's child must not see the row.
COMMITS = """
import pytest
from shop.models import Item0

@pytest.mark.django_db(transaction=True)
def test_commits():
    Item0.objects.create(name="committed")
    assert Item0.objects.count() == 1
"""

SEES_NONE = """
import pytest
from shop.models import Item0

@pytest.mark.django_db
def test_sees_none():
    assert Item0.objects.count() == 0
"""


def _suite() -> ModuleType:
    path = Path(__file__).parents[1] / "benchmarks" / "django_suite.py"
    spec = importlib.util.spec_from_file_location("django_suite", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("django_suite", module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(params=["memory", "file"])
def project(request: pytest.FixtureRequest, pytester: pytest.Pytester) -> Path:
    """The project with its test database in memory (Django's default for
    SQLite) or in a file (``TEST.NAME``)."""
    root = _suite().make_project(pytester.path, files=3, models=2)
    (root / "tests" / "test_commits.py").write_text(COMMITS)
    (root / "tests" / "test_sees_none.py").write_text(SEES_NONE)
    if request.param == "file":
        settings = root / "proj" / "settings.py"
        text = settings.read_text().replace(
            '"NAME": str(BASE / "db.sqlite3")',
            '"NAME": str(BASE / "db.sqlite3"), "TEST": {"NAME": str(BASE / "test.sqlite3")}',
        )
        settings.write_text(text)
    return root


def test_the_test_database_is_created_once_for_every_child(
    pytester: pytest.Pytester, project: Path
) -> None:
    result = run_file_mode(pytester, "fork", *SHARED)
    result.assert_outcomes(passed=20)
    output = result.stdout.str()
    assert output.count("SETUP    S django_db_setup") == 1
    result.stdout.fnmatch_lines(
        [
            "isolation: shared fixtures set up once for every child, in *: django_db_setup "
            "(after _fail_for_invalid_template_variable, which pytest sets up first)"
        ]
    )


def test_without_sharing_each_child_creates_it(pytester: pytest.Pytester, project: Path) -> None:
    result = run_file_mode(pytester, "fork", "-p", "django", "--setup-show")
    result.assert_outcomes(passed=20)
    assert result.stdout.str().count("SETUP    S django_db_setup") == 5


def test_spawned_children_create_it_each(pytester: pytest.Pytester, project: Path) -> None:
    result = run_file_mode(pytester, "spawn", *SHARED)
    result.assert_outcomes(passed=20)
    assert result.stdout.str().count("SETUP    S django_db_setup") == 5


DEFINES_A_MODEL = """
import pytest
from django.db import models

class Note(models.Model):
    text = models.CharField(max_length=10)

    class Meta:
        app_label = "shop"

@pytest.mark.django_db
def test_note():
    assert Note.objects.count() == 0
"""


def _in_memory(project: Path) -> bool:
    return '"TEST"' not in (project / "proj" / "settings.py").read_text()


def test_a_test_file_that_defines_a_model_gets_its_table_or_is_refused(
    pytester: pytest.Pytester, project: Path
) -> None:
    """A plain run imports every test file before it creates the test
    database, so a model defined in one gets a table; a shared database is
    made before any is imported.  A child makes the table in its own copy of
    an in-memory database; a database the children share is refused at
    start."""
    (project / "tests" / "test_note.py").write_text(DEFINES_A_MODEL)
    result = run_file_mode(pytester, "fork", *SHARED, "--no-migrations")
    if _in_memory(project):
        result.assert_outcomes(passed=21)
        return
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(
        [
            "*isolation: */tests/test_note.py:5 (Note) defines a Django model, and the shared "
            "django_db_setup creates the test database, which every child shares, before any "
            "test file is imported*"
        ]
    )


def test_a_model_the_parent_cannot_see_gets_its_table_or_fails_its_file(
    pytester: pytest.Pytester, project: Path
) -> None:
    hidden = DEFINES_A_MODEL.replace(
        "class Note(models.Model):", "Base = models.Model\n\nclass Note(Base):"
    )
    (project / "tests" / "test_note.py").write_text(hidden)
    result = run_file_mode(pytester, "fork", *SHARED, "--no-migrations")
    if _in_memory(project):
        result.assert_outcomes(passed=21)
        return
    result.assert_outcomes(passed=20, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*isolation: */tests/test_note.py defines Django models, and the shared test "
            "database, made before any test file was imported, has no tables for them*"
        ]
    )


def test_with_migrations_a_test_file_s_model_has_no_table_as_in_a_plain_run(
    pytester: pytest.Pytester, project: Path
) -> None:
    """The app of the model has migrations: Django makes no table for a model
    they do not have, in a plain run either; the child makes none."""
    if not _in_memory(project):
        pytest.skip("a shared database file is refused at start (above)")
    (project / "tests" / "test_note.py").write_text(DEFINES_A_MODEL)
    plain = pytester.runpytest_subprocess("-p", "django", "-p", "isolation", timeout=120)
    plain.assert_outcomes(passed=20, failed=1)
    result = run_file_mode(pytester, "fork", *SHARED)
    result.assert_outcomes(passed=20, failed=1)
    result.stdout.fnmatch_lines(["*no such table: shop_note*"])


def test_an_app_s_models_collected_for_doctests_are_not_refused(
    pytester: pytest.Pytester, project: Path
) -> None:
    """``--doctest-modules`` collects the app's ``models.py``, which Django
    has loaded before any test: its tables exist."""
    result = run_file_mode(pytester, "fork", *SHARED, "--doctest-modules", "shop", "tests")
    result.assert_outcomes(passed=20)
    assert "defines a Django model" not in result.stdout.str()
