"""Property (issue 16): whatever value any of the plugin's options or ini keys
gets, the run ends as pytest's own runs do, exit 0, 1, 4 or 5, never an
internal error or a traceback; and on a usage error nothing ran and nothing
was written.

The options and ini keys are read from ``pytest --help``, so a new one is
covered without touching this file."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from conftest import TIMEOUT
from conftest import plugin_help

ENV = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
ENV.pop("PYTEST_ADDOPTS", None)


def _table() -> tuple[list[tuple[str, bool]], list[str]]:
    """The plugin's options (flag, takes a value) and ini keys, from --help."""
    text = plugin_help()
    flags = re.findall(r"^  (--isolation-[a-z-]+)(=?)", text, re.M)
    keys = re.findall(r"^  (isolation_[a-z_]+) \(", text, re.M)
    return sorted({(flag, bool(value)) for flag, value in flags}), sorted(set(keys))


OPTIONS, INI_KEYS = _table()

#: Values a hostile user (or a broken CI template) would give.
VALUES = st.sampled_from(
    [
        "",
        " ",
        "-1",
        "0",
        "1",
        "3",
        "1/2",
        "5/4",
        "1e308",
        "99999999999999999999",
        "nan",
        "inf",
        "0.001",
        "true",
        "maybe",
        "é",
        "\u0663",
        "env:[",
        "adir",
        "afile/x.json",
        "alink",
        "binary.bin",
        "@binary.bin",
        "/dev/full",
        "/proc/nope/x",
        "nope.py",
        "test_a.py::test_a",
        "HEAD",
        "file",
        "fork",
        "auto",
        # Globs (issue 31): an unclosed set, a range, many ``**``, a lint allowance.
        "test_[!].py: off",
        "test_[a-m].py: group=g",
        "/".join(["**"] * 10) + "/x: off",
        "ISO203: tests/[abc/",
    ]
)

SUITE = "def test_a():\n    open('ran', 'w').close()\n"


def _project() -> Path:
    root = Path(tempfile.mkdtemp(prefix="isolation-property-"))
    (root / "test_a.py").write_text(SUITE)
    (root / "adir").mkdir()
    (root / "afile").write_text("keep\n")
    (root / "binary.bin").write_bytes(b"\xff\xfe\x00binary")
    (root / "alink").symlink_to(root / "target.json")
    return root


def _listing(root: Path) -> dict[str, bytes | None]:
    return {
        str(path.relative_to(root)): None if path.is_dir() else path.read_bytes()
        for path in root.rglob("*")
        if "__pycache__" not in path.parts and not path.is_symlink()
    }


def _pytest(root: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """``pytest -p isolation ARGS`` in ``root``; its output, which must hold
    neither a traceback nor an internal error."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "isolation", *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=ENV,
        stdin=subprocess.DEVNULL,
    )
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output
    assert "INTERNALERROR" not in output, output
    return done, output


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,  # the same examples on every run, in CI too
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    options=st.lists(
        st.tuples(st.sampled_from(OPTIONS), VALUES),
        min_size=1,
        max_size=2,
        unique_by=lambda o: o[0],
    ),
    ini=st.lists(st.tuples(st.sampled_from(INI_KEYS), VALUES), max_size=1),
)
def test_any_value_of_any_option_ends_the_run_cleanly(
    options: list[tuple[tuple[str, bool], str]], ini: list[tuple[str, str]]
) -> None:
    root = _project()
    try:
        if ini:
            lines = "".join(f"{key} = {value}\n" for key, value in ini)
            (root / "pytest.ini").write_text(f"[pytest]\n{lines}")
        args = [flag if not takes else f"{flag}={value}" for (flag, takes), value in options]
        before = _listing(root)
        done, output = _pytest(root, "-p", "no:cacheprovider", *args)
        assert done.returncode in (0, 1, 4, 5), output
        if done.returncode == 4:
            assert not (root / "ran").exists(), f"a test ran despite a usage error:\n{output}"
            assert _listing(root) == before, f"a usage error wrote files:\n{output}"
        assert (root / "afile").read_text() == "keep\n"
        assert Path("/dev/full").is_char_device()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_the_table_has_the_options_and_keys() -> None:
    flags = [flag for flag, _ in OPTIONS]
    assert "--isolation-timeout" in flags
    assert "--isolation-report" in flags
    assert "isolation_leaks_deep" in INI_KEYS
    assert len(flags) > 25
    assert len(INI_KEYS) > 10
    assert ("--isolation-dry-run", False) in OPTIONS


pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="uses /dev/full and /proc")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)

#: A minimal valid run report (as the schema requires), for damage to start from.
REPORT = {
    "schema": "pytest-isolation-run-report",
    "version": 1,
    "created": "2026-01-01T00:00:00+00:00",
    "duration": 1.0,
    "exit_code": 0,
    "mode": "file",
    "start_method": "fork",
    "shard": None,
    "versions": {"python": "3.11.7", "pytest": "9.2.0", "pytest_isolation": "0.1.0",
                 "platform": "linux"},
    "totals": {
        "files": 0,
        "outcomes": {},
        "tests": {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "xfailed": 0,
                  "xpassed": 0, "quarantined": 0},
        "flaky": 0,
        "leaks": 0,
    },
    "files": [],
    "flaky": [],
    "quarantined": [],
    "quarantine_passing": [],
    "quarantine_stale": [],
}  # fmt: skip


@settings(max_examples=40, deadline=None, derandomize=True)
@given(key=st.sampled_from(sorted(REPORT)), value=JSON, whole=st.booleans())
def test_merge_of_any_json_ends_cleanly(key: str, value: object, whole: bool) -> None:
    directory = Path(tempfile.mkdtemp(prefix="isolation-merge-"))
    try:
        document: object = value if whole else {**REPORT, key: value}
        path = directory / "report.json"
        path.write_text(json.dumps(document))
        done = subprocess.run(
            [sys.executable, "-m", "pytest_isolation.merge", str(path), "-o", "merged.json"],
            cwd=directory,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env=ENV,
        )
        assert done.returncode in (0, 2), done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        if done.returncode == 2:
            assert done.stderr.startswith("error: "), done.stderr
            assert not (directory / "merged.json").exists()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def test_the_report_the_damage_starts_from_merges(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(REPORT))
    done = subprocess.run(
        [sys.executable, "-m", "pytest_isolation.merge", str(path)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=ENV,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["totals"]["files"] == 0


GLOBS = ["test_[!].py: off", "test_[a-m].py: off", "/".join(["**"] * 10) + "/x: off", "[: off"]


@pytest.mark.parametrize("key", ["isolation_paths", "isolation_lint_allow"])
@pytest.mark.parametrize("glob", GLOBS)
def test_every_glob_ends_the_run_cleanly(key: str, glob: str) -> None:
    """Issue 31, item 6: each glob line of the ini keys that take globs is
    a run or a usage error naming the key, never an internal error."""
    root = _project()
    try:
        line = glob if key == "isolation_paths" else f"ISO203: {glob.partition(':')[0]}"
        (root / "pytest.ini").write_text(f"[pytest]\n{key} =\n    {line}\n")
        done, output = _pytest(root, "--isolation-lint=warn")
        assert done.returncode in (0, 4), output
        if done.returncode == 4:
            assert f"{key} (ini) line" in output, output
    finally:
        shutil.rmtree(root, ignore_errors=True)
