"""The guard names what tests share beyond module globals (issue 45, named
rate on the pollution corpus): objects and files a higher-scoped fixture,
``setup_module`` or ``setUpClass`` holds, a test module's helper classes and
data modules, a registry reset by rebinding, a registry given a test's own
function, a standard stream a test closed, and the project's own code when
it is installed in site-packages (tox, ``pip install .``).

Each polluter makes its victim fail in a plain run; with the guard the
polluter and the key are named.  Shared state is reported and kept (the
tests of a scope may build on each other on purpose), so the victim still
fails where the rule keeps the state."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest
from tests.conftest import GUARD_MODES
from tests.conftest import TIMEOUT

#: name: (files, the leak line's pattern, its owner, whether the victim passes with the guard).
CASES: dict[str, tuple[dict[str, str], str, str, bool]] = {
    "module-fixture-object": (
        {
            "proj/__init__.py": "",
            "proj/router.py": """
                class Router:
                    def __init__(self):
                        self._routes = []

                    def add(self, handler):
                        self._routes.append(handler)
            """,
            "test_a.py": """
                import pytest
                from proj.router import Router

                @pytest.fixture(scope="module")
                def router():
                    return Router()

                def test_polluter(router):
                    class Handler:
                        pass
                    router.add(Handler)

                def test_victim(router):
                    assert router._routes == []
            """,
        },
        "[[]shared] fixture 'router' (scope=module)._routes (mutated in place: added *",
        "test_a.py::test_polluter",
        False,
    ),
    "setUpClass-object-two-levels-down": (
        {
            "proj/__init__.py": "",
            "proj/skill.py": """
                class Valid:
                    def __init__(self):
                        self.app_id = None

                class Skill:
                    def __init__(self):
                        self.valid = Valid()
            """,
            "test_a.py": """
                import unittest
                from proj.skill import Skill

                class TestSkill(unittest.TestCase):
                    @classmethod
                    def setUpClass(cls):
                        cls.skill = Skill()

                    def test_a_polluter(self):
                        self.skill.valid.app_id = "12345"

                    def test_b_victim(self):
                        assert self.skill.valid.app_id is None
            """,
        },
        "[[]shared] TestSkill.skill.valid.app_id (was None, now '12345') (not undone)",
        "test_a.py::TestSkill::test_a_polluter",
        False,
    ),
    "test-module-helper-class": (
        {
            "test_a.py": """
                class Sample:
                    pass

                def test_polluter():
                    Sample.as_dict = lambda self: {}

                def test_victim():
                    assert not hasattr(Sample, "as_dict")
            """,
        },
        "[[]shared] test_a.Sample.as_dict (was unset, now <function test_polluter.<locals>*",
        "test_a.py::test_polluter",
        False,
    ),
    "test-data-module": (
        {
            "tests/__init__.py": "",
            "tests/data.py": """
                rows = [{"name": "a", "color": "red"}]
            """,
            "tests/test_a.py": """
                from tests import data

                def test_polluter():
                    data.rows[0].pop("color")

                def test_victim():
                    assert data.rows[0]["color"] == "red"
            """,
        },
        "[[]container] tests.data.rows[[]0] (mutated in place) (removed 'color')",
        "tests/test_a.py::test_polluter",
        True,
    ),
    "registry-reset-by-rebinding": (
        {
            "proj/__init__.py": "",
            "proj/registry.py": """
                class Registry:
                    __classes = {}

                    @staticmethod
                    def clear():
                        Registry.__classes = {}

                    @classmethod
                    def register(cls, name):
                        cls.__classes[name] = object()

                    @classmethod
                    def names(cls):
                        return sorted(cls.__classes)

                Registry.register("builtin")
            """,
            "test_a.py": """
                from proj.registry import Registry

                def test_polluter():
                    Registry.clear()

                def test_victim():
                    assert Registry.names() == ["builtin"]
            """,
        },
        "[[]attribute] proj.registry.Registry._Registry__classes (rebound to a new dict: "
        "removed 'builtin'), not put back*",
        "test_a.py::test_polluter",
        False,
    ),
    "registry-given-a-test-function": (
        {
            "proj/__init__.py": "",
            "proj/hooks.py": """
                class Calls:
                    def __init__(self):
                        self.pending = []

                calls = Calls()

                def provider(function):
                    calls.pending.append(function)
                    return function
            """,
            "test_a.py": """
                from proj import hooks

                def test_polluter():
                    @hooks.provider
                    def make():
                        return 1

                def test_victim():
                    assert hooks.calls.pending == []
            """,
        },
        "[[]container] proj.hooks.calls.pending (mutated in place) (added <function*",
        "test_a.py::test_polluter",
        True,
    ),
    "class-level-container-through-an-instance": (
        {
            "proj/__init__.py": "",
            "proj/api.py": """
                class Api:
                    serializers = {"json": repr}

                    def serializer(self, mimetype):
                        def register(function):
                            self.serializers[mimetype] = function
                            return function
                        return register
            """,
            "test_a.py": """
                import pytest
                from proj.api import Api

                @pytest.fixture
                def api():
                    return Api()

                def test_polluter(api):
                    @api.serializer("json")
                    def mine(value):
                        return "42"

                def test_victim(api):
                    assert api.serializers["json"] is repr
            """,
        },
        "[[]shared] proj.api.Api.serializers (mutated in place: changed 'json') (not undone)",
        "test_a.py::test_polluter",
        False,
    ),
    "setup_module-file": (
        {
            "test_a.py": """
                import os

                def setup_module():
                    with open("shared.txt", "w") as out:
                        out.write("one\\ntwo\\n")

                def teardown_module():
                    os.remove("shared.txt")

                def test_polluter():
                    with open("shared.txt", "w") as out:
                        out.write("one\\n")

                def test_victim():
                    with open("shared.txt") as source:
                        assert source.read() == "one\\ntwo\\n"
            """,
        },
        "[[]files] file */shared.txt of setup_module of test_a (scope=module) (changed) "
        "(not undone)",
        "test_a.py::test_polluter",
        False,
    ),
    "session-fixture-folder": (
        {
            "conftest.py": """
                import pytest

                @pytest.fixture(scope="session")
                def repo(tmp_path_factory):
                    folder = tmp_path_factory.mktemp("repo")
                    (folder / ".git").mkdir()
                    return folder
            """,
            "test_a.py": """
                def test_polluter(repo):
                    (repo / ".git" / "HEAD").write_text("ref: refs/heads/x")

                def test_victim(repo):
                    assert not (repo / ".git" / "HEAD").exists()
            """,
        },
        "[[]files] folder */repo0 of fixture 'repo' (scope=session) (changed '.git') (not undone)",
        "test_a.py::test_polluter",
        False,
    ),
    "stream-closed": (
        {
            "test_a.py": """
                import sys
                import unittest

                class TestOut(unittest.TestCase):
                    def tearDown(self):  # closes pytest's capture file
                        sys.stdout.close()
                        sys.stdout = sys.__stdout__

                    def test_a_polluter(self):
                        print("hidden")

                def test_victim():
                    print("shown")
            """,
        },
        "[[]interpreter] sys.stdout (was *, now * (closed)); the test closed the stream, "
        "which cannot be reopened (not undone)",
        "test_a.py::TestOut::test_a_polluter",
        False,
    ),
}


def _write(pytester: pytest.Pytester, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = pytester.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_victim_fails_without_the_guard(pytester: pytest.Pytester, name: str) -> None:
    files, _, _, _ = CASES[name]
    _write(pytester, files)
    result = pytester.runpytest_subprocess(
        "-p", "no:isolation", "-p", "no:randomly", timeout=TIMEOUT
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) + outcomes.get("errors", outcomes.get("error", 0)) >= 1


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("mode", sorted(GUARD_MODES))
def test_the_polluter_is_named_with_what_it_shares(
    pytester: pytest.Pytester, name: str, mode: str
) -> None:
    files, line, owner, victim_passes = CASES[name]
    _write(pytester, files)
    result = pytester.runpytest_subprocess(
        *GUARD_MODES[mode], "-p", "no:randomly", "-rA", timeout=TIMEOUT
    )
    result.stdout.fnmatch_lines([line, f"  * {owner}"])  # by, or set during: no line known
    victim = [entry for entry in result.outlines if "victim" in entry and "PASSED" in entry]
    assert bool(victim) is victim_passes, result.stdout.str()


def test_shared_state_a_test_did_not_change_is_not_reported(pytester: pytest.Pytester) -> None:
    """Reading a shared object, adding to its private cache, or counting on
    it is no leak; neither is a fixture's file that no test writes, nor a
    class-level list each new object adds itself to (filled, as a module's)."""
    _write(
        pytester,
        {
            "proj/__init__.py": "",
            "proj/store.py": """
                class Store:
                    instances = []

                    def __init__(self):
                        self._cache = {}
                        self.hits = 0
                        Store.instances.append(self)

                    def get(self, key):
                        self.hits += 1
                        return self._cache.setdefault(key, key.upper())
            """,
            "test_a.py": """
                import pytest
                from proj.store import Store

                @pytest.fixture(scope="module")
                def store(tmp_path_factory):
                    path = tmp_path_factory.mktemp("data") / "rows.txt"
                    path.write_text("a")
                    return Store(), path

                @pytest.fixture
                def fresh():
                    return Store()

                def test_one(store, fresh):
                    assert store[0].get("a") == "A"
                    assert store[1].read_text() == "a"

                def test_two(store, fresh):
                    assert store[0].get("b") == "B"
            """,
        },
    )
    result = pytester.runpytest_subprocess(*GUARD_MODES["plain"], timeout=TIMEOUT)
    result.assert_outcomes(passed=2)
    result.stdout.no_fnmatch_line("*leaked*")
    result.stdout.no_fnmatch_line("*= isolation: * leak* by * =*")  # no leak section
    result.stdout.no_fnmatch_line("*routine state*")


def _site_packages_copy(pytester: pytest.Pytester) -> Path:
    """A virtual environment whose site-packages holds an installed copy of
    the project's package (what ``pip install .`` or tox makes), and that
    sees pytest and this plugin through a ``.pth`` file."""
    venv = pytester.path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=TIMEOUT
    )
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    ).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    plugin = str(Path(__file__).resolve().parents[1] / "src")
    (Path(purelib) / "outer.pth").write_text(f"{ours}\n{plugin}\n")
    installed = Path(purelib) / "proj"
    installed.mkdir()
    for name in ("__init__.py", "base.py"):
        (installed / name).write_text((pytester.path / "src" / "proj" / name).read_text())
    return python


def test_the_project_installed_in_site_packages_is_the_project(pytester: pytest.Pytester) -> None:
    """tox and ``pip install .`` run the tests against a copy of the
    project's package in site-packages; it was taken for a library and never
    watched.  A package the rootdir holds (``src/proj``, ``proj``) is the
    project's wherever it is imported from."""
    _write(
        pytester,
        {
            "src/proj/__init__.py": "",
            "src/proj/base.py": """
                MODE = "safe"

                def set_mode(mode):
                    global MODE
                    MODE = mode
            """,
            "tests/test_a.py": """
                from proj import base

                def test_polluter():
                    base.set_mode("fast")

                def test_victim():
                    assert base.MODE == "safe"
            """,
        },
    )
    python = _site_packages_copy(pytester)
    run = subprocess.run(
        [
            str(python),
            "-m",
            "pytest",
            "-p",
            "isolation",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
        ],
        cwd=pytester.path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert "2 passed" in run.stdout, run.stdout + run.stderr
    assert "[attribute] proj.base.MODE (was 'safe', now 'fast')" in run.stdout, run.stdout
    assert " tests/test_a.py::test_polluter" in run.stdout  # by, or set during: no line known
    assert (
        "/site-packages/proj/base.py"
        in subprocess.run(
            [str(python), "-c", "import proj.base; print(proj.base.__file__)"],
            cwd=pytester.path / "tests",
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        ).stdout
    )


def test_a_teardown_that_fails_still_ends_the_window(pytester: pytest.Pytester) -> None:
    """An inner teardown hook that raised (pytest's capture, on a closed
    stream) skipped the guard's own end of the window: nothing the test
    leaked was found."""
    _write(pytester, {"test_a.py": CASES["stream-closed"][0]["test_a.py"]})
    result = pytester.runpytest_subprocess(*GUARD_MODES["plain"], timeout=TIMEOUT)
    result.stdout.fnmatch_lines(["*isolation: * by 1 test*"])
    assert "ValueError: I/O operation on closed file" in result.stdout.str()


def test_shared_state_can_be_allowed(pytester: pytest.Pytester) -> None:
    """``allow_leaks`` takes the ``shared`` and ``files`` categories."""
    files, _, _, _ = CASES["module-fixture-object"]
    _write(pytester, files)
    pytester.makeini("[pytest]\nisolation_allow_leaks = shared:fixture 'router'*\n")
    result = pytester.runpytest_subprocess(
        *GUARD_MODES["plain"], "-p", "no:randomly", timeout=TIMEOUT
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.no_fnmatch_line("*leaked*")
    result.stdout.no_fnmatch_line("*= isolation: * leak* by * =*")  # no leak section


def test_an_object_s_own_bookkeeping_is_kept(pytester: pytest.Pytester) -> None:
    """A project object's private list that its own code changes as it is
    used (a pool's free list) is neither reported nor put back: putting it
    back would hand out a connection twice.  A public one that lost items is
    reported, and kept."""
    _write(
        pytester,
        {
            "proj/__init__.py": "",
            "proj/pool.py": """
                class Pool:
                    def __init__(self):
                        self._free = [object(), object()]
                        self.names = ["a", "b"]
                        self.taken = []

                    def take(self):
                        item = self._free.pop()
                        self.taken.append(item)
                        return item

                pool = Pool()
            """,
            "test_a.py": """
                from proj.pool import pool

                def test_take():
                    pool.take()
                    pool.names.remove("b")

                def test_after():
                    assert len(pool._free) == 1
                    assert pool.names == ["a"]
            """,
        },
    )
    result = pytester.runpytest_subprocess(*GUARD_MODES["plain"], "-v", timeout=TIMEOUT)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "[[]container] proj.pool.pool.names (mutated in place) (removed 'b'), not put back: "
            "the object's other state may depend on it, at test_a.py:6 (not undone)",
            "  by test_a.py::test_take",
        ]
    )
    result.stdout.no_fnmatch_line("*pool._free*leaked*")


def test_a_registered_plugin_module_s_state_is_the_run_s(pytester: pytest.Pytester) -> None:
    """A project that is a pytest plugin (syrupy's own suite) keeps its
    session's state in its plugin module: that is the run's machinery, not
    state a test leaked (it was reported for 12 of syrupy's tests)."""
    _write(
        pytester,
        {
            "proj/__init__.py": "",
            "proj/plugin.py": """
                _state = {"last": None}

                def pytest_runtest_call(item):
                    _state["last"] = item.nodeid
            """,
            "test_a.py": """
                def test_one():
                    pass

                def test_two():
                    pass
            """,
        },
    )
    result = pytester.runpytest_subprocess(
        *GUARD_MODES["plain"], "-p", "proj.plugin", timeout=TIMEOUT
    )
    result.assert_outcomes(passed=2)
    result.stdout.no_fnmatch_line("*leaked*")
    result.stdout.no_fnmatch_line("*= isolation: * leak* by * =*")  # no leak section
