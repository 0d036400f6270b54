"""Which tests run in a process of their own, and with which limits: every
test under ``--isolation-mode=test`` (but those of the files placed ``off``),
the tests of the files placed ``test`` in file mode (``isolation_paths``, a
conftest's ``isolation_mode``, the module's ``isolation`` marker), and the
tests marked ``isolation_process``, in any mode."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_isolation.core.kinds import Mode
from pytest_isolation.filemode.placement import TESTS
from pytest_isolation.filemode.placement import TOGETHER
from pytest_isolation.filemode.placement import Placement
from pytest_isolation.filemode.placement import Placements
from pytest_isolation.pertest.limits import MARKER
from pytest_isolation.pertest.limits import Limits

#: No setting places the file (a placement's source names its setting).
_UNPLACED = Placement(TOGETHER, "", "")


class Chooser:
    """Says whether a test runs in a process of its own, with its limits."""

    def __init__(self, config: pytest.Config, mode: Mode, defaults: Limits) -> None:
        self.config = config
        self.mode = mode
        self.defaults = defaults
        #: Each file's placement, found in the process that runs its tests
        #: (where its conftests are loaded), once.
        self._placed: dict[Path, Placement] = {}
        self._placements: tuple[int, Placements] | None = None

    def limits_of(self, item: pytest.Item) -> Limits | None:
        """``item``'s limits if it runs in a process of its own, else None."""
        if item.get_closest_marker(MARKER) is not None:
            return self.defaults.of_marker(item)
        if self.mode == "off":
            return None
        placed = self._placement(Path(str(item.path)))
        if self.mode == "test":
            chosen = not (placed.how == TOGETHER and placed.source)
        else:
            chosen = placed.how == TESTS
        return self.defaults.of_marker(item) if chosen else None

    def _placement(self, path: Path) -> Placement:
        placements = self._placements_here()
        found = self._placed.get(path)
        if found is None:
            try:
                found = placements.of(path)
            except pytest.UsageError:  # the file's collection reported it
                found = _UNPLACED
            self._placed[path] = found
        return found

    def _placements_here(self) -> Placements:
        if self._placements is None or self._placements[0] != os.getpid():
            self._placements = (os.getpid(), Placements(self.config, _UNPLACED))
            self._placed.clear()
        return self._placements[1]
