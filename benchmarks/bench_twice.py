"""What ``--isolation-twice`` costs: every passing test run a second time.

A suite of ``--files`` files x ``--tests`` tests, each test burning ``--work-ms``
of CPU (a busy loop on ``time.perf_counter``, not a sleep) and using a
function-scoped fixture (``tmp_path``, written to and read back) and a
module-scoped one.  Timed side by side in interleaved runs (the starting mode
rotates every round): plain pytest without the plugin, the plugin's default
leak guard, ``--isolation-twice`` with and without the guard restoring state,
and file mode (fork) with and without ``--isolation-twice``.  The expected
price of the repeat is about 2x the tests' own time, plus the guard; the
interpreter start, plugin loading and collection are paid once.  A
``collect only`` baseline (``--collect-only``) is timed too, so that the
ratios can also be given for the time after collection.  Besides its exit
code and summary line, every run is checked for how many ``tmp_path``
directories its tests made: one per test, two with ``--isolation-twice``.

    python benchmarks/bench_twice.py --work-ms 2 --runs 5
    python benchmarks/bench_twice.py --work-ms 0 --runs 5   # trivial tests

Standard library only: pytest and the plugin only ever run in subprocesses
(``sys.executable -m pytest``, with the caller's environment less
``PYTEST_ADDOPTS`` and ``PYTEST_PLUGINS``, plus ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``
and ``-p isolation`` for the plugin's modes, as the other benchmarks here;
``--autoload`` loads every installed plugin instead, which in the project's
venv adds about 2 s of start-up to every run; ``PYTHONDONTWRITEBYTECODE`` is
passed through as it is and printed).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parent.parent

CONFTEST = """\
import pytest


@pytest.fixture(scope="module")
def module_data():
    return tuple(range(200))
"""

TEST_HEAD = """\
import time

WORK_SECONDS = {seconds!r}


def burn():
    end = time.perf_counter() + WORK_SECONDS
    spins = 0
    while time.perf_counter() < end:
        spins += 1
    return spins
"""

TEST_BODY = """

def test_{number:03d}(tmp_path, module_data):
    burn()
    out = tmp_path / "out.txt"
    out.write_text(str(sum(module_data) + {number}))
    assert int(out.read_text()) == sum(module_data) + {number}
"""

COMMON = ["-p", "no:randomly", "-p", "no:cacheprovider", "-q"]
FILE_MODE = ["--isolation-mode=file", "--isolation-start=fork"]
TWICE = ["--isolation-twice"]
#: Name: the arguments after ``python -m pytest`` and COMMON.
MODES: dict[str, list[str]] = {
    "plain": ["-p", "no:isolation"],
    "guard": [],
    "twice": TWICE,
    "twice, guard off": [*TWICE, "--isolation-leaks=off"],
    "file": FILE_MODE,
    "file, twice": [*FILE_MODE, *TWICE],
}
#: The baselines of the "after collection" ratios: collecting only, without the
#: plugin (for plain) and with it (for the plugin's modes).
COLLECT = "collect only"
COLLECT_PLUGIN = "collect only, plugin"
BASELINE = {COLLECT: ["-p", "no:isolation", "--collect-only"], COLLECT_PLUGIN: ["--collect-only"]}
#: The ratios reported, numerator / denominator, and what each one measures.
RATIOS = [
    ("guard", "plain", "the leak guard"),
    ("twice", "guard", "the repeat itself (guard on in both)"),
    ("twice, guard off", "guard", "the repeat, the guard only finding, not restoring"),
    ("twice", "plain", "--isolation-twice against no plugin"),
    ("file", "plain", "file mode"),
    ("file, twice", "file", "the repeat in file mode"),
]


class RunFailed(SystemExit):
    pass


def make_suite(root: Path, files: int, tests: int, work_ms: float) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pytest.ini").write_text("[pytest]\n")  # the suite is its own rootdir
    (root / "conftest.py").write_text(CONFTEST)
    head = TEST_HEAD.format(seconds=work_ms / 1000)
    for index in range(files):
        body = "".join(TEST_BODY.format(number=number) for number in range(tests))
        (root / f"test_{index:03d}.py").write_text(head + body)


def environment(autoload: bool = False) -> dict[str, str]:
    env = dict(os.environ)
    for name in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        env.pop(name, None)
    if not autoload:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


def mode_dir(basetemp: Path, mode: str) -> Path:
    return basetemp / re.sub(r"\W+", "-", mode)


def command(mode: str, basetemp: Path, autoload: bool = False) -> list[str]:
    args = {**MODES, **BASELINE}[mode]
    plugin = [] if autoload or "no:isolation" in args else ["-p", "isolation"]
    return [
        sys.executable,
        "-m",
        "pytest",
        *COMMON,
        *plugin,
        *args,
        f"--basetemp={mode_dir(basetemp, mode)}",
    ]


def tmp_paths(basetemp: Path, mode: str) -> int:
    """How many ``tmp_path`` directories the last run of ``mode`` made."""
    found = mode_dir(basetemp, mode)
    if not found.is_dir():
        return 0
    return sum(1 for p in found.iterdir() if p.is_dir() and not p.name.endswith("current"))


def check(mode: str, done: subprocess.CompletedProcess[str], expected: int, basetemp: Path) -> None:
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    last = lines[-1].strip("= ") if lines else ""
    if mode in BASELINE:
        pattern = rf"{expected} tests collected in [\d.]+s( \([^)]*\))?"
    else:
        pattern = rf"{expected} passed in [\d.]+s( \([^)]*\))?"
    problem = ""
    if done.returncode != 0:
        problem = f"exit code {done.returncode}"
    elif not re.fullmatch(pattern, last):
        problem = f"summary line {last!r}, expected {expected} and nothing else"
    if not problem:
        made = tmp_paths(basetemp, mode)
        runs = 0 if mode in BASELINE else 2 if "--isolation-twice" in MODES[mode] else 1
        if made != runs * expected:
            problem = f"{made} tmp_path directories, expected {runs} x {expected}"
    if problem:
        tail = done.stdout[-3000:] + done.stderr[-2000:]
        raise RunFailed(f"{mode}: {problem}\n{shlex.join(done.args)}\n{tail}")


def run(
    mode: str, root: Path, basetemp: Path, expected: int, args: argparse.Namespace
) -> tuple[float, float]:
    """One timed run, checked: its wall and CPU seconds (the subprocess and
    the children it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        command(mode, basetemp, args.autoload),
        cwd=root,
        env=environment(args.autoload),
        capture_output=True,
        text=True,
        timeout=args.timeout,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    check(mode, done, expected, basetemp)
    return wall, cpu


def version(module: str) -> str:
    code = f"import importlib.metadata as m; print(m.version({module!r}))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environment()
    )
    return done.stdout.strip() or "?"


def git(*args: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=REPO_DIR, capture_output=True, text=True)
    except OSError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def meta() -> dict[str, str]:
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "pytest": version("pytest"),
        "pytest-isolation": version("pytest-isolation"),
        "commit": (git("rev-parse", "--short", "HEAD") or "?")
        + (" (uncommitted changes in the tree)" if dirty else ""),
        "platform": f"{platform.system()} {platform.release()} {platform.machine()}",
        "cpus": str(os.cpu_count()),
        "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE", "(unset)"),
        "load": load(),
    }


def load() -> str:
    """The 1-, 5- and 15-minute load averages (other jobs on the machine)."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b > 0 else "n/a"


def render(
    args: argparse.Namespace,
    info: dict[str, str],
    walls: dict[str, list[float]],
    cpus: dict[str, list[float]],
) -> str:
    tests = args.files * args.tests
    med = {mode: statistics.median(found) for mode, found in walls.items()}
    cpu = {mode: statistics.median(found) for mode, found in cpus.items()}

    def after(mode: str, medians: dict[str, float]) -> float:
        base = COLLECT if "no:isolation" in MODES[mode] else COLLECT_PLUGIN
        return medians[mode] - medians[base]

    argv = shlex.join([Path(sys.executable).name, *sys.argv])
    out = [
        f"### {args.files} files x {args.tests} tests, {args.work_ms:g} ms of work per test",
        "",
        f"`{argv}`",
        "",
        f"{info['date']}; Python {info['python']}, pytest {info['pytest']}, "
        f"pytest-isolation {info['pytest-isolation']} at {info['commit']}; "
        f"{info['platform']}, {info['cpus']} CPUs; "
        f"PYTHONDONTWRITEBYTECODE={info['PYTHONDONTWRITEBYTECODE']}; "
        f"plugin autoload {'on' if args.autoload else 'off (`-p isolation` where loaded)'}; "
        f"load average {info['load']} at the start, {info['load_end']} at the end; "
        f"{args.runs} interleaved runs (+{args.warmup} untimed warm-up), medians. "
        f"Every run exited 0 with `{tests} passed` and made {tests} `tmp_path` "
        f"directories ({2 * tests} with `--isolation-twice`).",
        "",
        "| mode | command |",
        "|---|---|",
        *(
            f"| {mode} | `{shlex.join(['python', *command(mode, Path(), args.autoload)[1:-1]])}` |"
            for mode in [*MODES, *BASELINE]
        ),
        "",
        "Every command also has `--basetemp=` a directory of its own mode in the temporary "
        "directory, so that the `tmp_path` directories can be counted.",
        "",
        "| mode | median s | min s | max s | CPU s | ratio to plain |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for mode in [*MODES, *BASELINE]:
        found = walls[mode]
        out.append(
            f"| {mode} | {med[mode]:.2f} | {min(found):.2f} | {max(found):.2f} "
            f"| {cpu[mode]:.2f} | {ratio(med[mode], med['plain'])} |"
        )
    out += [
        "",
        "| ratio | of medians | median of per-round | after collection | CPU "
        "| CPU after collection | what |",
        "|---|--:|--:|--:|--:|--:|---|",
    ]
    for top, bottom, what in RATIOS:
        rounds = statistics.median(a / b for a, b in zip(walls[top], walls[bottom], strict=True))
        out.append(
            f"| {top} / {bottom} | {ratio(med[top], med[bottom])} | {rounds:.2f} "
            f"| {ratio(after(top, med), after(bottom, med))} "
            f"| {ratio(cpu[top], cpu[bottom])} "
            f"| {ratio(after(top, cpu), after(bottom, cpu))} | {what} |"
        )
    out += [
        "",
        "*after collection*: the ratio of the medians less the median of `collect only` "
        "(`plain`) or `collect only, plugin` (the plugin's modes): the wall time past "
        "start-up and collection, where the tests run (an estimate). *CPU*: user + system "
        "seconds of pytest and the children it waited for (the work loop runs on the clock: "
        "a test descheduled by other jobs burns less CPU in it).",
        "",
    ]
    return "\n".join(out)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--tests", type=int, default=10, help="tests per file")
    parser.add_argument("--work-ms", type=float, default=2.0, help="CPU work per test, ms")
    parser.add_argument("--runs", type=int, default=5, help="interleaved timed rounds")
    parser.add_argument("--warmup", type=int, default=1, help="untimed plain runs first")
    parser.add_argument("--timeout", type=float, default=900, help="limit per run, seconds")
    parser.add_argument(
        "--autoload", action="store_true", help="load every installed pytest plugin"
    )
    parser.add_argument("--output", type=Path, help="also write the Markdown report here")
    parser.add_argument("--json", type=Path, help="also write every raw time here")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    expected = args.files * args.tests
    info = meta()
    order = [*MODES, *BASELINE]
    walls: dict[str, list[float]] = {mode: [] for mode in order}
    cpus: dict[str, list[float]] = {mode: [] for mode in order}
    with tempfile.TemporaryDirectory(prefix="bench-twice-") as directory:
        root = Path(directory) / "suite"
        basetemp = Path(directory) / "basetemp"
        basetemp.mkdir()
        make_suite(root, args.files, args.tests, args.work_ms)
        for number in range(args.warmup):
            wall, _ = run("plain", root, basetemp, expected, args)
            progress(f"warm-up {number + 1}: plain {wall:.2f} s")
        for round_ in range(args.runs):
            start = round_ % len(order)
            for mode in order[start:] + order[:start]:
                wall, cpu = run(mode, root, basetemp, expected, args)
                walls[mode].append(wall)
                cpus[mode].append(cpu)
                progress(f"round {round_ + 1}/{args.runs}: {mode:18} {wall:6.2f} s")
    info["load_end"] = load()
    report = render(args, info, walls, cpus)
    print(report)
    if args.output:
        args.output.write_text(report)
    if args.json:
        data = {"meta": info, "settings": vars(args) | {"output": None, "json": None}}
        data |= {
            "commands": {mode: command(mode, Path("BASETEMP"), args.autoload) for mode in order}
        }
        data |= {"walls": walls, "cpus": cpus}
        args.json.write_text(json.dumps(data, indent=2))


if __name__ == "__main__":
    main()
