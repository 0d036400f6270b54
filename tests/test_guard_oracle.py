"""The guard against its oracle, the plain run (issue 45): a suite that passes
with ``-p no:isolation`` has the same outcome, test by test, with the guard
on, in every tier (default, ``--isolation-leaks-deep``), every policy (warn,
quiet, error) and in file mode; and state a test created (an object created
lazily that registered itself elsewhere, a module first imported, a registry
filled behind a cache, a counter advanced) is kept, as a plain run keeps it,
so none of these suites gets a leak section (``isolation: N leaks by ...``).

Each class of problem (A1-A6, C) has two variants in ``CASES``, none of which
leaks; ``ODD_SITES`` leak one variable each, to check the report's site."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import NamedTuple

import pytest

from conftest import GUARD_MODES
from conftest import TIMEOUT
from conftest import literal
from conftest import run_guard
from conftest import run_plain


class Case(NamedTuple):
    """A small project whose tests all pass in a plain run."""

    files: dict[str, str]
    args: tuple[str, ...] = ()


INI = "[pytest]\npythonpath = .\n"

CASES: dict[str, Case] = {
    # A1: an object created lazily that registers itself process-wide; putting it back
    # makes the next test create (and register) a second one.
    "a1-prometheus-metrics-held-by-a-lazy-holder": Case(
        {
            # the registry refers to the metrics, not to the holder created lazily
            "telemetry.py": """
                from prometheus_client import Counter
                from prometheus_client import Histogram

                class _Metrics:
                    def __init__(self):
                        self.latency = Histogram(
                            "oracle_request_seconds", "Request latency", ["route"]
                        )
                        self.errors = Counter("oracle_request_errors", "Request errors")

                class Telemetry:
                    def __init__(self):
                        self._metrics = None

                    def metrics(self):
                        if self._metrics is None:
                            self._metrics = _Metrics()
                        return self._metrics

                TELEMETRY = Telemetry()
            """,
            "test_a_routes.py": """
                from prometheus_client import REGISTRY
                from telemetry import TELEMETRY

                def test_index():
                    TELEMETRY.metrics().latency.labels("/").observe(0.25)
                    assert REGISTRY.get_sample_value(
                        "oracle_request_seconds_count", {"route": "/"}
                    ) == 1.0

                def test_login_error():
                    TELEMETRY.metrics().errors.inc()
            """,
            "test_b_more_routes.py": """
                from telemetry import TELEMETRY

                def test_logout():
                    TELEMETRY.metrics().latency.labels("/logout").observe(0.1)
            """,
        }
    ),
    "a1-module-getattr-engine-claims-its-name": Case(
        {
            # the registry keeps the name only: nothing else refers to the engine
            "registry.py": """
                NAMES = set()

                def claim(name):
                    if name in NAMES:
                        raise ValueError(f"engine name {name!r} is taken")
                    NAMES.add(name)
            """,
            "engine.py": """
                import registry

                class Engine:
                    def __init__(self, name):
                        registry.claim(name)
                        self.name = name

                    def run(self, sql):
                        return f"{self.name}: {sql}"

                def __getattr__(name):
                    if name == "default":
                        value = Engine("default")
                        globals()["default"] = value
                        return value
                    raise AttributeError(name)
            """,
            "test_engine.py": """
                import engine
                import registry

                def test_query():
                    assert engine.default.run("select 1") == "default: select 1"

                def test_name_claimed():
                    assert engine.default.name in registry.NAMES

                def test_query_again():
                    assert engine.default.run("select 2") == "default: select 2"
            """,
        }
    ),
    # A2: a module a test imports first whose import registers something process-wide:
    # a second import breaks (a duplicate registration, or a class that is no longer
    # the class of what was registered).
    "a2-prometheus-collector-registered-at-import": Case(
        {
            "queue_collector.py": """
                from prometheus_client import REGISTRY
                from prometheus_client.core import GaugeMetricFamily

                class QueueCollector:
                    def describe(self):
                        return [GaugeMetricFamily("oracle_queue_depth", "Queue depth")]

                    def collect(self):
                        yield GaugeMetricFamily("oracle_queue_depth", "Queue depth", value=3)

                COLLECTOR = QueueCollector()
                REGISTRY.register(COLLECTOR)
            """,
            "test_a_scrape.py": """
                from prometheus_client import generate_latest

                def test_scrape():
                    import queue_collector
                    assert b"oracle_queue_depth 3.0" in generate_latest()
            """,
            "test_b_value.py": """
                from prometheus_client import REGISTRY

                def test_value():
                    import queue_collector
                    assert REGISTRY.get_sample_value("oracle_queue_depth") == 3.0

                def test_same_collector():
                    import queue_collector
                    assert isinstance(queue_collector.COLLECTOR, queue_collector.QueueCollector)
            """,
        }
    ),
    "a2-codec-registered-at-import-isinstance": Case(
        {
            "shout_codec.py": """
                import codecs

                class IncrementalEncoder(codecs.IncrementalEncoder):
                    def encode(self, input, final=False):
                        return input.upper().encode("ascii")

                def _encode(text, errors="strict"):
                    return text.upper().encode("ascii"), len(text)

                def _decode(data, errors="strict"):
                    return bytes(data).decode("ascii").lower(), len(data)

                def _search(name):
                    if name != "shout":
                        return None
                    return codecs.CodecInfo(
                        _encode, _decode, name="shout", incrementalencoder=IncrementalEncoder
                    )

                codecs.register(_search)
            """,
            "test_a_encode.py": """
                def test_encode():
                    import shout_codec
                    assert "hi".encode("shout") == b"HI"
            """,
            "test_b_encoder.py": """
                import codecs

                def test_incremental_encoder_is_the_modules():
                    import shout_codec
                    encoder = codecs.getincrementalencoder("shout")()
                    assert isinstance(encoder, shout_codec.IncrementalEncoder)
                    assert encoder.encode("abc") == b"ABC"
            """,
        }
    ),
    # A3: a counter numbering the rows of a store created lazily: put the counter back but
    # keep the store, and the next row reuses a key.
    "a3-lastrowid-and-a-store-others-refer-to": Case(
        {
            # a counter whose name does not say it counts; the store is listed elsewhere
            "store.py": """
                STORES = []

                class Store:
                    _lastrowid = 0
                    _default = None

                    def __init__(self):
                        self.rows = {}
                        STORES.append(self)

                    @classmethod
                    def default(cls):
                        if cls._default is None:
                            cls._default = cls()
                        return cls._default

                    def insert(self, row):
                        Store._lastrowid += 1
                        key = Store._lastrowid
                        if key in self.rows:
                            raise KeyError(f"duplicate primary key {key}")
                        self.rows[key] = row
                        return key
            """,
            "test_store.py": """
                from store import Store

                def test_insert_alice():
                    key = Store.default().insert("alice")
                    assert Store.default().rows[key] == "alice"

                def test_insert_bob():
                    key = Store.default().insert("bob")
                    assert Store.default().rows[key] == "bob"

                def test_insert_carol():
                    key = Store.default().insert("carol")
                    assert Store.default().rows[key] == "carol"
            """,
        }
    ),
    "a3-keygen-object-and-lazy-table-object": Case(
        {
            "keys.py": """
                class KeyGen:
                    def __init__(self):
                        self.next_key = 100

                    def take(self):
                        key = self.next_key
                        self.next_key += 1
                        return key

                KEYS = KeyGen()
            """,
            "db.py": """
                import keys

                class Table:
                    def __init__(self):
                        self.rows = {}

                    def insert(self, row):
                        key = keys.KEYS.take()
                        if key in self.rows:
                            raise RuntimeError(f"duplicate primary key {key}")
                        self.rows[key] = row
                        return key

                _table = None

                def table():
                    global _table
                    if _table is None:
                        _table = Table()
                    return _table
            """,
            "test_a_orders.py": """
                import db

                def test_first_order():
                    assert db.table().insert(("order", 1)) >= 100

                def test_second_order():
                    assert db.table().insert(("order", 2)) >= 100
            """,
            "test_b_more_orders.py": """
                import db

                def test_third_order():
                    assert db.table().insert(("order", 3)) >= 100

                def test_fourth_order():
                    assert db.table().insert(("order", 4)) >= 100
            """,
        }
    ),
    # A4: a registry filled by a loader behind a cache the guard cannot see: empty the
    # registry and the loader, which ran already, never fills it again.
    "a4-lru-cache-fills-a-class-level-registry": Case(
        {
            "formats.py": """
                import functools

                class Formats:
                    known = {}

                @functools.lru_cache(maxsize=None)
                def discover():
                    Formats.known["csv"] = ","
                    Formats.known["tsv"] = "\\t"
                    return len(Formats.known)

                def separator(name):
                    discover()
                    return Formats.known[name]
            """,
            "test_formats.py": """
                from formats import separator

                def test_csv():
                    assert separator("csv") == ","

                def test_tsv():
                    assert separator("tsv") == "\\t"

                def test_csv_again():
                    assert separator("csv") == ","
            """,
        }
    ),
    "a4-closure-memo-rebinds-a-public-registry": Case(
        {
            "plugins.py": """
                PLUGINS = {}

                def _loader():
                    loaded = set()

                    def load(group):
                        global PLUGINS
                        if group in loaded:
                            return
                        loaded.add(group)
                        PLUGINS = {**PLUGINS, group: [f"{group}.json", f"{group}.yaml"]}

                    return load

                load = _loader()

                def plugins(group):
                    load(group)
                    return PLUGINS[group]
            """,
            "test_a_plugins.py": """
                from plugins import plugins

                def test_readers():
                    assert plugins("readers") == ["readers.json", "readers.yaml"]
            """,
            "test_b_plugins.py": """
                from plugins import plugins

                def test_readers_again():
                    assert "readers.yaml" in plugins("readers")

                def test_writers():
                    assert plugins("writers")[0] == "writers.json"
            """,
        }
    ),
    # A5: a test that patches open and, while it is patched, imports a project module for
    # the first time: the guard must not call the patched open.
    "a5-open-denied-by-a-module-fixture-patch": Case(
        {
            # open stays patched across the tests' boundaries, where the guard works
            "late_parser.py": """
                class Pair:
                    def __init__(self, key, value):
                        self.key, self.value = key, value

                def parse(text):
                    key, value = text.split("=", 1)
                    return Pair(key.strip(), value.strip())
            """,
            "late_format.py": """
                from late_parser import Pair

                def render(pair):
                    assert isinstance(pair, Pair)
                    return f"{pair.key}={pair.value}"
            """,
            "test_parse.py": """
                import builtins
                from unittest import mock
                import pytest

                @pytest.fixture(scope="module")
                def denied():
                    patcher = mock.patch.object(
                        builtins, "open", side_effect=PermissionError("sandboxed")
                    )
                    fake = patcher.start()
                    yield fake
                    patcher.stop()

                def test_import_while_open_is_denied(denied):
                    import late_parser
                    assert late_parser.parse("a = 1").value == "1"

                def test_another_first_import(denied):
                    import late_format
                    import late_parser
                    assert late_format.render(late_parser.parse("b=2")) == "b=2"

                def test_nobody_opened_a_file(denied):
                    assert denied.call_count == 0
            """,
        }
    ),
    "a5-mock-open-with-garbage-while-a-package-is-imported": Case(
        {
            "late_pkg/__init__.py": """
                from late_pkg.reader import load

                __all__ = ["load"]
            """,
            "late_pkg/reader.py": """
                class Document:
                    def __init__(self, text):
                        self.text = text

                def load(path):
                    with open(path) as f:
                        return Document(f.read())
            """,
            "test_reader.py": """
                from unittest import mock

                def test_load_with_a_fake_file():
                    fake = mock.mock_open(read_data="def broken(:\\n")
                    with mock.patch("builtins.open", fake):
                        import late_pkg
                        document = late_pkg.load("settings.cfg")
                    assert document.text == "def broken(:\\n"
                    fake.assert_called_once_with("settings.cfg")

                def test_the_package_is_usable_later(tmp_path):
                    import late_pkg
                    path = tmp_path / "real.cfg"
                    path.write_text("real")
                    assert late_pkg.load(str(path)).text == "real"
            """,
        }
    ),
    # A6: higher-scoped fixtures that patch through MonkeyPatch.context() or pytest-mock
    # and undo it at their teardown: nothing leaks, nothing was "never undone".
    "a6-package-fixture-monkeypatch-context": Case(
        {
            "settings.py": 'MODE = "prod"\n',
            "pkg_a/__init__.py": "",
            "pkg_a/conftest.py": """
                import pytest
                import settings

                @pytest.fixture(scope="package")
                def app_env():
                    with pytest.MonkeyPatch.context() as mp:
                        mp.setenv("ORACLE_DSN", "sqlite://")
                        mp.delenv("ORACLE_REMOTE", raising=False)
                        mp.setattr(settings, "MODE", "test")
                        yield "sqlite://"
            """,
            "pkg_a/test_a_client.py": """
                import os
                import pytest
                import settings

                @pytest.fixture(scope="module")
                def client(app_env):
                    return {"dsn": app_env, "mode": settings.MODE}

                def test_client_sees_the_env(client):
                    assert client == {"dsn": "sqlite://", "mode": "test"}
                    assert os.environ["ORACLE_DSN"] == "sqlite://"

                def test_client_again(client):
                    assert settings.MODE == "test"
            """,
            "pkg_a/test_a_other.py": """
                import os

                def test_uses_the_package_fixture(app_env):
                    assert os.environ["ORACLE_DSN"] == app_env
            """,
            "pkg_b/__init__.py": "",
            "pkg_b/test_b_after.py": """
                import os
                import settings

                def test_env_is_gone():
                    assert "ORACLE_DSN" not in os.environ

                def test_setting_is_back():
                    assert settings.MODE == "prod"
            """,
        }
    ),
    "a6-class-mocker-in-a-class-fixture": Case(
        {
            "settings.py": """
                TIMEOUT = 30

                def connect():
                    return "connected"
            """,
            "test_a_mocked.py": """
                import os
                import pytest
                import settings

                @pytest.fixture(scope="class")
                def fast(class_mocker):
                    class_mocker.patch.object(settings, "TIMEOUT", 0.1)
                    class_mocker.patch.dict(os.environ, {"ORACLE_FAST": "1"})
                    spy = class_mocker.spy(settings, "connect")
                    yield spy

                @pytest.mark.usefixtures("fast")
                class TestFast:
                    def test_timeout(self):
                        assert settings.TIMEOUT == 0.1

                    def test_env_and_spy(self, fast):
                        assert os.environ["ORACLE_FAST"] == "1"
                        assert settings.connect() == "connected"
                        assert fast.call_count == 1

                def test_after_the_class():
                    assert settings.TIMEOUT == 30
                    assert "ORACLE_FAST" not in os.environ
            """,
            "test_b_later.py": """
                import os
                import settings

                def test_everything_is_back():
                    assert settings.TIMEOUT == 30
                    assert "ORACLE_FAST" not in os.environ
                    assert not hasattr(settings.connect, "spy_return")
            """,
        },
        args=("-p", "pytest_mock"),
    ),
    # C: routine state, put back or kept, never reported as a leak.
    "c-seen-sets-and-stdlib-lazy-state": Case(
        {
            "slugs.py": """
                import collections
                import re

                _seen = set()
                _by_initial = collections.defaultdict(list)

                def slugify(text):
                    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
                    if slug not in _seen:
                        _seen.add(slug)
                        _by_initial[slug[:1]].append(slug)
                    return slug
            """,
            "test_routine.py": """
                import tempfile
                import time
                import uuid

                import slugs

                def test_slugs():
                    assert slugs.slugify("Hello World") == "hello-world"
                    assert slugs.slugify("Hello, World!") == "hello-world"

                def test_uuid1():
                    assert uuid.uuid1().version == 1

                def test_tempdir():
                    assert tempfile.gettempdir()

                def test_strptime():
                    assert time.strptime("2024-02-03", "%Y-%m-%d").tm_mday == 3

                def test_slugs_again():
                    assert slugs.slugify("Other") == "other"
            """,
        }
    ),
    "c-config-reloaded-into-equal-objects": Case(
        {
            "config.py": """
                import dataclasses
                import datetime

                @dataclasses.dataclass(frozen=True)
                class Limits:
                    requests: int
                    burst: int

                def _build():
                    return (
                        {"region": "eu", "retries": 3},
                        ["primary", "replica"],
                        frozenset({"GET", "POST"}),
                        Limits(100, 10),
                        datetime.date(2024, 1, 1),
                    )

                SETTINGS, HOSTS, METHODS, LIMITS, EPOCH = _build()

                def reload():
                    global SETTINGS, HOSTS, METHODS, LIMITS, EPOCH
                    SETTINGS, HOSTS, METHODS, LIMITS, EPOCH = _build()
            """,
            "test_config.py": """
                import datetime
                import config

                def test_reload():
                    config.reload()
                    assert config.SETTINGS == {"region": "eu", "retries": 3}

                def test_values():
                    assert config.LIMITS == config.Limits(100, 10)
                    assert "GET" in config.METHODS
                    assert config.EPOCH == datetime.date(2024, 1, 1)

                def test_reload_twice():
                    config.reload()
                    config.reload()
                    assert config.SETTINGS["retries"] == 3
                    assert config.HOSTS == ["primary", "replica"]
            """,
        }
    ),
}

TIERS: dict[str, tuple[str, ...]] = {"default": (), "deep": ("--isolation-leaks-deep",)}
POLICIES = ("warn", "quiet", "error")

#: The plain run's outcomes of each case (node id -> outcome), run once per process.
_plain_outcomes: dict[str, dict[str, str]] = {}


def _write(pytester: pytest.Pytester, files: dict[str, str]) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(**files)


def _outcomes(result: pytest.RunResult, junit: Path) -> dict[str, str]:
    """Each test's outcome in the run's junit XML report: passed, failure, error or
    skipped (a test that passed and errored at teardown is "error")."""
    assert junit.is_file(), f"no junit XML: the run ended with {result.ret!r}"
    found: dict[str, set[str]] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        tags = {child.tag for child in case if child.tag in ("failure", "error", "skipped")}
        key = f"{case.get('classname', '')}::{case.get('name', '')}"
        found.setdefault(key, set()).update(tags or {"passed"})
    return {key: ",".join(sorted(tags)) for key, tags in found.items()}


def _oracle(pytester: pytest.Pytester, name: str) -> dict[str, str]:
    """The plain run's outcomes; every test passes there."""
    if name not in _plain_outcomes:
        case = CASES[name]
        _write(pytester, case.files)
        junit = pytester.path / "plain.xml"
        result = run_plain(pytester, "-p", "no:isolation", *case.args, f"--junitxml={junit}")
        assert result.ret == pytest.ExitCode.OK
        outcomes = _outcomes(result, junit)
        assert set(outcomes.values()) == {"passed"}
        _plain_outcomes[name] = outcomes
    return _plain_outcomes[name]


def _no_leak_section(result: pytest.RunResult) -> None:
    result.stdout.no_fnmatch_line("*= isolation: * leak* by * =*")
    result.stdout.no_fnmatch_line("*LeakedStateWarning*")


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("tier", sorted(TIERS))
@pytest.mark.parametrize("name", sorted(CASES))
def test_same_outcomes_as_the_plain_run(
    pytester: pytest.Pytester, name: str, tier: str, policy: str
) -> None:
    plain = _oracle(pytester, name)
    case = CASES[name]
    _write(pytester, case.files)
    junit = pytester.path / "guard.xml"
    result = run_guard(
        pytester, *TIERS[tier], f"--isolation-leaks={policy}", *case.args, f"--junitxml={junit}"
    )
    assert _outcomes(result, junit) == plain
    assert result.ret == pytest.ExitCode.OK
    result.stdout.no_fnmatch_line("*a pytest.MonkeyPatch never undone*")
    if tier == "default":
        # nothing here is a leak: no section, whatever the policy (the deep tier's reports
        # are not asserted on; its outcomes are)
        _no_leak_section(result)


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_outcomes_in_file_mode(pytester: pytest.Pytester, name: str) -> None:
    plain = _oracle(pytester, name)
    case = CASES[name]
    _write(pytester, case.files)
    junit = pytester.path / "file.xml"
    result = pytester.runpytest_subprocess(
        *GUARD_MODES["file"],
        "--isolation-leaks=error",
        *case.args,
        f"--junitxml={junit}",
        timeout=TIMEOUT,
    )
    assert _outcomes(result, junit) == plain
    assert result.ret == pytest.ExitCode.OK
    _no_leak_section(result)
    result.stdout.no_fnmatch_line("*a pytest.MonkeyPatch never undone*")


#: A5: a test that makes the site of its (real) leak hard to compute.
ODD_SITES = {
    "getcwd-gone": """
        import os

        def test_leaks_while_the_cwd_is_gone(monkeypatch):
            def gone():
                raise FileNotFoundError(2, "No such file or directory")

            monkeypatch.setattr(os, "getcwd", gone)
            os.environ["ORACLE_ODD_SITE"] = "1"

        def test_next():
            assert os.getcwd()
    """,
    "relpath-refuses": """
        import os

        def test_leaks_while_relpath_refuses(monkeypatch):
            def other_drive(path, start=None):
                raise ValueError("path is on mount 'C:', start on mount 'D:'")

            monkeypatch.setattr(os.path, "relpath", other_drive)
            os.environ["ORACLE_ODD_SITE"] = "1"

        def test_next():
            assert os.path.relpath("a/b", "a") == "b"
    """,
}


@pytest.mark.parametrize("mode", sorted(GUARD_MODES))
@pytest.mark.parametrize("name", sorted(ODD_SITES))
def test_the_leak_site_survives_patched_path_functions(
    pytester: pytest.Pytester, name: str, mode: str
) -> None:
    """A5: the leak is still named with its test and FILE:LINE, and no outcome changes."""
    path = pytester.makepyfile(test_odd=ODD_SITES[name])
    lines = path.read_text().splitlines()
    line = 1 + next(i for i, text in enumerate(lines) if "os.environ[" in text)
    test = re.findall(r"def (test_leaks_\w+)", path.read_text())[0]
    plain_junit = pytester.path / "plain.xml"
    plain = run_plain(pytester, "-p", "no:isolation", f"--junitxml={plain_junit}")
    plain_outcomes = _outcomes(plain, plain_junit)
    assert set(plain_outcomes.values()) == {"passed"}
    junit = pytester.path / "guard.xml"
    result = pytester.runpytest_subprocess(
        *GUARD_MODES[mode], f"--junitxml={junit}", timeout=TIMEOUT
    )
    assert _outcomes(result, junit) == plain_outcomes
    leak = f"[env] os.environ['ORACLE_ODD_SITE'] (was unset, now '1'), at test_odd.py:{line}"
    result.stdout.fnmatch_lines(
        ["*isolation: * by 1 test*", literal(leak), f"  by test_odd.py::{test}"]
    )
