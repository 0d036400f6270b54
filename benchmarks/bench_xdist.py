"""How file mode scales over pytest-xdist workers on a CPU-bound suite.

Generates ``benchmarks/.work/xdist-<files>x<ms>/``: ``--files`` test files,
each with one test that burns ``--ms`` milliseconds of CPU, then runs, side by
side in every round (the order rotated), file mode with ``-n 0`` and ``-n 2``
(and a plain run with each, for reference), and reports medians and the
ratio of the ``-n 2`` median to the ``-n 0`` median.

    .venv/bin/python benchmarks/bench_xdist.py --runs 5
    .venv/bin/python benchmarks/bench_xdist.py --runs 5 --files 40 --ms 200
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

BURN = """
import time


def test_burn():
    end = time.process_time() + {seconds}
    total = 0
    while time.process_time() < end:
        total += sum(range(1000))
    assert total >= 0
"""

MODES = {
    "file -n 0": ["-p", "isolation", "--isolation-mode=file", "-n", "0"],
    "file -n 2": ["-p", "isolation", "--isolation-mode=file", "-n", "2"],
    "plain -n 0": ["-p", "isolation", "-n", "0"],
    "plain -n 2": ["-p", "isolation", "-n", "2"],
}


def generate(root: Path, files: int, ms: int) -> None:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\n")
    for index in range(files):
        (root / f"test_burn_{index:03d}.py").write_text(BURN.format(seconds=ms / 1000))


def run(root: Path, args: list[str]) -> float:
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "xdist", "-p", "no:cacheprovider", *args]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--ms", type=int, default=50)
    parser.add_argument("--workdir", type=Path, default=Path(__file__).parent / ".work")
    parser.add_argument("--json", type=Path)
    options = parser.parse_args()
    root = options.workdir / f"xdist-{options.files}x{options.ms}"
    generate(root, options.files, options.ms)
    run(root, MODES["file -n 0"])  # warm-up: bytecode and page cache
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    ratios = []
    names = list(MODES)
    for round_ in range(options.runs):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        this: dict[str, float] = {}
        for mode in order:
            this[mode] = run(root, MODES[mode])
            times[mode].append(this[mode])
        ratios.append(this["file -n 2"] / this["file -n 0"])
        print(
            f"round {round_ + 1}: " + ", ".join(f"{m} {t:.2f} s" for m, t in this.items()),
            file=sys.stderr,
        )
    medians = {mode: statistics.median(values) for mode, values in times.items()}
    print(
        f"# File mode over xdist: {options.files} files x {options.ms} ms of CPU, "
        f"{options.runs} rounds, {os.cpu_count()} cores\n"
    )
    print("| mode | median s | min s | max s |")
    print("|---|---:|---:|---:|")
    for mode, values in times.items():
        print(f"| {mode} | {medians[mode]:.2f} | {min(values):.2f} | {max(values):.2f} |")
    print(
        f"\n-n 2 / -n 0 in file mode: ratio of medians "
        f"{medians['file -n 2'] / medians['file -n 0']:.2f}, median of per-round ratios "
        f"{statistics.median(ratios):.2f}"
    )
    print(
        f"-n 2 / -n 0 without file mode: ratio of medians "
        f"{medians['plain -n 2'] / medians['plain -n 0']:.2f}"
    )
    if options.json:
        options.json.write_text(json.dumps({"times": times, "ratios": ratios}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
