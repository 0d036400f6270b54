"""Spawned children: a fresh interpreter for each file (the ``spawn`` start method)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile

from pytest_isolation.core.names import CHILD_ENV
from pytest_isolation.filemode.processes import AS_THE_PARENT
from pytest_isolation.filemode.processes import DUMP_SIGNAL
from pytest_isolation.filemode.processes import Child
from pytest_isolation.filemode.processes import as_the_parent
from pytest_isolation.filemode.processes import interpreter_options
from pytest_isolation.filemode.wire import ChildSpec

# Run by a spawned child: what a spawned interpreter does first (AS_THE_PARENT), then pytest.
_SPAWN_CODE = (
    "import faulthandler, importlib.util, json, os, signal, sys\n"
    # A timed-out child dumps every thread's traceback to its stderr file (DUMP_SIGNAL).
    f"faulthandler.register({DUMP_SIGNAL}, os.dup(2), all_threads=True)\n"
    f"spec = json.loads(os.environ[{CHILD_ENV!r}])\n"
    f"{AS_THE_PARENT}"
    "del spec\n"
    "import pytest\n"
    "raise SystemExit(pytest.main())\n"
)


def spawn_child(
    spec: ChildSpec,
    args: list[str],
    cwd: str,
    environ: dict[str, str] | None = None,
    fds: tuple[int, ...] = (),
) -> Child:
    """Start a fresh interpreter, with this one's options, that runs pytest
    as a child for ``spec``, in ``environ`` (default: this process's
    environment), inheriting ``fds``."""
    read_fd, write_fd = os.pipe()
    stderr = tempfile.TemporaryFile()  # noqa: SIM115 - owned by the returned Child
    spec = dataclasses.replace(spec, fd=write_fd, **as_the_parent())
    env = {**(os.environ if environ is None else environ), CHILD_ENV: spec.to_env()}
    try:
        process = subprocess.Popen(
            [sys.executable, *interpreter_options(env), "-c", _SPAWN_CODE, *args],
            cwd=cwd,
            env=env,
            pass_fds=(write_fd, *fds),
            stderr=stderr,
            start_new_session=True,
        )
    finally:
        os.close(write_fd)
    return Child(process.pid, os.fdopen(read_fd, "rb"), stderr, process)
