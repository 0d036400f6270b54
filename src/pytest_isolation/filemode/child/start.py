"""How a file's child starts: forked (from the run loop, a fork server or
the origin) or spawned (a fresh interpreter that loads the entry plugin),
its capture restarted, and its identity as a pytest-xdist worker."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import pytest

from pytest_isolation.core import frozen
from pytest_isolation.core import keys
from pytest_isolation.core import names
from pytest_isolation.core import pytest_private
from pytest_isolation.core.keys import IN_CHILD
from pytest_isolation.core.xdist import is_worker
from pytest_isolation.filemode import cov
from pytest_isolation.filemode import junit
from pytest_isolation.filemode.child.plugin import ChildPlugin
from pytest_isolation.filemode.child.terminal import detach_terminal
from pytest_isolation.filemode.wire import ChildSpec
from pytest_isolation.filemode.wire import Sender
from pytest_isolation.filemode.wire import receive


def prepare(config: pytest.Config, fd: int) -> ChildPlugin:
    """Turn this process's pytest into a child that reports on ``fd``."""
    plugin = ChildPlugin(config, Sender(fd))
    detach_terminal(config, plugin.write_terminal)
    manager = config.pluginmanager
    manager.register(plugin, names.CHILD)
    junit.install_in_child(config, plugin.record_junit)
    plugin.live = True
    config.stash[IN_CHILD] = True  # imports and the file's end are contained by this process
    return plugin


def prepare_forked(session: pytest.Session) -> ChildPlugin:
    """Make a forked copy of the parent a child; done once per fork server."""
    config = session.config
    for name in names.PARENT_ONLY:  # the parent's business
        if config.pluginmanager.has_plugin(name):
            config.pluginmanager.unregister(name=name)
    for key in keys.PARENT_ONLY:
        if key in config.stash:
            del config.stash[key]
    _leave_xdist(config)
    # Inherited counters would stop pytest's logic in the child early.
    session.testsfailed = 0
    return prepare(config, -1)


def _leave_xdist(config: pytest.Config) -> None:
    """In a child forked from a pytest-xdist worker, stop xdist's worker plugin
    from talking to the controller: the child reports to its parent only."""
    interactor = pytest_private.worker_interactor(config) if is_worker(config) else None
    if interactor is not None:
        config.pluginmanager.unregister(interactor)


def start_forked(
    session: pytest.Session,
    plugin: ChildPlugin,
    control_fd: int,
    fd: int,
    parent: pytest.Collector | None = None,
    environ: dict[str, str] | None = None,
) -> ChildPlugin:
    """In a forked child: wait for the file to run, start ``plugin`` for it
    (:func:`collect_forked` collects it).

    ``parent`` is the file's directory collector when known at fork time;
    a child forked ahead of time finds it from the item index it is sent.
    ``environ`` is the environment the run started with, which every file
    starts from (a spawned child gets it too).
    """
    if environ is not None and os.environ != environ:
        os.environ.clear()
        os.environ.update(environ)
    restart_capture(session.config)
    plugin.sender = Sender(fd)
    with os.fdopen(control_fd, "rb") as control:
        message = next(receive(control), None)
    if message is None:  # the parent no longer needs this child
        os._exit(0)
    # The parent froze its objects before forking (processes._before_fork):
    # they stay frozen until a call that would see it (core.frozen).
    frozen.keep_until_observed()
    cov.measure_in_fork()
    payload = message[1]
    if parent is None:
        placeholder = session.items[payload["index"]].parent
        assert placeholder is not None
        parent = placeholder.parent
    plugin.start(payload["spec"], parent)
    return plugin


def restart_capture(config: pytest.Config) -> None:
    """Give the child capture files of its own instead of the parent's,
    under the same stream objects.

    A module imported before the fork may hold the capture's streams (``from
    sys import stdout``, a ``logging.StreamHandler()`` made at a conftest's
    import): in a plain run they stay pytest's ``sys.stdout`` and
    ``sys.stderr`` for the whole session, so the child keeps them, open and
    identical, and only the file under each one's descriptor is new (the
    parent's would mix the two processes' output)."""
    for capture_file, target, saved in pytest_private.fd_capture_files(config):
        with tempfile.TemporaryFile(buffering=0) as fresh:
            current = os.path.samestat(os.fstat(capture_file), os.fstat(target))
            if not current:  # what the target is now is the child's own (its stderr tail)
                os.dup2(target, saved)
            os.dup2(fresh.fileno(), capture_file)  # the same fd, a file of this child's
            if current:  # capturing now: the target follows the file it was pointed at
                os.dup2(capture_file, target)
    capman: Any = config.pluginmanager.get_plugin("capturemanager")
    if capman is not None and capman.is_globally_capturing():
        capman.suspend_global_capture()


def adopt_worker_identity(config: pytest.Config, spec: ChildSpec) -> None:
    """A child spawned by a pytest-xdist worker is that worker to its plugins
    and tests (``worker_id``, ``testrun_uid``), as a forked one is."""
    if spec.workerinput is not None:
        config.workerinput = spec.workerinput  # type: ignore[attr-defined]
        config.workeroutput = {}  # type: ignore[attr-defined]


def install_spawned(config: pytest.Config, spec: ChildSpec) -> None:
    """Called from ``pytest_configure`` of a spawned interpreter."""
    prepare(config, spec.fd).start(spec, None)
