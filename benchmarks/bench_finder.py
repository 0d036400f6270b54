"""Benchmark of ``--isolation-find-polluter`` against detect-test-pollution.

Generates a suite of 300 trivial tests (30 files x 10) in which one test in the middle
(``tests/test_f13.py::test_t4``) sets ``os.environ["POLLUTED"]``, plus a victim that runs
last (``tests/test_zz_victim.py::test_victim``) and fails when that variable is set. Then,
in ``--runs`` interleaved rounds, it asks each tool for the polluter:

* ``isolation N=1``: ``python -m pytest -p isolation -p no:randomly
  --isolation-find-polluter=VICTIM --isolation-probes=1 tests``;
* ``isolation N=2``: the same with ``--isolation-probes=2`` (two probes at a time);
* ``detect-test-pollution``: ``detect-test-pollution --failing-test VICTIM --tests tests``
  (the console script next to this interpreter; ``pip install detect-test-pollution``);

plus two plain pytest runs for reference (the victim alone, and the whole suite).

Every run is checked: exit status 0 and exactly the expected polluter, or the benchmark stops
with exit status 1. The pytest runs each tool makes are counted twice: from its output (the
probe / step lines) and from a ``conftest.py`` in the suite that appends one line per
configured pytest session to a log file; the two counts must agree.

See ``benchmarks/README.md``. Run with the interpreter that has pytest, the plugin and
detect-test-pollution installed::

    .venv/bin/python benchmarks/bench_finder.py [--runs 5] [--json PATH] > report.md

Standard library only: pytest and both tools only ever run in subprocesses.
"""

from __future__ import annotations

import argparse
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

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_WORKDIR = BENCH_DIR / ".work"

FILES = 30
TESTS = 10
POLLUTER_AT = (13, 4)  # file index, test index
POLLUTER = f"tests/test_f{POLLUTER_AT[0]:02d}.py::test_t{POLLUTER_AT[1]}"
VICTIM = "tests/test_zz_victim.py::test_victim"
PRECEDING = FILES * TESTS
TIMEOUT = 900.0
ROUND_GAP = 0.1  # s: probe lines further apart than this came from different batches
RUNLOG_ENV = "BENCH_FINDER_RUNLOG"
SCRUBBED_ENV = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")

ISOLATION_FIXED = (
    "collection",
    "victim alone",
    "all preceding + victim",
    "leak report",
    "file-mode check",
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


def generate(root: Path) -> None:
    """The suite, afresh, with its own ``pytest.ini`` (so ``root`` is pytest's rootdir)."""
    if root.exists():
        shutil.rmtree(root)
    tests = root / "tests"
    tests.mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (root / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    for f in range(FILES):
        parts = ["import os\n"]
        for t in range(TESTS):
            body = 'os.environ["POLLUTED"] = "1"' if (f, t) == POLLUTER_AT else "pass"
            parts.append(f"\ndef test_t{t}():\n    {body}\n")
        (tests / f"test_f{f:02d}.py").write_text("\n".join(parts), encoding="utf-8")
    (tests / "test_zz_victim.py").write_text(
        'import os\n\n\ndef test_victim():\n    assert "POLLUTED" not in os.environ\n',
        encoding="utf-8",
    )


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


def commands(dtp: str) -> dict[str, list[str]]:
    isolation = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "isolation",
        "-p",
        "no:randomly",
        f"--isolation-find-polluter={VICTIM}",
    ]
    plain = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    plugin = ["-p", "isolation", "--isolation-leaks=off"]  # as in pytest-isolation's probes
    return {
        "isolation N=1": [*isolation, "--isolation-probes=1", "tests"],
        "isolation N=2": [*isolation, "--isolation-probes=2", "tests"],
        "detect-test-pollution": [dtp, "--failing-test", VICTIM, "--tests", "tests"],
        "pytest: victim alone": [*plain, VICTIM],
        "pytest -p isolation: victim alone": [*plain, *plugin, VICTIM],
        "pytest: whole suite": [*plain, "tests"],
    }


TOOLS = ("isolation N=1", "isolation N=2", "detect-test-pollution")
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
        begin = _arrival(result, r"^isolation: after all \d+ tests before it, it fails: bisecting")
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


def check_isolation(name: str, result: dict[str, Any]) -> dict[str, Any]:
    out = result["stdout"]
    probes = len(re.findall(r"^isolation: probe \d+\b.*: after \d+ tests? it ", out, re.M))
    found = re.search(r"^isolation: polluter: (\S+) \((\d+) probes\)$", out, re.M)
    if result["code"] != 0 or found is None:
        raise _fail(name, result, "no polluter found")
    if found[1] != POLLUTER:
        raise _fail(name, result, f"WRONG polluter {found[1]!r}, expected {POLLUTER!r}")
    if int(found[2]) != probes:
        raise _fail(name, result, f"says {found[2]} probes but printed {probes} probe lines")
    sessions = result["sessions"]
    kinds = {
        "collection": sum("--collect-only" in s for s in sessions),
        "leak report": sum("--isolation-leaks=warn" in s for s in sessions),
        "file-mode check": sum("--isolation-mode=file" in s for s in sessions),
    }
    if any(count != 1 for count in kinds.values()):
        raise _fail(name, result, f"unexpected fixed runs in the session log: {kinds}")
    if len(sessions) != probes + len(ISOLATION_FIXED):
        raise _fail(
            name,
            result,
            f"{len(sessions)} pytest sessions logged; expected {probes} probes + "
            f"{len(ISOLATION_FIXED)} fixed runs",
        )
    return {
        "found": found[1],
        "probes": probes,
        "fixed": len(ISOLATION_FIXED),
        "sessions": len(sessions),
        "leak_reported": "os.environ['POLLUTED']" in out,
        "file_mode_prevents": "--isolation-mode=file prevents it" in out,
    }


def check_dtp(name: str, result: dict[str, Any]) -> dict[str, Any]:
    out = result["stdout"]
    steps = len(re.findall(r"^running step \d+:$", out, re.M))
    found = re.search(r"^-> the polluting test is: (\S+)$", out, re.M)
    discovered = re.search(r"^-> discovered (\d+) tests!$", out, re.M)
    if result["code"] != 0 or found is None:
        raise _fail(name, result, "no polluter found")
    if found[1] != POLLUTER:
        raise _fail(name, result, f"WRONG polluter {found[1]!r}, expected {POLLUTER!r}")
    if discovered is None or int(discovered[1]) != PRECEDING + 1:
        raise _fail(name, result, f"did not discover the {PRECEDING + 1} tests")
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


def check_reference(name: str, result: dict[str, Any]) -> dict[str, Any]:
    last = (result["stdout"].strip().splitlines() or [""])[-1]
    if name.endswith("victim alone"):
        good = result["code"] == 0 and re.match(r"1 passed in ", last)
    else:
        good = result["code"] == 1 and re.match(rf"1 failed, {PRECEDING} passed in ", last)
    if not good:
        raise _fail(name, result, f"unexpected outcome: {last!r}")
    return {"sessions": len(result["sessions"])}


def check(name: str, result: dict[str, Any]) -> dict[str, Any]:
    if name.startswith("isolation"):
        return check_isolation(name, result)
    if name == "detect-test-pollution":
        return check_dtp(name, result)
    return check_reference(name, result)


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
    }


def _span(values: Sequence[int]) -> str:
    low, high = min(values), max(values)
    return str(low) if low == high else f"{low}-{high}"


def summarize(results: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
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
        if name in TOOLS:
            entry["probes"] = [r["probes"] for r in rows]
            entry["fixed"] = rows[0]["fixed"]
            entry["sessions"] = [r["sessions"] for r in rows]
            entry["found"] = sorted({r["found"] for r in rows})
            if name.startswith("isolation"):
                entry["leak_reported"] = sum(r["leak_reported"] for r in rows)
                entry["file_mode_prevents"] = sum(r["file_mode_prevents"] for r in rows)
            for phase in ("before", "search", "after"):
                entry[phase] = statistics.median(r[phase] for r in rows)
            entry["search_per_probe"] = statistics.median(r["search"] / r["probes"] for r in rows)
            entry["rounds"] = [r["rounds"] for r in rows]
            entry["search_per_round"] = statistics.median(r["search"] / r["rounds"] for r in rows)
            entry["ratio_of_medians"] = entry["median"] / statistics.median(dtp_times)
            entry["round_ratios"] = [t / d for t, d in zip(times, dtp_times, strict=True)]
            entry["median_round_ratio"] = statistics.median(entry["round_ratios"])
        summary[name] = entry
    return summary


def render(meta: dict[str, Any], summary: dict[str, Any], runs: int) -> str:
    pdwb = meta["PYTHONDONTWRITEBYTECODE"]
    lines = [
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
        f"- suite: {FILES} files x {TESTS} trivial tests, polluter `{POLLUTER}` "
        f"(sets `os.environ['POLLUTED']`), victim `{VICTIM}` runs last "
        f"({PRECEDING + 1} tests collected); log2({PRECEDING}) = "
        f"{math.log2(PRECEDING):.1f}",
        f"- {runs} interleaved round(s), the order rotated every round, after one untimed "
        "whole-suite run; wall clock of each command",
        "",
        "| tool | median s | min s | max s | median / median(dtp) | median of per-round "
        "ratios | search probes | fixed runs | pytest sessions | polluter found |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name in TOOLS:
        e = summary[name]
        lines.append(
            f"| {name} | {e['median']:.2f} | {e['min']:.2f} | {e['max']:.2f} | "
            f"{e['ratio_of_medians']:.2f} | {e['median_round_ratio']:.2f} | "
            f"{_span(e['probes'])} | {e['fixed']} | {_span(e['sessions'])} | "
            f"`{', '.join(e['found'])}` (right) |"
        )
    for name in REFERENCES:
        e = summary[name]
        lines.append(
            f"| {name} (reference) | {e['median']:.2f} | {e['min']:.2f} | {e['max']:.2f} "
            "| | | | | 1 | |"
        )
    leaks = sum(summary[n]["leak_reported"] for n in TOOLS[:2])
    prevents = sum(summary[n]["file_mode_prevents"] for n in TOOLS[:2])
    lines += [
        "",
        "- search probes: pytest-isolation's `isolation: probe N:` lines (files first, then "
        "the tests of the file found; each stage ends with a confirming probe); "
        "detect-test-pollution's `running step N:` lines (plain bisection of the test list).",
        f"- fixed runs: pytest-isolation {', '.join(ISOLATION_FIXED)}; detect-test-pollution "
        f"{', '.join(DTP_FIXED)}. pytest-isolation's own `pytest` process, which drives the "
        "search, is one more pytest start-up (it configures no session); "
        "detect-test-pollution's driver is a plain Python process.",
        "- pytest sessions: counted by a `conftest.py` in the suite that logs every configured "
        "session; checked to equal search probes + fixed runs.",
        f"- pytest-isolation's leak report named `os.environ['POLLUTED']` in "
        f"{leaks} of {2 * runs} runs, and its file-mode check said `--isolation-mode=file "
        f"prevents it` in {prevents} of {2 * runs}.",
    ]
    lines += [
        "",
        "Where the time goes (medians over the rounds, seconds; from when each tool's progress "
        "lines arrived, so the three parts need not add up to the median total):",
        "",
        "| tool | before the search | search | probe rounds | search / probe | search / round "
        "| after the search |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in TOOLS:
        e = summary[name]
        lines.append(
            f"| {name} | {e['before']:.2f} | {e['search']:.2f} | {_span(e['rounds'])} | "
            f"{e['search_per_probe']:.2f} | {e['search_per_round']:.2f} | {e['after']:.2f} |"
        )
    lines += [
        "",
        "- before the search: the tool's own start-up, collection, the victim alone and all "
        "preceding tests + victim (pytest-isolation: until `...: bisecting`; "
        "detect-test-pollution: until `running step 1:`).",
        "- search: the probes (until `isolation: polluter:` / `double checking we found it...`). "
        "probe rounds: sequential batches of probes (with N=2 up to two run at a time; told "
        f"apart by their lines arriving more than {ROUND_GAP:g} s apart); search / probe and "
        "search / round are wall time.",
        "- after the search: pytest-isolation's leak report and file-mode check, and printing the "
        "answer; detect-test-pollution's double check.",
    ]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=DEFAULT_WORKDIR,
        help="the suite is generated in WORKDIR/finder (default benchmarks/.work)",
    )
    parser.add_argument("--json", type=Path, help="also write raw times and counts as JSON")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return args


def progress(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def bench(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    root = args.workdir.resolve() / "finder"
    log = args.workdir.resolve() / "finder-sessions.jsonl"
    generate(root)
    env, removed = build_env()
    meta = collect_meta(env, removed)
    cmds = commands(dtp_executable())
    names = [*TOOLS, *REFERENCES]

    progress("warm-up: pytest: whole suite (untimed)")
    check("pytest: whole suite", run(cmds["pytest: whole suite"], root, env, log))

    results: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for index in range(args.runs):
        order = names[index % len(names) :] + names[: index % len(names)]
        for name in order:
            result = run(cmds[name], root, env, log)
            row = check(name, result)
            row["seconds"] = result["seconds"]
            if name in TOOLS:
                row.update(phases(name, result))
            row["round"] = index + 1
            row["position"] = order.index(name) + 1
            results[name].append(row)
            extra = f", {row['probes']} probes" if "probes" in row else ""
            progress(f"round {index + 1}/{args.runs}: {name}: {result['seconds']:.2f} s{extra}")
    if log.exists():
        log.unlink()
    settings = {"runs": args.runs, "suite": str(root), "commands": cmds, "timeout": TIMEOUT}
    return meta, settings, {"rounds": results, "summary": summarize(results)}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        meta, settings, data = bench(args)
    except BenchError as error:
        progress(f"bench_finder: FAILED: {error}")
        return 1
    sys.stdout.write(render(meta, data["summary"], args.runs))
    if args.json:
        payload = {"meta": meta, "settings": settings, **data}
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
