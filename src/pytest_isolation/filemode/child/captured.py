"""What a file's child keeps for its parent in case it dies during a test:
its capture files, where the parent can read them, and the running test's
log records, sent as they are made; a crashed or timed-out test's report
shows what its phase had printed and logged, as pytest's sections would."""

from __future__ import annotations

import logging
import os

import pytest

from pytest_isolation.core import names
from pytest_isolation.core import pytest_private
from pytest_isolation.filemode.logs import LogRelay
from pytest_isolation.filemode.wire import LOGRECORD
from pytest_isolation.filemode.wire import Sender


def keep_crash_output(config: pytest.Config, sender: Sender, capture_dir: str) -> None:
    """Once per child: its capture files in ``capture_dir`` (when given),
    and its tests' log records sent on ``sender`` while each runs."""
    if capture_dir:
        capture_for_parent(config, capture_dir)
    if not config.pluginmanager.has_plugin(names.CHILD_LOGS):
        relay = TestLogs(config, sender)
        logging.getLogger().addHandler(relay.handler)
        config.pluginmanager.register(relay, names.CHILD_LOGS)


class TestLogs:
    """Sends a running test's log records (only while one runs)."""

    __test__ = False  # not a test class, whatever pytest's python_classes say

    def __init__(self, config: pytest.Config, sender: Sender) -> None:
        self.handler = LogRelay(config, lambda text: sender.send(LOGRECORD, text=text))
        self.handler.sending = False

    def pytest_runtest_logstart(self) -> None:
        self.handler.sending = True

    def pytest_runtest_logfinish(self) -> None:
        self.handler.sending = False


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
