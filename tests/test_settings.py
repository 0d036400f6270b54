"""Start-method resolution."""

from __future__ import annotations

import sys
import threading

import pytest

from conftest import TIMEOUT
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


EMPTY_KEYS = [
    "isolation_start",
    "isolation_preload",
    "isolation_lint",
    "isolation_leaks",
    "isolation_keep_tmp",
    "isolation_retry_scope",
    "isolation_mode",
    "isolation_shard",
]


@pytest.mark.parametrize("key", EMPTY_KEYS)
def test_an_empty_ini_value_means_the_default(pytester: pytest.Pytester, key: str) -> None:
    """Issue 31, item 8: ``isolation_start =`` was a usage error, while the
    reference says an empty ini value means the default."""
    pytester.makeini(f"[pytest]\n{key} =\n")
    pytester.makepyfile(test_a="def test_a(isolated_tmp):\n    pass\n")
    for mode in ("off", "file"):
        result = pytester.runpytest_subprocess(
            "-p", "isolation", f"--isolation-mode={mode}", timeout=TIMEOUT
        )
        assert result.ret == 0, result.stderr.str()
        result.assert_outcomes(passed=1)


def test_the_environment_variable_off_runs_plain_whatever_addopts_say(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``PYTEST_ISOLATION_MODE=off`` with ``addopts = --isolation-timeout=300``
    was exit 4 ("needs --isolation-mode=file"): the variable is documented as
    the way to run plain; the file-mode options are ignored, with one line."""
    pytester.makeini("[pytest]\naddopts = --isolation-timeout=300 --isolation-retries=1\n")
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    monkeypatch.setenv("PYTEST_ISOLATION_MODE", "off")
    result = pytester.runpytest_subprocess("-p", "isolation", timeout=TIMEOUT)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "isolation: PYTEST_ISOLATION_MODE=off: --isolation-timeout, --isolation-retries "
            "ignored (file mode only)"
        ]
    )
    explicit = pytester.runpytest_subprocess(
        "-p", "isolation", "--isolation-mode=off", timeout=TIMEOUT
    )
    assert explicit.ret == 4
    explicit.stderr.fnmatch_lines(["*--isolation-timeout * it needs --isolation-mode=file"])


def test_mode_off_from_the_environment_keeps_the_leak_guard(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What README says of ``PYTEST_ISOLATION_MODE=off`` (issue 49 item 10):
    file mode is off over the ini file's, every file runs in pytest's own
    process, and the leak guard still runs."""
    pytester.makeini("[pytest]\nisolation_mode = file\n")
    pytester.makepyfile(pidenv="import os\nos.environ['ISO_PID'] = str(os.getpid())\n")
    pytester.makepyfile(
        test_a="import os\ndef test_a():\n    os.environ['ISO_OFF'] = str(os.getpid())\n",
        test_b="import os\ndef test_b():\n    assert os.environ.get('ISO_OFF') is None\n"
        "    assert os.getpid() == int(os.environ['ISO_PID'])\n",
    )
    monkeypatch.setenv("PYTEST_ISOLATION_MODE", "off")
    result = pytester.runpytest_subprocess("-p", "isolation", "-p", "pidenv", timeout=TIMEOUT)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["*isolation: 1 leak by 1 test*", "?env? os.environ?'ISO_OFF'? (was unset, now *"]
    )
    assert "file mode" not in result.stdout.str()
