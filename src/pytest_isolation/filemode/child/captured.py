"""A file's child's capture files, where its parent can read them once the
child has died: a crashed or timed-out test's report shows what its phase
had printed, as pytest's ``Captured stdout`` section would have."""

from __future__ import annotations

import os

import pytest

from pytest_isolation.core import pytest_private


def capture_for_parent(config: pytest.Config, directory: str) -> None:
    """Make the capture's files ones the parent can read once this process
    has died: files named by this process's pid and the descriptor they
    capture, in ``directory`` (a crashed or timed-out test's report shows
    what its phase had printed).  The same descriptors and stream objects,
    as :func:`restart_capture` keeps them."""
    for capture_file, target, _ in pytest_private.fd_capture_files(config):
        path = os.path.join(directory, f"{os.getpid()}-{target}")
        named = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            current = os.path.samestat(os.fstat(capture_file), os.fstat(target))
            os.dup2(named, capture_file)
            if current:  # capturing now: the target follows the file it was pointed at
                os.dup2(capture_file, target)
        finally:
            os.close(named)
