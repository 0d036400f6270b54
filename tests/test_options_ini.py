"""Every option's ini key (issue 33): ``-o KEY=VALUE`` (and an ini file)
takes effect, the command line wins over it, and a bad value is an error
naming the key.  ``pytest -o isolation_report=r.json`` warned "Unknown
config option" and wrote nothing."""

from __future__ import annotations

import json
import re

import pytest

from conftest import TIMEOUT
from pytest_isolation.core import options


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "isolation", *args, timeout=TIMEOUT)


def ini(*pairs: str) -> list[str]:
    """``-o KEY=VALUE`` for each pair."""
    return [arg for pair in pairs for arg in ("-o", pair)]


FILE_MODE = ini("isolation_mode=file", "isolation_start=fork")


# -- the leak guard, file mode, the fixtures ------------------------------------------


def test_isolation_mode_and_isolation_start(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a="def test_a(): pass\n")
    result = run(pytester, *ini("isolation_mode=file", "isolation_start=spawn"))
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["isolation: file mode, * (start method spawn: requested)"])


def test_isolation_leaks(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a="import os\ndef test_leak():\n    os.environ['ISO_INI'] = '1'\n")
    warned = run(pytester)
    warned.assert_outcomes(passed=1)
    warned.stdout.fnmatch_lines(["*= isolation: * by 1 test =*"])
    run(pytester, *ini("isolation_leaks=error")).assert_outcomes(passed=1, errors=1)


def test_isolation_leaks_deep(pytester: pytest.Pytester) -> None:
    """The deep tier adds class-level containers; ``-o ...=false`` turns off
    an ini ``true``."""
    pytester.mkpydir("app")
    pytester.path.joinpath("app", "state.py").write_text("class Service:\n    hooks = []\n")
    pytester.makepyfile(
        test_a="from app.state import Service\ndef test_hook():\n    Service.hooks.append(1)\n"
    )
    pytester.makeini("[pytest]\nisolation_leaks_deep = true\n")
    deep = run(pytester, "-v")
    deep.stdout.fnmatch_lines(["  [[]container] app.state.Service.hooks (mutated in place)*"])
    plain = run(pytester, "-v", *ini("isolation_leaks_deep=false"))
    plain.assert_outcomes(passed=1)
    plain.stdout.no_fnmatch_line("*Service.hooks*")


def test_isolation_lint(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_env="import os\ndef test_env():\n    os.environ['A'] = '1'\n")
    result = run(pytester, *ini("isolation_lint=warn", "isolation_leaks=off"))
    result.stdout.fnmatch_lines(["*= isolation lint =*", "test_env.py:3 ISO203 *"])


def test_isolation_keep_tmp(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a="def test_a(isolated_tmp_path):\n    pass\n")
    result = run(pytester, *ini("isolation_keep_tmp=always"))
    result.stdout.fnmatch_lines(
        ["*= isolation: kept 1 temporary directory =*", "test_a.py::test_a: /*"]
    )


def test_isolation_timeout_and_isolation_kill_grace(pytester: pytest.Pytester) -> None:
    """A child that ignores SIGTERM is killed after the grace: 1 s, not the
    default 10."""
    pytester.makepyfile(
        test_stuck="""
        import signal
        import time

        def test_stuck():
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            time.sleep(60)
        """
    )
    result = run(pytester, *FILE_MODE, *ini("isolation_timeout=1", "isolation_kill_grace=1"))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["isolation: timed out after 1 s while running test_stuck *"])
    assert result.duration < 8


COUNTING = """
import os
import pathlib

LOG = pathlib.Path(os.environ["RUNS_LOG"])

def ran(name):
    with LOG.open("a") as log:
        log.write(name + "\\n")
    return LOG.read_text().split().count(name)

def test_ok():
    ran("ok")

def test_sometimes():
    assert ran("sometimes") > 1, "fails on its first run"
"""


@pytest.mark.parametrize(
    ("scope", "runs"),
    [("", ["ok", "sometimes", "sometimes"]), ("file", ["ok", "ok", "sometimes", "sometimes"])],
)
def test_isolation_retries_and_isolation_retry_scope(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, scope: str, runs: list[str]
) -> None:
    log = pytester.path.parent / f"{pytester.path.name}-runs.log"
    monkeypatch.setenv("RUNS_LOG", str(log))
    pytester.makepyfile(test_flaky=COUNTING)
    result = run(
        pytester, *FILE_MODE, *ini("isolation_retries=1", f"isolation_retry_scope={scope}")
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*= isolation: 1 flaky (passed on retry) =*"])
    assert sorted(log.read_text().split()) == runs


def test_isolation_preload(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\npythonpath = .\n")
    pytester.mkpydir("mylib")
    source = "import mylib\n\ndef test_it():\n    pass\n"
    pytester.makepyfile(test_one=source, test_two=source)
    result = run(pytester, *FILE_MODE, *ini("isolation_preload=auto"))
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["isolation: the fork server preloads 1 module *"])


# -- CI: shards, known failures, the run report ---------------------------------------


def test_isolation_shard(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a="def test_a(): pass\n", test_b="def test_b(): pass\n")
    result = run(pytester, *ini("isolation_shard=1/2"))
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["isolation: shard 1/2 (round-robin, from isolation_shard (ini)): 1 of 2 test files"]
    )


def test_isolation_durations_is_relative_to_the_ini_file(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run from ``tests/``: the durations file is found beside the ini file,
    and with it ``auto`` balances by duration."""
    pytester.makeini("[pytest]\nisolation_shard = 1/2\nisolation_durations = ci/durations.json\n")
    tests = pytester.mkdir("tests")
    for name in ("a", "b", "c"):
        tests.joinpath(f"test_{name}.py").write_text(f"def test_{name}(): pass\n")
    pytester.mkdir("ci").joinpath("durations.json").write_text(
        json.dumps({"tests/test_a.py": 9.0, "tests/test_b.py": 1.0, "tests/test_c.py": 1.0})
    )
    monkeypatch.chdir(tests)
    result = run(pytester)
    result.assert_outcomes(passed=1)  # the longest file alone in shard 1
    result.stdout.fnmatch_lines(
        ["isolation: shard 1/2 (duration, from isolation_shard (ini)): 1 of 3 test files"]
    )


def test_isolation_shard_strategy(pytester: pytest.Pytester) -> None:
    """With a durations file ``auto`` balances by duration; the key says
    round-robin."""
    pytester.makepyfile(test_a="def test_a(): pass\n", test_b="def test_b(): pass\n")
    pytester.path.joinpath("d.json").write_text('{"test_a.py": 1.0, "test_b.py": 2.0}')
    args = ["--isolation-shard=1/2", "--isolation-durations=d.json"]
    run(pytester, *args).stdout.fnmatch_lines(["isolation: shard 1/2 (duration, *"])
    result = run(pytester, *args, *ini("isolation_shard_strategy=round-robin"))
    result.stdout.fnmatch_lines(["isolation: shard 1/2 (round-robin, *"])


def test_isolation_quarantine(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nisolation_quarantine = ci/quarantine.txt\n")
    pytester.mkdir("ci").joinpath("quarantine.txt").write_text("test_a.py::test_a  # bug 1\n")
    pytester.makepyfile(test_a="def test_a():\n    assert False\n")
    result = run(pytester)
    assert result.ret == 0
    assert result.parseoutcomes()["quarantined"] == 1


def test_isolation_report(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a="def test_a(): pass\n")
    result = run(pytester, *ini("isolation_report=out/run.json"))
    result.stdout.fnmatch_lines(["isolation: run report written to out/run.json"])
    report = json.loads(pytester.path.joinpath("out", "run.json").read_text())
    assert report["totals"]["tests"]["passed"] == 1


def test_isolation_report_in_an_ini_file_is_relative_to_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\nisolation_report = reports/run.json\n")
    tests = pytester.mkdir("tests")
    tests.joinpath("test_a.py").write_text("def test_a(): pass\n")
    monkeypatch.chdir(tests)
    result = run(pytester)
    result.stdout.fnmatch_lines(["isolation: run report written to */reports/run.json"])
    assert pytester.path.joinpath("reports", "run.json").is_file()
    assert not tests.joinpath("reports").exists()


def test_the_command_line_wins(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nisolation_report = ini.json\nisolation_mode = file\n")
    pytester.makepyfile(test_a="def test_a(): pass\n")
    result = run(pytester, "--isolation-report=given.json", "--isolation-mode=off")
    result.stdout.fnmatch_lines(["isolation: run report written to given.json"])
    result.stdout.no_fnmatch_line("isolation: file mode*")
    assert pytester.path.joinpath("given.json").is_file()
    assert not pytester.path.joinpath("ini.json").exists()


# -- the selector ---------------------------------------------------------------------

PROJECT = {
    "src/shop/__init__.py": "",
    "src/shop/cart.py": "class Cart:\n    size = 0\n",
    "src/shop/prices.py": "from shop.cart import Cart\ndef total(): return Cart.size\n",
    "src/shop/unused.py": "X = 1\n",
    "tests/test_cart.py": "from shop.cart import Cart\ndef test_cart(): assert Cart.size == 0\n",
    "tests/test_prices.py": "from shop.prices import total\n"
    "def test_total(): assert total() == 0\n",
    "docs/index.md": "# docs\n",
}


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for key, text in PROJECT.items():
        path = pytester.path / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    pytester.makeini("[pytest]\ntestpaths = tests\npythonpath = src\nnorecursedirs = docs .*\n")
    monkeypatch.delenv("PYTEST_ISOLATION_ALLOW_ALL", raising=False)
    return pytester


def dry_run(project: pytest.Pytester, *args: str) -> pytest.RunResult:
    return run(project, "--isolation-for=src/shop/cart.py", "--isolation-dry-run", *args)


def test_isolation_scope_and_isolation_max_test_files(project: pytest.Pytester) -> None:
    result = dry_run(project, *ini("isolation_scope=convention", "isolation_max_test_files=7"))
    assert result.ret == 0
    assert result.stdout.lines[0].startswith("isolation: scope=convention sources=1 test_files=1/7")
    assert result.stdout.lines[1:] == ["tests/test_cart.py"]


def test_an_empty_selector_value_means_the_default(project: pytest.Pytester) -> None:
    result = dry_run(project, *ini("isolation_scope=", "isolation_max_test_files="))
    assert result.stdout.lines[0].startswith("isolation: scope=impact sources=1 test_files=2/50")


def test_the_command_line_wins_for_the_selector(project: pytest.Pytester) -> None:
    result = dry_run(project, "--isolation-max-test-files=9", *ini("isolation_max_test_files=7"))
    assert " test_files=2/9 " in result.stdout.lines[0]


def test_isolation_max_depth(project: pytest.Pytester) -> None:
    result = dry_run(project, *ini("isolation_max_depth=0"))
    assert result.stdout.lines[1:] == ["tests/test_cart.py"]


@pytest.mark.parametrize(
    ("key", "sources", "phase"),
    [
        ("isolation_max_sources", ["src/shop/cart.py", "src/shop/prices.py"], "select"),
        ("isolation_max_items", ["src/shop/cart.py"], "collect"),
    ],
)
def test_isolation_max_sources_and_isolation_max_items(
    project: pytest.Pytester, key: str, sources: list[str], phase: str
) -> None:
    """Over the cap, nothing runs: two sources over 1, two tests over 1."""
    args = [f"--isolation-for={source}" for source in sources]
    result = run(project, *args, *ini(f"{key}=1"), "--isolation-json=d.json")
    assert result.ret == 4
    assert result.stderr.lines[0].startswith("isolation: scope_exceeded: ")
    assert json.loads(project.path.joinpath("d.json").read_text())["phase"] == phase


def test_isolation_allow_empty(project: pytest.Pytester) -> None:
    args = ["--isolation-for=src/shop/unused.py"]
    assert run(project, *args).ret == 5
    assert run(project, *args, *ini("isolation_allow_empty=true")).ret == 0


def test_isolation_unmapped(project: pytest.Pytester) -> None:
    args = ["--isolation-for=docs/index.md", "--isolation-for=src/shop/cart.py"]
    assert run(project, *args).ret == 4
    result = run(project, *args, *ini("isolation_unmapped=ignore"))
    result.assert_outcomes(passed=2)
    result.stdout.no_fnmatch_line("*docs/index.md*")


def test_isolation_explain(project: pytest.Pytester) -> None:
    explained = "isolation: tests/test_cart.py: named after src/shop/cart.py"
    dry_run(project, *ini("isolation_explain=true")).stdout.fnmatch_lines([explained])
    project.makeini(
        "[pytest]\ntestpaths = tests\npythonpath = src\nnorecursedirs = docs .*\n"
        "isolation_explain = true\n"
    )
    dry_run(project, *ini("isolation_explain=false")).stdout.no_fnmatch_line(explained)
    # The flag turns it on whatever the key says.
    dry_run(project, "--isolation-explain", *ini("isolation_explain=false")).stdout.fnmatch_lines(
        [explained]
    )


def test_isolation_json(project: pytest.Pytester) -> None:
    dry_run(project, *ini("isolation_json=out/decision.json"))
    record = json.loads(project.path.joinpath("out", "decision.json").read_text())
    assert record["outcome"] == "selected"
    assert record["test_files"] == ["tests/test_cart.py", "tests/test_prices.py"]


# -- the polluter finder --------------------------------------------------------------

FILLER = "def test_one(): pass\ndef test_two(): pass\n"
POLLUTER = """
import os

def test_before(): pass

def test_sets_mode():
    os.environ["MODE"] = "debug"
"""
VICTIM = """
import os

def test_victim():
    assert os.environ.get("MODE") != "debug"
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_a=FILLER, test_b=FILLER, test_c=POLLUTER, test_d=FILLER, test_v=VICTIM)
    return pytester


def find(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return run(pytester, "--isolation-find-polluter=test_v.py::test_victim", *args)


def test_isolation_probes(suite: pytest.Pytester) -> None:
    """Three probes at a time: the first round runs three of four parts."""
    result = find(suite, *ini("isolation_probes=3"))
    assert result.ret == 0, result.stderr.str()
    result.stdout.fnmatch_lines(
        [
            "isolation: probe 1 of at most * (4 files left): *",
            "isolation: probe 2 of at most * (4 files left): *",
            "isolation: probe 3 of at most * (4 files left): *",
        ]
    )


def test_isolation_find_timeout(suite: pytest.Pytester) -> None:
    result = find(suite, *ini("isolation_find_timeout=0.01"))
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "isolation: gave up: isolation_find_timeout (ini)=0.01 s ran out "
            "while collecting the tests and running them up to test_v.py::test_victim"
        ]
    )


def test_isolation_find_json_and_no_run_report_from_the_probes(suite: pytest.Pytester) -> None:
    """The ini file's run report is the user's runs': the search's probes
    (fresh pytest runs in the same directory) do not overwrite it."""
    suite.makeini("[pytest]\nisolation_find_json = found.json\nisolation_report = run.json\n")
    result = find(suite)
    assert result.ret == 0, result.stderr.str()
    assert json.loads(suite.path.joinpath("found.json").read_text())["outcome"] == "found"
    assert not suite.path.joinpath("run.json").exists()


# -- bad values -----------------------------------------------------------------------

SELECT = ("--isolation-for=src/shop/cart.py",)
FIND = ("--isolation-find-polluter=test_v.py::test_victim",)

#: Per key: a bad value, the options that make the key read, and the message.
BAD = {
    "isolation_mode": ("files", (), "choose from 'off', 'file', 'test'"),
    "isolation_start": ("forked", (), "choose from 'auto', 'fork', 'spawn', 'forkserver'"),
    "isolation_leaks": ("loud", (), "choose from 'warn', 'error', 'quiet', 'off'"),
    "isolation_retry_scope": ("test", (), "choose from 'failed', 'file'"),
    "isolation_preload": ("on", (), "choose from 'off', 'auto'"),
    "isolation_lint": ("strict", (), "choose from 'off', 'warn', 'error'"),
    "isolation_leaks_deep": ("maybe", (), "expected true or false"),
    "isolation_keep_tmp": ("sometimes", (), "choose from 'never', 'failed', 'always'"),
    "isolation_timeout": ("soon", (), "expected a positive number of seconds, at most 604800"),
    "isolation_kill_grace": ("601", (), "expected a positive number of seconds, at most 600"),
    "isolation_retries": ("two", (), "expected a whole number of 0 or more"),
    "isolation_test_timeout": ("soon", (), "expected a number of seconds from 0 (no limit)*"),
    "isolation_test_memory": ("lots", (), "expected a number of megabytes from 0 (no limit)*"),
    "isolation_test_cpu": ("-2", (), "expected a number of seconds from 0 (no limit)*"),
    "isolation_shard": ("2", (), "expected K/N, e.g. 2/4"),
    "isolation_shard_strategy": ("random", (), "choose from 'auto', 'round-robin', 'duration'"),
    "isolation_durations": ("nope.json", (), "no such file: 'nope.json'"),
    "isolation_quarantine": ("nope.txt", (), "cannot read the quarantine file *nope.txt*"),
    "isolation_report": ("/dev/full", (), "'/dev/full' exists and is not a regular file*"),
    "isolation_scope": (
        "wide",
        SELECT,
        "choose from 'auto', 'recorded', 'convention', 'graph', 'impact', 'all'",
    ),
    "isolation_record": ("always", (), "choose from 'auto', 'on', 'off'"),
    "isolation_record_from": ("nope.json", SELECT, "*nope.json': cannot read it*"),
    "isolation_max_sources": ("many", SELECT, "expected a whole number"),
    "isolation_max_test_files": ("-1", SELECT, "expected a whole number"),
    "isolation_max_items": ("1e3", SELECT, "expected a whole number"),
    "isolation_max_depth": ("deep", SELECT, "expected a whole number"),
    "isolation_allow_empty": ("perhaps", SELECT, "expected true or false"),
    "isolation_unmapped": ("skip", SELECT, "choose from 'error', 'warn', 'ignore'"),
    "isolation_explain": ("sure", SELECT, "expected true or false"),
    "isolation_json": ("/dev/full", SELECT, "'/dev/full' exists and is not a regular file*"),
    "isolation_probes": ("0", FIND, "expected a positive whole number"),
    "isolation_find_timeout": ("never", FIND, "expected a positive number of seconds*"),
    "isolation_find_json": ("/dev/full", FIND, "'/dev/full' exists and is not a regular file*"),
}


@pytest.mark.parametrize("key", sorted(BAD))
def test_a_bad_value_is_an_error_naming_the_key(project: pytest.Pytester, key: str) -> None:
    value, args, message = BAD[key]
    project.makepyfile(test_v=VICTIM)
    result = run(project, *args, *ini(f"{key}={value}"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([f"*{key} (ini): *{message}"])
    assert "passed" not in result.stdout.str()


def test_every_key_of_an_option_has_a_case_here(pytester: pytest.Pytester) -> None:
    """A new option's ini key gets its bad value here (and its effect above)."""
    text = run(pytester, "--help").stdout.str()
    keys = set(re.findall(r"^  (isolation_[a-z_]+) \(", text, re.M))
    dests = {dest.replace("-", "_") for dest in re.findall(r"^  --(isolation-[a-z-]+)", text, re.M)}
    assert keys & dests == set(BAD)


# -- typed keys (issue 49 item 11): what pytest typed, and what it refused -------------


class TypedConfig:
    """A configuration whose ini key holds what pytest's ``getini`` gave a
    typed key (a bool, a number, None for unset) or raises what it raised."""

    def __init__(self, value: object) -> None:
        self.value = value

    def getoption(self, dest: str) -> None:
        return None

    def getini(self, dest: str) -> object:
        if isinstance(self.value, Exception):
            raise self.value
        return self.value


def typed(value: object) -> pytest.Config:
    return TypedConfig(value)  # type: ignore[return-value]


@pytest.mark.parametrize(("value", "read"), [(True, True), (False, False), (None, False)])
def test_a_bool_key_is_read_as_pytest_typed_it(value: object, read: bool) -> None:
    assert options.boolean(typed(value), "isolation_explain") is read


def test_a_refused_truth_value_names_the_key_and_the_value() -> None:
    refused = ValueError("invalid truth value 'maybe'")
    with pytest.raises(pytest.UsageError) as raised:
        options.boolean(typed(refused), "isolation_explain")
    assert str(raised.value) == (
        "isolation_explain (ini): invalid truth value 'maybe'; expected true or false"
    )


def test_an_empty_truth_value_is_the_default() -> None:
    refused = pytest.UsageError("invalid truth value ''")  # as pytest 9 raises it
    assert options.boolean(typed(refused), "isolation_env_network", default=True) is True


def test_a_number_key_is_read_as_pytest_typed_it() -> None:
    assert options.count(typed(3), "isolation_retries") == 3
    assert options.count(typed(None), "isolation_max_items") is None
    assert options.seconds(typed(2.5), "isolation_timeout") == 2.5
    assert options.limit(typed(0.0), "isolation_test_cpu", "seconds", 10.0) is None


@pytest.mark.parametrize(
    ("refused", "message"),
    [
        (
            ValueError("invalid literal for int() with base 10: '1e3'"),
            "isolation_max_items (ini): invalid value '1e3'; expected a whole number of 0 or more",
        ),
        (
            TypeError(
                "pyproject.toml: config option 'isolation_max_items' expects an int, got "
                "str: 'many'"
            ),
            "isolation_max_items (ini): invalid value 'many'; expected a whole number of 0 or more",
        ),
    ],
)
def test_a_refused_number_names_the_key_and_the_value(refused: Exception, message: str) -> None:
    with pytest.raises(pytest.UsageError) as raised:
        options.count(typed(refused), "isolation_max_items")
    assert str(raised.value) == message


def test_an_empty_number_is_unset() -> None:
    refused = ValueError("could not convert string to float: ''")
    assert options.seconds(typed(refused), "isolation_timeout") is None


def test_a_refusal_that_quotes_no_value_is_pytests_message_naming_the_key() -> None:
    refused = TypeError(
        "pyproject.toml: config option 'isolation_retries' expects an int, got float: 1.5"
    )
    with pytest.raises(pytest.UsageError) as raised:
        options.count(typed(refused), "isolation_retries")
    assert str(raised.value) == f"isolation_retries (ini): {refused}"


@pytest.mark.skipif(
    pytest.version_tuple[:2] < (9, 0), reason="pytest 9 reads [tool.pytest] with TOML's types"
)
def test_native_toml_values_of_their_type(pytester: pytest.Pytester) -> None:
    """``[tool.pytest]`` keeps TOML's types: a true or a number was refused by
    the keys registered as strings (``expects a string, got bool``)."""
    pytester.makepyprojecttoml(
        "[tool.pytest]\n"
        "isolation_leaks = 'error'\n"
        "isolation_leaks_deep = true\n"
        "isolation_retries = 1\n"
        "isolation_timeout = 60\n"
        "isolation_env_network = false\n"
    )
    pytester.makepyfile(test_a="def test_a(): pass\n")
    result = run(pytester, "--isolation-mode=file")
    result.assert_outcomes(passed=1)
