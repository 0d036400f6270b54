"""Fences around the private details the leak guard relies on: each breaks
loudly if the stdlib, pytest or pyfakefs changes what the guard reads."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import sysconfig
import threading
import types
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from unittest import mock

import pytest

from pytest_isolation.guard import dictversion
from pytest_isolation.guard.attributes import Attributes
from pytest_isolation.guard.deep import Containers
from pytest_isolation.guard.leftovers import pooled
from pytest_isolation.guard.mocks import _LivePatchers
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


def test_each_monkeypatch_holds_one_reference_to_its_class() -> None:
    """What lets the guard skip the heap walk for forgotten patchers: a
    ``pytest.MonkeyPatch`` made or dropped moves the class's reference count
    by one."""
    cls = pytest.MonkeyPatch  # (an assert's rewriting holds what it reads)
    before = sys.getrefcount(cls)
    patcher = cls()
    made = sys.getrefcount(cls)
    del patcher
    dropped = sys.getrefcount(cls)
    assert (made, dropped) == (before + 1, before)


def test_live_patchers_are_found_after_the_first_walk() -> None:
    live = _LivePatchers()
    first = pytest.MonkeyPatch()
    assert first in live()
    second = pytest.MonkeyPatch()  # made after a walk: the count tells
    assert {id(first), id(second)} <= {id(patcher) for patcher in live()}
    del first  # one gone, a new one made: the same count, still found
    third = pytest.MonkeyPatch()
    found = {id(patcher) for patcher in live()}
    assert {id(second), id(third)} <= found


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


CPYTHON_WITH_TAGS = (
    sys.implementation.name == "cpython"
    and (3, 10) <= sys.version_info < (3, 14)
    and not hasattr(sys, "getobjects")
    and not sysconfig.get_config_var("Py_GIL_DISABLED")
)


@pytest.mark.skipif(not CPYTHON_WITH_TAGS, reason="dict version tags are CPython 3.10-3.13's")
def test_the_dict_version_tag_is_where_the_guard_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The supported CPythons pass the self-test, and the tag read through
    the view moves with each write a test makes (a monkeypatch, a class
    attribute) and stays put otherwise."""
    assert dictversion.WORKS
    module = types.ModuleType("fenced")
    probe = type("Probe", (), {"value": 0})
    for owner in (module, probe):
        tag = dictversion.tag_of(owner)
        assert tag is not None
        view, before = tag
        namespace = dictversion.namespace(owner)
        assert namespace is not None
        assert ctypes.addressof(view) == id(namespace) + dictversion._TAG_AT
        assert view[0] == before
        monkeypatch.setattr(owner, "value", 1, raising=False)
        assert view[0] != before
    assert dictversion.tag_of(probe()) is None  # an object's own dict: compared by value


@pytest.mark.parametrize("tags", [True, False], ids=["version tags", "values compared"])
def test_a_namespace_snapshot_sees_every_write(monkeypatch: pytest.MonkeyPatch, tags: bool) -> None:
    """The per-test check, with the tags and without them (another
    interpreter): a rebinding, a new name and a removal are each seen, and
    only in the namespace written to."""
    if not tags:
        monkeypatch.setattr(dictversion, "WORKS", False)
    elif not dictversion.WORKS:
        pytest.skip("this interpreter has no dict version tags")
    module = types.ModuleType("watched")
    module.value = 1  # type: ignore[attr-defined]
    other = type("Other", (), {"value": 1})
    watched = Attributes(Sites(Path.cwd()))
    watched.spaces = [("watched", module), ("Other", other)]
    writes: list[tuple[object, Callable[[], None]]] = [
        (module, lambda: setattr(module, "value", 2)),
        (module, lambda: setattr(module, "new", 1)),
        (module, lambda: delattr(module, "value")),
        (other, lambda: setattr(other, "value", 2)),
    ]
    for owner, write in writes:
        snapshot = watched.snapshot()
        assert watched.unchanged(snapshot)
        write()
        assert not watched.unchanged(snapshot)
        assert [space.owner for space in watched.changed_spaces(snapshot)] == [owner]
    # Written to and put back: unchanged, and (with tags) one read from then on.
    module.value = 2  # type: ignore[attr-defined]
    snapshot = watched.snapshot()
    module.value = 3  # type: ignore[attr-defined]
    module.value = 2  # type: ignore[attr-defined]
    assert watched.unchanged(snapshot)
    assert watched.changed_spaces(snapshot) == []
    module.value = 3  # type: ignore[attr-defined]
    assert not watched.unchanged(snapshot)


@pytest.mark.parametrize("tags", [True, False], ids=["version tags", "values compared"])
def test_a_container_snapshot_sees_every_write(monkeypatch: pytest.MonkeyPatch, tags: bool) -> None:
    """The containers' check, with the tags and without them: an item set,
    added or removed is seen; the content put back is unchanged again."""
    if not tags:
        monkeypatch.setattr(dictversion, "WORKS", False)
    elif not dictversion.WORKS:
        pytest.skip("this interpreter has no dict version tags")
    module = types.ModuleType("registry")
    module.REGISTRY = {"a": 1}  # type: ignore[attr-defined]
    module.ITEMS = [1]  # type: ignore[attr-defined]
    watched = Containers()
    watched.spaces = [("registry", module)]
    registry: dict[str, int] = module.REGISTRY
    writes: list[Callable[[], object]] = [
        lambda: registry.__setitem__("a", 2),
        lambda: registry.__setitem__("b", 1),
        lambda: registry.pop("a"),
        lambda: module.ITEMS.append(2),
    ]
    for write in writes:
        snapshot = watched.snapshot()
        assert watched.unchanged(snapshot)
        write()
        assert not watched.unchanged(snapshot)
        assert len(watched.diff(snapshot)) == 1
    snapshot = watched.snapshot()
    assert watched.unchanged(snapshot)
    registry["c"] = 3
    del registry["c"]
    assert watched.unchanged(snapshot)  # written to, and back as it was
    registry["c"] = 3
    assert not watched.unchanged(snapshot)


def test_the_import_watch_tells_an_import_from_a_lookup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Imports and reloads reach the finder through the functions of
    ``importlib._bootstrap`` the watch recognises; ``importlib.util.find_spec``
    does not (and is not answered twice)."""
    import importlib
    import importlib.util

    from pytest_isolation.guard import imports

    asked: list[tuple[str, bool]] = []

    class Recording:
        def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
            asked.append((fullname, imports._asked_by_an_import()))

    (tmp_path / "fenced_import_probe.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    others = [finder for finder in sys.meta_path if not isinstance(finder, imports.ImportWatch)]
    monkeypatch.setattr(sys, "meta_path", [Recording(), *others])  # this run's guard's out
    monkeypatch.delitem(sys.modules, "fenced_import_probe", raising=False)
    module = importlib.import_module("fenced_import_probe")
    importlib.reload(module)
    assert importlib.util.find_spec("fenced_import_probe_absent") is None
    with pytest.raises(ImportError):
        __import__("fenced_import_probe_missing")  # the import statement's path
    assert asked == [
        ("fenced_import_probe", True),
        ("fenced_import_probe", True),
        ("fenced_import_probe_absent", False),
        ("fenced_import_probe_missing", True),
    ]


def test_the_event_loop_policy_is_read_where_asyncio_keeps_it() -> None:
    """``asyncio.events._event_loop_policy`` (private): the guard reads the
    policy there so that reading it creates none."""
    import asyncio
    import asyncio.events

    from pytest_isolation.guard.process import DEFAULT_POLICY
    from pytest_isolation.guard.process import _loop_policy

    policy = asyncio.get_event_loop_policy()
    assert asyncio.events._event_loop_policy is policy
    assert _loop_policy() == DEFAULT_POLICY
    custom = type("Custom", (asyncio.DefaultEventLoopPolicy,), {})()
    asyncio.set_event_loop_policy(custom)
    try:
        assert _loop_policy() is custom
    finally:
        asyncio.set_event_loop_policy(None)
