"""The ``recorded`` scope on real suites: accuracy, recording cost and selection time.

Three parts, each run on its own (``--part``); each prints a markdown section and, with
``--json PATH``, writes its raw figures.

``accuracy`` -- precision and recall of ``--isolation-scope=recorded`` against the ground
truth of ``benchmarks/recorded_truth.json`` (made by ``recorded_truth.py``: which test files
execute a function, and which fail when it is broken).  Per project of the truth: a fresh
copy of its pristine tree under ``WORK/accuracy/<python>/<project>`` is made a git repository
(one commit, so ``--isolation-since HEAD`` works), the suite runs once in file mode to record
(``real_suites.py``'s arguments for the project, ``-p isolation --isolation-mode=file
--rootdir=TREE --isolation-report=REPORT``), then, with ``--isolation-dry-run
--isolation-explain --isolation-max-test-files=1000``:

* a whole-file case (``function`` null): ``--isolation-for SOURCE`` with nothing changed,
  against ``executes_beyond_import`` and ``executes``;
* a single-function case: ``_ = 0`` is inserted as the first statement of the function's
  body (after its docstring, same indentation: every later line moves down one), then
  ``--isolation-for SOURCE`` and ``--isolation-since HEAD`` with the recorded scope, and
  ``--isolation-for SOURCE --isolation-scope=impact`` for comparison, each against
  ``executes`` and ``fails_when_broken``; the file is restored after;
* a module-level case per project: ``_BENCH_MODULE_LEVEL = 1`` appended to the project's
  first source, selected with ``--isolation-for``: every test file whose record says it
  loaded the module is expected (the record's own ``deps``, so a check of the selector,
  not of the recorder);
* for a project whose suite imports its code from the tree (rich), one case is also
  selected after recording again *with* the change (the record then saw the current
  content: only git's lines say which function changed).

``--rootdir=TREE`` is added because rich's ``tests/pytest.ini`` otherwise makes ``tests/``
the rootdir: the record then holds only files under ``tests/`` and sits in
``tests/.pytest_cache``, where a selection from the tree's top (the rootdir of
``pyproject.toml``) does not look (see ``results-recorded.md``).

``cost`` -- wall time of the file-mode run (the same arguments, no report) with recording
on (the default, ``auto``) and ``--isolation-record=off``, interleaved (on, off, on, off,
...), ``--runs`` of each, in one copy of the tree per project.  ``--python 3.11`` uses the
Python 3.11 venvs of ``real_suites.py``'s default work directory (sys.monitoring absent:
only modules are recorded), with ``PYTHONPATH`` pointing at this repository's ``src`` so that
the plugin under test is this one whatever those venvs have installed.

``synthetic`` -- a generated project (30 packages of 20 modules, each module importing up
to two others, every package ``__init__`` re-exporting its modules; 1,000 test files, each
importing and calling two functions) in ``WORK/synthetic``: recorded once in file mode,
then ``--isolation-for src/proj/pkg0/mod2.py --isolation-scope=recorded --isolation-dry-run``
``--runs`` times: the median of the header's ms (the selector's own time) and of the
command's wall time.

Run (after ``recorded_truth.py``, with the venvs of ``real_suites.py``; the plugin must be
installed editable from this repository in them, which the script checks)::

    python benchmarks/bench_recorded.py --part accuracy --json acc312.json
    python benchmarks/bench_recorded.py --part cost --projects attrs --projects rich --runs 5
    python benchmarks/bench_recorded.py --part cost --python 3.11 --projects attrs \
        --projects rich --runs 5
    python benchmarks/bench_recorded.py --part synthetic --runs 11 \
        --synthetic-python VENV312/bin/python

The venvs of ``--python 3.12`` are those of ``recorded_truth.py``'s default ``--work``
(``pytest-isolation-realsuites312``), of ``--python 3.11`` those of ``real_suites.py``'s
(``pytest-isolation-realsuites``), each under ``$PYTEST_ISOLATION_BENCH_WORK``, else under the
system temp directory; this script's own ``--work`` defaults to ``pytest-isolation-benchrec``
there.  ``--synthetic-python`` is an interpreter with pytest and this plugin installed
(``VENV312``: a Python 3.12 venv, which records what each test file executes; default: the
interpreter running this script).

Standard library only (it imports ``real_suites`` and ``recorded_truth`` beside it).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # work directories
import real_suites  # the harness: projects, venvs, trees, environment
import recorded_truth  # functions_of: a function's span by qualified name

REPO_DIR = Path(__file__).resolve().parent.parent
TRUTH = Path(__file__).resolve().parent / "recorded_truth.json"
#: Where ``real_suites.py`` built the venvs of each Python (``--python``).
WORKS = {"3.12": recorded_truth.DEFAULT_WORK, "3.11": real_suites.DEFAULT_WORK}
DEFAULT_WORK = _machine.work_dir("benchrec")
HEADER = re.compile(
    r"^isolation: scope=(?P<scope>\S+) sources=\d+ test_files=(?P<n>\d+)/(?P<cap>\d+)"
    r"(?: via (?P<via>[^(]*?))?(?: \((?P<paren>.*)\))?$"
)
RECORD_PAREN = re.compile(
    r"record: (?P<tests>\d+) test files?, (?P<stale>\d+) stale, (?P<unrec>\d+) unrecorded, "
    r"(?P<ms>\d+(?:\.\d+)?) ms"
)
DRY = ("--isolation-dry-run", "--isolation-explain", "--isolation-max-test-files=1000")
INSERTED = "_ = 0"
MODULE_LINE = "_BENCH_MODULE_LEVEL = 1\n"


def log(message: str) -> None:
    print(f"[bench_recorded] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- set-up


@dataclasses.dataclass
class Suite:
    """One project's suite ready to run under one Python."""

    project: real_suites.Project
    py: Path
    env: dict[str, str]
    options: list[str]  # the harness's arguments, and -p no:randomly where installed


def suite(name: str, python: str) -> Suite:
    project = next(p for p in real_suites.PROJECTS if p.name == name)
    work = WORKS[python]
    py = real_suites.venv_python(work, project)
    env = {**real_suites.base_env(work), **dict(project.env)}
    if python == "3.11":  # those venvs' editable install may point at another clone
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_DIR / "src"), env.get("PYTHONPATH", "")) if p
        )
    probe = (
        "import importlib.util as u, sys, pytest_isolation as p; "
        "print(p.__file__, u.find_spec('pytest_randomly') is not None, sys.version_info[:2])"
    )
    out = subprocess.run(
        [str(py), "-c", probe], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    if not Path(out[0]).resolve().is_relative_to((REPO_DIR / "src").resolve()):
        raise SystemExit(f"{py}: pytest_isolation is {out[0]}, not this repository's src")
    options = list(project.args) + (["-p", "no:randomly"] if out[1] == "True" else [])
    return Suite(project, py, env, options)


def fresh_tree(pristine: Path, dest: Path) -> Path:
    """A copy of ``pristine`` at ``dest``, a git repository with one commit."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(pristine, dest, symlinks=True)
    git = ["git", "-c", "user.email=bench@example.invalid", "-c", "user.name=bench"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "pristine"]):
        subprocess.run([*git, *args], cwd=dest, check=True, capture_output=True)
    return dest


def run_pytest(s: Suite, tree: Path, args: Sequence[str], out: Path) -> tuple[int | None, float]:
    code, wall, _ = timed_pytest(s, tree, args, out)
    return code, wall


def timed_pytest(
    s: Suite, tree: Path, args: Sequence[str], out: Path
) -> tuple[int | None, float, float]:
    """Exit code, wall time and CPU time (user + system of the run's processes that were
    waited for: pytest and its file-mode children)."""
    cmd = [str(s.py), "-m", "pytest", *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    code = real_suites.execute(cmd, tree, s.env, out, timeout=900)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return code, wall, cpu


def file_mode_args(s: Suite, tree: Path) -> list[str]:
    return [*s.options, "-p", "isolation", "--isolation-mode=file", f"--rootdir={tree}"]


def summary_line(out: Path) -> str:
    text = out.read_text(errors="replace").splitlines()
    lines = [line for line in text if "==" in line or re.match(r"^\d+ (passed|failed)", line)]
    return lines[-1].strip("= ") if lines else "(no summary)"


# --------------------------------------------------------------------------- selections


@dataclasses.dataclass
class Selection:
    command: str
    files: list[str]
    header: str
    via: str
    stale: int | None
    unrecorded: int | None
    ms: float | None
    why: dict[str, str]
    notes: list[str]  # other isolation: lines (no record, fallbacks, errors)
    code: int

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def select(s: Suite, tree: Path, args: Sequence[str]) -> Selection:
    cmd = [str(s.py), "-m", "pytest", *args]
    done = subprocess.run(cmd, cwd=tree, env=s.env, capture_output=True, text=True, check=False)
    files: list[str] = []
    header, via, notes = "", "", []
    stale = unrecorded = None
    ms = None
    why: dict[str, str] = {}
    for line in (done.stdout + done.stderr).splitlines():
        found = HEADER.match(line)
        if found and not header:
            header, via = line, (found["via"] or "")
            paren = RECORD_PAREN.search(found["paren"] or "")
            if paren:
                stale, unrecorded, ms = int(paren["stale"]), int(paren["unrec"]), float(paren["ms"])
            else:
                tail = re.search(r"(\d+(?:\.\d+)?) ms\)?$", line)
                ms = float(tail[1]) if tail else None
        elif line.startswith("isolation: "):
            explained = re.match(r"isolation: (\S+\.py): (.*)$", line)
            if explained:
                why[explained[1]] = explained[2]
            else:
                notes.append(line)
        elif line.strip().endswith(".py") and " " not in line.strip():
            files.append(line.strip())
    rel = " ".join(a if not a.startswith("/") else os.path.relpath(a, tree) for a in args)
    return Selection(
        f"pytest {rel}", files, header, via, stale, unrecorded, ms, why, notes, done.returncode
    )


def pr(selected: Sequence[str], truth: Sequence[str]) -> dict[str, Any]:
    got, want = set(selected), set(truth)
    hit = got & want
    return {
        "selected": len(got),
        "truth": len(want),
        "precision": len(hit) / len(got) if got else None,
        "recall": len(hit) / len(want) if want else None,
        "extra": sorted(got - want),
        "missed": sorted(want - got),
    }


def insert_statement(text: str, qualname: str) -> str:
    """``text`` with ``_ = 0`` as the first statement of ``qualname``'s body (after its
    docstring), on a line of its own at the body's indentation."""
    matches = [f for f in recorded_truth.functions_of(text) if f.qualname == qualname]
    if len(matches) != 1:
        raise RuntimeError(f"{qualname}: {len(matches)} functions of that name")
    body = matches[0].node.body
    first = body[0]
    doc = (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    )
    lines = text.splitlines(keepends=True)
    indent = " " * first.col_offset
    if first.lineno == matches[0].node.lineno:
        raise RuntimeError(f"{qualname}: body on the def line")
    at = (first.end_lineno or first.lineno) if doc else first.lineno - 1
    return "".join([*lines[:at], f"{indent}{INSERTED}\n", *lines[at:]])


# --------------------------------------------------------------------------- accuracy


def record_run(s: Suite, tree: Path, out_dir: Path, tag: str) -> dict[str, Any]:
    report = out_dir / f"report-{tag}.json"
    out = out_dir / f"record-{tag}.txt"
    args = [*file_mode_args(s, tree), f"--isolation-report={report}"]
    code, wall = run_pytest(s, tree, args, out)
    cache = tree / ".pytest_cache" / "v" / "isolation" / "recorded"
    facts: dict[str, Any] = {"code": code, "wall": wall, "summary": summary_line(out)}
    facts["command"] = "pytest " + " ".join(
        a.replace(str(tree), ".").replace(str(out_dir), "OUT") for a in args
    )
    try:
        record = json.loads(cache.read_text())
        facts["cache_tests"] = len(record["tests"])
        facts["how"] = record["how"]
        facts["cache_bytes"] = cache.stat().st_size
    except (OSError, ValueError, KeyError) as error:
        facts["cache_error"] = repr(error)
        record = None
    try:
        recorded = json.loads(report.read_text()).get("recorded")
        facts["report_tests"] = None if recorded is None else len(recorded["tests"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        facts["report_error"] = repr(error)
    facts["record"] = record
    log(f"{s.project.name} record [{tag}]: {code} in {wall:.1f}s, {facts['summary']}")
    return facts


def deps_of(record: dict[str, Any], entry: dict[str, Any]) -> set[str]:
    """The files an entry of the record (layout 2) depends on: its ``deps``
    is a hexadecimal bit mask over the record's ``files``."""
    mask = int(entry["deps"], 16)
    return {key for bit, (key, _) in enumerate(record["files"]) if mask >> bit & 1}


def loaded_by(record: dict[str, Any] | None, source: str) -> list[str]:
    if record is None:
        return []
    return sorted(t for t, entry in record["tests"].items() if source in deps_of(record, entry))


def rootdir_check(
    s: Suite, pristine: Path, work: Path, case: dict[str, Any]
) -> dict[str, Any] | None:
    """For a suite whose test folder has an ini file of its own (rich's
    ``tests/pytest.ini``), the harness's arguments alone make that folder the
    rootdir: where the record goes then, and what a selection from the tree's top says."""
    inis = ("pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg")
    paths = [a for a in s.project.args if not a.startswith("-") and (pristine / a).is_dir()]
    if not any((pristine / a / ini).is_file() for a in paths for ini in inis):
        return None
    name = s.project.name
    tree = fresh_tree(pristine, work / f"{name}-rootdir")
    args = [*s.options, "-p", "isolation", "--isolation-mode=file"]
    code, wall = run_pytest(s, tree, args, work / f"{name}-rootdir-record.txt")
    caches = sorted(
        str(p.relative_to(tree)) for p in tree.rglob(".pytest_cache/v/isolation/recorded")
    )
    deps: set[str] = set()
    for cache in caches:
        record = json.loads((tree / cache).read_text())
        deps.update(d for entry in record["tests"].values() for d in deps_of(record, entry))
    sel = select(s, tree, [*DRY, "--isolation-scope=recorded", "--isolation-for", case["source"]])
    log(f"{name} rootdir check: record in {caches}")
    return {
        "command": "pytest " + " ".join(args),
        "code": code,
        "wall": wall,
        "records": caches,
        "deps": sorted(deps),
        "selection": sel.to_json(),
    }


def accuracy(python: str, work: Path, projects: Sequence[str]) -> dict[str, Any]:
    cases = [c for c in json.loads(TRUTH.read_text()) if c["project"] in projects]
    results: dict[str, Any] = {"python": python, "projects": {}, "cases": []}
    for name in dict.fromkeys(c["project"] for c in cases):
        s = suite(name, python)
        mine = [c for c in cases if c["project"] == name]
        pristine = Path(mine[0]["tree"])
        out_dir = work / "accuracy" / python / f"{name}-out"
        shutil.rmtree(out_dir, ignore_errors=True)
        out_dir.mkdir(parents=True)
        tree = fresh_tree(pristine, work / "accuracy" / python / name)
        rec = record_run(s, tree, out_dir, "first")
        record = rec.pop("record")
        results["projects"][name] = rec
        rec["rootdir_check"] = rootdir_check(s, pristine, work / "accuracy" / python, mine[0])
        base = [*DRY, "--isolation-scope=recorded"]
        for case in mine:
            source, function = case["source"], case["function"]
            row: dict[str, Any] = {"project": name, "source": source, "function": function}
            path = tree / source
            original = path.read_text()
            if function is None:
                sel = select(s, tree, [*base, "--isolation-for", source])
                impact = select(
                    s, tree, [*DRY, "--isolation-scope=impact", "--isolation-for", source]
                )
                row["recorded_for"] = sel.to_json()
                row["impact_for"] = impact.to_json()
                for key, truth in (
                    ("beyond_import", case["executes_beyond_import"]),
                    ("executes", case["executes"]),
                ):
                    row[f"recorded_for_vs_{key}"] = pr(sel.files, truth)
                    row[f"impact_for_vs_{key}"] = pr(impact.files, truth)
            else:
                try:
                    path.write_text(insert_statement(original, function))
                    ways = {
                        "recorded_for": [*base, "--isolation-for", source],
                        "recorded_since": [*base, "--isolation-since", "HEAD"],
                        "impact_for": [*DRY, "--isolation-scope=impact", "--isolation-for", source],
                    }
                    for way, args in ways.items():
                        sel = select(s, tree, args)
                        row[way] = sel.to_json()
                        row[f"{way}_vs_executes"] = pr(sel.files, case["executes"])
                        row[f"{way}_vs_fails"] = pr(sel.files, case["fails_when_broken"])
                finally:
                    path.write_text(original)
            results["cases"].append(row)
            log(f"{name} {source} {function}: done")
            # Functions of a whole-file case that importing the project runs: a change
            # to one reaches every test file that imports the project.
            for qualname in (case.get("executed_at_import") or []) if function is None else []:
                try:
                    path.write_text(insert_statement(original, qualname))
                    sel = select(s, tree, [*base, "--isolation-for", source])
                    since = select(s, tree, [*base, "--isolation-since", "HEAD"])
                finally:
                    path.write_text(original)
                results["cases"].append(
                    {
                        "project": name,
                        "source": source,
                        "function": f"{qualname} (runs at import)",
                        "recorded_for": sel.to_json(),
                        "recorded_since": since.to_json(),
                        "recorded_for_vs_executes": pr(sel.files, case["executes"]),
                        "recorded_since_vs_executes": pr(since.files, case["executes"]),
                    }
                )
        # A module-level change to the project's first source.
        source = mine[0]["source"]
        path = tree / source
        original = path.read_text()
        try:
            path.write_text(original + MODULE_LINE)
            sel = select(s, tree, [*base, "--isolation-for", source])
            since = select(s, tree, [*base, "--isolation-since", "HEAD"])
        finally:
            path.write_text(original)
        expected = loaded_by(record, source)
        results["cases"].append(
            {
                "project": name,
                "source": source,
                "function": "(module level: " + MODULE_LINE.strip() + " appended)",
                "recorded_for": sel.to_json(),
                "recorded_since": since.to_json(),
                "recorded_for_vs_loaded": pr(sel.files, expected),
                "recorded_since_vs_loaded": pr(since.files, expected),
                "executes_truth": next(c["executes"] for c in mine if c["source"] == source),
            }
        )
        # The record saw the current content: only the tree-imported project can show it
        # (a src layout runs its installed copy, whose content the record keeps).
        seen_now = [c for c in mine if c["function"] and c["imported_from"] == ["tree"]]
        if seen_now:
            case = seen_now[0]
            path = tree / case["source"]
            original = path.read_text()
            try:
                path.write_text(insert_statement(original, case["function"]))
                again = record_run(s, tree, out_dir, "changed")
                again.pop("record")
                row = {
                    "project": name,
                    "source": case["source"],
                    "function": case["function"] + " (recorded after the change)",
                    "record_run": again,
                }
                for way, args in {
                    "recorded_for": [*base, "--isolation-for", case["source"]],
                    "recorded_since": [*base, "--isolation-since", "HEAD"],
                }.items():
                    sel = select(s, tree, args)
                    row[way] = sel.to_json()
                    row[f"{way}_vs_executes"] = pr(sel.files, case["executes"])
                    row[f"{way}_vs_fails"] = pr(sel.files, case["fails_when_broken"])
                results["cases"].append(row)
            finally:
                path.write_text(original)
    return results


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def accuracy_report(results: dict[str, Any]) -> str:
    out = [f"## Accuracy, Python {results['python']}", ""]
    out += ["| project | record run | exit | wall s | how | tests in cache | in report |"]
    out += ["|---|---|---:|---:|---|---:|---:|"]
    for name, rec in results["projects"].items():
        out.append(
            f"| {name} | {rec['summary']} | {rec['code']} | {rec['wall']:.1f} | "
            f"{rec.get('how', rec.get('cache_error'))} | {rec.get('cache_tests')} | "
            f"{rec.get('report_tests', rec.get('report_error'))} |"
        )
    for name, rec in results["projects"].items():
        check = rec.get("rootdir_check")
        if check:
            out += [
                "",
                f"{name} without `--rootdir`: `{check['command']}` (exit {check['code']}) "
                f"wrote the record to {check['records']}, whose entries depend on "
                f"{check['deps']}; then from the tree's top:",
                "",
                f"    {check['selection']['command']}",
                f"    {check['selection']['header']}",
                *[f"    {note}" for note in check["selection"]["notes"]],
            ]
    out += ["", "| case | way | truth | selected | precision | recall | extra | missed |"]
    out += ["|---|---|---|---:|---:|---:|---|---|"]
    for row in results["cases"]:
        label = f"{row['project']} `{row['source']}` {row['function'] or '(whole file)'}"
        for key, value in row.items():
            if "_vs_" not in key:
                continue
            way, truth = key.split("_vs_")
            out.append(
                f"| {label} | {way} | {truth} | {value['selected']} | "
                f"{fmt(value['precision'])} | {fmt(value['recall'])} | "
                f"{', '.join(value['extra']) or '-'} | {', '.join(value['missed']) or '-'} |"
            )
    out += ["", "Headers and notes of each selection:", ""]
    for row in results["cases"]:
        for way in ("recorded_for", "recorded_since", "impact_for"):
            sel = row.get(way)
            if sel:
                out.append(f"- {row['project']} {row['function'] or '(whole file)'} / {way}:")
                out.append(f"  `{sel['header']}`")
                out += [f"  `{note}`" for note in sel["notes"]]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- cost


def cost(python: str, work: Path, projects: Sequence[str], runs: int) -> dict[str, Any]:
    results: dict[str, Any] = {"python": python, "projects": {}}
    for name in projects:
        s = suite(name, python)
        pristine = real_suites.pristine_tree(WORKS[python], s.project)
        tree = fresh_tree(pristine, work / "cost" / python / name)
        out_dir = work / "cost" / python / f"{name}-out"
        shutil.rmtree(out_dir, ignore_errors=True)
        out_dir.mkdir(parents=True)
        args = file_mode_args(s, tree)
        # One run first, not counted: compiles the tree's bytecode, makes the record.
        run_pytest(s, tree, args, out_dir / "warmup.txt")
        walls: dict[str, list[float]] = {"on": [], "off": []}
        cpus: dict[str, list[float]] = {"on": [], "off": []}
        summaries: dict[str, set[str]] = {"on": set(), "off": set()}
        for index in range(runs):
            for mode in ("on", "off"):
                extra = [] if mode == "on" else ["--isolation-record=off"]
                out = out_dir / f"{mode}-{index}.txt"
                code, wall, cpu = timed_pytest(s, tree, [*args, *extra], out)
                walls[mode].append(wall)
                cpus[mode].append(cpu)
                summaries[mode].add(re.sub(r" in [\d.]+s.*", "", summary_line(out)))
                log(f"{python} {name} {mode} #{index}: {wall:.2f}s wall {cpu:.2f}s cpu exit {code}")
        on, off = statistics.median(walls["on"]), statistics.median(walls["off"])
        results["projects"][name] = {
            "walls": walls,
            "median_on": on,
            "median_off": off,
            "ratio": on / off,
            "cpus": cpus,
            "cpu_on": statistics.median(cpus["on"]),
            "cpu_off": statistics.median(cpus["off"]),
            "cpu_ratio": statistics.median(cpus["on"]) / statistics.median(cpus["off"]),
            "summaries": {k: sorted(v) for k, v in summaries.items()},
            "command": "pytest "
            + " ".join(a.replace(str(tree), ".") for a in args)
            + " [--isolation-record=off]",
        }
    return results


def cost_report(results: dict[str, Any]) -> str:
    out = [f"## Recording cost, Python {results['python']}", ""]
    out += ["| project | measure | runs | median on s | median off s | ratio of medians "]
    out[-1] += "| ratio of minimums | on (each) | off (each) |"
    out += ["|---|---|---:|---:|---:|---:|---:|---|---|"]
    for name, r in results["projects"].items():
        for measure, key in (("wall", "walls"), ("cpu", "cpus")):
            on, off = (statistics.median(r[key][mode]) for mode in ("on", "off"))
            low = min(r[key]["on"]) / min(r[key]["off"])
            each = {k: ", ".join(f"{w:.2f}" for w in v) for k, v in r[key].items()}
            out.append(
                f"| {name} | {measure} | {len(r[key]['on'])} | {on:.2f} | {off:.2f} "
                f"| {on / off:.3f} | {low:.3f} | {each['on']} | {each['off']} |"
            )
    for name, r in results["projects"].items():
        out.append(f"\n{name}: `{r['command']}`; outcomes {r['summaries']}")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- synthetic

PACKAGES, MODULES, TESTS = 30, 20, 1000


def generate(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    rng = random.Random(7)
    names = [(p, m) for p in range(PACKAGES) for m in range(MODULES)]
    for p in range(PACKAGES):
        package = root / "src" / "proj" / f"pkg{p}"
        package.mkdir(parents=True)
        exports = "\n".join(f"from .mod{m} import func{m}" for m in range(MODULES))
        (package / "__init__.py").write_text(exports + "\n")
    (root / "src" / "proj" / "__init__.py").write_text("")
    for p, m in names:
        imports = [
            f"from proj.pkg{op} import func{om}"
            for op, om in rng.sample(names, 2)
            if (op, om) < (p, m)  # no cycles: only earlier modules
        ]
        body = "\n".join(imports) + f"\n\n\ndef func{m}():\n    return {p * MODULES + m}\n"
        (root / "src" / "proj" / f"pkg{p}" / f"mod{m}.py").write_text(body)
    tests = root / "tests"
    tests.mkdir()
    for t in range(TESTS):
        (p1, m1), (p2, m2) = rng.sample(names, 2)
        (tests / f"test_{t}.py").write_text(
            f"from proj.pkg{p1} import func{m1} as a\nfrom proj.pkg{p2} import func{m2} as b\n"
            f"\n\ndef test_it():\n    assert a() >= 0\n    assert b() >= 0\n"
        )
    (root / "pytest.ini").write_text("[pytest]\ntestpaths = tests\npythonpath = src\n")


def synthetic(work: Path, py: Path, runs: int) -> dict[str, Any]:
    root = work / "synthetic"
    generate(root)
    env = {k: v for k, v in os.environ.items() if k not in real_suites.SCRUBBED_ENV}
    s = Suite(real_suites.PROJECTS[0], py, env, [])
    source = "src/proj/pkg0/mod2.py"
    code, wall = run_pytest(
        s, root, ["-p", "isolation", "--isolation-mode=file", "-q"], work / "synthetic-record.txt"
    )
    cache = root / ".pytest_cache" / "v" / "isolation" / "recorded"
    log(f"synthetic record: exit {code} in {wall:.1f}s, {cache.stat().st_size} bytes")
    args = [*DRY, "--isolation-scope=recorded", "--isolation-for", source]
    selections, walls = [], []
    for _ in range(runs):
        start = time.perf_counter()
        selections.append(select(s, root, args))
        walls.append(time.perf_counter() - start)
    impact = select(s, root, [*DRY, "--isolation-scope=impact", "--isolation-for", source])
    ms = [sel.ms for sel in selections if sel.ms is not None]
    return {
        "record_exit": code,
        "record_wall": wall,
        "record_summary": summary_line(work / "synthetic-record.txt"),
        "record_bytes": cache.stat().st_size,
        "source": source,
        "selected": len(selections[-1].files),
        "header": selections[-1].header,
        "notes": selections[-1].notes,
        "impact_header": impact.header,
        "ms": ms,
        "walls": walls,
        "median_ms": statistics.median(ms) if ms else None,
        "median_wall": statistics.median(walls),
        "command": f"pytest {' '.join(args)}",
    }


def synthetic_report(r: dict[str, Any]) -> str:
    return "\n".join(
        [
            f"## Warm selection, synthetic project ({PACKAGES * MODULES} modules, {TESTS} "
            "test files)",
            "",
            f"Record: exit {r['record_exit']} in {r['record_wall']:.1f}s ({r['record_summary']}), "
            f"{r['record_bytes']} bytes in the cache.",
            "",
            f"`{r['command']}`, {len(r['walls'])} runs: header ms median "
            f"{fmt(r['median_ms'])} (each: {', '.join(f'{m:g}' for m in r['ms'])}); wall median "
            f"{r['median_wall'] * 1000:.0f} ms (each: "
            f"{', '.join(f'{w * 1000:.0f}' for w in r['walls'])}).",
            "",
            f"    {r['header']}",
            f"    {r['impact_header']}",
            *[f"    {n}" for n in r["notes"]],
        ]
    )


# --------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("accuracy", "cost", "synthetic"), required=True)
    parser.add_argument("--python", choices=tuple(WORKS), default="3.12")
    parser.add_argument("--projects", action="append")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--work", type=Path, default=DEFAULT_WORK, help=_machine.work_help(DEFAULT_WORK)
    )
    parser.add_argument(
        "--synthetic-python",
        type=Path,
        default=Path(sys.executable),
        help="an interpreter with pytest and this plugin (default: the one running this script)",
    )
    parser.add_argument("--json", type=Path)
    options = parser.parse_args(argv)
    options.work.mkdir(parents=True, exist_ok=True)
    if options.part == "accuracy":
        projects = options.projects or ["attrs", "rich", "structlog"]
        results = accuracy(options.python, options.work, projects)
        text = accuracy_report(results)
    elif options.part == "cost":
        results = cost(
            options.python, options.work, options.projects or ["attrs", "rich"], options.runs
        )
        text = cost_report(results)
    else:
        results = synthetic(options.work, options.synthetic_python, options.runs)
        text = synthetic_report(results)
    print(text)
    if options.json:
        options.json.write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
