"""Ground truth for the test-selector benchmark, measured on real suites.

For each case (a real project's source file and, optionally, one of its functions) it
measures, independently of the plugin and its selector:

* ``executes``: the test files whose run executes the function (for a whole-file case: any
  function of the file).  Each test file runs alone in a fresh interpreter,
  ``VENV_PYTHON -m pytest -p no:isolation -q -p no:cacheprovider -p truthrec OPTIONS FILE``
  in (a copy of) the project's tree, where ``truthrec`` is a small plugin written by this
  script to a temporary folder on ``PYTHONPATH``: it registers a ``sys.monitoring`` tool
  (Python 3.12+) for ``PY_START`` events, notes each started code object's
  ``(co_filename, co_firstlineno)`` once (the callback returns ``DISABLE``) and writes them
  as JSON at ``pytest_unconfigure``.  A code object is mapped, with ``ast``, to the
  innermost ``def`` / ``async def`` whose span (first decorator line to ``end_lineno``)
  holds its first line; code outside every function (module and class bodies) does not
  count.
* ``fails_when_broken`` (single-function cases only): the test files with a test that fails
  when the function's body is replaced by ``raise RuntimeError("broken by truth")`` (its
  signature kept).  Every test file runs again, one per fresh interpreter, with the broken
  function; a test counts when its junit outcome is a failure or error there and was not
  in the unbroken run of the same file (so tests that already fail do not count), as does
  a broken run without junit or killed by the timeout.  The file that the suite actually
  imports is broken (the tree's copy for rich, which imports ``rich`` from its tree; the
  venv's installed copy for src layouts such as attrs and structlog) and is always
  restored, also on error or interruption (a restore record in ``WORK/truth`` covers a
  killed run).  The rest of the body becomes blank lines, so no other line moves.

Each case of the output (a JSON list) has ``project``, ``version``, ``tree`` (the pristine
tree the keys are relative to), ``source``, ``function`` (null: the whole file),
``executes``, ``fails_when_broken`` (null for a whole-file case) and ``test_files`` (how
many test files ran), and details: ``executes_beyond_import`` (``executes`` without the
functions that merely importing the project's packages runs, measured with the recorder in
``python -c "import PKG"``; ``executed_at_import`` names them), ``imported_from`` (``tree``
or the installed file), ``failing_tests`` (per file, the tests that only fail broken),
``broken_run_executes`` (the files that started the broken function: a sanity check) and
``caveats`` (test files that fail unbroken, files pytest does not collect, project modules
imported before the recorder started).

The venvs, trees and suite arguments are those of ``benchmarks/real_suites.py`` (imported
from it): build them first with Python 3.12, e.g.::

    python benchmarks/real_suites.py --python PYTHON312 --work WORK312 \
        --projects attrs --projects rich --projects structlog --modes plain --runs 1 --plugin .

then::

    python benchmarks/recorded_truth.py --work WORK312 \
        --out benchmarks/recorded_truth.json [--functions-out functions.json]

where ``PYTHON312`` is a Python 3.12 interpreter and ``WORK312`` defaults, here and in
``bench_recorded.py --python 3.12``, to ``pytest-isolation-realsuites312`` under
``$PYTEST_ISOLATION_BENCH_WORK``, else under the system temp directory.

Each project's pristine tree is copied to ``WORK/truth/<project>/tree-N`` (one copy per job)
and the suite runs there; the test files are those that pytest would collect from the
suite's test paths (``test_*.py`` / ``*_test.py``).  ``--functions-out`` writes, per
project and test file, every function of the project's source that the file executes (what
the cases were chosen from).  Standard library only; no network.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import fnmatch
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # work directories
import real_suites  # the harness: projects, venvs, trees, environment

#: Where ``real_suites.py --python PYTHON312 --work WORK312`` built the Python 3.12 venvs.
DEFAULT_WORK = _machine.work_dir("realsuites312")
BROKEN_BODY = 'raise RuntimeError("broken by truth")'
TOOL_ID = 3
# pytest's default norecursedirs, and folders that never hold tests.
NORECURSE: tuple[str, ...] = ("*.egg", ".*", "_darcs", "build", "CVS", "dist", "node_modules")
NORECURSE += ("venv", "{arch}", "__pycache__")
FAILING = frozenset({"failed", "error"})

PLUGIN_SOURCE = f'''\
"""truthrec: which code objects a pytest run starts (written by recorded_truth.py)."""

import json
import os
import sys

_TOOL = {TOOL_ID}
_PREFIXES = tuple(json.loads(os.environ["TRUTHREC_PREFIXES"]))
_SEEN = set()
_PRELOADED = sorted(
    name
    for name, module in list(sys.modules.items())
    if str(getattr(module, "__file__", None) or "").startswith(_PREFIXES)
)


def _start(code, offset):
    if code.co_filename.startswith(_PREFIXES):
        _SEEN.add((code.co_filename, code.co_firstlineno))
    return sys.monitoring.DISABLE


sys.monitoring.use_tool_id(_TOOL, "truthrec")
sys.monitoring.register_callback(_TOOL, sys.monitoring.events.PY_START, _start)
sys.monitoring.set_events(_TOOL, sys.monitoring.events.PY_START)


def pytest_unconfigure(config):
    sys.monitoring.set_events(_TOOL, 0)
    data = {{"executed": sorted(_SEEN), "preloaded": _PRELOADED}}
    with open(os.environ["TRUTHREC_OUT"], "w") as f:
        json.dump(data, f)
'''


@dataclasses.dataclass(frozen=True)
class Case:
    project: str
    source: str  # relative to the tree's top, POSIX
    function: str | None  # qualified name; None: the whole file


CASES: tuple[Case, ...] = (
    Case("attrs", "src/attr/validators.py", None),
    # Chosen from the recorded data: functions that 2-10 test files execute.
    Case("rich", "rich/columns.py", "Columns.__rich_console__"),
    Case("rich", "rich/text.py", "Text.highlight_words"),
    Case("rich", "rich/rule.py", "Rule.__rich_console__"),
    Case("structlog", "src/structlog/processors.py", "TimeStamper.__call__"),
    Case("structlog", "src/structlog/dev.py", "ConsoleRenderer.__call__"),
)


@dataclasses.dataclass
class FileRun:
    """One test file's run: its tests' outcomes and the code objects it started."""

    code: int | None  # exit code; None: killed at the timeout
    outcomes: dict[str, str] | None  # test id -> outcome; None: no junit XML
    executed: list[tuple[str, int]]  # (real co_filename, co_firstlineno)
    preloaded: list[str]
    wall: float


@dataclasses.dataclass
class Setup:
    """A project ready to run: its venv, its pristine tree and the copies the jobs use."""

    project: real_suites.Project
    py: Path
    pristine: Path
    trees: list[Path]
    purelib: Path
    packages: list[str]  # the project's top-level packages, as installed in the venv
    randomly: bool  # pytest-randomly is installed: pin the order
    test_paths: list[str]
    options: list[str]
    env: dict[str, str]
    plugin_dir: Path
    out_dir: Path


def log(message: str) -> None:
    print(f"[recorded_truth] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- functions


@dataclasses.dataclass(frozen=True)
class Function:
    qualname: str
    start: int  # first decorator line, or the def line
    end: int
    node: ast.FunctionDef | ast.AsyncFunctionDef


def functions_of(source: str) -> list[Function]:
    """Every def / async def of a module, with its qualified name and line span."""
    found: list[Function] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                qualname = prefix + child.name
                lines = [child.lineno, *(d.lineno for d in child.decorator_list)]
                end = child.end_lineno or child.lineno
                found.append(Function(qualname, min(lines), end, child))
                visit(child, qualname + ".<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


class FunctionIndex:
    """(file, line) -> innermost enclosing function, per file, parsed once."""

    def __init__(self) -> None:
        self._cache: dict[Path, list[Function]] = {}

    def functions(self, path: Path) -> list[Function]:
        if path not in self._cache:
            self._cache[path] = functions_of(path.read_text(encoding="utf-8"))
        return self._cache[path]

    def enclosing(self, path: Path, line: int) -> str | None:
        best: Function | None = None
        for function in self.functions(path):
            if function.start <= line <= function.end and (
                best is None or function.start > best.start
            ):
                best = function
        return best.qualname if best else None


# --------------------------------------------------------------------------- set-up


def find_test_files(tree: Path, test_paths: Sequence[str]) -> list[str]:
    """The files pytest collects from the suite's paths: test_*.py and *_test.py."""
    found: set[str] = set()
    for top in test_paths:
        base = tree / top
        if base.is_file():
            found.add(top)
            continue
        for folder, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if not any(fnmatch.fnmatch(d, p) for p in NORECURSE))
            for name in files:
                if fnmatch.fnmatch(name, "test_*.py") or fnmatch.fnmatch(name, "*_test.py"):
                    found.add((Path(folder) / name).relative_to(tree).as_posix())
    return sorted(found)


def prepare(work: Path, name: str, jobs: int) -> Setup:
    project = next((p for p in real_suites.PROJECTS if p.name == name), None)
    if project is None:
        raise SystemExit(f"unknown project {name!r} (not in real_suites.PROJECTS)")
    py = real_suites.venv_python(work, project)
    pristine = real_suites.pristine_tree(work, project)
    if not py.is_file() or not pristine.is_dir():
        raise SystemExit(f"{name}: no venv or tree under {work}: run real_suites.py first")
    version = subprocess.run(
        [str(py), "-c", "import sys; print(sys.version_info >= (3, 12))"],
        capture_output=True,
        text=True,
        check=True,
    )
    if version.stdout.strip() != "True":
        raise SystemExit(f"{name}: {py} is older than Python 3.12 (no sys.monitoring)")
    purelib = Path(
        real_suites.run_checked(
            [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
        ).strip()
    )
    roots = [pristine / "src"] if (pristine / "src").is_dir() else [pristine]
    packages = sorted(
        d.name
        for root in roots
        for d in root.iterdir()
        if (d / "__init__.py").is_file() and (purelib / d.name).is_dir()
    )
    out_dir = work / "truth" / name
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    trees = []
    for number in range(jobs):
        tree = out_dir / f"tree-{number}"
        shutil.copytree(pristine, tree, symlinks=True)
        trees.append(tree)
    plugin_dir = out_dir / "plugin"
    plugin_dir.mkdir()
    (plugin_dir / "truthrec.py").write_text(PLUGIN_SOURCE)
    env = {**real_suites.base_env(work), **dict(project.env)}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(plugin_dir), env.get("PYTHONPATH", "")) if p
    )
    paths = [a for a in project.args if not a.startswith("-") and (pristine / a).exists()]
    options = [a for a in project.args if a not in paths]
    probe = "import importlib.util as u; print(u.find_spec('pytest_randomly') is not None)"
    randomly = real_suites.run_checked([py, "-c", probe]).strip() == "True"
    options += ["-p", "no:randomly"] if randomly else []
    return Setup(
        project,
        py,
        pristine,
        trees,
        purelib,
        packages,
        randomly,
        paths,
        options,
        env,
        plugin_dir,
        out_dir,
    )


def suite_files(work: Path, setup: Setup, timeout: float) -> tuple[list[str], list[str]]:
    """The test files: those the file-name patterns match that pytest collects (the
    harness's ``--collect-only`` listing, which honours ``collect_ignore``), and notes on
    the files only one of the two lists has."""
    ctx = real_suites.Context(work, timeout, setup.randomly)
    out = setup.out_dir / "collect.txt"
    args = (setup.project, setup.py, setup.trees[0], setup.env, out)
    collected, problem = real_suites.test_files(ctx, *args)
    if problem:
        raise SystemExit(f"{setup.project.name}: {problem} (see {out})")
    matched = find_test_files(setup.pristine, setup.test_paths)
    notes = [
        f"{f}: matches the test file patterns but pytest collects nothing from it"
        for f in matched
        if f not in collected
    ]
    notes += [f"{f}: collected, but not a test_*.py file" for f in collected if f not in matched]
    return sorted(set(matched) & set(collected)), notes


def recorder_env(setup: Setup, tree: Path, record: Path) -> dict[str, str]:
    """The environment of a recorded run in ``tree``: what the recorder watches, where it
    writes."""
    prefixes = [str(tree.resolve()) + os.sep]
    for lib in dict.fromkeys((setup.purelib, setup.purelib.resolve())):
        prefixes += [str(lib / package) + os.sep for package in setup.packages]
    return {**setup.env, "TRUTHREC_OUT": str(record), "TRUTHREC_PREFIXES": json.dumps(prefixes)}


def read_record(record: Path) -> tuple[list[tuple[str, int]], list[str]]:
    executed: list[tuple[str, int]] = []
    preloaded: list[str] = []
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(record.read_text())
        executed = [(os.path.realpath(f), int(line)) for f, line in data["executed"]]
        preloaded = list(data["preloaded"])
    return executed, preloaded


# --------------------------------------------------------------------------- runs


def outcome_of(case: ET.Element) -> str:
    tags = {child.tag for child in case}
    if "error" in tags:
        return "error"
    if "failure" in tags:
        return "failed"
    if "skipped" in tags:
        return "skipped"
    return "passed"


def parse_junit(path: Path) -> dict[str, str]:
    outcomes: dict[str, str] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        test = f"{case.get('classname', '')}::{case.get('name', '')}"
        key, number = test, 1
        while key in outcomes:
            number += 1
            key = f"{test} #{number}"
        outcomes[key] = outcome_of(case)
    return outcomes


def run_file(setup: Setup, tree: Path, test_file: str, tag: str, timeout: float) -> FileRun:
    """One test file in a fresh interpreter, in ``tree``, with the recorder loaded."""
    stem = test_file.replace("/", "__")
    run_dir = setup.out_dir / tag
    run_dir.mkdir(exist_ok=True)
    junit, record, out = (run_dir / f"{stem}.{ext}" for ext in ("xml", "json", "txt"))
    for path in (junit, record):
        path.unlink(missing_ok=True)
    env = recorder_env(setup, tree, record)
    cmd = [str(setup.py), "-m", "pytest", "-p", "no:isolation", "-q", "-p", "no:cacheprovider"]
    cmd += ["-p", "truthrec", *setup.options, test_file, f"--junitxml={junit}"]
    start = time.perf_counter()
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            cmd, cwd=tree, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
    wall = time.perf_counter() - start
    outcomes: dict[str, str] | None
    try:
        outcomes = parse_junit(junit)
    except (OSError, ET.ParseError):
        outcomes = None
    executed, preloaded = read_record(record)
    return FileRun(code, outcomes, executed, preloaded, wall)


def import_baseline(setup: Setup) -> FileRun:
    """What merely importing the project's packages executes (same interpreter set-up,
    without pytest): the functions that every test file importing the project runs."""
    record = setup.out_dir / "import.json"
    names = ", ".join(repr(p) for p in setup.packages)
    code = "import importlib, truthrec\n"
    code += f"for name in ({names},):\n    importlib.import_module(name)\n"
    code += "truthrec.pytest_unconfigure(None)\n"
    env = recorder_env(setup, setup.trees[0], record)
    cmd = [str(setup.py), "-c", code]
    subprocess.run(cmd, cwd=setup.trees[0], env=env, check=True, capture_output=True)
    executed, preloaded = read_record(record)
    return FileRun(0, {}, executed, preloaded, 0.0)


def run_all(setup: Setup, files: Sequence[str], tag: str, timeout: float) -> dict[str, FileRun]:
    """Every test file, one per fresh interpreter, ``len(setup.trees)`` at a time (each job
    in its own copy of the tree)."""
    free: queue.Queue[Path] = queue.Queue()
    for tree in setup.trees:
        free.put(tree)

    def one(test_file: str) -> FileRun:
        tree = free.get()
        try:
            return run_file(setup, tree, test_file, tag, timeout)
        finally:
            free.put(tree)

    start = time.perf_counter()
    pool = ThreadPoolExecutor(max_workers=len(setup.trees))
    try:
        results = dict(zip(files, pool.map(one, files), strict=True))
    finally:
        pool.shutdown(cancel_futures=True)  # interrupted: the files not started yet
    log(f"{setup.project.name} [{tag}]: {len(files)} files in {time.perf_counter() - start:.0f}s")
    return results


# --------------------------------------------------------------------------- mapping


class KeyMapper:
    """A started code object's real path -> the source key (relative to the tree's top)."""

    def __init__(self, setup: Setup) -> None:
        self.setup = setup
        self.trees = [tree.resolve() for tree in setup.trees]

    def key(self, filename: str) -> tuple[str, str] | None:
        """(key, origin): origin is "tree" (the run's tree copy) or the installed file."""
        path = Path(filename)
        for tree in self.trees:
            if path.is_relative_to(tree):
                return path.relative_to(tree).as_posix(), "tree"
        purelib = self.setup.purelib.resolve()
        if path.is_relative_to(purelib):
            rel = path.relative_to(purelib).as_posix()
            for prefix in ("src/", ""):
                if (self.setup.pristine / prefix / rel).is_file():
                    return prefix + rel, str(path)
        return None

    def is_test_code(self, key: str) -> bool:
        return any(key == p or key.startswith(p.rstrip("/") + "/") for p in self.setup.test_paths)


def executed_functions(
    setup: Setup, runs: dict[str, FileRun], index: FunctionIndex
) -> tuple[dict[str, set[tuple[str, str]]], dict[str, set[str]]]:
    """Per test file, the (source key, qualname) of every project function it executed;
    and per source key, where it was imported from."""
    mapper = KeyMapper(setup)
    per_file: dict[str, set[tuple[str, str]]] = {}
    origins: dict[str, set[str]] = {}
    for test_file, run in runs.items():
        done: set[tuple[str, str]] = set()
        for filename, line in run.executed:
            mapped = mapper.key(filename)
            if mapped is None or mapper.is_test_code(mapped[0]) or not filename.endswith(".py"):
                continue
            key, origin = mapped
            origins.setdefault(key, set()).add(origin)
            qualname = index.enclosing(setup.pristine / key, line)
            if qualname is not None:
                done.add((key, qualname))
        per_file[test_file] = done
    return per_file, origins


# --------------------------------------------------------------------------- breaking


def broken_source(source: str, qualname: str) -> str:
    """``source`` with the body of the function ``qualname`` replaced by the raise (and
    blank lines, so that no other line moves)."""
    matches = [f for f in functions_of(source) if f.qualname == qualname]
    if len(matches) != 1:
        raise RuntimeError(f"{qualname}: {len(matches)} functions of that name, want 1")
    node = matches[0].node
    first, last = node.body[0], node.body[-1]
    lines = source.splitlines(keepends=True)
    if last.end_lineno is None or last.end_col_offset is None:
        raise RuntimeError(f"{qualname}: no end position")
    head = "".join(lines[: first.lineno - 1]) + lines[first.lineno - 1][: first.col_offset]
    # The end offsets count UTF-8 bytes.
    tail_line = lines[last.end_lineno - 1].encode()[last.end_col_offset :].decode()
    # Blank lines in place of the rest of the body: every other line keeps its number (the
    # broken runs' code objects map to the same functions).
    filler = "\n" * (last.end_lineno - first.lineno)
    text = head + BROKEN_BODY + filler + tail_line + "".join(lines[last.end_lineno :])
    if text.count("\n") != source.count("\n"):
        raise RuntimeError(f"{qualname}: breaking it moved lines")
    ast.parse(text)
    return text


class Restorer:
    """Breaks files and puts them back; a record on disk survives a killed run."""

    def __init__(self, work: Path) -> None:
        self.record = work / "truth" / "restore.json"
        self.backups = work / "truth" / "backups"
        self.pending: dict[str, str] = {}

    def recover(self) -> None:
        """Restore what a killed earlier run left broken."""
        if not self.record.is_file():
            return
        for target, backup in json.loads(self.record.read_text()).items():
            log(f"restoring {target} left broken by an earlier run")
            shutil.copy2(backup, target)
        self.record.unlink()

    @contextlib.contextmanager
    def broken(self, targets: Sequence[Path], qualname: str, stamp: int) -> Iterator[None]:
        self.backups.mkdir(parents=True, exist_ok=True)
        try:
            for number, target in enumerate(targets):
                backup = self.backups / f"{number}-{target.name}"
                shutil.copy2(target, backup)
                self.pending[str(target)] = str(backup)
                self.record.write_text(json.dumps(self.pending))
                original = target.stat()
                target.write_text(broken_source(target.read_text(encoding="utf-8"), qualname))
                # A modification time of its own: the bytecode cached for another broken
                # version (same size, same second) can never be taken for this one.
                fake = original.st_mtime + 86400 * (stamp + 1)
                os.utime(target, (fake, fake))
            yield
        finally:
            for name, saved in list(self.pending.items()):
                shutil.copy2(saved, name)  # the original bytes and modification time
                del self.pending[name]
            self.record.unlink(missing_ok=True)


def newly_failing(before: FileRun, after: FileRun) -> list[str]:
    """Tests failing in the broken run that did not fail unbroken (or why the run counts)."""
    if after.code is None and before.code is not None:
        return ["<killed at the timeout>"]
    if after.outcomes is None:
        return [] if before.outcomes is None else ["<no junit XML>"]
    old = before.outcomes or {}
    return sorted(
        test
        for test, outcome in after.outcomes.items()
        if outcome in FAILING and old.get(test) not in FAILING
    )


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument(
        "--work", type=Path, default=DEFAULT_WORK, help=_machine.work_help(DEFAULT_WORK)
    )
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("recorded_truth.json"))
    parser.add_argument("--functions-out", type=Path, help="per test file, functions executed")
    parser.add_argument("--jobs", type=int, default=2, help="test files run at a time")
    parser.add_argument("--timeout", type=float, default=600.0, help="per test file (s)")
    parser.add_argument("--projects", nargs="*", help="only these projects' cases")
    parser.add_argument("--no-break", action="store_true", help="skip the break experiments")
    return parser.parse_args(argv)


def exit_on_sigterm() -> None:
    """SIGTERM raises SystemExit, so that broken files are restored (``finally``)."""

    def handler(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    args.work = args.work.resolve()
    exit_on_sigterm()
    restorer = Restorer(args.work)
    restorer.recover()
    names = list(dict.fromkeys(c.project for c in CASES))
    names = [n for n in names if not args.projects or n in args.projects]
    output: list[dict[str, Any]] = []
    functions_dump: dict[str, Any] = {}
    for name in names:
        setup = prepare(args.work, name, args.jobs)
        index = FunctionIndex()
        files, notes = suite_files(args.work, setup, args.timeout)
        log(f"{name}: {len(files)} test files, packages {setup.packages}")
        at_import = executed_functions(setup, {"": import_baseline(setup)}, index)[0][""]
        base = run_all(setup, files, "unbroken", args.timeout)
        per_file, origins = executed_functions(setup, base, index)
        caveats = notes + [
            f"{f}: unbroken run exited {r.code}, failing: "
            + ", ".join(t for t, o in (r.outcomes or {}).items() if o in FAILING)
            for f, r in base.items()
            if r.code not in (0, 5)
        ]
        caveats += [
            f"{f}: project modules imported before the recorder: {r.preloaded}"
            for f, r in base.items()
            if r.preloaded
        ]
        caveats += [f"{f}: recorder wrote nothing" for f, r in base.items() if not r.executed]
        functions_dump[name] = {
            "origins": {k: sorted(v) for k, v in sorted(origins.items())},
            "files": {f: sorted(f"{k}::{q}" for k, q in done) for f, done in per_file.items()},
        }
        for stamp, case in enumerate(c for c in CASES if c.project == name):

            def hits(done: set[tuple[str, str]], case: Case = case) -> set[tuple[str, str]]:
                return {
                    (k, q)
                    for k, q in done
                    if k == case.source and (case.function is None or q == case.function)
                }

            executes = sorted(f for f, done in per_file.items() if hits(done))
            beyond = sorted(f for f, done in per_file.items() if hits(done) - at_import)
            if case.function is not None:
                known = {f.qualname for f in index.functions(setup.pristine / case.source)}
                if case.function not in known:
                    raise SystemExit(f"{case.source}: no function {case.function}")
            entry: dict[str, Any] = {
                "project": name,
                "version": setup.project.version,
                "tree": str(setup.pristine),
                "run_trees": [str(t) for t in setup.trees],
                "source": case.source,
                "function": case.function,
                "imported_from": sorted(origins.get(case.source, ())),
                "executes": executes,
                "fails_when_broken": None,
                "test_files": len(files),
                # Without the functions that merely importing the project runs.
                "executes_beyond_import": beyond,
                "executed_at_import": sorted(q for _, q in hits(at_import)),
            }
            if case.function is not None and not args.no_break:
                where = origins.get(case.source, set())
                if where == {"tree"}:
                    targets = [tree / case.source for tree in setup.trees]
                elif len(where) == 1:
                    targets = [Path(next(iter(where)))]
                    same = targets[0].read_bytes() == (setup.pristine / case.source).read_bytes()
                    entry["installed_copy_identical_to_tree"] = same
                else:
                    raise SystemExit(f"{case.source}: imported from {where or 'nowhere'}")
                tag = f"broken-{stamp}"
                with restorer.broken(targets, case.function, stamp):
                    after = run_all(setup, files, tag, args.timeout)
                failing = {f: newly_failing(base[f], after[f]) for f in files}
                entry["fails_when_broken"] = sorted(f for f, tests in failing.items() if tests)
                entry["failing_tests"] = {f: t for f, t in sorted(failing.items()) if t}
                entry["broken_run_executes"] = sorted(
                    f
                    for f, done in executed_functions(setup, after, index)[0].items()
                    if (case.source, case.function) in done
                )
            entry["caveats"] = caveats
            output.append(entry)
            log(
                f"{name} {case.source} {case.function}: executes {len(executes)}, fails "
                f"{len(entry['fails_when_broken'] or [])} of {len(files)}"
            )
    args.out.write_text(json.dumps(output, indent=1) + "\n")
    if args.functions_out:
        args.functions_out.write_text(json.dumps(functions_dump, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
