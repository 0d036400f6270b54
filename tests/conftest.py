"""Shared helpers: inner pytest runs load only what they name."""

from __future__ import annotations

import pytest

#: Every inner run is bounded (seconds).
TIMEOUT = 120

FILE_MODE = ("-p", "isolation", "--isolation-mode=file")


@pytest.fixture(autouse=True)
def _no_autoload(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner runs see only the plugins they load explicitly."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)


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
    return pytester.runpytest_subprocess("-p", "isolation", *args, timeout=TIMEOUT)


def literal(pattern: str) -> str:
    """An fnmatch pattern whose ``[`` is literal (``*`` stays a wildcard)."""
    return pattern.replace("[", "[[]")


#: The leak guard in a plain run and in a file-mode child.
GUARD_MODES = {
    "plain": ("-p", "isolation"),
    "file": (*FILE_MODE, "--isolation-start=fork"),
}


@pytest.fixture(params=sorted(GUARD_MODES))
def mode(request: pytest.FixtureRequest) -> tuple[str, ...]:
    """The leak guard's arguments, in a plain run and in file mode."""
    return GUARD_MODES[str(request.param)]
