"""What a process per test costs: ``--isolation-mode=test`` against pytest-forked and
pytest-isolate, on real suites and on a synthetic one with costly module fixtures.

Runners (every venv has all three plugins installed; each runner blocks the other two with
``-p no:NAME``, so that each run loads one of them, or none):

* ``plain`` -- pytest alone;
* ``isolation`` -- ``--isolation-mode=test`` (the leak guard on, as by default);
* ``isolation, guard off`` -- the same with ``--isolation-leaks=off``: the process per test
  alone, as the other two give it (neither has a leak guard);
* ``pytest-forked`` -- ``--forked``;
* ``pytest-isolate`` -- ``--isolate`` (its own option; it steps aside while pytest-forked is
  loaded, hence ``-p no:forked``).

Suites: ``synthetic`` (written by the script: ``--files`` files of 5 test functions and a
class of 5 test methods; a session fixture, a module fixture sleeping ``--module-ms`` and a
class fixture sleeping a fifth of that, under a function-scoped one), and the suites of
``attrs`` and ``rich`` from ``real_suites.py`` (its pristine trees, with its pytest
arguments for them).  Every suite runs in one venv per pytest (``--pytest``): pytest 9 and
pytest 8.3 by default, each with pytest-forked, pytest-isolate and this plugin (editable)
installed, built once under ``--work``.  pytest-isolation runs in the first venv (with
``--every-venv``, in each); plain and the competitors run in each, since neither
competitor runs on pytest 9.2: their figures come from the pytest 8.3 venv, each runner's
overhead taken against plain of its own venv.

Per suite, one untimed ``plain`` run per venv first (the warm-up, and the count of tests
that pass), then ``--runs`` rounds; each round runs every (venv, runner) once, in an order
that rotates from round to round.  Every run is in a fresh copy of the suite's tree, with
``--junitxml``; a small plugin loaded in every run (``-p bench_pertest_count``) counts the
set-ups of fixtures above function scope, in whichever process they happen.  A runner whose
run is killed at ``--timeout``, writes no junit XML or passes fewer than half the tests
plain passes is *broken* in that venv: its error is reported and it is not run again there.

Reported per suite: the median wall time of each runner; the per-test overhead,
``(median(runner) - median(plain)) / tests`` with plain of the same venv; the ratio of
pytest-isolation's per-test overhead to each competitor's (target: at most 0.5); the
set-ups counted; and every test whose outcome differs from plain's in the same venv and
round (from the junit XML).

    python benchmarks/bench_pertest.py --output benchmarks/results-pertest.md
    python benchmarks/bench_pertest.py --runs 1 --suite synthetic --pytest 9   # quick check

The environment of every run is the caller's less ``PYTEST_ADDOPTS``, ``PYTEST_PLUGINS``,
``PYTEST_DISABLE_PLUGIN_AUTOLOAD`` and ``PYTHONDONTWRITEBYTECODE``, plus
``PYTHONPYCACHEPREFIX=WORK/pycache`` and ``PYTHONHASHSEED=0``, as ``real_suites.py`` runs
them: byte code is written, outside the trees.  The venvs' packages and the plugin are
compiled there beforehand; each run compiles its fresh tree's modules once (the first
process that imports one writes it, the tests' processes forked later read it), as a fresh
checkout would, and every runner alike.  With ``PYTHONDONTWRITEBYTECODE=1`` instead, every
test's process would compile from source each module of the suite that the test is the
first to import (rich imports its Unicode tables lazily): a cost of every process-per-test
runner alike that no developer's machine pays.  Standard library only (it imports
``real_suites`` beside it); building the venvs needs the package index.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime
import json
import os
import platform
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # work directories and interpreters
import real_suites  # projects, trees, junit parsing, process groups

REPO_DIR = Path(__file__).resolve().parent.parent
DEFAULT_WORK = _machine.work_dir("pertest")
#: The venvs, by label: the pytest each has.
PYTESTS = {"9": "pytest>=9,<10", "8.3": "pytest>=8.3,<8.4"}
#: The competitors, pinned: the versions measured.
COMPETITORS = ("pytest-forked==1.7.5", "pytest-isolate==0.0.17")
#: The plugins' entry-point names, as ``-p no:NAME`` takes them.
PLUGINS = {"isolation": "isolation", "forked": "forked", "isolate": "pytest_isolate"}
COUNTER = "bench_pertest_count"
SETUPS_ENV = "BENCH_PERTEST_SETUPS"
TARGET = 0.5
#: Why a competitor is broken on pytest 9, as found by hand (its own message says too little).
CAUSES = {
    "pytest-forked": "its forked child serializes the reports with `marshal`, which cannot "
    "serialize the `NodeId` objects pytest 9.2's reports carry (`ValueError: unmarshallable "
    "object`); the child swallows the exception and exits with status 3, so every test fails "
    "with `running the test EXITED with status 3`.",
    "pytest-isolate": "its child calls `_pytest.warnings.apply_warning_filters`: the function "
    "lives in `_pytest.config`, and pytest 9.2's `_pytest.warnings` no longer imports it.",
}
SCOPES = ("session", "package", "module", "class")


@dataclasses.dataclass(frozen=True)
class Runner:
    name: str
    plugin: str  # a key of PLUGINS, or "" for none
    args: tuple[str, ...]


RUNNERS = [
    Runner("plain", "", ()),
    Runner("isolation", "isolation", ("--isolation-mode=test",)),
    Runner("isolation, guard off", "isolation", ("--isolation-mode=test", "--isolation-leaks=off")),
    Runner("pytest-forked", "forked", ("--forked",)),
    Runner("pytest-isolate", "isolate", ("--isolate",)),
]
BY_NAME = {runner.name: runner for runner in RUNNERS}
OURS = ("isolation", "isolation, guard off")
THEIRS = ("pytest-forked", "pytest-isolate")


def runner_args(runner: Runner) -> list[str]:
    blocked = [name for key, name in PLUGINS.items() if key != runner.plugin]
    return [arg for name in blocked for arg in ("-p", f"no:{name}")] + list(runner.args)


COUNTER_SOURCE = '''\
"""Counts the set-ups of fixtures above function scope, in any process (bench_pertest.py)."""

import os

import pytest

PATH = os.environ.get("BENCH_PERTEST_SETUPS", "")


@pytest.hookimpl(tryfirst=True)  # before pytest's own, which runs the fixture
def pytest_fixture_setup(fixturedef, request):
    if PATH and fixturedef.scope != "function":
        fd = os.open(PATH, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{fixturedef.scope} {fixturedef.argname}\\n".encode())
        finally:
            os.close(fd)
'''

SYNTHETIC_CONFTEST = """\
import time

import pytest


@pytest.fixture(scope="session")
def session_resource():
    time.sleep({seconds!r})
    return {{"ready": True}}
"""

SYNTHETIC_HEAD = """\
import time

import pytest


@pytest.fixture(scope="module")
def module_resource(session_resource):
    time.sleep({seconds!r})  # a costly module fixture: a database, a server, a big file
    return list(range(1000))


@pytest.fixture
def numbers(module_resource):
    return module_resource[:10]
"""

SYNTHETIC_FUNCTION = """

def test_function_{n}(numbers):
    assert sum(numbers) + {n} == 45 + {n}
"""

SYNTHETIC_CLASS_HEAD = """

@pytest.fixture(scope="class")
def class_resource(module_resource):
    time.sleep({seconds!r})
    return len(module_resource)


class TestGroup:
"""

SYNTHETIC_METHOD = """
    def test_method_{n}(self, class_resource, numbers):
        assert class_resource - {n} == 1000 - {n} and len(numbers) == 10
"""


@dataclasses.dataclass(frozen=True)
class Suite:
    name: str
    project: real_suites.Project | None  # None: the synthetic suite
    tree: Path  # pristine
    args: tuple[str, ...]


def write_synthetic(root: Path, files: int, module_ms: float) -> None:
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\n")  # the suite is its own rootdir
    seconds = module_ms / 1000
    (root / "conftest.py").write_text(SYNTHETIC_CONFTEST.format(seconds=seconds))
    for index in range(files):
        text = SYNTHETIC_HEAD.format(seconds=seconds)
        text += "".join(SYNTHETIC_FUNCTION.format(n=n) for n in range(5))
        text += SYNTHETIC_CLASS_HEAD.format(seconds=seconds / 5)
        text += "".join(SYNTHETIC_METHOD.format(n=n) for n in range(5))
        (root / f"test_{index:02d}.py").write_text(text)


def project(name: str) -> real_suites.Project:
    return next(p for p in real_suites.PROJECTS if p.name == name)


def suites(args: argparse.Namespace) -> list[Suite]:
    found = []
    for name in args.suite:
        if name == "synthetic":
            tree = args.work / "synthetic"
            write_synthetic(tree, args.files, args.module_ms)
            found.append(Suite(name, None, tree, ()))
            continue
        proj = project(name)
        tree = real_suites.pristine_tree(args.realsuites, proj)
        if not tree.is_dir():
            sdist = real_suites.fetch_sdist(args.realsuites, args.python, proj)
            source = real_suites.fetch_source(args.realsuites, proj) if proj.source else sdist
            real_suites.extract(source, tree)
        found.append(Suite(name, proj, tree, proj.args))
    return found


# --------------------------------------------------------------------------- venvs


def install_list(args: argparse.Namespace, suite: Suite, label: str) -> list[str]:
    packages = [PYTESTS[label], *COMPETITORS]
    if suite.project is None:
        return packages
    sdist = real_suites.fetch_sdist(args.realsuites, args.python, suite.project)
    return [*real_suites.install_spec(suite.project, sdist), *packages]


def venv(args: argparse.Namespace, suite: Suite, label: str) -> Path:
    """The suite's venv with pytest ``label``, built once (again when its list changes)."""
    root: Path = args.work / "venvs" / f"{suite.name}-pytest{label}"
    py = root / "bin" / "python"
    stamp = root / "bench-pertest-stamp.json"
    packages = install_list(args, suite, label)
    wanted = json.dumps(packages)
    if not args.rebuild and stamp.is_file() and stamp.read_text() == wanted:
        return py
    progress(f"{suite.name}: building the venv with {PYTESTS[label]}")
    shutil.rmtree(root, ignore_errors=True)
    real_suites.run_checked([args.python, "-m", "venv", root])
    real_suites.run_checked([py, "-m", "pip", "install", "-q", *packages])
    real_suites.install_plugin(args.work, py, REPO_DIR)
    stamp.write_text(wanted)
    return py


PURELIB = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
VERSIONS = """\
import importlib.metadata as m, importlib.util as u, json, sys
names = ["pytest", "pytest-isolation", "pytest-forked", "pytest-isolate"]
print(json.dumps({
    "python": sys.version.split()[0],
    **{name: m.version(name) for name in names},
    "plugin_path": u.find_spec("pytest_isolation").origin,
    "randomly": u.find_spec("pytest_randomly") is not None,
}))
"""


def probe(py: Path, env: dict[str, str]) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(real_suites.run_checked([py, "-c", VERSIONS], env=env))
    if not str(found["plugin_path"]).startswith(str(REPO_DIR / "src")):
        raise SystemExit(f"{py} imports pytest_isolation from {found['plugin_path']}")
    return found


def environment(work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in real_suites.SCRUBBED_ENV}
    counter_dir = work / "counter"
    counter_dir.mkdir(parents=True, exist_ok=True)
    (counter_dir / f"{COUNTER}.py").write_text(COUNTER_SOURCE)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(counter_dir), env.get("PYTHONPATH")) if p)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    env["PYTHONHASHSEED"] = "0"
    return env


def precompile(work: Path, py: Path) -> None:
    """Byte code of the venv's packages and of the plugin, in the prefix the runs read."""
    purelib = real_suites.run_checked([py, "-c", PURELIB]).strip()
    real_suites.precompile(work, py, purelib, REPO_DIR / "src")


# --------------------------------------------------------------------------- one run


@dataclasses.dataclass
class Run:
    suite: str
    pytest: str
    runner: str
    round: int  # 0: the warm-up
    wall: float
    cpu: float
    exit_code: int | None
    outcomes: dict[str, real_suites.Outcome]
    setups: dict[str, int]  # scope -> set-ups counted
    problem: str  # why the run failed as a run, else ""
    output: str


@dataclasses.dataclass(frozen=True)
class Venv:
    label: str
    py: Path
    versions: dict[str, Any]


def command(venv: Venv, suite: Suite, runner: Runner, junit: Path) -> list[str]:
    cmd = [str(venv.py), "-m", "pytest", "-p", COUNTER, *runner_args(runner), *suite.args]
    cmd += ["-p", "no:randomly"] if venv.versions["randomly"] else []
    return [*cmd, f"--junitxml={junit}"]


def run_once(
    args: argparse.Namespace, env: dict[str, str], suite: Suite, venv: Venv, runner: Runner, n: int
) -> Run:
    run_dir = args.work / "runs" / suite.name / f"pytest{venv.label}" / f"{slug(runner.name)}-{n}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    tree, junit, out = run_dir / "tree", run_dir / "junit.xml", run_dir / "output.txt"
    setups = run_dir / "setups.txt"
    shutil.copytree(suite.tree, tree, symlinks=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    code = real_suites.execute(
        command(venv, suite, runner, junit), tree, {**env, SETUPS_ENV: str(setups)}, out,
        args.timeout,
    )  # fmt: skip
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    problem = "" if code is not None else f"killed at the {args.timeout:.0f} s timeout"
    try:
        outcomes = real_suites.parse_junit(junit)
    except (OSError, ET.ParseError) as exc:
        outcomes, problem = {}, problem or f"no junit XML ({exc.__class__.__name__})"
    shutil.rmtree(tree, ignore_errors=True)
    counted = collections.Counter(line.split()[0] for line in read_lines(setups))
    return Run(
        suite.name, venv.label, runner.name, n, wall, cpu, code, outcomes, dict(counted),
        problem, str(out),
    )  # fmt: skip


def read_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.is_file() else []


def slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name).strip("-")


def passed(run: Run) -> int:
    return sum(o.kind == "passed" for o in run.outcomes.values())


def broken_because(run: Run, baseline: Run) -> str:
    """Why ``run`` does not count (a problem, or most tests failing), else ""."""
    if run.problem:
        return run.problem
    if passed(run) < passed(baseline) / 2:
        return f"{passed(run)} tests passed, {passed(baseline)} in plain's warm-up"
    return ""


def error_lines(run: Run) -> list[str]:
    """The most common messages of the tests that did not pass, and the output's tail."""
    messages = collections.Counter(
        f"{o.kind}: {o.message}" for o in run.outcomes.values() if o.kind != "passed"
    )
    lines = [f"{count} x {message}" for message, count in messages.most_common(3)]
    tail = [line for line in Path(run.output).read_text(errors="replace").splitlines() if line]
    return [*lines, "output's last lines:", *tail[-3:]]


# --------------------------------------------------------------------------- a suite


@dataclasses.dataclass
class SuiteResult:
    suite: Suite
    venvs: list[Venv]
    runs: list[Run] = dataclasses.field(default_factory=list)
    broken: dict[tuple[str, str], list[str]] = dataclasses.field(default_factory=dict)


def run_suite(args: argparse.Namespace, env: dict[str, str], result: SuiteResult) -> None:
    suite = result.suite
    warm = {}
    for v in result.venvs:
        warm[v.label] = run_once(args, env, suite, v, BY_NAME["plain"], 0)
        result.runs.append(warm[v.label])
        progress(f"{suite.name} pytest {v.label}: warm-up plain {warm[v.label].wall:.1f} s")
        if warm[v.label].problem:
            raise SystemExit(f"plain failed as a run: {warm[v.label].problem}")
    slots = [
        (v, BY_NAME[name])
        for index, v in enumerate(result.venvs)
        for name in args.runner
        if index == 0 or name not in OURS or args.every_venv
    ]
    for n in range(1, args.runs + 1):
        start = (n - 1) % len(slots)
        for v, runner in slots[start:] + slots[:start]:
            if (v.label, runner.name) in result.broken:
                continue
            run = run_once(args, env, suite, v, runner, n)
            why = "" if runner.name == "plain" else broken_because(run, warm[v.label])
            if why:
                result.broken[(v.label, runner.name)] = [why, *error_lines(run)]
            result.runs.append(run)
            status = f"BROKEN: {why}" if why else f"{run.wall:6.1f} s"
            progress(
                f"{suite.name} round {n}/{args.runs}: pytest {v.label} {runner.name:22} {status}"
            )


# --------------------------------------------------------------------------- the report


def timed(result: SuiteResult, label: str, runner: str) -> list[Run]:
    return [
        r
        for r in result.runs
        if r.pytest == label and r.runner == runner and r.round > 0
        and (label, runner) not in result.broken
    ]  # fmt: skip


def median(result: SuiteResult, label: str, runner: str, cpu: bool = False) -> float | None:
    runs = timed(result, label, runner)
    return statistics.median(r.cpu if cpu else r.wall for r in runs) if runs else None


def tests_of(result: SuiteResult, label: str) -> int:
    warm = next(r for r in result.runs if r.pytest == label and r.round == 0)
    return len(warm.outcomes)


def overhead_ms(result: SuiteResult, label: str, runner: str, cpu: bool = False) -> float | None:
    """Per-test overhead against plain of the same venv, in ms (of wall or CPU time)."""
    mine, plain = median(result, label, runner, cpu), median(result, label, "plain", cpu)
    if mine is None or plain is None:
        return None
    return (mine - plain) / tests_of(result, label) * 1000


def setups_cell(result: SuiteResult, label: str, runner: str) -> str:
    counts = {
        " / ".join(str(r.setups.get(scope, 0)) for scope in SCOPES)
        for r in result.runs
        if r.pytest == label and r.runner == runner
    }
    return ", ".join(sorted(counts)) or "-"


def diffs(result: SuiteResult, label: str, runner: str) -> list[tuple[real_suites.TestDiff, int]]:
    """Differences from plain of the same round (plain: from the warm-up), each with the
    number of rounds it was seen in."""
    plains = {r.round: r for r in result.runs if r.pytest == label and r.runner == "plain"}
    seen: dict[tuple[str, str, str], tuple[real_suites.TestDiff, int]] = {}
    for run in result.runs:
        if run.pytest != label or run.runner != runner or run.round == 0:
            continue
        base = plains[0] if runner == "plain" else plains.get(run.round)
        if base is None or base is run:
            continue
        for diff in outcome_diffs(base.outcomes, run.outcomes):
            key = (diff.test, diff.plain, diff.other)
            seen[key] = (seen[key][0], seen[key][1] + 1) if key in seen else (diff, 1)
    return list(seen.values())


def outcome_diffs(
    plain: dict[str, real_suites.Outcome], other: dict[str, real_suites.Outcome]
) -> list[real_suites.TestDiff]:
    """Every test whose outcome differs, or that only one of the runs has."""
    found = []
    for test in sorted(plain.keys() | other.keys()):
        a, b = plain.get(test), other.get(test)
        if a is not None and b is not None and a.kind == b.kind:
            continue
        message = (b.message if b else "") or (a.message if a else "")
        kinds = (a.kind if a else "absent", b.kind if b else "absent")
        found.append(real_suites.TestDiff(test, *kinds, message))
    return found


def fmt(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def suite_table(result: SuiteResult, runners: Sequence[str]) -> list[str]:
    out = [
        "| runner | pytest | median s | min s | max s | CPU s | per-test overhead ms "
        "| per-test CPU ms | ratio to plain | set-ups: session / package / module / class "
        "| tests differing |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for v in result.venvs:
        for name in runners:
            runs = timed(result, v.label, name)
            plain = median(result, v.label, "plain")
            if not runs and (v.label, name) not in result.broken:
                continue  # not run in this venv
            if (v.label, name) in result.broken:
                first = result.broken.get((v.label, name), ["not run"])[0]
                out.append(f"| {name} | {v.versions['pytest']} | BROKEN: {first} ||||||||"
                           f" {setups_cell(result, v.label, name)} | |")  # fmt: skip
                continue
            walls = [r.wall for r in runs]
            mid = statistics.median(walls)
            cpu = statistics.median(r.cpu for r in runs)
            ratio = mid / plain if plain else None
            extra = "-" if name == "plain" else fmt(overhead_ms(result, v.label, name), 1)
            extra_cpu = "-" if name == "plain" else fmt(overhead_ms(result, v.label, name, True), 1)
            out.append(
                f"| {name} | {v.versions['pytest']} | {mid:.2f} | {min(walls):.2f} "
                f"| {max(walls):.2f} | {cpu:.1f} | {extra} | {extra_cpu} | {fmt(ratio)} "
                f"| {setups_cell(result, v.label, name)} | {len(diffs(result, v.label, name))} |"
            )
    return out


def ratio_rows(result: SuiteResult, runners: Sequence[str]) -> list[str]:
    """pytest-isolation's per-test overhead over each competitor's: in the same venv, or,
    where the competitor is broken there, against it in each venv where it runs."""
    labels = [v.label for v in result.venvs]
    rows = []
    for ours, a in ((r, a) for r in OURS if r in runners for a in labels):
        mine = overhead_ms(result, a, ours)
        for theirs in (r for r in THEIRS if r in runners):
            same = overhead_ms(result, a, theirs) is not None
            for b in [a] if same else [b for b in labels if b != a]:
                other = overhead_ms(result, b, theirs)
                if mine is None or other is None:
                    continue
                value = mine / other if other > 0 else None
                verdict = "n/a" if value is None else "met" if value <= TARGET else "MISSED"
                cpu_mine = overhead_ms(result, a, ours, cpu=True)
                cpu_other = overhead_ms(result, b, theirs, cpu=True)
                cpu_value = cpu_mine / cpu_other if cpu_mine and cpu_other else None
                rows.append(
                    f"| {ours} (pytest {a}) / {theirs} (pytest {b}) | {mine:.1f} "
                    f"| {other:.1f} | {fmt(value)} | {verdict} | {fmt(cpu_mine, 1)} "
                    f"| {fmt(cpu_other, 1)} | {fmt(cpu_value)} |"
                )
    return rows


def diff_lines(result: SuiteResult, runners: Sequence[str], limit: int) -> list[str]:
    out = []
    for v in result.venvs:
        for name in runners:
            found = sorted(diffs(result, v.label, name), key=lambda d: d[0].test)
            if not found:
                if timed(result, v.label, name):
                    out.append(f"- **{name}, pytest {v.versions['pytest']}**: none")
                continue
            if (v.label, name) in result.broken:
                out.append(f"- **{name}, pytest {v.versions['pytest']}**: broken (above), "
                           f"{len(found)} tests differ")  # fmt: skip
                continue
            rounds = len(timed(result, v.label, name)) or 1
            out.append(f"- **{name}, pytest {v.versions['pytest']}**: {len(found)} tests")
            for diff, count in found[:limit]:
                message = f": {diff.message}" if diff.message else ""
                out.append(
                    f"  - `{diff.test}`: {diff.plain} → {diff.other} "
                    f"({count}/{rounds} rounds){message}"
                )
            if len(found) > limit:
                out.append(f"  - … and {len(found) - limit} more (all in `--json`)")
    return out


def report_suite(result: SuiteResult, args: argparse.Namespace) -> list[str]:
    tests = {v.label: tests_of(result, v.label) for v in result.venvs}
    counts = ", ".join(f"{n} (pytest {label})" for label, n in tests.items())
    out = [f"## {result.suite.name}: {counts} tests", ""]
    if result.suite.project is not None:
        out += [f"pytest arguments: `{shlex.join(result.suite.args)}`", ""]
    out += [*suite_table(result, args.runner), ""]
    out += [
        f"Ratio of per-test overheads (target: at most {TARGET}):",
        "",
        "| isolation / competitor | isolation ms | competitor ms | ratio | target "
        "| CPU: isolation ms | competitor ms | ratio |",
        "|---|--:|--:|--:|---|--:|--:|--:|",
        *(ratio_rows(result, args.runner) or ["| n/a ||||||||"]),
        "",
        "*ms*: per-test overhead of wall time (the target's measure); *CPU*: the same of "
        "CPU time (user + system), which other jobs on the machine disturb less, but which "
        "leaves out waiting (the synthetic suite's fixtures sleep).",
        "",
    ]
    for (label, name), lines in result.broken.items():
        out += [f"**{name} broken on pytest {label}**:", "", "```", *lines, "```", ""]
        out += [f"Cause (found by hand): {CAUSES[name]}", ""] if name in CAUSES else []
    out += ["Tests whose outcome differs from plain's (same venv, same round):", ""]
    return [*out, *diff_lines(result, args.runner, args.list_limit), ""]


def header(
    args: argparse.Namespace, results: Sequence[SuiteResult], meta: dict[str, str]
) -> list[str]:
    versions = {v.label: v.versions for r in results for v in r.venvs}
    argv = shlex.join(args.argv)
    out = [
        "# A process per test: pytest-isolation against pytest-forked and pytest-isolate",
        "",
        f"`{argv}`",
        "",
        f"{meta['date']}; pytest-isolation at {meta['commit']}; {meta['platform']}, "
        f"{meta['cpus']} CPUs; load average {meta['load']} at the start, "
        f"{meta['load_end']} at the end; every run with PYTHONPYCACHEPREFIX (byte code "
        "written outside the trees, PYTHONDONTWRITEBYTECODE unset) and PYTHONHASHSEED=0; "
        f"{args.runs} interleaved rounds after one untimed plain run per venv; medians.",
        "",
        "| venv | Python | pytest | pytest-forked | pytest-isolate |",
        "|---|---|---|---|---|",
        *(
            f"| pytest {label} | {v['python']} | {v['pytest']} | {v['pytest-forked']} "
            f"| {v['pytest-isolate']} |"
            for label, v in versions.items()
        ),
        "",
        "| runner | command (in a fresh copy of the suite's tree) |",
        "|---|---|",
        *(
            f"| {r.name} | `python -m pytest -p {COUNTER} "
            f"{shlex.join(runner_args(r))} ARGS --junitxml=…` |"
            for r in RUNNERS
            if r.name in args.runner
        ),
        "",
        f"`-p {COUNTER}` counts the set-ups of fixtures above function scope in every "
        "process (a line per set-up, appended to a file). *per-test overhead*: "
        "`(median(runner) - median(plain)) / tests`, with plain of the same venv. "
        "*CPU s*: user + system time of pytest and the processes it waited for. "
        "A BROKEN runner was run once and not again in that venv.",
        "",
    ]
    return out


def summary(results: Sequence[SuiteResult], runners: Sequence[str]) -> list[str]:
    shown = [r for r in runners if r != "plain"]
    out = [
        "## Per-test overhead, ms",
        "",
        "| suite | pytest | tests | " + " | ".join(shown) + " |",
        "|---|---|--:|" + "--:|" * len(shown),
    ]
    for result in results:
        for v in result.venvs:
            cells = [fmt(overhead_ms(result, v.label, name), 1) for name in shown]
            cells = [
                "broken" if (v.label, name) in result.broken else "-" if cell == "n/a" else cell
                for name, cell in zip(shown, cells, strict=True)
            ]
            out.append(
                f"| {result.suite.name} | {v.versions['pytest']} | {tests_of(result, v.label)} | "
                + " | ".join(cells)
                + " |"
            )
    return [*out, ""]


def git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=REPO_DIR, capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else ""


def meta() -> dict[str, str]:
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "src")
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": (git("rev-parse", "--short", "HEAD") or "?")
        + (" (uncommitted changes in src/)" if dirty else ""),
        "platform": f"{platform.system()} {platform.release()} {platform.machine()}",
        "cpus": str(os.cpu_count()),
        "load": load(),
    }


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def progress(message: str) -> None:
    print(f"[bench_pertest] {message}", file=sys.stderr, flush=True)


def raw(
    args: argparse.Namespace, results: Sequence[SuiteResult], meta_: dict[str, str]
) -> dict[str, Any]:
    return {
        "meta": meta_,
        "settings": {"argv": args.argv, "runs": args.runs, "runner": args.runner},
        "suites": {
            r.suite.name: {
                "args": list(r.suite.args),
                "venvs": {v.label: v.versions for v in r.venvs},
                "broken": {f"{k[1]} @ pytest {k[0]}": lines for k, lines in r.broken.items()},
                "runs": [
                    dataclasses.asdict(run)
                    | {"outcomes": {t: dataclasses.asdict(o) for t, o in run.outcomes.items()}}
                    for run in r.runs
                ],
            }
            for r in results
        },
    }


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="interleaved timed rounds")
    parser.add_argument(
        "--suite", action="append", choices=["synthetic", "rich", "attrs"],
        help="repeatable; default: synthetic, rich, attrs",
    )  # fmt: skip
    parser.add_argument(
        "--runner", action="append", choices=[r.name for r in RUNNERS],
        help="repeatable; plain is always run; default: all",
    )  # fmt: skip
    parser.add_argument(
        "--pytest", action="append", choices=list(PYTESTS), help="venvs; default: 9 and 8.3"
    )
    parser.add_argument(
        "--every-venv", action="store_true",
        help="run pytest-isolation in every venv (default: in the first only; the "
        "competitors run in every venv, plain too)",
    )  # fmt: skip
    parser.add_argument("--files", type=int, default=20, help="synthetic suite: test files")
    parser.add_argument(
        "--module-ms", type=float, default=50.0, help="synthetic suite: module fixture's sleep"
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="limit per run, seconds")
    parser.add_argument(
        "--work", type=Path, default=DEFAULT_WORK, help=_machine.work_help(DEFAULT_WORK)
    )
    parser.add_argument(
        "--realsuites", type=Path, default=real_suites.DEFAULT_WORK,
        help="real_suites.py's work directory: its sdists and pristine trees",
    )  # fmt: skip
    parser.add_argument("--python", default=None, help="the venvs' interpreter (Python 3.11)")
    parser.add_argument("--rebuild", action="store_true", help="build the venvs afresh")
    parser.add_argument("--list-limit", type=int, default=40, help="differences listed per runner")
    parser.add_argument("--output", type=Path, help="also write the Markdown report here")
    parser.add_argument("--json", type=Path, help="also write every run's data here")
    parser.add_argument(
        "--render", type=Path, metavar="JSON",
        help="run nothing: write the report of an earlier run from its --json data",
    )  # fmt: skip
    args = parser.parse_args(argv)
    args.suite = args.suite or ["synthetic", "rich", "attrs"]
    args.runner = ["plain", *(r for r in (args.runner or BY_NAME) if r != "plain")]
    args.pytest = args.pytest or list(PYTESTS)
    args.python = args.python or (
        "" if args.render else _machine.find_python(real_suites.PYTHON_VERSION)
    )
    given = sys.argv[1:] if argv is None else list(argv)
    args.argv = [Path(sys.executable).name, *sys.argv[:1], *given]
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return args


def from_raw(data: dict[str, Any]) -> list[SuiteResult]:
    """The results kept by ``--json``."""
    results = []
    for name, found in data["suites"].items():
        proj = None if name == "synthetic" else project(name)
        suite = Suite(name, proj, Path(), tuple(found["args"]))
        venvs = [Venv(label, Path(), versions) for label, versions in found["venvs"].items()]
        result = SuiteResult(suite, venvs)
        for key, lines in found["broken"].items():
            runner, label = key.split(" @ pytest ")
            result.broken[(label, runner)] = lines
        for run in found["runs"]:
            outcomes = {t: real_suites.Outcome(**o) for t, o in run["outcomes"].items()}
            result.runs.append(Run(**(run | {"outcomes": outcomes})))
        results.append(result)
    return results


def measure(args: argparse.Namespace) -> tuple[list[SuiteResult], dict[str, str]]:
    args.work.mkdir(parents=True, exist_ok=True)
    env = environment(args.work)
    info = meta()
    results = []
    for suite in suites(args):
        venvs = []
        for label in args.pytest:
            py = venv(args, suite, label)
            precompile(args.work, py)
            venvs.append(Venv(label, py, probe(py, env)))
        result = SuiteResult(suite, venvs)
        run_suite(args, env, result)
        results.append(result)
    info["load_end"] = load()
    return results, info


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render:
        data = json.loads(args.render.read_text())
        results, info = from_raw(data), data["meta"]
        args.argv, args.runs, args.runner = (
            data["settings"][k] for k in ("argv", "runs", "runner")
        )
    else:
        results, info = measure(args)
    lines = header(args, results, info) + summary(results, args.runner)
    for result in results:
        lines += report_suite(result, args)
    text = "\n".join(lines)
    print(text)
    if args.output:
        args.output.write_text(text)
    if args.json and not args.render:
        args.json.write_text(json.dumps(raw(args, results, info), indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
