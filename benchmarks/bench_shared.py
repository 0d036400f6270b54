"""What a slow session fixture costs in file mode, shared and not.

A suite of ``--files`` files, each of whose tests uses one session fixture
that sleeps ``--seconds``.  Timed side by side in interleaved runs: file mode
with the fixture shared (``isolation_shared_fixtures``) and not, each with
the fixture sleeping and not, and the plain run.  The fixture's cost is the
difference between a mode with the sleep and without: about ``--seconds``
once when shared, once per file when not.

    python benchmarks/bench_shared.py --files 20 --seconds 0.5 --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFTEST = """\
import os
import time

import pytest


@pytest.fixture(scope="session")
def slow():
    time.sleep(float(os.environ["BENCH_FIXTURE_SECONDS"]))
    return 42
"""

TEST = """\
def test_one(slow):
    assert slow == 42


def test_two(slow):
    assert slow == 42
"""

FILE_MODE = ["--isolation-mode=file", "--isolation-start=fork"]
#: Name: (arguments, whether the fixture sleeps).
MODES = {
    "plain": ([], True),
    "file": (FILE_MODE, True),
    "file, no sleep": (FILE_MODE, False),
    "shared": ([*FILE_MODE, "-o", "isolation_shared_fixtures=slow"], True),
    "shared, no sleep": ([*FILE_MODE, "-o", "isolation_shared_fixtures=slow"], False),
}


def make_suite(root: Path, files: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "conftest.py").write_text(CONFTEST)
    for number in range(files):
        (root / f"test_{number:03d}.py").write_text(TEST)


def run(root: Path, args: list[str], seconds: float) -> float:
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env["BENCH_FIXTURE_SECONDS"] = str(seconds)
    env.pop("PYTEST_ADDOPTS", None)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "isolation", *args]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{args}: exit {done.returncode}\n{done.stdout[-2000:]}{done.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=0.5)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory) / "suite"
        make_suite(root, args.files)
        times: dict[str, list[float]] = {mode: [] for mode in MODES}
        for _ in range(args.runs):
            for mode, (extra, sleeps) in MODES.items():
                times[mode].append(run(root, extra, args.seconds if sleeps else 0.0))
    medians = {mode: statistics.median(found) for mode, found in times.items()}
    shared_cost = statistics.median(
        a - b for a, b in zip(times["shared"], times["shared, no sleep"], strict=True)
    )
    file_cost = statistics.median(
        a - b for a, b in zip(times["file"], times["file, no sleep"], strict=True)
    )
    print(f"{args.files} files, fixture {args.seconds:g} s, {args.runs} interleaved runs")
    for mode, median in medians.items():
        print(f"  {mode:18} median {median:6.2f} s")
    print(f"  the fixture costs, shared:     {shared_cost:5.2f} s (once: {args.seconds:g} s)")
    print(f"  the fixture costs, not shared: {file_cost:5.2f} s ({args.files} files)")
    if args.json:
        report = {"times": times, "shared_cost": shared_cost, "file_cost": file_cost}
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
