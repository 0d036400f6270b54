"""Fences around the private details the leak guard relies on: each breaks
loudly if the stdlib, pytest or pyfakefs changes what the guard reads."""

from __future__ import annotations

import os
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from unittest import mock

import pytest

from pytest_isolation.guard.leftovers import pooled
from pytest_isolation.guard.mocks import _pyfakefs_patcher
from pytest_isolation.guard.mocks import active_patches
from pytest_isolation.guard.mocks import monkeypatch_records
from pytest_isolation.guard.mocks import patch_name
from pytest_isolation.guard.mocks import record_start_sites
from pytest_isolation.guard.mocks import start_site
from pytest_isolation.guard.process import _getsignal
from pytest_isolation.guard.process import environ_data
from pytest_isolation.guard.process import text
from pytest_isolation.guard.sites import Sites
from pytest_isolation.guard.state import MISSING


def test_started_patches_are_where_the_guard_looks() -> None:
    patcher = mock.patch("os.getcwd", return_value="/nowhere")
    dict_patcher = mock.patch.dict(os.environ, {"FENCE": "1"})
    patcher.start()
    dict_patcher.start()
    try:
        assert active_patches()[-2:] == [patcher, dict_patcher]
        assert patch_name(patcher) == "os.getcwd"
        assert patch_name(dict_patcher) == "os.environ (patch.dict)"
    finally:
        dict_patcher.stop()
        patcher.stop()
    assert patcher not in active_patches()


def test_start_sites_are_recorded_and_forgotten_on_stop() -> None:
    previous = record_start_sites(lambda: "here:1")
    try:
        patcher = mock.patch.object(os, "getpid", return_value=0)
        patcher.start()
        assert start_site(patcher) == "here:1"
        patcher.stop()
        assert start_site(patcher) is None
    finally:
        record_start_sites(previous)


def test_environ_data_sees_what_os_environ_sees(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ISOLATION_FENCE", "é")
    data = environ_data()
    assert {text(key) for key in data} == set(os.environ)
    assert {text(key): text(value) for key, value in data.items()}["ISOLATION_FENCE"] == "é"


def test_raw_getsignal_agrees_with_signal_getsignal() -> None:
    def handler(number: int, frame: object) -> None:
        """A Python-level handler."""

    previous = signal.signal(signal.SIGUSR2, handler)
    try:
        assert _getsignal(signal.SIGUSR2) is signal.getsignal(signal.SIGUSR2) is handler
    finally:
        signal.signal(signal.SIGUSR2, previous)
    assert _getsignal(signal.SIGUSR2) == signal.getsignal(signal.SIGUSR2)


def test_monkeypatch_records(tmp_path: Path) -> None:
    patcher = pytest.MonkeyPatch()
    try:
        patcher.setenv("FENCE_SET", "1")
        patcher.setattr(os, "sep", "|")
        patcher.setitem(sys.modules, "fence_module", mock.MagicMock())
        patcher.chdir(tmp_path)
        patcher.syspath_prepend(str(tmp_path))
        records = monkeypatch_records(patcher)
    finally:
        patcher.undo()
    assert ("env", "FENCE_SET", MISSING) in records
    assert ("attribute", "os.sep", "/") in records
    assert ("sys.modules", "fence_module", MISSING) in records
    assert {category for category, _, _ in records} >= {"cwd", "import"}
    assert monkeypatch_records(patcher) == []


def test_pyfakefs_active_patcher_is_public() -> None:
    fake_filesystem_unittest = pytest.importorskip("pyfakefs.fake_filesystem_unittest")
    assert _pyfakefs_patcher() is None
    with fake_filesystem_unittest.Patcher() as patcher:
        assert _pyfakefs_patcher() is patcher
    assert _pyfakefs_patcher() is None


def test_sites_skip_library_frames(pytestconfig: pytest.Config) -> None:
    sites = Sites(pytestconfig.rootpath)
    here = sites.caller(depth=0)
    assert here == f"tests/test_guard_fences.py:{sys._getframe().f_lineno - 1}"
    assert sites.library(os.__file__)
    assert sites.library(pytest.__file__)
    assert not sites.library(__file__)


def test_a_pool_s_workers_are_told_by_thread_target() -> None:
    """``pooled`` reads the private ``Thread._target`` while a thread runs;
    this fails if the stdlib stops keeping it there."""
    with ThreadPoolExecutor(1) as executor:
        executor.submit(lambda: None).result()
        workers = [t for t in threading.enumerate() if t.name.startswith("ThreadPoolExecutor")]
        assert workers
        assert all(pooled(worker) for worker in workers)
    stop = threading.Event()
    plain = threading.Thread(target=stop.wait)
    plain.start()
    try:
        assert not pooled(plain)
    finally:
        stop.set()
        plain.join()
