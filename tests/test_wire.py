"""The wire protocol between parent and child."""

from __future__ import annotations

import io
import os

import pytest

from pytest_isolation.filemode.wire import ChildSpec
from pytest_isolation.filemode.wire import Sender
from pytest_isolation.filemode.wire import receive


def test_spec_round_trips_through_the_environment() -> None:
    spec = ChildSpec(
        path="/x/test_a.py",
        selectors=(("TestC", "test_m"), ("test_p[1]",)),
        skip=frozenset({"test_a.py::test_1"}),
        maxfail=2,
        collect_only=True,
        fd=7,
        path0="/venv/bin",
        uses=("db", "dataset"),
        loop_room=950,
    )
    assert ChildSpec.from_env(spec.to_env()) == spec


def test_spec_without_selectors_runs_the_whole_file() -> None:
    spec = ChildSpec.from_env(ChildSpec(path="/x/test_a.py").to_env())
    assert spec.selectors is None
    assert spec.skip == frozenset()


def test_messages_arrive_whole_and_in_order() -> None:
    read_fd, write_fd = os.pipe()
    sender = Sender(write_fd)
    sender.send("hello", version=1, pid=123)
    # Below the pipe's 64 KiB buffer: nothing reads until both are sent.
    sender.send("report", data={"nodeid": "t.py::x", "longrepr": "y" * 50_000})
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as stream:
        messages = list(receive(stream))
    assert messages[0] == ("hello", {"version": 1, "pid": 123})
    assert messages[1][1]["data"]["longrepr"] == "y" * 50_000
    assert len(messages) == 2


@pytest.mark.parametrize("cut", [2, 6])
def test_a_message_cut_short_by_a_dying_child_is_dropped(cut: int) -> None:
    read_fd, write_fd = os.pipe()
    Sender(write_fd).send("report", data={"x": 1})
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as stream:
        whole = stream.read()
    assert list(receive(io.BytesIO(whole))) == [("report", {"data": {"x": 1}})]
    assert list(receive(io.BytesIO(whole[:cut]))) == []
