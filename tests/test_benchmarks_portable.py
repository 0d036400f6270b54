"""The benchmark scripts carry no machine's paths: their work directories and interpreters
come from arguments, the environment or portable defaults (``benchmarks/_machine.py``)."""

from __future__ import annotations

import importlib.util
import re
import stat
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).parents[1] / "benchmarks"

#: An absolute path under one machine's home or work folders (not ``a/work/b``).
MACHINE_PATH = re.compile(r"(?<![\w.~/-])/(?:root|work|home)/")


def machine_paths(text: str) -> list[tuple[int, str]]:
    """The lines of ``text`` (numbered from 1) that name such a path."""
    return [
        (number, line.strip())
        for number, line in enumerate(text.splitlines(), start=1)
        if MACHINE_PATH.search(line)
    ]


def scripts() -> list[Path]:
    """The benchmarks' code (results files are records of past runs: not scanned)."""
    return sorted(p for pattern in ("*.py", "*.sh") for p in BENCHMARKS.rglob(pattern))


def machine() -> ModuleType:
    """``benchmarks/_machine.py``, loaded from its file (not left in ``sys.modules``)."""
    spec = importlib.util.spec_from_file_location("_machine", BENCHMARKS / "_machine.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_scan_sees_machine_paths() -> None:
    text = 'DEFAULT_WORK = Path("/work/realsuites")\nGLOB = "/root/.pyenv/versions/3.11*"\n'
    text += "# cd /home/me/x\nREL = 'a/work/b'\nHERE = Path('benchmarks/.work/')\n"
    assert [number for number, _ in machine_paths(text)] == [1, 2, 3]


def test_no_machine_paths_in_benchmarks() -> None:
    assert scripts(), f"no scripts found under {BENCHMARKS}"
    found = [
        f"{path.relative_to(BENCHMARKS.parent)}:{number}: {line}"
        for path in scripts()
        for number, line in machine_paths(path.read_text(encoding="utf-8"))
    ]
    assert not found, "machine-specific paths in benchmarks/:\n" + "\n".join(found)


def test_work_dir_under_the_environment_base(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    m = machine()
    monkeypatch.setenv(m.WORK_ENV, str(tmp_path))
    assert m.work_dir("realsuites") == tmp_path / "pytest-isolation-realsuites"
    monkeypatch.delenv(m.WORK_ENV)
    assert m.work_dir("realsuites").name == "pytest-isolation-realsuites"
    assert m.work_dir("realsuites").parent.is_dir()  # the system temp directory


def fake_python(folder: Path, name: str, version: str, exit_code: int = 0) -> Path:
    """An executable that answers the probe as Python ``version`` would (or fails)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\necho {version}\necho {path}\nexit {exit_code}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_find_python_on_path_passes_over_a_failing_shim(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    m = machine()
    fake_python(tmp_path / "shims", "python3.99", "3.99", exit_code=127)
    good = fake_python(tmp_path / "bin", "python3.99", "3.99")
    monkeypatch.setenv("PATH", f"{tmp_path / 'shims'}:{tmp_path / 'bin'}")
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    assert m.find_python("3.99") == str(good)


def test_find_python_under_pyenv_newest_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    m = machine()
    versions = tmp_path / "pyenv" / "versions"
    fake_python(versions / "3.99.9" / "bin", "python3.99", "3.99")
    newest = fake_python(versions / "3.99.10" / "bin", "python3.99", "3.99")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    assert m.find_python("3.99") == str(newest)


def test_find_python_fails_naming_version_and_places(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    m = machine()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    with pytest.raises(m.PythonNotFound) as info:
        m.find_python("3.99")
    message = str(info.value)
    assert "no Python 3.99 found" in message
    assert "python3.99 on PATH" in message
    assert str(tmp_path / "pyenv" / "versions") in message
