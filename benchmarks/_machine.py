"""What the benchmark scripts take from the machine they run on: where they work and which
interpreters they use, from their arguments, the environment or defaults that hold anywhere.

* Work directories: a script's ``--work`` wins; its default is ``BASE/pytest-isolation-NAME``,
  where ``BASE`` is ``$PYTEST_ISOLATION_BENCH_WORK`` or else the system temp directory
  (``tempfile.gettempdir()``), and ``NAME`` the script's own (``realsuites``, ...).
* Interpreters: a script's ``--python`` wins; ``find_python("3.11")`` looks for a working
  ``python3.11`` on ``PATH``, then under ``$PYENV_ROOT/versions/3.11*/bin/`` (``PYENV_ROOT``
  defaults to ``~/.pyenv``), and fails naming the version and where it looked.

The scripts beside it import it (``python benchmarks/x.py`` puts ``benchmarks/`` first on
``sys.path``; ``pollution/run.py`` adds it).  Standard library only.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

#: The base directory of every script's default work directory.
WORK_ENV = "PYTEST_ISOLATION_BENCH_WORK"

#: What a candidate interpreter prints: its major and minor version, then its executable.
_PROBE = "import sys; print('%d.%d' % sys.version_info[:2]); print(sys.executable)"


class PythonNotFound(LookupError):
    """No interpreter of the wanted version on this machine."""


def work_dir(name: str) -> Path:
    """The default work directory of the script called ``name``."""
    base = os.environ.get(WORK_ENV) or tempfile.gettempdir()
    return Path(base) / f"pytest-isolation-{name}"


def work_help(default: Path) -> str:
    """The ``--work`` help text of a script whose default is ``default``."""
    text = f"default: {default} (under ${WORK_ENV} if set, else the system temp directory)"
    return text.replace("%", "%%")  # argparse formats help with %


def pyenv_root() -> Path:
    return Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")


def _version_key(path: Path) -> tuple[int, ...]:
    """``.../versions/3.11.10/bin/python3.11`` sorts after ``3.11.9``."""
    return tuple(int(n) for n in re.findall(r"\d+", path.parents[1].name))


def _probe(candidate: str, version: str) -> str | None:
    """The interpreter behind ``candidate`` if it runs as Python ``version``, else None.

    A pyenv shim on ``PATH`` for a version that pyenv has not selected exits with an error:
    it is passed over.  Behind a working shim, the interpreter's own path is returned.
    """
    try:
        done = subprocess.run(
            [candidate, "-c", _PROBE], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.splitlines()
    if done.returncode != 0 or not lines or lines[0] != version:
        return None
    return lines[1] if len(lines) > 1 and lines[1] else candidate


def find_python(version: str) -> str:
    """An interpreter of Python ``version`` (``"3.11"``): ``pythonX.Y`` on ``PATH``, else the
    newest ``$PYENV_ROOT/versions/X.Y*/bin/pythonX.Y``; ``PythonNotFound`` otherwise."""
    name = f"python{version}"
    passed_over: list[str] = []
    for directory in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = shutil.which(name, path=directory) if directory else None
        if candidate is None:
            continue
        found = _probe(candidate, version)
        if found is not None:
            return found
        passed_over.append(candidate)
    versions = pyenv_root() / "versions"
    installed = sorted(versions.glob(f"{version}*/bin/{name}"), key=_version_key, reverse=True)
    for candidate_path in installed:
        found = _probe(str(candidate_path), version)
        if found is not None:
            return found
        passed_over.append(str(candidate_path))
    tried = f" ({', '.join(passed_over)} did not run as {version})" if passed_over else ""
    raise PythonNotFound(
        f"no Python {version} found: looked for {name} on PATH and for "
        f"{versions}/{version}*/bin/{name} ($PYENV_ROOT, default ~/.pyenv){tried}"
    )
