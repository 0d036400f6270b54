"""Sharding: every file in exactly one shard, deterministic, balanced by duration."""

from __future__ import annotations

import json
import random
import re

import pytest

from conftest import FILE_MODE
from conftest import TIMEOUT
from conftest import run_file_mode
from pytest_isolation.ci.split import Shard
from pytest_isolation.ci.split import assign
from pytest_isolation.ci.split import by_duration
from pytest_isolation.ci.split import from_environment
from pytest_isolation.ci.split import parse

FILES = [f"tests/test_{name}.py" for name in range(23)]


@pytest.mark.parametrize("strategy", ["round-robin", "duration"])
@pytest.mark.parametrize("total", [1, 2, 3, 4, 5])
def test_every_file_in_exactly_one_shard(strategy: str, total: int) -> None:
    durations = {name: float(index % 7 + 1) for index, name in enumerate(FILES)}
    assignment, used = assign(FILES, total, strategy, durations)
    assert used == strategy
    assert sorted(assignment) == sorted(FILES)
    assert set(assignment.values()) <= set(range(total))
    # Deterministic whatever the order the files come in.
    shuffled = FILES[:]
    random.Random(total).shuffle(shuffled)
    assert assign(shuffled, total, strategy, dict(reversed(durations.items())))[0] == assignment


def test_duration_balances_a_skewed_suite() -> None:
    rng = random.Random(5)
    durations = {f"test_{i}.py": rng.choice([0.1, 0.2, 0.5, 3.0, 8.0, 12.0]) for i in range(60)}
    for total in (2, 3, 4, 5, 6):
        ideal = sum(durations.values()) / total
        assert max(durations.values()) <= ideal
        assignment = by_duration(durations, total)
        loads = [0.0] * total
        for name, shard_of in assignment.items():
            loads[shard_of] += durations[name]
        assert max(loads) <= 1.10 * ideal, (total, loads, ideal)


def test_swaps_fix_what_longest_first_cannot() -> None:
    durations = {"a": 3.0, "b": 3.0, "c": 2.0, "d": 2.0, "e": 2.0}
    assignment = by_duration(durations, 2)
    loads = [0.0, 0.0]
    for name, shard_of in assignment.items():
        loads[shard_of] += durations[name]
    assert sorted(loads) == [6.0, 6.0]


def test_auto_uses_durations_only_from_a_durations_file() -> None:
    assert assign(FILES, 3, "auto", None)[1] == "round-robin"
    assert assign(FILES, 3, "auto", {})[1] == "duration"
    assert assign(FILES, 3, "auto", {FILES[0]: 1.0})[1] == "duration"


@pytest.mark.parametrize("text", ["0/3", "4/3", "1/0", "2", "a/b", "1/2/3", ""])
def test_invalid_shards_are_usage_errors(text: str) -> None:
    with pytest.raises(
        pytest.UsageError, match=re.escape(f"--isolation-shard: invalid shard {text!r}")
    ):
        parse(text, "--isolation-shard")


def test_ci_variables() -> None:
    assert from_environment({"CI_NODE_INDEX": "2", "CI_NODE_TOTAL": "4"}) == Shard(
        2, 4, "CI_NODE_INDEX/CI_NODE_TOTAL"
    )
    assert from_environment({"CIRCLE_NODE_INDEX": "0", "CIRCLE_NODE_TOTAL": "3"}) == Shard(
        1, 3, "CIRCLE_NODE_INDEX/CIRCLE_NODE_TOTAL"
    )
    assert from_environment(
        {"BUILDKITE_PARALLEL_JOB": "4", "BUILDKITE_PARALLEL_JOB_COUNT": "5"}
    ) == Shard(5, 5, "BUILDKITE_PARALLEL_JOB/BUILDKITE_PARALLEL_JOB_COUNT")
    assert from_environment({"CI": "true"}) is None
    with pytest.raises(
        pytest.UsageError,
        match=r"^CI_NODE_INDEX/CI_NODE_TOTAL: invalid values CI_NODE_INDEX='5', CI_NODE_TOTAL='4'; "
        r"CI_NODE_INDEX must be between 1 and N \(it counts from 1\)",
    ):
        from_environment({"CI_NODE_INDEX": "5", "CI_NODE_TOTAL": "4"})


@pytest.mark.parametrize(
    ("index", "total", "problem"),
    [
        ("-1", "4", "expected whole numbers"),
        ("4", "4", r"CIRCLE_NODE_INDEX must be between 0 and N-1 \(it counts from 0\)"),
        ("0", "0", "CIRCLE_NODE_TOTAL at least 1"),
        (" 1", "4", "expected whole numbers"),
        ("\u0663", "4", "expected whole numbers"),
    ],
)
def test_bad_ci_variables_are_named_with_their_values(index: str, total: str, problem: str) -> None:
    with pytest.raises(pytest.UsageError) as raised:
        from_environment({"CIRCLE_NODE_INDEX": index, "CIRCLE_NODE_TOTAL": total})
    message = str(raised.value)
    assert message.startswith(
        f"CIRCLE_NODE_INDEX/CIRCLE_NODE_TOTAL: invalid values CIRCLE_NODE_INDEX={index!r}, "
        f"CIRCLE_NODE_TOTAL={total!r}; "
    )
    assert re.search(problem, message), message


def _suite(pytester: pytest.Pytester, count: int = 7) -> None:
    for index in range(count):
        pytester.makepyfile(**{f"test_f{index}": "def test_a(): pass\ndef test_b(): pass\n"})


def _ran_files(result: pytest.RunResult) -> set[str]:
    return {line.split("::")[0] for line in result.outlines if "::" in line and "PASSED" in line}


@pytest.mark.parametrize("mode", ["plain", "file"])
def test_shards_of_a_run_cover_every_file_once(pytester: pytest.Pytester, mode: str) -> None:
    _suite(pytester)
    extra = ("--isolation-mode=file",) if mode == "file" else ()
    seen: list[str] = []
    for index in (1, 2, 3):
        result = pytester.runpytest_subprocess(
            "-p",
            "isolation",
            "-p",
            "no:cacheprovider",
            "-v",
            *extra,
            f"--isolation-shard={index}/3",
            timeout=TIMEOUT,
        )
        assert result.ret == 0
        result.stdout.fnmatch_lines(
            [f"isolation: shard {index}/3 (round-robin, from --isolation-shard): * of 7 test files"]
        )
        seen += sorted(_ran_files(result))
    assert sorted(seen) == sorted(f"test_f{i}.py" for i in range(7))


def test_ci_variables_alone_shard_nothing(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 31, item 1: with CI_NODE_INDEX/CI_NODE_TOTAL set (a project that
    splits its jobs its own way), installing the plugin ran one shard."""
    _suite(pytester)
    monkeypatch.setenv("CI_NODE_INDEX", "1")
    monkeypatch.setenv("CI_NODE_TOTAL", "3")
    for args in [("-p", "isolation"), (*FILE_MODE, "--isolation-start=fork")]:
        result = pytester.runpytest_subprocess(*args, "-q", timeout=TIMEOUT)
        result.assert_outcomes(passed=14)
        assert "shard" not in result.stdout.str()


def test_auto_outside_ci_runs_every_file_and_says_so(pytester: pytest.Pytester) -> None:
    _suite(pytester, 3)
    result = pytester.runpytest_subprocess(
        "-p", "isolation", "-q", "--isolation-shard=auto", timeout=TIMEOUT
    )
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(
        ["isolation: --isolation-shard=auto: no CI parallel-job variables set, every test*"]
    )


def test_the_ini_key_asks_for_a_shard(pytester: pytest.Pytester) -> None:
    _suite(pytester)
    pytester.makeini("[pytest]\nisolation_shard = 2/2\n")
    result = pytester.runpytest_subprocess("-p", "isolation", "-q", timeout=TIMEOUT)
    result.assert_outcomes(passed=6, deselected=8)
    result.stdout.fnmatch_lines(
        ["isolation: shard 2/2 (round-robin, from isolation_shard (ini)): 3 of 7 test files"]
    )


def test_shards_are_a_partition_whatever_each_job_has_cached(pytester: pytest.Pytester) -> None:
    """Issue 31, item 2: the first job had no durations and dealt the files
    out in turn; the next ones found the first's durations in pytest's cache
    and balanced them: files ran twice or never.  The cache no longer
    chooses the split (only a durations file every job reads does)."""
    for index in range(7):
        body = f"import time\ndef test_a():\n    time.sleep({0.01 * (7 - index):.2f})\n"
        pytester.makepyfile(**{f"test_f{index}": body})
    seen: list[str] = []
    for index in (1, 2, 3):
        result = pytester.runpytest_subprocess(
            "-p", "isolation", "-v", f"--isolation-shard={index}/3", timeout=TIMEOUT
        )
        assert result.ret == 0
        seen += sorted(_ran_files(result))
    assert sorted(seen) == sorted(f"test_f{i}.py" for i in range(7))


def test_duration_without_a_durations_file_is_refused(pytester: pytest.Pytester) -> None:
    _suite(pytester, 2)
    result = pytester.runpytest_subprocess(
        "-p",
        "isolation",
        "--isolation-shard=1/2",
        "--isolation-shard-strategy=duration",
        timeout=TIMEOUT,
    )
    assert result.ret == 4
    result.stderr.fnmatch_lines(
        ["*--isolation-shard-strategy=duration needs --isolation-durations FILE*"]
    )


def test_ci_variables_choose_the_shard_under_auto_and_the_header_says_so(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _suite(pytester)
    monkeypatch.setenv("CIRCLE_NODE_INDEX", "1")
    monkeypatch.setenv("CIRCLE_NODE_TOTAL", "2")
    result = run_file_mode(
        pytester, "fork", "-p", "no:cacheprovider", "-q", "--isolation-shard=auto"
    )
    result.stdout.fnmatch_lines(
        ["isolation: shard 2/2 (round-robin, from CIRCLE_NODE_INDEX/CIRCLE_NODE_TOTAL): 3 of 7*"]
    )
    # In file mode the other shards' files are never collected: each counts once.
    result.assert_outcomes(passed=6, deselected=4)


def test_durations_are_stored_and_then_balance_the_shards(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_slow="import time\ndef test_s(): time.sleep(0.6)\n",
        test_mid="import time\ndef test_m(): time.sleep(0.3)\n",
        test_fast1="def test_a(): pass\n",
        test_fast2="def test_a(): pass\n",
        test_fast3="def test_a(): pass\n",
    )
    stored = pytester.runpytest_subprocess(
        "-p", "isolation", "--isolation-store-durations", timeout=TIMEOUT
    )
    stored.assert_outcomes(passed=5)
    durations = json.loads((pytester.path / "isolation-durations.json").read_text())
    assert set(durations) == {f"test_{n}.py" for n in ("slow", "mid", "fast1", "fast2", "fast3")}
    assert durations["test_slow.py"] > durations["test_mid.py"] > durations["test_fast1.py"]
    first = pytester.runpytest_subprocess(
        "-p",
        "isolation",
        "-v",
        "--isolation-shard=1/2",
        "--isolation-durations=isolation-durations.json",
        timeout=TIMEOUT,
    )
    first.stdout.fnmatch_lines(["isolation: shard 1/2 (duration, *): 1 of 5 test files"])
    assert _ran_files(first) == {"test_slow.py"}


def test_bad_strategy_and_missing_durations_file(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(
        "-p", "isolation", "--isolation-shard=1/2", "--isolation-shard-strategy=random"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --isolation-shard-strategy: invalid value 'random'*"])
    result = pytester.runpytest_subprocess(
        "-p", "isolation", "--isolation-shard=1/2", "--isolation-durations=nope.json"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --isolation-durations: no such file: 'nope.json'"])


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "cannot read 'durations': Is a directory"),
        (
            '{"test_a.py": NaN}',
            "'durations' must map file paths to seconds (finite numbers of 0 or more)",
        ),
        (
            '{"test_a.py": 1e400}',
            "'durations' must map file paths to seconds (finite numbers of 0 or more)",
        ),
        (
            '{"test_a.py": -1}',
            "'durations' must map file paths to seconds (finite numbers of 0 or more)",
        ),
        (
            '{"test_a.py": true}',
            "'durations' must map file paths to seconds (finite numbers of 0 or more)",
        ),
        (b"\xff\xfe{", "'durations' is not valid JSON: *"),
    ],
)
def test_a_bad_durations_file_is_a_usage_error(
    pytester: pytest.Pytester, content: str | bytes | None, problem: str
) -> None:
    _suite(pytester, 2)
    target = pytester.path / "durations"
    if content is None:
        target.mkdir()
    elif isinstance(content, bytes):
        target.write_bytes(content)
    else:
        target.write_text(content)
    result = pytester.runpytest_subprocess(
        "-p", "isolation", "--isolation-shard=1/2", "--isolation-durations=durations"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([f"ERROR: --isolation-durations: {problem}"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
