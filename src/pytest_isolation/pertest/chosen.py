"""Which tests run in a process of their own, and with which limits: every
test under ``--isolation-mode=test``, the tests of the files that
``isolation_paths`` (or a conftest, or the module's ``isolation`` marker)
places with ``test``, and the tests marked ``isolation_process``."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_isolation.pertest.limits import MARKER
from pytest_isolation.pertest.limits import Limits


class Chooser:
    """Says whether a test runs in a process of its own, with its limits."""

    def __init__(self, every: bool, defaults: Limits, alone_files: set[Path] | None = None) -> None:
        #: ``--isolation-mode=test``: every test.
        self.every = every
        self.defaults = defaults
        #: The files placed with ``test`` (file mode's placements).
        self.alone_files = alone_files if alone_files is not None else set()

    def limits_of(self, item: pytest.Item) -> Limits | None:
        """``item``'s limits if it runs in a process of its own, else None."""
        chosen = self.every or item.get_closest_marker(MARKER) is not None
        if not chosen and self.alone_files:
            chosen = Path(str(item.path)) in self.alone_files
        return self.defaults.of_marker(item) if chosen else None
