"""The package as it is built, installed and set up (issue 49 item 10): its
license file in the distribution's metadata, its project URLs, install
advice that works while it is not on the index, and README's set-up
commands as CI runs them."""

from __future__ import annotations

import importlib.metadata
import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest's own dependency there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_license_file_is_mit_and_names_its_holders() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n")
    assert "Copyright (c) 2026 pytest-isolation contributors\n" in text
    assert 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND' in text
    assert PYPROJECT["project"]["license"] == "MIT"
    assert PYPROJECT["project"]["license-files"] == ["LICENSE"]


def test_the_installed_distribution_carries_the_license() -> None:
    """What the build backend wrote (the wheel's metadata, or an editable
    install's, made the same way): reinstall after changing pyproject.toml."""
    distribution = importlib.metadata.distribution("pytest-isolation")
    assert distribution.metadata.get_all("License-File") == ["LICENSE"]
    assert distribution.metadata["License-Expression"] == "MIT"
    shipped = distribution.read_text("licenses/LICENSE")
    assert shipped == (ROOT / "LICENSE").read_text(encoding="utf-8")


def test_the_project_urls_are_paths_of_the_repository() -> None:
    """No host yet (pyproject.toml says so): each URL is a path that exists."""
    urls = PYPROJECT["project"]["urls"]
    assert set(urls) == {"Documentation", "Changelog", "Source"}
    assert [name for name, path in urls.items() if not (ROOT / path).exists()] == []
    listed = importlib.metadata.distribution("pytest-isolation").metadata.get_all("Project-URL")
    assert sorted(listed or []) == sorted(f"{name}, {path}" for name, path in urls.items())


def test_no_install_advice_names_the_package_on_the_index() -> None:
    """``pip install 'pytest-isolation[merge]'`` cannot work until it is
    published; the advice names what can."""
    places = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "src").rglob("*.py")]
    found = [
        str(path.relative_to(ROOT))
        for path in places
        if re.search(r"pip install '?pytest-isolation\[", path.read_text(encoding="utf-8"))
    ]
    assert found == []
    assert PYPROJECT["project"]["optional-dependencies"]["merge"] == ["jsonschema>=4.18"]
    merge = (ROOT / "src" / "pytest_isolation" / "ci" / "merge.py").read_text(encoding="utf-8")
    assert "pip install jsonschema" in merge


def setup_commands() -> list[str]:
    """README's set-up commands: the bash blocks before its first section."""
    start = README[: README.index("\n## ")]
    return re.findall(r"^```bash\n(.*?)\n```$", start, re.M | re.S)


def test_readme_starts_with_two_setup_commands_in_their_own_virtualenvs() -> None:
    main, tests = setup_commands()
    assert main.startswith("python3 -m venv .venv && .venv/bin/pip install -e . &&")
    assert main.endswith("PYTHON=.venv/bin/python bash examples/run")
    # The test extra's plugins stay out of the main job's virtualenv.
    assert tests.startswith("python3 -m venv .venv-test && .venv-test/bin/pip install -e")
    assert ".venv/" not in tests
    assert "about 15 minutes on 2 cores" in " ".join(README.split())


def test_ci_runs_the_readme_setup_commands_as_written() -> None:
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert [command for command in setup_commands() if command not in lines] == []
    assert lines.index(setup_commands()[0]) < lines.index(setup_commands()[1])


def test_readme_says_what_mode_off_in_the_environment_keeps() -> None:
    """``PYTEST_ISOLATION_MODE=off`` turns the modes off, not the leak guard
    (``tests/test_options_ini.py`` and the guard's tests run it so)."""
    text = " ".join(README.split())
    said = text[text.index("`PYTEST_ISOLATION_MODE=off`") :][:300]
    assert "runs plain" not in said
    assert "the leak guard still runs" in said
