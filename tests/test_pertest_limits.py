"""The limits of a test's process and how its end is put into words
(``pertest/limits.py``, ``pertest/ending.py``): plain logic, no process."""

from __future__ import annotations

import signal

import pytest

from pytest_isolation.pertest.ending import Timer
from pytest_isolation.pertest.ending import cause
from pytest_isolation.pertest.limits import Limits
from pytest_isolation.pertest.limits import marker_arguments
from pytest_isolation.pertest.waiting import Ended

RUN = Limits(timeout=5.0, memory=512.0)


def test_a_given_limit_replaces_the_runs_and_zero_lifts_it() -> None:
    assert RUN.over(timeout=2.0) == Limits(timeout=2.0, memory=512.0)
    assert RUN.over(memory=0.0) == Limits(timeout=5.0, memory=None)
    assert RUN.over(cpu=None) == RUN  # not given: the run's
    assert RUN.over(cpu=3.0).cpu == 3.0


def test_limits_in_words() -> None:
    assert Limits().text() == "time none, memory none, CPU none"
    assert Limits(timeout=1.5, memory=512.0, cpu=2.0).text() == "time 1.5 s, memory 512 MB, CPU 2 s"


def test_the_markers_arguments_are_checked() -> None:
    assert marker_arguments({"timeout": 2, "memory": 0}, (), "t") == {
        "timeout": 2.0,
        "memory": 0.0,
    }
    cases: list[tuple[dict[str, object], tuple[object, ...], str]] = [
        ({}, (5,), "keyword arguments only"),
        ({"seconds": 1}, (), "unknown argument 'seconds'"),
        ({"timeout": -1}, (), r"timeout=-1\): give a number >= 0"),
        ({"cpu": "1"}, (), r"cpu='1'\): give a number"),
        ({"memory": True}, (), r"memory=True\): give a number"),
    ]
    for kwargs, args, message in cases:
        with pytest.raises(pytest.UsageError, match=message):
            marker_arguments(kwargs, args, "test_a.py::test_x")


@pytest.mark.parametrize(
    ("ended", "limits", "timer", "expected"),
    [
        (
            Ended(-signal.SIGKILL, timed_out=True),
            Limits(timeout=2.0),
            None,
            "over its 2 s time limit: the test's process was killed",
        ),
        (
            Ended(-signal.SIGXCPU),
            Limits(cpu=1.0),
            None,
            "over its 1 s CPU time limit: the test's process was killed by SIGXCPU",
        ),
        (
            Ended(-signal.SIGXCPU),
            Limits(),
            None,
            "the test's process was killed by signal 24 (SIGXCPU) during its call",
        ),
        (
            Ended(-signal.SIGSEGV),
            Limits(memory=64.0),
            None,
            "the test's process was killed by signal 11 (SIGSEGV) during its call "
            "(its memory limit: 64 MB)",
        ),
        (
            Ended(1),
            Limits(),
            Timer(1.0, "thread"),
            "over pytest-timeout's 1 s limit: its thread method ended the test's process "
            "(exit code 1)",
        ),
        (
            Ended(1),
            Limits(),
            Timer(1.0, "signal"),
            "the test's process exited with code 1 during its call",
        ),
        (Ended(0), Limits(), None, "the test's process exited with code 0 during its call"),
    ],
)
def test_how_a_process_that_ended_early_is_named(
    ended: Ended, limits: Limits, timer: Timer | None, expected: str
) -> None:
    assert cause(ended, limits, timer, "call") == expected
