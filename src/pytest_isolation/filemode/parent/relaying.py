"""The parent's reading of each child: its messages replayed by the file's
:class:`.relay.FileRelay` until it finishes or dies, within the file's and
the running test's time limits (:mod:`.clock`); a finished child is handed
on to the reaping of :class:`.ending.Finishing`, a dead one described
(:class:`Death`), with what its running phase had printed."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import NamedTuple

import pytest

from pytest_isolation.core.settings import Settings
from pytest_isolation.filemode import wire
from pytest_isolation.filemode.parent import crash
from pytest_isolation.filemode.parent.clock import Clock
from pytest_isolation.filemode.parent.ending import Finishing
from pytest_isolation.filemode.parent.ending import end_at_once
from pytest_isolation.filemode.parent.ending import end_child
from pytest_isolation.filemode.parent.ending import end_tree
from pytest_isolation.filemode.parent.ending import pass_through
from pytest_isolation.filemode.parent.relay import FileRelay
from pytest_isolation.filemode.processes import Child
from pytest_isolation.filemode.processes import describe_exit

#: How long an interrupted run reads what its ended child had sent.
_DRAIN_SECONDS = 1.0


class Death(NamedTuple):
    """How a child died (``was killed by signal 9 (SIGKILL)``), its stderr's
    end, and what its running phase had printed (stdout, stderr)."""

    how: str
    tail: str
    captured: tuple[str, str] = ("", "")


class Relayer:
    """Replays each child's messages, and hands a finished child on to the
    reaping of :class:`.ending.Finishing`."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.timeout = settings.timeout
        self.test_timeout = settings.test_timeout
        self.kill_grace = settings.kill_grace
        #: The message stream of each running shared child, by pid (it is read file by file).
        self.receivers: dict[int, wire.Receiver] = {}
        #: Children that finished and still run their unconfigure, until reaped.
        self.finishing = Finishing(config, settings.timeout, settings.kill_grace)
        #: Where each child's capture files are (:mod:`..child.captured`).
        self.capture_dir = tempfile.mkdtemp(prefix="pytest-isolation-capture-")

    def relay(self, child: Child, relay: FileRelay) -> Death | None:
        """Replay the child's messages until it finishes or dies.

        Returns None when it finished, else how it died and its stderr tail.
        Any error or Ctrl-C in the parent ends the child first.
        """
        clock = Clock(self.timeout, self.test_timeout, relay.running)
        receiver = self.receivers.pop(child.pid, None) or wire.Receiver(child.stream)
        try:
            for kind, payload in clock.messages(receiver):
                relay.handle(kind, payload)
                if relay.end.finished or relay.end.done:
                    break
        except wire.TimedOut:
            end_tree(child, self.kill_grace)
            tail = child.stderr_tail()
            relay.process_ended(child.wait(), timed_out=True)
            child.close()
            return Death(clock.expired(), tail, self.captured(child.pid))
        except KeyboardInterrupt:  # Ctrl-C, SIGTERM: report what the child finished
            end_at_once(child, keep_stream=True)
            try:
                for kind, payload in receiver.drain(_DRAIN_SECONDS):
                    relay.handle(kind, payload)
            finally:
                child.close()
            raise
        except BaseException:
            end_at_once(child)
            raise
        end = relay.end
        if end.done:  # the child goes on with the next file of its shared process
            self.receivers[child.pid] = receiver
            relay.process_ended(0)
            return None
        if end.interrupted:
            end_child(child)
            relay.conclude()
            if end.exit_reason is not None:
                pytest.exit(end.exit_reason, end.exit_code)
            crash.interrupt_at(end.where)
        if end.finished:  # its plugins' unconfigure runs while the next file does
            seen = pass_through(child, 0, end.stderr)
            # A fork server's child says its exit code too, for when the server is gone.
            told = receiver if child.waiter is not None else None
            if told is None:
                child.stream.close()
            relay.process_ended(0)
            self.finishing.add(child, str(relay.file.nodeid), seen, told)
            return None
        returncode = child.wait()
        relay.process_ended(returncode)
        death = Death(describe_exit(returncode), child.stderr_tail(), self.captured(child.pid))
        child.close()
        return death

    def captured(self, pid: int) -> tuple[str, str]:
        """What a child's capture files hold (what its running phase had
        printed), and they are gone."""
        found = []
        for target in (1, 2):
            path = os.path.join(self.capture_dir, f"{pid}-{target}")
            try:
                with open(path, "rb") as file:
                    found.append(file.read().decode("utf-8", "replace"))
                os.unlink(path)
            except OSError:
                found.append("")
        return found[0], found[1]

    def close(self) -> None:
        shutil.rmtree(self.capture_dir, ignore_errors=True)
