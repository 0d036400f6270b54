"""Shared helpers: inner pytest runs load only what they name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

#: Every inner run is bounded (seconds).
TIMEOUT = 120

#: Prints the LeakedStateWarnings an inner run recorded, which pytest's
#: warnings summary leaves out (tests/leakwarnings.py).
LEAK_WARNINGS = ("-p", "leakwarnings")
FILE_MODE = ("-p", "isolation", *LEAK_WARNINGS, "--isolation-mode=file")


@pytest.fixture(autouse=True)
def _no_autoload(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner runs see only the plugins they load explicitly."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    # pytest does not cut short summary lines on CI (CI or BUILD_NUMBER set): inner runs read
    # the same on a CI machine as here
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("BUILD_NUMBER", raising=False)
    # tests/leakwarnings.py, for -p leakwarnings (see LEAK_WARNINGS)
    paths = [str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(path for path in paths if path))


@pytest.fixture(params=["fork", "spawn", "forkserver"])
def start(request: pytest.FixtureRequest) -> str:
    """Every start method of file mode."""
    return str(request.param)


def run_file_mode(pytester: pytest.Pytester, start: str, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        *FILE_MODE, f"--isolation-start={start}", *args, timeout=TIMEOUT
    )


def run_plain(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*args, timeout=TIMEOUT)


def run_guard(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """A plain run with the plugin (so the leak guard) loaded."""
    return pytester.runpytest_subprocess("-p", "isolation", *LEAK_WARNINGS, *args, timeout=TIMEOUT)


def literal(pattern: str) -> str:
    """An fnmatch pattern whose ``[`` is literal (``*`` stays a wildcard)."""
    return pattern.replace("[", "[[]")


#: The leak guard in a plain run and in a file-mode child.
GUARD_MODES = {
    "plain": ("-p", "isolation", *LEAK_WARNINGS),
    "file": (*FILE_MODE, "--isolation-start=fork"),
}


@pytest.fixture(params=sorted(GUARD_MODES))
def mode(request: pytest.FixtureRequest) -> tuple[str, ...]:
    """The leak guard's arguments, in a plain run and in file mode."""
    return GUARD_MODES[str(request.param)]


def warned(result: pytest.RunResult) -> int:
    """How many ``LeakedStateWarning``s the inner run raised (printed by
    ``-p leakwarnings``: pytest's warnings summary leaves them out)."""
    return sum(1 for line in result.outlines if ": LeakedStateWarning: " in line)


def plugin_help(cwd: Path | None = None, columns: int | None = None) -> str:
    """``pytest -p isolation --help`` in a fresh process (only this plugin)."""
    import subprocess
    import sys

    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    if columns is not None:
        env["COLUMNS"] = str(columns)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "isolation", "--help"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
        check=True,
    )
    return done.stdout
