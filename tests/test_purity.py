"""Exact preloading (issue 32): a fork server preloads a module only when
importing it there gives each file's child what importing it in the child
would.  Each case is a module whose import ties it to its process (refused,
with what it did) or does not (preloaded).

``preload.load`` runs as in a fork server: in a fresh interpreter that has
imported pytest, with the standard streams as pytest's capture leaves them.
"""

from __future__ import annotations

import fnmatch
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import TIMEOUT

LOAD = """
import dataclasses, json, sys
import pytest
from pytest_isolation.filemode.server import preload
print(json.dumps(dataclasses.asdict(preload.load(sys.argv[1:]))))
"""

#: Module source -> the reason its import is refused.
REFUSED = {
    "pid": ("import os\nPID = os.getpid()\n", "reads the process id (os.getpid)"),
    "parent pid": ("from os import getppid\nPARENT = getppid()\n", "reads the process id"),
    "clock": ("import time\nSTARTED = time.time()\n", "reads the clock (time.time)"),
    "monotonic": ("import time\nT0 = time.monotonic()\n", "reads the clock (time.monotonic)"),
    "datetime": (
        "import datetime\nTODAY = datetime.date.today()\n",
        "reads the clock (date.today)",
    ),
    "shared random": (
        "import random\nTOKEN = random.random()\n",
        "uses the random module's shared generator (random.random)",
    ),
    "seeding the shared random": (
        "import random\nrandom.seed(1)\n",
        "uses the random module's shared generator (random.seed)",
    ),
    "own random": (
        "import random\nRNG = random.Random()\n",
        "seeds a random generator from the system (random.Random())",
    ),
    "urandom": ("import os\nKEY = os.urandom(8)\n", "draws random bytes (os.urandom)"),
    "uuid": ("import uuid\nRUN = uuid.uuid4()\n", "draws random bytes"),
    "temporary directory": (
        "import tempfile\nCACHE = tempfile.mkdtemp()\n",
        "makes a temporary directory",
    ),
    "temporary file": (
        "import tempfile\nSPOOL = tempfile.NamedTemporaryFile()\n",
        "makes a temporary file",
    ),
    "socket": ("import socket\nS = socket.socket()\nS.close()\n", "makes a socket"),
    "process": (
        "import subprocess, sys\nsubprocess.run([sys.executable, '-c', ''])\n",
        "starts a process",
    ),
    "atexit": (
        "import atexit\natexit.register(print, 'bye')\n",
        "registers an atexit function (atexit.register)",
    ),
    "fork handler": (
        "import os\nos.register_at_fork(after_in_child=lambda: None)\n",
        "registers a fork handler (os.register_at_fork)",
    ),
    "stream handler": (
        "import logging\nHANDLER = logging.StreamHandler()\n",
        "keeps a reference to sys.stdout or sys.stderr",
    ),
    "default argument": (
        "import sys\ndef echo(text, out=sys.stdout):\n    out.write(text)\n",
        "keeps a reference to sys.stdout or sys.stderr",
    ),
    "file written": (
        "with open('written.txt', 'w') as f:\n    f.write('x')\n",
        "opens * for writing",
    ),
    "file left open": ("import os\nLOG = open(os.devnull)\n", "leaves a file descriptor open"),
    "proc": (
        "with open('/proc/self/status') as f:\n    STATUS = f.read()\n",
        "reads /proc/self/status",
    ),
    "outside": (
        "with open('/etc/hostname') as f:\n    HOST = f.read()\n",
        "reads /etc/hostname, outside the installed packages and sys.path",
    ),
}

#: Imports that are the same in a fork server as in a file's child.
PURE = {
    "environment": "import os\nMODE = os.environ.get('MODE', 'default')\n",
    "working directory": "import os\nHERE = os.getcwd()\n",
    "seeded random": "import random\nRNG = random.Random(1234)\nFIRST = RNG.random()\n",
    "lock": "import threading\nLOCK = threading.Lock()\n",
    "own data": (
        "import pathlib\nDATA = (pathlib.Path(__file__).parent / 'data.txt').read_text()\n"
    ),
    "platform": "import platform, sys\nKIND = (sys.platform, platform.python_version())\n",
    # The watch compares by identity: a class whose ``__eq__`` fails while
    # it is being made (typing_extensions' Protocol) is not called.
    "fragile equality": (
        "class Meta(type):\n"
        "    def __eq__(cls, other):\n"
        "        return NOT_YET_DEFINED\n"
        "    __hash__ = type.__hash__\n"
        "class Base(metaclass=Meta):\n"
        "    def __init_subclass__(cls, **kwargs):\n"
        "        super().__init_subclass__(**kwargs)\n"
        "class Child(Base):\n"
        "    pass\n"
        "NOT_YET_DEFINED = True\n"
    ),
}


def load(tmp_path: Path, modules: dict[str, str]) -> dict[str, object]:
    for name, source in modules.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    (tmp_path / "data.txt").write_text("data")
    result = subprocess.run(
        [sys.executable, "-c", LOAD, *modules],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=True,
    )
    line = next(line for line in result.stdout.splitlines() if line.startswith("{"))
    loaded: dict[str, object] = json.loads(line)
    return loaded


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_an_import_tied_to_its_process_is_refused(tmp_path: Path, case: str) -> None:
    source, why = REFUSED[case]
    loaded = load(tmp_path, {"first": "VALUE = 1\n", "impure": source})
    assert loaded["modules"] == ["first"]
    assert loaded["refused"] == "impure"
    assert isinstance(loaded["why"], str)
    assert fnmatch.fnmatch(loaded["why"], f"its import {why}*"), loaded["why"]


@pytest.mark.parametrize("case", sorted(PURE))
def test_an_import_the_same_in_every_process_is_preloaded(tmp_path: Path, case: str) -> None:
    loaded = load(tmp_path, {"pure": PURE[case]})
    files = loaded.pop("files")
    assert loaded == {"modules": ["pure"], "refused": "", "why": "", "total": 1}
    assert files == [str((tmp_path / "pure.py").resolve())]  # what a remembered verdict holds for


def test_what_an_import_made_is_only_checked_while_it_runs(tmp_path: Path) -> None:
    """The watch ends with the imports: a later call of a refused function
    (here by the code that reports) is not held against a module."""
    loaded = load(tmp_path, {"calls_later": "import os\ndef pid():\n    return os.getpid()\n"})
    assert loaded["modules"] == ["calls_later"]


def test_a_module_found_through_the_working_directory_is_preloaded(tmp_path: Path) -> None:
    """``python -c`` puts ``""`` on ``sys.path``: the working directory, a
    place an import may read its own package from; it was refused as a read
    outside ``sys.path``."""
    (tmp_path / "here.py").write_text("VALUE = 1\n")
    result = subprocess.run(
        [sys.executable, "-c", LOAD, "here"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=True,
    )
    line = next(line for line in result.stdout.splitlines() if line.startswith("{"))
    loaded = json.loads(line)
    assert (loaded["modules"], loaded["refused"], loaded["why"]) == (["here"], "", "")
