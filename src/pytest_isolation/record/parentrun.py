"""What the parent process runs outside every test file's process, for the
record of what each test file executed (:mod:`.recording`).

A file's process records what it runs, from its start to its own
``pytest_unconfigure``.  The parent's code is no file's, and a change to it
can fail them all: its conftests' imports and the shared fixtures' set-up
before the first child (the entry plugin's recorder, Python 3.12+), the
relaying of each file's reports while the files run, and, after the last
one, the shared fixtures' teardown, the session's end, the terminal
summary, each plugin's ``pytest_unconfigure`` and the run's cleanups.  All
of it counts for every test file of the run: each project file the parent
ran code of, or loaded, is a dependency of each entry, and each function
it ran counts as run by each (the record's ``inherited``).

What a test item that runs in the parent itself executes (a non-Python
item) is left out: it is no test file's.  Not seen: what ``atexit`` runs,
after the last cleanup (Python ignores an error there: the run's outcome
stays).
"""

from __future__ import annotations

import contextlib
from typing import Any

from pytest_isolation.record.executed import Recorder


class ParentRun:
    """The project code this process ran outside the files' processes, and
    the project modules it loaded, gathered as the run goes."""

    def __init__(self, root: str) -> None:
        self.root = root
        #: The first lines of the code objects that ran, by file.
        self.lines: dict[str, set[int]] = {}
        #: The project modules loaded.
        self.modules: set[str] = set()
        self.recorder: Recorder | None = None
        self.ended = False

    def add(self, taken: dict[str, Any]) -> None:
        """Add what a recorder took (``{"lines": ..., "modules": ...}``)."""
        for path, lines in taken["lines"].items():
            self.lines.setdefault(path, set()).update(lines)
        self.modules.update(taken["modules"])

    def start(self) -> None:
        """Watch what this process runs from now on (once).  In file mode not
        before the origin of the children is forked: a forked process would
        inherit the callback, and the code it has seen disabled."""
        if self.recorder is None and not self.ended:
            self.recorder = Recorder(self.root)
            self.recorder.start()

    def left_out(self) -> contextlib.AbstractContextManager[None]:
        """What runs inside is not the parent's own (a test item it runs)."""
        if self.recorder is None:
            return contextlib.nullcontext()
        return self.recorder.left_out()

    def seen(self) -> tuple[dict[str, set[int]], set[str]]:
        """What ran so far: the first lines by file, and every file that ran
        or was loaded."""
        lines = {path: set(found) for path, found in self.lines.items()}
        modules = set(self.modules)
        if self.recorder is not None:
            taken = self.recorder.so_far()
            for path, found in taken["lines"].items():
                lines.setdefault(path, set()).update(found)
            modules.update(taken["modules"])
        return lines, modules | set(lines)

    def end(self) -> None:
        """Stop watching, and give the tool id back."""
        if self.recorder is not None:
            self.add(self.recorder.take())
            self.recorder = None
        self.ended = True
