"""A pytest-django project for the shared-fixture benchmark and tests: the
apps of ``django-admin startproject`` and one of its own with models and a
migration, and test files whose tests use the database
(``pytest.mark.django_db``).

``python benchmarks/django_suite.py`` times, side by side in one run, the
plain run, file mode with the test database created in each file's process,
and file mode with ``django_db_setup`` shared (set up once in the parent);
it compares the per-test outcomes of all three.  Needs Django and
pytest-django (``pip install django pytest-django``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import xml.etree.ElementTree as ET
from pathlib import Path

SETTINGS = """\
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent
SECRET_KEY = "not secret"
# The apps of ``django-admin startproject``, and the project's own.
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "shop",
]
DATABASES = {{
    "default": {{"ENGINE": "django.db.backends.sqlite3", "NAME": str(BASE / "db.sqlite3")}}
}}
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
"""

TEST_FILE = """\
import pytest
from django.contrib.auth.models import User

from shop.models import Item{model}

pytestmark = pytest.mark.django_db


def test_create():
    Item{model}.objects.create(name="first", price={number})
    assert Item{model}.objects.count() == 1


def test_starts_empty():
    assert Item{model}.objects.count() == 0
    assert not User.objects.exists()


def test_user():
    User.objects.create(username="user{number}")
    assert User.objects.get().username == "user{number}"


@pytest.mark.parametrize("price", [1, 2, 3])
def test_prices(price):
    Item{model}.objects.create(name="p", price=price)
    assert list(Item{model}.objects.values_list("price", flat=True)) == [price]
"""


def make_project(root: Path, files: int = 30, models: int = 12) -> Path:
    """Write the project under ``root``; return ``root``."""
    (root / "proj").mkdir(parents=True, exist_ok=True)
    (root / "proj" / "__init__.py").write_text("")
    (root / "proj" / "settings.py").write_text(SETTINGS.format())
    shop = root / "shop"
    (shop / "migrations").mkdir(parents=True, exist_ok=True)
    (shop / "__init__.py").write_text("")
    (shop / "migrations" / "__init__.py").write_text("")
    model_code = ["from django.db import models", ""]
    operations = []
    for model in range(models):
        model_code += [
            f"class Item{model}(models.Model):",
            "    name = models.CharField(max_length=100)",
            "    price = models.IntegerField(default=0)",
            "",
        ]
        operations.append(
            f"        migrations.CreateModel(name='Item{model}', fields=[\n"
            "            ('id', models.AutoField(primary_key=True, serialize=False)),\n"
            "            ('name', models.CharField(max_length=100)),\n"
            "            ('price', models.IntegerField(default=0)),\n"
            "        ]),"
        )
    (shop / "models.py").write_text("\n".join(model_code))
    (shop / "migrations" / "0001_initial.py").write_text(
        "from django.db import migrations, models\n\n\n"
        "class Migration(migrations.Migration):\n"
        "    initial = True\n"
        "    dependencies = []\n"
        "    operations = [\n" + "\n".join(operations) + "\n    ]\n"
    )
    tests = root / "tests"
    tests.mkdir(exist_ok=True)
    for number in range(files):
        text = TEST_FILE.format(model=number % models, number=number)
        (tests / f"test_shop_{number:03d}.py").write_text(text)
    (root / "pytest.ini").write_text(
        textwrap.dedent(
            """\
            [pytest]
            DJANGO_SETTINGS_MODULE = proj.settings
            pythonpath = .
            testpaths = tests
            """
        )
    )
    return root


#: The runs compared, by name: their arguments.
MODES = {
    "plain": ["-p", "isolation"],
    "file": ["-p", "isolation", "--isolation-mode=file", "--isolation-start=fork"],
    "file-shared": [
        "-p",
        "isolation",
        "--isolation-mode=file",
        "--isolation-start=fork",
        "-o",
        "isolation_shared_fixtures=django_db_setup",
    ],
}


def run(root: Path, mode: str, junit: Path, before: Path | None = None) -> float:
    """One run of the project; its wall time.  ``file, before``: file mode
    with the plugin's source at ``before`` (first on ``PYTHONPATH``)."""
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    if mode == BEFORE:
        env["PYTHONPATH"] = str(before)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "django", *MODES[mode]]
    command.append(f"--junitxml={junit}")
    started = time.perf_counter()
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{mode}: exit {done.returncode}\n{done.stdout[-3000:]}{done.stderr}")
    return seconds


#: File mode of an earlier version of the plugin (``--before``).
BEFORE = "file, before"


def outcomes(junit: Path) -> dict[str, str]:
    """Each test's outcome in a junit XML report."""
    found = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        found[f"{case.get('classname')}::{case.get('name')}"] = kinds[0] if kinds else "passed"
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=30)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--before",
        type=Path,
        help="the src directory of an earlier version of the plugin: also time its file mode",
    )
    args = parser.parse_args()
    modes = [*MODES, BEFORE] if args.before else list(MODES)
    MODES[BEFORE] = MODES["file"]
    with tempfile.TemporaryDirectory() as directory:
        root = make_project(Path(directory) / "project", files=args.files)
        times: dict[str, list[float]] = {mode: [] for mode in modes}
        seen: dict[str, dict[str, str]] = {}
        for _ in range(args.runs):  # interleaved: the machine's noise hits every mode alike
            for mode in modes:
                junit = Path(directory) / f"{mode}.xml"
                times[mode].append(run(root, mode, junit, args.before))
                seen[mode] = outcomes(junit)
        medians = {mode: statistics.median(found) for mode, found in times.items()}
        ratios = {
            mode: statistics.median(t / p for t, p in zip(found, times["plain"], strict=True))
            for mode, found in times.items()
        }
        same = all(found == seen["plain"] for found in seen.values())
        tests = len(seen["plain"])
        print(f"{args.files} files, {tests} tests, {args.runs} interleaved runs each")
        for mode in modes:
            print(f"  {mode:12} median {medians[mode]:6.2f} s   x plain {ratios[mode]:.2f}")
        speedups = {
            mode: statistics.median(
                f / s for f, s in zip(times[mode], times["file-shared"], strict=True)
            )
            for mode in modes
            if mode.startswith("file") and mode != "file-shared"
        }
        for mode, speedup in speedups.items():
            print(f"  {mode} / file-shared: {speedup:.2f}x")
        print(f"  per-test outcomes identical in every mode: {same}")
        if args.json:
            report = {"times": times, "ratios": ratios, "speedups": speedups, "same": same}
            args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
