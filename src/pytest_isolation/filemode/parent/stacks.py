"""The test's own frames in a dead child's faulthandler dump.

A child that crashes, or is ended by a timeout, writes a faulthandler dump
of its threads to its stderr: each thread's frames, most recent first, from
the test's line out through pytest, pluggy, this plugin, ``runpy`` and
whatever called ``pytest.main()``. A person wants the first part.
:func:`split_dump` keeps, of each thread, the frames above the outermost run
of frames that belong to the test runner (the frames a plain pytest
traceback hides too), leaves out threads that are nothing but the runner's
(this plugin's own helpers), and says how many frames it left out.
``--full-trace`` keeps the dump whole.
"""

from __future__ import annotations

import re
from pathlib import Path

import pluggy

import pytest_isolation
from pytest_isolation.core import pytest_private
from pytest_isolation.core.words import counted

#: A thread's heading in a dump: ``Current thread 0x... (most recent call first):``,
#: ``Thread 0x... [name] (most recent call first):`` (3.12 and later name it).
THREAD = re.compile(r"^(Current thread|Thread) 0x[0-9a-f]+.*\(most recent call first\):$")
#: A frame of a dump: ``  File "path", line 12 in name``.
FRAME = re.compile(r'^  File "(?P<path>.*)", line (?:\d+|\?\?\?) in .*$')
#: What a dump writes besides its threads: the fatal error's first line, the
#: list of extension modules, a thread without Python frames, a cut stack.
DUMP_LINE = re.compile(r"^(Fatal Python error: |Extension modules: |  <no Python frame>|  \.\.\.)")

_PYTEST_DIR = f"/{pytest_private.PYTEST_PACKAGE}/"
_RUNNER_DIRS = tuple(
    str(Path(module.__file__).resolve().parent) + "/"
    for module in (pytest_isolation, pluggy)
    if module.__file__
)


def _is_runner(path: str) -> bool:
    """A frame of the test runner: pytest (its console script too), pluggy,
    this plugin, the interpreter's start (``runpy``, a ``-c`` script), and a
    thread's own start (``threading``); only the outermost run of them is
    left out."""
    if path in ("<frozen runpy>", "<string>") or path.endswith(("/runpy.py", "/threading.py")):
        return True
    if _PYTEST_DIR in path or path.endswith(("/pytest/__main__.py", "/pytest", "/py.test")):
        return True  # pytest, ``python -m pytest``, the ``pytest`` console script
    if "/xdist/" in path or "/execnet/" in path:  # a pytest-xdist worker's start
        return True
    resolved = str(Path(path).resolve()) if path.startswith("/") else path
    return resolved.startswith(_RUNNER_DIRS)


def split_dump(stderr: str, full: bool = False) -> tuple[str, str]:
    """``stderr`` split into the dump with the runner's frames left out, and
    everything else the child wrote; the dump is empty if there is none."""
    lines = stderr.splitlines()
    start = next(
        (i for i, line in enumerate(lines) if THREAD.match(line) or DUMP_LINE.match(line)), None
    )
    if start is None:
        return "", stderr
    dump, rest = [], lines[:start]
    threads: list[tuple[str, list[str]]] = []
    for line in lines[start:]:
        if line.startswith("Extension modules: ") or not line.strip():
            continue  # the list of compiled modules loaded: noise in a test report
        if THREAD.match(line):
            threads.append((line, []))
        elif threads and (FRAME.match(line) or DUMP_LINE.match(line)):
            threads[-1][1].append(line)
        elif line.startswith("Fatal Python error: ") and not threads:
            dump.append(line)
        else:  # what the test wrote after the dump began
            rest.append(line)
    left_out = 0
    for heading, frames in threads:
        kept = frames if full else _own(frames)
        if not kept and _runner_thread(frames):
            left_out += len(frames)
            continue
        kept = kept or frames  # a thread of the test's that runs C code: shown whole
        left_out += len(frames) - len(kept)
        dump += ["", heading, *kept]
    if left_out:
        frames_of = counted(left_out, "frame")
        runner = "pytest, pluggy and pytest-isolation"
        dump.append(f"  ({frames_of} of {runner} left out; --full-trace shows them)")
    return "\n".join(dump).strip("\n"), "\n".join(rest)


def _runner_thread(frames: list[str]) -> bool:
    """A thread of pytest's, pluggy's or this plugin's (not one that only
    shows ``threading``'s frames: a test's thread running C code)."""
    paths = [match["path"] for line in frames if (match := FRAME.match(line))]
    return any(_is_runner(path) and not path.endswith("/threading.py") for path in paths)


def _own(frames: list[str]) -> list[str]:
    """A thread's frames without the outermost run of the runner's, and
    without the frames of the program that called ``pytest.main()`` below
    it."""
    paths = [match["path"] if (match := FRAME.match(line)) else "" for line in frames]
    outermost = max((i for i, path in enumerate(paths) if _PYTEST_DIR in path), default=None)
    end = len(frames) if outermost is None else outermost + 1
    while end > 0:
        match = FRAME.match(frames[end - 1])
        if match is None or not _is_runner(match["path"]):
            break
        end -= 1
    kept = frames[:end]
    return [] if all(line.strip() == "<no Python frame>" for line in kept) else kept
