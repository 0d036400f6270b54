"""Start-method resolution."""

from __future__ import annotations

import sys
import threading

import pytest

from pytest_isolation.core.settings import resolve_start


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_explicit_methods_are_kept(method: str) -> None:
    assert resolve_start(method) == (method, "requested")


@pytest.mark.skipif(sys.platform != "linux", reason="auto forks only on Linux")
def test_auto_forks_without_threads_and_forks_from_a_fresh_interpreter_with_them() -> None:
    baseline = threading.active_count()  # this outer run's plugins may have idle threads
    assert resolve_start("auto", baseline) == ("fork", "auto")
    assert resolve_start("auto", baseline, "in a pytest-xdist worker") == (
        "fork",
        "auto, in a pytest-xdist worker",
    )
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        method, reason = resolve_start("auto", baseline)
    finally:
        stop.set()
        thread.join(timeout=10)
    assert method == "forkserver"
    assert "threads" in reason
