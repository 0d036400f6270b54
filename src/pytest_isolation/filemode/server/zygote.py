"""The prepared fork server of the ``forkserver`` start method: the zygote.

Its interpreter (``forkserver._FORKSERVER_CODE``) calls
``pytest.main(args, plugins=[Zygote(...)])`` from the top of its stack, as
shallow as the ``pytest`` script, and each child goes on from there.

A fresh interpreter runs pytest's start-up once, as every spawned child
would: it parses the run's arguments, loads the plugins (entry points,
``-p``, ``PYTEST_PLUGINS``; assertion rewriting marks and rewrites them) and
the initial conftests, up to ``pytest_cmdline_main``.  There it becomes a
fork server.  Each file's child, forked from it, goes on from that point as
a spawned child does: ``pytest_configure`` of every plugin and conftest, the
session, the collection of its file.  So a thread that a plugin or conftest
starts at configure runs in each child, as in the plain run, while the
imports and the parsing are paid once.

The zygote refuses to serve when a thread runs after the start-up (forking
it would not be safe, and the thread would be missing in the children):
the parent then uses the fork server that runs all of pytest in each child
(:func:`.forkserver.serve_spawned`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import sys
import threading
from collections.abc import Generator
from typing import Any

import pytest

from pytest_isolation.core import frozen
from pytest_isolation.filemode.child.forked import restart_capture
from pytest_isolation.filemode.server import preload
from pytest_isolation.filemode.server.forkserver import say_hello
from pytest_isolation.filemode.server.forkserver import serve
from pytest_isolation.filemode.server.forkserver import take_start


def end(code: int) -> None:
    """End the zygote, or a child of it, with ``code``."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class Zygote:
    """Turns pytest's start-up into a fork server at ``pytest_cmdline_main``."""

    def __init__(self, fd: int, modules: list[str]) -> None:
        self.fd = fd
        self.modules = modules

    @pytest.hookimpl(wrapper=True, tryfirst=True)  # before every plugin's own main
    def pytest_cmdline_main(self, config: pytest.Config) -> Generator[None, object, object]:
        channel = socket.socket(fileno=self.fd)
        others = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
        if others:
            why = f"a thread runs after pytest's start-up ({', '.join(sorted(others))})"
            loaded = preload.Loaded([], "", why)
        else:
            loaded = preload.load(self.modules, watched=False)  # plugins, as the parent's
        hello = json.dumps(dataclasses.asdict(loaded)).encode()
        if loaded.why:  # the parent does not use a server in which that ran
            say_hello(channel, hello)
            os._exit(0)
        # What the start-up printed under capture (a conftest's import) is
        # each child's: its first report shows it, as a spawned child's does.
        captured = _take_captured(config)
        control, fd = serve(channel, hello)
        # From here on: a child, forked for one file.
        frozen.keep_until_observed()  # what the server froze (see serve)
        config.pluginmanager.unregister(self)
        _become_child(config, control, fd)
        _give_back_captured(config, captured)
        return (yield)


def _take_captured(config: pytest.Config) -> tuple[str, str] | None:
    capman = config.pluginmanager.get_plugin("capturemanager")
    if capman is None or not capman.is_globally_capturing():
        return None
    out, err = capman.read_global_capture()
    return str(out), str(err)


def _give_back_captured(config: pytest.Config, captured: tuple[str, str] | None) -> None:
    """Start this child's own capture (``restart_capture``), holding what
    the zygote's start-up printed."""
    restart_capture(config)
    capman: Any = config.pluginmanager.get_plugin("capturemanager")
    if captured is None or capman is None or not any(captured):
        return
    capman.resume_global_capture()
    sys.stdout.write(captured[0])
    sys.stderr.write(captured[1])
    sys.stdout.flush()
    sys.stderr.flush()
    capman.suspend_global_capture()


def _become_child(config: pytest.Config, control: int, fd: int) -> None:
    """Wait for the file to run; take the run's environment and this child's
    own ``--basetemp``, as a spawned child for that file would have them."""
    launch = take_start(control, fd, started=True)
    if launch.basetemp is not None:
        config.option.basetemp = launch.basetemp
    params = config.invocation_params
    config.invocation_params = dataclasses.replace(params, args=tuple(launch.argv), plugins=None)
