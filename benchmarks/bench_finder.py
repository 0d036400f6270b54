"""Benchmark of ``--isolation-find-polluter`` against detect-test-pollution.

Generates suites (``--samples``) in which one earlier test sets
``os.environ["POLLUTED"]`` and a victim that runs last fails when that variable is set:

* ``300``: 300 trivial tests (30 files x 10), the polluter in the middle
  (``tests/test_f13.py::test_t4``), the victim in a file of its own
  (``tests/test_zz_victim.py::test_victim``);
* ``7-other-file``: 7 tests in two files, the polluter in the file before the victim's;
* ``7-same-file``: 7 tests in two files, the polluter in the victim's file;
* ``7-one-file``: 7 tests in one file.

Then, in ``--runs`` interleaved rounds per sample, it asks each tool for the polluter:

* ``isolation``: ``python -m pytest -p isolation -p no:randomly
  --isolation-find-polluter=VICTIM tests`` (its default number of probes at a time);
* ``isolation N=1`` / ``isolation N=2``: the same with ``--isolation-probes=1`` / ``=2``;
* ``isolation before N=1`` / ``N=2``: the same commands with the plugin's sources of
  ``--before SRC`` first on ``PYTHONPATH`` (the probes inherit it), when given;
* ``detect-test-pollution``: ``detect-test-pollution --failing-test VICTIM --tests tests``
  (the console script next to this interpreter; ``pip install detect-test-pollution``);

plus plain pytest runs for reference (the victim alone, and the whole suite).

Every run is checked: exit status 0 and exactly the expected polluter, or the benchmark stops
with exit status 1. The pytest runs each tool makes are counted twice: from its output (the
probe / step lines) and from a ``conftest.py`` in the suite that appends one line per
configured pytest session to a log file; the two counts must agree.

See ``benchmarks/README.md``. Run with the interpreter that has pytest, the plugin and
detect-test-pollution installed::

    .venv/bin/python benchmarks/bench_finder.py [--runs 5] [--samples 300,7-one-file]
        [--before OLD/src] [--json PATH] > report.md

Standard library only: pytest and both tools only ever run in subprocesses.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.metadata
import itertools
import json
import math
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

V_TESTS = ["test_v0", "test_v1", "test_v2", "test_victim"]
BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_WORKDIR = BENCH_DIR / ".work"

TIMEOUT = 900.0
ROUND_GAP = 0.1  # s: probe lines further apart than this came from different batches
RUNLOG_ENV = "BENCH_FINDER_RUNLOG"
SCRUBBED_ENV = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")

ISOLATION_FIXED = (
    "collection",
    "victim alone",
    "all preceding + victim (now in the collection's run)",
    "leak report",
    "file-mode check (polluter in another file only)",
)
DTP_FIXED = ("collection", "victim alone", "all preceding + victim", "double check")

CONFTEST = '''\
"""Instrumentation of bench_finder.py: one line per configured pytest session."""

import json
import os
import sys


def pytest_configure(config):
    path = os.environ.get("BENCH_FINDER_RUNLOG")
    if path:
        line = json.dumps({"pid": os.getpid(), "argv": sys.argv[1:]})
        with open(path, "a", encoding="utf-8") as file:
            file.write(line + "\\n")
'''


class BenchError(Exception):
    """A run failed or gave a wrong answer: the benchmark stops."""


# --------------------------------------------------------------------------- suite


@dataclasses.dataclass(frozen=True)
class Sample:
    """A generated suite: test files (name -> test names) in order, the polluter, the victim."""

    what: str
    files: dict[str, list[str]]
    polluter: str
    victim: str

    @property
    def preceding(self) -> int:
        return sum(map(len, self.files.values())) - 1


def _sample_300() -> Sample:
    files = {f"test_f{f:02d}.py": [f"test_t{t}" for t in range(10)] for f in range(30)}
    files["test_zz_victim.py"] = ["test_victim"]
    return Sample(
        "30 files x 10 trivial tests, the polluter in the middle, the victim in a file of its own",
        files,
        "tests/test_f13.py::test_t4",
        "tests/test_zz_victim.py::test_victim",
    )


SAMPLES = {
    "300": _sample_300(),
    "7-other-file": Sample(
        "7 tests in 2 files, the polluter in the file before the victim's",
        {"test_a.py": ["test_a0", "test_a1", "test_a2"], "test_v.py": V_TESTS},
        "tests/test_a.py::test_a1",
        "tests/test_v.py::test_victim",
    ),
    "7-same-file": Sample(
        "7 tests in 2 files, the polluter in the victim's file",
        {"test_a.py": ["test_a0", "test_a1", "test_a2"], "test_v.py": V_TESTS},
        "tests/test_v.py::test_v1",
        "tests/test_v.py::test_victim",
    ),
    "7-one-file": Sample(
        "7 tests in 1 file",
        {"test_v.py": [f"test_v{t}" for t in range(6)] + ["test_victim"]},
        "tests/test_v.py::test_v2",
        "tests/test_v.py::test_victim",
    ),
}


def generate(root: Path, sample: Sample) -> None:
    """The suite, afresh, with its own ``pytest.ini`` (so ``root`` is pytest's rootdir)."""
    if root.exists():
        shutil.rmtree(root)
    tests = root / "tests"
    tests.mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (root / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    for name, names in sample.files.items():
        parts = ["import os\n"]
        for test in names:
            nodeid = f"tests/{name}::{test}"
            body = {
                sample.polluter: 'os.environ["POLLUTED"] = "1"',
                sample.victim: 'assert "POLLUTED" not in os.environ',
            }.get(nodeid, "pass")
            parts.append(f"\ndef {test}():\n    {body}\n")
        (tests / name).write_text("\n".join(parts), encoding="utf-8")


# --------------------------------------------------------------------------- tools


def dtp_executable() -> str:
    """detect-test-pollution's console script, preferably the one next to this interpreter.

    (``python -m detect_test_pollution`` does not work: it passes ``-p __name__`` to pytest,
    which would then be ``-p __main__``.)"""
    beside = Path(sys.executable).parent / "detect-test-pollution"
    if beside.exists():
        return str(beside)
    found = shutil.which("detect-test-pollution")
    if found is None:
        raise BenchError(
            "detect-test-pollution is not installed: "
            f"{sys.executable} -m pip install detect-test-pollution"
        )
    return found


def commands(dtp: str, sample: Sample, before: bool) -> dict[str, list[str]]:
    victim = sample.victim
    isolation = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "isolation",
        "-p",
        "no:randomly",
        f"--isolation-find-polluter={victim}",
    ]
    plain = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    plugin = ["-p", "isolation", "--isolation-leaks=off"]  # as in pytest-isolation's probes
    found = {
        "isolation": [*isolation, "tests"],
        "isolation N=1": [*isolation, "--isolation-probes=1", "tests"],
        "isolation N=2": [*isolation, "--isolation-probes=2", "tests"],
        "detect-test-pollution": [dtp, "--failing-test", victim, "--tests", "tests"],
        "pytest: victim alone": [*plain, victim],
        "pytest -p isolation: victim alone": [*plain, *plugin, victim],
        "pytest: whole suite": [*plain, "tests"],
    }
    if before:
        found["isolation before N=1"] = found["isolation N=1"]
        found["isolation before N=2"] = found["isolation N=2"]
    return found


def tools(before: bool) -> tuple[str, ...]:
    olds = ("isolation before N=1", "isolation before N=2") if before else ()
    return ("isolation", "isolation N=1", "isolation N=2", *olds, "detect-test-pollution")


REFERENCES = ("pytest: victim alone", "pytest -p isolation: victim alone", "pytest: whole suite")


def build_env() -> tuple[dict[str, str], list[str]]:
    env = dict(os.environ)
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["PYTHONUNBUFFERED"] = "1"  # detect-test-pollution's progress lines arrive as printed
    removed = [name for name in SCRUBBED_ENV if env.pop(name, None) is not None]
    return env, removed


def run(command: Sequence[str], root: Path, env: dict[str, str], log: Path) -> dict[str, Any]:
    """Run ``command`` in the suite, timed; its output lines, each with the time it arrived
    (seconds from the start), and the pytest sessions it configured."""
    if log.exists():
        log.unlink()
    timed_out = []

    def kill() -> None:
        timed_out.append(True)
        os.killpg(proc.pid, signal.SIGKILL)

    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            command,
            cwd=root,
            env={**env, RUNLOG_ENV: str(log)},
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            start_new_session=True,
        )
        timer = threading.Timer(TIMEOUT, kill)
        timer.start()
        assert proc.stdout is not None
        lines = [(time.perf_counter() - start, line.rstrip("\n")) for line in proc.stdout]
        proc.wait()
        seconds = time.perf_counter() - start
        timer.cancel()
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    if timed_out:
        raise BenchError(f"{shlex.join(command)}: no answer within {TIMEOUT:g} s")
    sessions = []
    if log.exists():
        logged = log.read_text(encoding="utf-8").splitlines()
        sessions = [json.loads(line)["argv"] for line in logged if line]
    return {
        "seconds": seconds,
        "code": proc.returncode,
        "lines": lines,
        "stdout": "".join(text + "\n" for _, text in lines),
        "stderr": stderr,
        "sessions": sessions,
    }


def _arrival(result: dict[str, Any], pattern: str) -> float:
    """When the first output line matching ``pattern`` arrived."""
    for stamp, text in result["lines"]:
        if re.search(pattern, text):
            return float(stamp)
    raise _fail("phases", result, f"no output line matches {pattern!r}")


def phases(name: str, result: dict[str, Any]) -> dict[str, float]:
    """The wall time before, during and after the search, from the output lines' arrival."""
    if name.startswith("isolation"):
        begin = _arrival(result, r"^isolation: after all \d+ tests? before it, it fails: bisecting")
        end = _arrival(result, r"^isolation: polluter: ")
        # A batch of parallel probes reports all its lines at once, when the batch is done.
        stamps = [t for t, text in result["lines"] if re.match(r"isolation: probe \d+\b", text)]
        rounds = 1 + sum(b - a > ROUND_GAP for a, b in itertools.pairwise(stamps))
    else:
        begin = _arrival(result, r"^running step 1:$")
        end = _arrival(result, r"^double checking we found it")
        rounds = len(re.findall(r"^running step \d+:$", result["stdout"], re.M))
    return {
        "before": begin,
        "search": end - begin,
        "after": result["seconds"] - end,
        "rounds": rounds,
    }


def _fail(name: str, result: dict[str, Any], why: str) -> BenchError:
    tail = (result["stdout"] + result["stderr"]).strip().splitlines()[-15:]
    return BenchError(
        f"{name}: {why} (exit status {result['code']})\n" + "\n".join("    " + t for t in tail)
    )


def check_isolation(name: str, result: dict[str, Any], sample: Sample) -> dict[str, Any]:
    out = result["stdout"]
    probes = len(re.findall(r"^isolation: probe \d+\b", out, re.M))
    found = re.search(r"^isolation: polluter: (\S+) \((\d+) probes?\)$", out, re.M)
    if result["code"] != 0 or found is None:
        raise _fail(name, result, "no polluter found")
    if found[1] != sample.polluter:
        raise _fail(name, result, f"WRONG polluter {found[1]!r}, expected {sample.polluter!r}")
    if int(found[2]) != probes - 1:  # the probe without it comes after that line
        raise _fail(name, result, f"says {found[2]} probes but printed {probes} probe lines")
    sessions = result["sessions"]
    apart = sample.polluter.split("::")[0] != sample.victim.split("::")[0]
    # The run that says the order: a collection, or (since issue 49 item 6) the suite's
    # paths run up to the victim.
    ordering = sum("--collect-only" in s or s[-1:] == ["tests"] for s in sessions)
    kinds = {
        "collection": (ordering, 1),
        "leak report": (sum("--isolation-leaks=warn" in s for s in sessions), 1),
        "file-mode check": (sum("--isolation-mode=file" in s for s in sessions), int(apart)),
    }
    if any(count != wanted for count, wanted in kinds.values()):
        raise _fail(name, result, f"unexpected fixed runs in the session log: {kinds}")
    fixed = len(sessions) - probes
    most = len(ISOLATION_FIXED) - (not apart)
    if not most - 1 <= fixed <= most:
        raise _fail(
            name,
            result,
            f"{len(sessions)} pytest sessions logged; expected {probes} probes + "
            f"{most - 1} or {most} fixed runs",
        )
    return {
        "found": found[1],
        "probes": probes,
        "fixed": fixed,
        "sessions": len(sessions),
        "leak_reported": "os.environ['POLLUTED']" in out,
        "file_mode_right": (
            "--isolation-mode=file prevents it" if apart else "they are in the same file"
        )
        in out,
    }


def check_dtp(name: str, result: dict[str, Any], sample: Sample) -> dict[str, Any]:
    out = result["stdout"]
    steps = len(re.findall(r"^running step \d+:$", out, re.M))
    found = re.search(r"^-> the polluting test is: (\S+)$", out, re.M)
    discovered = re.search(r"^-> discovered (\d+) tests!$", out, re.M)
    if result["code"] != 0 or found is None:
        raise _fail(name, result, "no polluter found")
    if found[1] != sample.polluter:
        raise _fail(name, result, f"WRONG polluter {found[1]!r}, expected {sample.polluter!r}")
    if discovered is None or int(discovered[1]) != sample.preceding + 1:
        raise _fail(name, result, f"did not discover the {sample.preceding + 1} tests")
    sessions = result["sessions"]
    if len(sessions) != steps + len(DTP_FIXED):
        raise _fail(
            name,
            result,
            f"{len(sessions)} pytest sessions logged; expected {steps} steps + "
            f"{len(DTP_FIXED)} fixed runs",
        )
    return {
        "found": found[1],
        "probes": steps,
        "fixed": len(DTP_FIXED),
        "sessions": len(sessions),
    }


def check_reference(name: str, result: dict[str, Any], sample: Sample) -> dict[str, Any]:
    last = (result["stdout"].strip().splitlines() or [""])[-1]
    if name.endswith("victim alone"):
        good = result["code"] == 0 and re.match(r"1 passed in ", last)
    else:
        wanted = rf"1 failed, {sample.preceding} passed in "
        good = result["code"] == 1 and re.match(wanted, last)
    if not good:
        raise _fail(name, result, f"unexpected outcome: {last!r}")
    return {"sessions": len(result["sessions"])}


def check(name: str, result: dict[str, Any], sample: Sample) -> dict[str, Any]:
    if name.startswith("isolation"):
        return check_isolation(name, result, sample)
    if name == "detect-test-pollution":
        return check_dtp(name, result, sample)
    return check_reference(name, result, sample)


# --------------------------------------------------------------------------- report


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def collect_meta(env: dict[str, str], removed: list[str]) -> dict[str, Any]:
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "command": shlex.join([sys.executable, *sys.argv]),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "python": sys.executable,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": affinity,
        "pytest": _version("pytest"),
        "pytest_isolation": _version("pytest-isolation"),
        "detect_test_pollution": _version("detect-test-pollution"),
        "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE"),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"],
        "scrubbed_env": removed,
        "bytecode": "",
    }


def compile_plugin(before: Path | None) -> str:
    """Byte-compile the plugin's sources (and an older copy's), as installing
    a wheel does: pip compiled detect-test-pollution's, and under
    PYTHONDONTWRITEBYTECODE=1 an editable checkout's modules would otherwise
    be compiled anew by every pytest process the finder starts."""
    import compileall
    import importlib.util

    spec = importlib.util.find_spec("pytest_isolation")
    if spec is None or spec.origin is None:
        raise BenchError("pytest_isolation is not importable")
    folders = [Path(spec.origin).parent]
    if before is not None:
        folders.append(before / "pytest_isolation")
    for folder in folders:
        if not compileall.compile_dir(str(folder), quiet=1):
            raise BenchError(f"could not byte-compile {folder}")
    return ", ".join(str(folder) for folder in folders)


def _span(values: Sequence[int]) -> str:
    low, high = min(values), max(values)
    return str(low) if low == high else f"{low}-{high}"


def summarize(results: dict[str, list[dict[str, Any]]], names: Sequence[str]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    dtp_times = [r["seconds"] for r in results["detect-test-pollution"]]
    for name, rows in results.items():
        times = [r["seconds"] for r in rows]
        entry: dict[str, Any] = {
            "times": times,
            "median": statistics.median(times),
            "min": min(times),
            "max": max(times),
        }
        if name in names:
            entry["probes"] = [r["probes"] for r in rows]
            entry["fixed"] = rows[0]["fixed"]
            entry["sessions"] = [r["sessions"] for r in rows]
            entry["found"] = sorted({r["found"] for r in rows})
            if name.startswith("isolation"):
                entry["leak_reported"] = sum(r["leak_reported"] for r in rows)
                entry["file_mode_right"] = sum(r["file_mode_right"] for r in rows)
            for phase in ("before", "search", "after"):
                entry[phase] = statistics.median(r[phase] for r in rows)
            entry["rounds"] = [r["rounds"] for r in rows]
            entry["ratio_of_medians"] = entry["median"] / statistics.median(dtp_times)
            entry["round_ratios"] = [t / d for t, d in zip(times, dtp_times, strict=True)]
            entry["median_round_ratio"] = statistics.median(entry["round_ratios"])
        summary[name] = entry
    return summary


def render_head(meta: dict[str, Any], runs: int) -> list[str]:
    pdwb = meta["PYTHONDONTWRITEBYTECODE"]
    return [
        "# pytest-isolation polluter-finder benchmark",
        "",
        f"- command: `{meta['command']}`",
        f"- date: {meta['date']}",
        f"- python {meta['python_version']}, pytest {meta['pytest']}, "
        f"pytest-isolation {meta['pytest_isolation']}, "
        f"detect-test-pollution {meta['detect_test_pollution']}",
        f"- platform: {meta['platform']}; {meta['cpu_count']} cores "
        f"(usable {meta['cpu_affinity']}), shared VM: noisy, compare only within this report",
        "- environment of the runs: PYTEST_DISABLE_PLUGIN_AUTOLOAD=1, PYTHONUNBUFFERED=1, "
        f"PYTHONDONTWRITEBYTECODE={'unset' if pdwb is None else pdwb}"
        + (f"; removed: {', '.join(meta['scrubbed_env'])}" if meta["scrubbed_env"] else ""),
        f"- byte-compiled before the rounds, as a wheel install does (pip compiled "
        f"detect-test-pollution's): {meta['bytecode'] or 'nothing'}",
        f"- {runs} interleaved round(s) per sample, the order rotated every round, after one "
        "untimed whole-suite run; wall clock of each command",
        "- `isolation` is the finder with its default number of probes at a time (2 here); "
        + (
            f"`isolation before` is the plugin's sources at {meta['before']}"
            if meta.get("before")
            else "no `isolation before` runs"
        ),
        "- search probes: pytest-isolation's `isolation: probe N` lines (with the probe without "
        "the polluter); detect-test-pollution's `running step N:` lines. fixed runs: "
        f"pytest-isolation {', '.join(ISOLATION_FIXED)}; detect-test-pollution "
        f"{', '.join(DTP_FIXED)}. pytest sessions: counted by a `conftest.py` in the suite that "
        "logs every configured session; checked to equal search probes + fixed runs. "
        "pytest-isolation's own `pytest` process, which drives the search, is one more start-up.",
        "- before the search: until `...: bisecting` / `running step 1:`; search: until "
        "`isolation: polluter:` / `double checking we found it...`; after: the rest. The "
        "finder now runs the check of the test found together with the leak report, the "
        "file-mode check and the probe without it, so part of that work falls in its search.",
    ]


def render_sample(
    key: str, sample: Sample, summary: dict[str, Any], names: Sequence[str], runs: int
) -> list[str]:
    lines = [
        "",
        f"## Sample `{key}`: {sample.what}",
        "",
        f"Polluter `{sample.polluter}`, victim `{sample.victim}` "
        f"({sample.preceding} tests before it; log2 = {math.log2(sample.preceding):.1f}).",
        "",
        "| tool | median s | min s | max s | median / median(dtp) | median of per-round "
        "ratios | search probes | probe rounds | fixed runs | pytest sessions | before | "
        "search | after |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in names:
        e = summary[name]
        lines.append(
            f"| {name} | {e['median']:.2f} | {e['min']:.2f} | {e['max']:.2f} | "
            f"{e['ratio_of_medians']:.2f} | {e['median_round_ratio']:.2f} | "
            f"{_span(e['probes'])} | {_span(e['rounds'])} | {e['fixed']} | "
            f"{_span(e['sessions'])} | {e['before']:.2f} | {e['search']:.2f} | "
            f"{e['after']:.2f} |"
        )
    for name in REFERENCES:
        e = summary[name]
        lines.append(
            f"| {name} (reference) | {e['median']:.2f} | {e['min']:.2f} | {e['max']:.2f} "
            "| | | | | | 1 | | | |"
        )
    isolations = [n for n in names if n.startswith("isolation")]
    leaks = sum(summary[n]["leak_reported"] for n in isolations)
    right = sum(summary[n]["file_mode_right"] for n in isolations)
    total = len(isolations) * runs
    ratios = "; ".join(
        f"{n} " + ", ".join(f"{r:.2f}" for r in summary[n]["round_ratios"])
        for n in names
        if n != "detect-test-pollution"
    )
    lines += [
        "",
        f"Every run found `{sample.polluter}`. The finder's leak report named "
        f"`os.environ['POLLUTED']` in {leaks} of {total} runs, and its file-mode line was right "
        f"in {right} of {total}. Per-round ratios to detect-test-pollution: {ratios}.",
    ]
    return lines


def render(meta: dict[str, Any], data: dict[str, Any], names: Sequence[str], runs: int) -> str:
    lines = render_head(meta, runs)
    for key, entry in data.items():
        lines += render_sample(key, SAMPLES[key], entry["summary"], names, runs)
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument(
        "--samples",
        default=",".join(SAMPLES),
        help=f"comma-separated, from {', '.join(SAMPLES)} (default: all)",
    )
    parser.add_argument(
        "--before",
        type=Path,
        help="the src/ folder of another pytest-isolation (an older commit's worktree) to "
        "run as 'isolation before'",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=DEFAULT_WORKDIR,
        help="the suites are generated in WORKDIR/finder-SAMPLE (default benchmarks/.work)",
    )
    parser.add_argument("--json", type=Path, help="also write raw times and counts as JSON")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    args.samples = args.samples.split(",")
    unknown = [key for key in args.samples if key not in SAMPLES]
    if unknown:
        parser.error(f"unknown samples: {', '.join(unknown)}")
    if args.before is not None and not (args.before / "pytest_isolation").is_dir():
        parser.error(f"--before {args.before}: no pytest_isolation package there")
    return args


def progress(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def bench_sample(
    key: str, args: argparse.Namespace, env: dict[str, str], dtp: str
) -> dict[str, Any]:
    sample = SAMPLES[key]
    root = args.workdir.resolve() / f"finder-{key}"
    log = args.workdir.resolve() / "finder-sessions.jsonl"
    generate(root, sample)
    before = args.before is not None
    cmds = commands(dtp, sample, before)
    old = {**env, "PYTHONPATH": str(args.before.resolve())} if before else env
    envs = {name: old if " before " in name else env for name in cmds}
    names = [*tools(before), *REFERENCES]

    progress(f"{key}: warm-up: pytest: whole suite (untimed)")
    check("pytest: whole suite", run(cmds["pytest: whole suite"], root, env, log), sample)

    results: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for index in range(args.runs):
        order = names[index % len(names) :] + names[: index % len(names)]
        for name in order:
            result = run(cmds[name], root, envs[name], log)
            row = check(name, result, sample)
            row["seconds"] = result["seconds"]
            if name in cmds and name not in REFERENCES:
                row.update(phases(name, result))
            row["round"] = index + 1
            row["position"] = order.index(name) + 1
            results[name].append(row)
            extra = f", {row['probes']} probes" if "probes" in row else ""
            progress(
                f"{key} round {index + 1}/{args.runs}: {name}: {result['seconds']:.2f} s{extra}"
            )
    if log.exists():
        log.unlink()
    settings = {"suite": str(root), "commands": cmds}
    return {"settings": settings, "rounds": results, "summary": summarize(results, tools(before))}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    env, removed = build_env()
    meta = collect_meta(env, removed)
    meta["before"] = None if args.before is None else str(args.before)
    try:
        meta["bytecode"] = compile_plugin(args.before)
        dtp = dtp_executable()
        data = {key: bench_sample(key, args, env, dtp) for key in args.samples}
    except BenchError as error:
        progress(f"bench_finder: FAILED: {error}")
        return 1
    sys.stdout.write(render(meta, data, tools(args.before is not None), args.runs))
    if args.json:
        payload = {"meta": meta, "runs": args.runs, "timeout": TIMEOUT, "samples": data}
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
