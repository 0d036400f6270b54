"""--isolation-report: the JSON run report, checked against its published
schema and for what it says about each file; the terminal lines for notable
files."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from conftest import TIMEOUT
from conftest import run_file_mode
from conftest import run_guard

SCHEMA = json.loads(
    resources.files("pytest_isolation").joinpath("run-report.schema.json").read_text()
)

SUITE = {
    "test_pass": "def test_one(): pass\ndef test_two(): pass\n",
    "test_fail": "def test_bad(): assert False\ndef test_good(): pass\n",
    "test_crash": """
        import os, signal

        def test_segv():
            os.kill(os.getpid(), signal.SIGSEGV)
    """,
    "test_leak": """
        import os

        def test_env():
            os.environ["LEAKED_BY_TEST"] = "1"
    """,
    "test_quarantined": "def test_known(): assert 0\n",
    "test_flaky": """
        import os, pathlib

        def test_once():
            mark = pathlib.Path(os.environ["FLAKY_MARK"])
            if not mark.exists():
                mark.write_text("")
                assert False
    """,
    "test_skip": "import pytest\n@pytest.mark.skip\ndef test_skipped(): pass\n",
}


def _validate(document: dict[str, Any]) -> None:
    jsonschema.validate(document, SCHEMA, format_checker=jsonschema.FormatChecker())


def _files(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["path"]: entry for entry in document["files"]}


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makepyfile(**SUITE)
    pytester.path.joinpath("q.txt").write_text("test_quarantined.py  # bug 7\n")
    monkeypatch.setenv("FLAKY_MARK", str(pytester.path.parent / f"{pytester.path.name}.mark"))
    return pytester


def test_file_mode_report(suite: pytest.Pytester, start: str) -> None:
    result = run_file_mode(
        suite,
        start,
        "--isolation-report=out/run.json",
        "--isolation-retries=1",
        "--isolation-quarantine=q.txt",
    )
    assert result.ret == 1
    result.stdout.fnmatch_lines(["isolation: run report written to out/run.json"])
    document = json.loads((suite.path / "out" / "run.json").read_text())
    _validate(document)
    assert document["schema"] == "pytest-isolation-run-report"
    assert document["version"] == 1
    assert document["mode"] == "file"
    assert document["start_method"] == start
    assert document["exit_code"] == 1
    assert document["shard"] is None
    assert document["versions"]["pytest"] == pytest.__version__
    files = _files(document)
    assert set(files) == {f"{name}.py" for name in SUITE}

    crash = files["test_crash.py"]
    assert crash["outcome"] == "crashed"
    assert crash["attempts"] == 2
    assert crash["signal"] == "SIGSEGV"
    assert crash["exit_code"] is None
    assert [p["signal"] for p in crash["processes"]] == ["SIGSEGV", "SIGSEGV"]
    assert crash["processes"][0]["running"] == "test_crash.py::test_segv"
    assert crash["tests"]["failed"] == 1

    failing = files["test_fail.py"]
    assert failing["outcome"] == "failed"
    assert failing["attempts"] == 2
    assert (failing["tests"]["failed"], failing["tests"]["passed"]) == (1, 1)
    assert failing["exit_code"] == 0

    assert files["test_pass.py"]["outcome"] == "passed"
    assert files["test_pass.py"]["attempts"] == 1
    assert files["test_pass.py"]["tests"]["passed"] == 2
    assert files["test_leak.py"]["leaks"] == 1
    assert files["test_pass.py"]["leaks"] == 0
    assert files["test_quarantined.py"]["tests"]["quarantined"] == 1
    assert files["test_quarantined.py"]["outcome"] == "skipped"
    assert files["test_skip.py"]["outcome"] == "skipped"
    assert files["test_flaky.py"]["outcome"] == "flaky"

    assert document["flaky"] == [
        {
            "nodeid": "test_flaky.py::test_once",
            "attempts": [{"attempt": 1, "outcome": "failed"}, {"attempt": 2, "outcome": "passed"}],
        }
    ]
    assert document["quarantined"] == [
        {"nodeid": "test_quarantined.py::test_known", "reason": "bug 7", "entry": "q.txt:1"}
    ]
    totals = document["totals"]
    assert totals["files"] == len(SUITE)
    assert totals["flaky"] == 1
    assert totals["leaks"] == 1
    assert totals["tests"]["passed"] == 5
    assert totals["tests"]["failed"] == 2
    assert totals["outcomes"]["crashed"] == 1
    # The terminal: one line per notable file, in the order they ran.
    result.stdout.fnmatch_lines(
        [
            "*= isolation: files: 1 crashed, 3 retried =*",  # a count per kind
            "test_crash.py: attempt 1: crashed (SIGSEGV) in test_segv; "
            "attempt 2: crashed (SIGSEGV) in test_segv",
            "test_fail.py: attempt 1: 1 failed; attempt 2: 1 failed",
            "test_flaky.py: attempt 1: 1 failed; attempt 2: passed; flaky: test_once",
        ]
    )


def test_plain_mode_report_with_shard(suite: pytest.Pytester) -> None:
    result = run_guard(suite, "--isolation-report=run.json", "--isolation-shard=2/2")
    document = json.loads((suite.path / "run.json").read_text())
    _validate(document)
    assert result.ret == document["exit_code"]
    assert document["mode"] == "off"
    assert document["start_method"] is None
    assert document["shard"] == {
        "index": 2,
        "total": 2,
        "strategy": "round-robin",
        "source": "--isolation-shard",
        "split": document["shard"]["split"],
    }
    assert re.fullmatch(r"[0-9a-f]{16}", document["shard"]["split"])
    files = _files(document)
    assert files  # this shard's files only, each run once in this process
    assert len(files) < len(SUITE)
    for entry in files.values():
        assert (entry["attempts"], entry["processes"], entry["exit_code"]) == (1, [], None)


def test_no_notable_lines_on_a_clean_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fine="def test_fine(): pass\n")
    result = run_file_mode(pytester, "fork", "--isolation-report=run.json")
    result.assert_outcomes(passed=1)
    result.stdout.no_re_match_line(
        r".*= isolation: (files: |\d+ files? )(crashed|timed out|retried)"
    )
    document = json.loads((pytester.path / "run.json").read_text())
    _validate(document)
    assert _files(document)["test_fine.py"]["outcome"] == "passed"


def test_a_timeout_is_in_the_report(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_hang="import time\ndef test_hang(): time.sleep(600)\n")
    run_file_mode(
        pytester,
        "fork",
        "--isolation-report=run.json",
        "--isolation-timeout=1",
        "--isolation-kill-grace=1",
    )
    document = json.loads((pytester.path / "run.json").read_text())
    _validate(document)
    entry = _files(document)["test_hang.py"]
    assert entry["outcome"] == "timed-out"
    assert entry["timed_out"] is True
    assert entry["signal"] in {"SIGTERM", "SIGKILL"}


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d.pop("files"),
        lambda d: d.update(version=2),
        lambda d: d["files"][0].update(outcome="fine"),
        lambda d: d["files"][0]["tests"].pop("passed"),
        lambda d: d["totals"].update(extra=1),
    ],
)
def test_the_schema_rejects_damaged_documents(pytester: pytest.Pytester, damage: Any) -> None:
    pytester.makepyfile(test_fine="def test_fine(): pass\n")
    run_file_mode(pytester, "fork", "--isolation-report=run.json")
    document = json.loads((pytester.path / "run.json").read_text())
    _validate(document)
    broken = copy.deepcopy(document)
    damage(broken)
    with pytest.raises(jsonschema.ValidationError):
        _validate(broken)


def test_shard_reports_merge_into_one_report_of_the_whole_suite(
    suite: pytest.Pytester, tmp_path: Path
) -> None:
    paths = []
    for index in (1, 2, 3):
        path = tmp_path / f"shard-{index}.json"
        run_file_mode(
            suite,
            "fork",
            f"--isolation-shard={index}/3",
            "--isolation-shard-strategy=round-robin",  # the cache fills between the runs
            f"--isolation-report={path}",
            "--isolation-quarantine=q.txt",
        )
        paths.append(path)
    merged_path = tmp_path / "run.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest_isolation.merge", *map(str, paths), "-o", str(merged_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    merged = json.loads(merged_path.read_text())
    _validate(merged)
    shards = [json.loads(path.read_text()) for path in paths]
    assert sorted(_files(merged)) == sorted(f"{name}.py" for name in SUITE)
    assert merged["shard"] is None
    assert merged["exit_code"] == 1
    for count in ("passed", "failed", "quarantined", "skipped"):
        expected = sum(shard["totals"]["tests"][count] for shard in shards)
        assert merged["totals"]["tests"][count] == expected
    assert merged["totals"]["tests"]["quarantined"] == 1
    assert merged["quarantined"][0]["nodeid"] == "test_quarantined.py::test_known"
    assert "merged 3 reports: 7 files" in done.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "not JSON"),
        ('{"schema": "other"}', "not a pytest-isolation run report"),
        (
            '{"schema": "pytest-isolation-run-report", "version": 9}',
            "run report version 9; this pytest-isolation reads version 1",
        ),
    ],
)
def test_merge_refuses_what_is_not_a_run_report(tmp_path: Path, content: str, message: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    done = subprocess.run(
        [sys.executable, "-m", "pytest_isolation.merge", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert f"error: {bad}: {message}" in done.stderr
    assert done.stdout == ""


def test_merge_refuses_a_file_in_two_reports(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(test_fine="def test_fine(): pass\n")
    run_file_mode(pytester, "fork", "--isolation-report=run.json")
    report = pytester.path / "run.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest_isolation.merge", str(report), str(report)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "test_fine.py is in another report too" in done.stderr


def test_with_xdist_the_controller_writes_the_whole_report(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makepyfile(**{f"test_{n}": "def test_it(): pass\n" for n in range(6)})
    result = run_guard(pytester, "-p", "xdist", "-n", "2", "--isolation-report=run.json")
    result.assert_outcomes(passed=6)
    document = json.loads((pytester.path / "run.json").read_text())
    _validate(document)
    assert len(document["files"]) == 6
    assert document["totals"]["tests"]["passed"] == 6
    assert not list(pytester.path.glob("run.json.tmp"))


def test_a_collection_error_is_counted_as_on_pytest_s_final_line(
    pytester: pytest.Pytester, start: str
) -> None:
    pytester.makepyfile(test_bad="import nope\n", test_ok="def test_b(): pass\n")
    result = run_file_mode(pytester, start, "--isolation-report=report.json")
    result.assert_outcomes(passed=1, errors=1)
    document = json.loads((pytester.path / "report.json").read_text())
    _validate(document)
    assert document["totals"]["tests"]["error"] == 1
    assert document["totals"]["tests"]["passed"] == 1
    assert _files(document)["test_bad.py"]["tests"]["error"] == 1


def _merge(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_isolation.merge", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture(scope="module")
def shard_reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Real reports of shards 1/2, 2/2 and 1/3 of a small suite, made once."""
    root = tmp_path_factory.mktemp("shards")
    for index in range(4):
        (root / f"test_{index}.py").write_text("def test_it(): pass\n")
    reports = {}
    for shard in ("1/2", "2/2", "1/3"):
        path = root / f"run-{shard.replace('/', 'of')}.json"
        subprocess.run(
            [
                sys.executable, "-m", "pytest", "-p", "isolation", "-q",
                f"--isolation-shard={shard}", "--isolation-shard-strategy=round-robin",
                f"--isolation-report={path}",
            ],
            cwd=root, capture_output=True, timeout=TIMEOUT, check=True,
        )  # fmt: skip
        reports[shard] = json.loads(path.read_text())
    return reports


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda d: d.pop("created"), "$: 'created' is a required property"),
        (lambda d: d.update(files="x"), "$.files: 'x' is not of type 'array'"),
        (lambda d: d["files"][0].update(path=None), "$.files[0].path: None is not of type"),
        (lambda d: d["totals"]["tests"].update(passed="many"), "$.totals.tests.passed: 'many'"),
        (lambda d: d.update(exit_code="x"), "$.exit_code: 'x' is not of type 'integer'"),
    ],
)
def test_merge_validates_every_report_against_the_schema(
    shard_reports: dict[str, dict[str, Any]],
    tmp_path: Path,
    damage: Callable[[dict[str, Any]], object],
    problem: str,
) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(shard_reports["1/2"]))
    broken = copy.deepcopy(shard_reports["2/2"])
    damage(broken)
    bad.write_text(json.dumps(broken))
    done = _merge(str(good), str(bad), "-o", str(tmp_path / "merged.json"))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"error: {bad}: {problem}"), done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "merged.json").exists()


def test_merge_refuses_missing_and_mixed_shards(
    shard_reports: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    paths = {}
    for shard, document in shard_reports.items():
        paths[shard] = tmp_path / f"{shard.replace('/', 'of')}.json"
        paths[shard].write_text(json.dumps(document))
    alone = _merge(str(paths["1/2"]))
    assert alone.returncode == 2
    assert "error: shard 2/2 missing (merge them all, or pass --partial)" in alone.stderr
    partial = _merge(str(paths["1/2"]), "--partial")
    assert partial.returncode == 0, partial.stderr
    assert "warning: shard 2/2 missing: the merged report is partial" in partial.stderr
    mixed = _merge(str(paths["1/2"]), str(paths["1/3"]))
    assert mixed.returncode == 2
    assert "error: the reports are shards of different splits" in mixed.stderr
    twice = _merge(str(paths["1/2"]), str(paths["1/2"]))
    assert twice.returncode == 2
    assert "shard 1/2 is also" in twice.stderr
    whole = _merge(str(paths["1/2"]), str(paths["2/2"]))
    assert whole.returncode == 0, whole.stderr
    other = json.loads(paths["2/2"].read_text())
    other["shard"]["split"] = "0" * 16  # its job split the suite otherwise
    paths["2/2"].write_text(json.dumps(other))
    split_otherwise = _merge(str(paths["1/2"]), str(paths["2/2"]))
    assert split_otherwise.returncode == 2
    assert "error: the shards were split differently" in split_otherwise.stderr


def test_merge_to_a_directory_is_refused(
    shard_reports: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    report = tmp_path / "run.json"
    report.write_text(json.dumps(shard_reports["1/2"]))
    done = _merge(str(report), "--partial", "-o", str(tmp_path))
    assert done.returncode == 2
    assert "exists and is not a regular file; refusing to replace it" in done.stderr
    assert "Traceback" not in done.stderr
