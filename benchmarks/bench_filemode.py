"""Benchmark of pytest-isolation's file mode against plain pytest and the alternatives.

Generates synthetic test suites, then times, per suite and side by side:

* ``plain``      -- ``python -m pytest -q -p no:cacheprovider SUITE``
* ``fork``       -- the same with ``-p isolation --isolation-mode=file --isolation-start=fork``
* ``fork-preload`` -- ``fork`` with ``--isolation-preload=auto`` (opt-in: the fork server
  imports the libraries the test files import, once)
* ``spawn``      -- the same with ``-p isolation --isolation-mode=file --isolation-start=spawn``
* ``forkserver`` -- the same with ``--isolation-start=forkserver``
* ``auto``       -- file mode with the default start method (``auto``)
* ``auto-thread``-- ``auto`` with a thread started in ``pytest_configure`` by the suite's
  conftest (suites that have one: ``100x5-thread``), so the parent has a live thread
* ``loop``       -- one ``python -m pytest -q -p no:cacheprovider FILE`` per test file, in turn
* ``cleanslate`` -- the same as ``plain`` with ``-p pytest_cleanslate.plugin --cleanslate``
* ``xdist-n2``   -- ``plain`` over two pytest-xdist workers: ``-p xdist -n 2``
* ``fork-n2``    -- ``fork`` over two pytest-xdist workers: ``fork`` plus ``-p xdist -n 2``

Plugin autoloading is off (``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``), so every plugin a mode uses,
pytest-xdist included, is loaded explicitly with ``-p``.

Repetitions are interleaved (every repetition runs every mode once, the starting mode rotating)
and the median wall time per mode is reported, with its ratio to ``plain``, and the ratios of
``fork-n2`` to ``xdist-n2`` and of ``fork`` to ``loop`` when both modes of a pair were run.
See ``benchmarks/README.md``.

Run with the interpreter that has pytest and the plugin installed::

    .venv/bin/python benchmarks/bench_filemode.py [--runs 3] [--suite NAME ...] [--json PATH]

Standard library only: pytest and the plugins are only ever used through subprocesses.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import os
import platform
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
DEFAULT_WORKDIR = BENCH_DIR / ".work"

ALL_MODES = (
    "plain",
    "fork",
    "fork-preload",
    "spawn",
    "forkserver",
    "auto",
    "auto-thread",
    "loop",
    "cleanslate",
    # Over two pytest-xdist workers: the plain baseline first, then file mode.
    "xdist-n2",
    "fork-n2",
)
BASE_ARGS = ("-m", "pytest", "-q", "-p", "no:cacheprovider")
MODE_ARGS: dict[str, tuple[str, ...]] = {
    "plain": (),
    "fork": ("-p", "isolation", "--isolation-mode=file", "--isolation-start=fork"),
    "fork-preload": (
        "-p",
        "isolation",
        "--isolation-mode=file",
        "--isolation-start=fork",
        "--isolation-preload=auto",
    ),
    "spawn": ("-p", "isolation", "--isolation-mode=file", "--isolation-start=spawn"),
    "forkserver": ("-p", "isolation", "--isolation-mode=file", "--isolation-start=forkserver"),
    "auto": ("-p", "isolation", "--isolation-mode=file"),
    "auto-thread": ("-p", "isolation", "--isolation-mode=file"),
    "loop": (),
    "cleanslate": ("-p", "pytest_cleanslate.plugin", "--cleanslate"),
    "xdist-n2": ("-p", "xdist", "-n", "2"),
    "fork-n2": (
        "-p",
        "isolation",
        "--isolation-mode=file",
        "--isolation-start=fork",
        "-p",
        "xdist",
        "-n",
        "2",
    ),
}
#: Modes that need pytest-xdist.
XDIST_MODES = frozenset({"xdist-n2", "fork-n2"})

#: Ratios of one mode's median to another's, reported when both modes were run.
PAIRS: tuple[tuple[str, str], ...] = (("fork-n2", "xdist-n2"), ("fork", "loop"))

#: What a mode adds to the environment: the suite's conftest starts a thread when it is set.
THREAD_ENV = "BENCH_PARENT_THREAD"
MODE_ENV: dict[str, dict[str, str]] = {"auto-thread": {THREAD_ENV: "1"}}

# Environment variables that would change what pytest runs; removed for every mode alike.
SCRUBBED_ENV = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")

TARGET_FORK_RATIO = 2.0
#: A parent with a live thread against the same run without it (issue 17).
TARGET_THREAD_RATIO = 1.2
TARGET_FORK_VS_CLEANSLATE = 0.35

# Last line of a ``-q`` run, e.g. "1000 passed in 2.31s" or "3 failed, 997 passed, 1 warning in
# 2.5s". Older pytest versions wrap it in "=" signs; allow that too.
_SUMMARY_RE = re.compile(r"^=*\s*(?P<counts>\d+ [a-z]+(?:, \d+ [a-z]+)*) in [\d.]+s\b")
_COUNT_RE = re.compile(r"(\d+) ([a-z]+)")
_HARMLESS_OUTCOMES = frozenset({"passed", "warning", "warnings"})


# --------------------------------------------------------------------------- suites


@dataclasses.dataclass(frozen=True)
class Suite:
    name: str
    files: int
    tests_per_file: int
    description: str
    render: Callable[[int, int], str]
    #: The suite's conftest.py, if it has one.
    conftest: str = ""

    @property
    def tests(self) -> int:
        return self.files * self.tests_per_file


def _render_trivial(index: int, tests: int) -> str:
    parts = [f'"""Synthetic trivial test file {index}."""\n']
    for t in range(tests):
        parts.append(f"\n\ndef test_{t}() -> None:\n    assert {index} + {t} == {index + t}\n")
    return "".join(parts)


_IMPORTS_HEADER = '''"""Synthetic test file {index}: a few stdlib imports, tiny work per test."""

import decimal
import email.message
import fractions
import json
'''

_IMPORTS_BODIES = (
    "    data = {{'file': {index}, 'test': {t}, 'items': [1, 2, 3]}}\n"
    "    assert json.loads(json.dumps(data)) == data\n",
    "    total = decimal.Decimal('0.1') * {t} + decimal.Decimal({index})\n"
    "    assert total == decimal.Decimal('{index}') + decimal.Decimal('0.1') * {t}\n",
    "    value = fractions.Fraction({t} + 1, {index} + 2) * ({index} + 2)\n"
    "    assert value == {t} + 1\n",
    "    msg = email.message.EmailMessage()\n"
    "    msg['Subject'] = 'file {index} test {t}'\n"
    "    msg.set_content('body')\n"
    "    assert msg['Subject'].endswith('test {t}')\n",
)


def _renderer(header: str, bodies: tuple[str, ...]) -> Callable[[int, int], str]:
    """A test file of ``header`` and ``tests`` tests, whose bodies take turns."""

    def render(index: int, tests: int) -> str:
        parts = [header.format(index=index)]
        for t in range(tests):
            body = bodies[t % len(bodies)].format(index=index, t=t)
            parts.append(f"\n\ndef test_{t}() -> None:\n{body}")
        return "".join(parts)

    return render


_render_imports = _renderer(_IMPORTS_HEADER, _IMPORTS_BODIES)


_LIBRARY_HEADER = '''"""Synthetic test file {index}: imports rich and pygments."""

import io

from pygments.lexers import PythonLexer
from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table
'''

_LIBRARY_BODIES = (
    "    table = Table('file', 'test')\n"
    "    table.add_row('{index}', '{t}')\n"
    "    out = io.StringIO()\n"
    "    Console(file=out, width=40).print(table)\n"
    "    assert '{t}' in out.getvalue()\n",
    "    syntax = Syntax('x = {index} + {t}', 'python')\n"
    "    out = io.StringIO()\n"
    "    Console(file=out, width=40).print(syntax)\n"
    "    assert '{index}' in out.getvalue()\n",
    "    tokens = list(PythonLexer().get_tokens('y = {t}'))\n"
    "    assert any(value == '{t}' for _, value in tokens)\n",
)


_render_library = _renderer(_LIBRARY_HEADER, _LIBRARY_BODIES)


_THREAD_CONFTEST = f'''"""Starts a thread at configure when {THREAD_ENV} is set (auto-thread)."""

import os
import threading


def pytest_configure(config):
    if os.environ.get("{THREAD_ENV}"):
        threading.Thread(target=threading.Event().wait, daemon=True).start()
'''


SUITES: dict[str, Suite] = {
    s.name: s
    for s in (
        Suite("200x5", 200, 5, "200 files x 5 trivial tests", _render_trivial),
        Suite(
            "50x20",
            50,
            20,
            "50 files x 20 tests; each file imports json, decimal, fractions, email.message",
            _render_imports,
        ),
        Suite(
            "100x5-thread",
            100,
            5,
            "100 files x 5 trivial tests; the conftest starts a thread at configure (auto-thread)",
            _render_trivial,
            _THREAD_CONFTEST,
        ),
        Suite(
            "rich60",
            60,
            15,
            "60 files x 15 tests; each file imports rich and pygments (0.2 s cold) and renders",
            _render_library,
        ),
    )
}


def generate(suite: Suite, workdir: Path) -> Path:
    """(Re)create the suite's directory under *workdir*; return it."""
    root = workdir / suite.name
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    # An empty ini file makes the suite directory pytest's rootdir, away from the repository's
    # own configuration (addopts, filterwarnings, ...).
    (root / "pytest.ini").write_text("")
    if suite.conftest:
        (root / "conftest.py").write_text(suite.conftest)
    width = len(str(suite.files - 1))
    for i in range(suite.files):
        path = root / f"test_f{i:0{width}d}.py"
        path.write_text(suite.render(i, suite.tests_per_file))
    return root


def test_files(root: Path) -> list[Path]:
    return sorted(root.glob("test_*.py"))


# --------------------------------------------------------------------------- running


class RunFailed(Exception):
    """A timed run did not end as a clean, complete pass."""


@dataclasses.dataclass
class Outcome:
    seconds: float
    stderr_first_line: str | None  # first non-empty stderr line, if any stderr was written
    #: User + system CPU time of the run and its children (what the VM's
    #: steal time and scheduling delays do not inflate).
    cpu_seconds: float = 0.0


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def parse_summary(stdout: str) -> dict[str, int] | None:
    """Outcome counts of the last summary line of a ``-q`` run, or None if there is none."""
    for line in reversed(stdout.strip().splitlines()):
        match = _SUMMARY_RE.match(line.strip())
        if match:
            counts: dict[str, int] = {}
            for number, word in _COUNT_RE.findall(match.group("counts")):
                counts[word] = counts.get(word, 0) + int(number)
            return counts
    return None


def _end_group(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """End a timed-out run: SIGINT first (so the plugin can end its children), then SIGKILL."""
    for sig, grace in ((signal.SIGINT, 10.0), (signal.SIGKILL, None)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            return proc.communicate(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
    raise AssertionError("unreachable")  # pragma: no cover


def run_pytest(
    cmd: Sequence[str], *, cwd: Path, env: dict[str, str], timeout: float, expect_passed: int
) -> Outcome:
    """Run one pytest command; check exit code and summary line; return its wall
    and CPU time."""
    start, cpu_start = time.perf_counter(), _children_cpu()
    proc = subprocess.Popen(
        list(cmd),
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,  # its own process group, so a timeout can end all of it
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stdout, stderr = _end_group(proc)
        raise RunFailed(
            f"timed out after {timeout:g}s: {' '.join(cmd)}\n"
            f"--- stdout tail\n{_tail(stdout)}\n--- stderr tail\n{_tail(stderr)}"
        ) from None
    seconds = time.perf_counter() - start
    cpu_seconds = _children_cpu() - cpu_start
    counts = parse_summary(stdout)
    problems = []
    if proc.returncode != 0:
        problems.append(f"exit code {proc.returncode}")
    if counts is None:
        problems.append("no summary line")
    else:
        if counts.get("passed", 0) != expect_passed:
            problems.append(f"{counts.get('passed', 0)} passed, expected {expect_passed}")
        others = {k: v for k, v in counts.items() if k not in _HARMLESS_OUTCOMES}
        if others:
            problems.append(
                "unexpected outcomes " + ", ".join(f"{v} {k}" for k, v in others.items())
            )
    if problems:
        raise RunFailed(
            f"{'; '.join(problems)}: {' '.join(cmd)}\n"
            f"--- stdout tail\n{_tail(stdout)}\n--- stderr tail\n{_tail(stderr)}"
        )
    first = next((line for line in stderr.splitlines() if line.strip()), None)
    return Outcome(seconds, first, cpu_seconds)


def run_mode(
    mode: str, suite: Suite, root: Path, *, python: str, env: dict[str, str], timeout: float
) -> Outcome:
    if mode == "loop":
        start = time.perf_counter()
        first: str | None = None
        for path in test_files(root):
            cmd = [python, *BASE_ARGS, str(path)]
            out = run_pytest(
                cmd, cwd=root, env=env, timeout=timeout, expect_passed=suite.tests_per_file
            )
            first = first or out.stderr_first_line
        return Outcome(time.perf_counter() - start, first)
    cmd = [python, *BASE_ARGS, *MODE_ARGS[mode], str(root)]
    env = {**env, **MODE_ENV.get(mode, {})}
    return run_pytest(cmd, cwd=root, env=env, timeout=timeout, expect_passed=suite.tests)


# --------------------------------------------------------------------------- results


@dataclasses.dataclass
class ModeResult:
    mode: str
    times: list[float] = dataclasses.field(default_factory=list)
    # (repetition, position within the repetition) of each time, for the raw JSON record
    slots: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    error: str | None = None
    skipped: str | None = None
    stderr_runs: int = 0
    stderr_first_line: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.skipped is None and bool(self.times)

    @property
    def median(self) -> float | None:
        return statistics.median(self.times) if self.ok else None


@dataclasses.dataclass
class SuiteResult:
    suite: Suite
    modes: dict[str, ModeResult]
    warmup_seconds: list[float]

    def median(self, mode: str) -> float | None:
        result = self.modes.get(mode)
        return result.median if result else None

    def overhead_ms(self, mode: str) -> float | None:
        """Per-file overhead of *mode* over plain, in milliseconds."""
        value, plain = self.median(mode), self.median("plain")
        if value is None or plain is None:
            return None
        return (value - plain) / self.suite.files * 1000.0

    def ratio(self, mode: str) -> float | None:
        value, plain = self.median(mode), self.median("plain")
        if value is None or plain is None or plain <= 0:
            return None
        return value / plain

    def pair_ratios(self) -> dict[str, dict[str, Any]]:
        """``median(mode) / median(baseline)`` of every pair in ``PAIRS`` whose two modes
        were both asked for (``value`` None when either has no median)."""
        pairs: dict[str, dict[str, Any]] = {}
        for mode, baseline in PAIRS:
            if mode not in self.modes or baseline not in self.modes:
                continue
            value, base = self.median(mode), self.median(baseline)
            pairs[f"{mode}/{baseline}"] = {
                "mode": mode,
                "baseline": baseline,
                "mode_median": value,
                "baseline_median": base,
                "value": value / base if value is not None and base else None,
            }
        return pairs

    def targets(self) -> dict[str, dict[str, Any]]:
        fork_ratio = self.ratio("fork")
        fork_oh, cs_oh = self.overhead_ms("fork"), self.overhead_ms("cleanslate")
        fork_vs_cs = fork_oh / cs_oh if fork_oh is not None and cs_oh and cs_oh > 0 else None
        spawn_oh, loop_oh = self.overhead_ms("spawn"), self.overhead_ms("loop")
        threaded, unthreaded = self.median("auto-thread"), self.median("auto")
        thread_ratio = threaded / unthreaded if threaded and unthreaded else None
        return {
            "thread_ratio": {
                "value": thread_ratio,
                "target": f"<= {TARGET_THREAD_RATIO}",
                "met": None if thread_ratio is None else thread_ratio <= TARGET_THREAD_RATIO,
            },
            "fork_plain_ratio": {
                "value": fork_ratio,
                "target": f"<= {TARGET_FORK_RATIO}",
                "met": None if fork_ratio is None else fork_ratio <= TARGET_FORK_RATIO,
            },
            "fork_overhead_vs_cleanslate": {
                "value": fork_vs_cs,
                "fork_ms_per_file": fork_oh,
                "cleanslate_ms_per_file": cs_oh,
                "target": f"<= {TARGET_FORK_VS_CLEANSLATE}",
                "met": None if fork_vs_cs is None else fork_vs_cs <= TARGET_FORK_VS_CLEANSLATE,
            },
            "spawn_vs_loop": {
                "value": None if spawn_oh is None or loop_oh is None else spawn_oh - loop_oh,
                "spawn_ms_per_file": spawn_oh,
                "loop_ms_per_file": loop_oh,
                "target": "spawn per-file <= loop per-file",
                "met": None if spawn_oh is None or loop_oh is None else spawn_oh <= loop_oh,
            },
        }


def bench_suite(
    suite: Suite,
    modes: Sequence[str],
    unavailable: dict[str, str],
    *,
    runs: int,
    warmup: int,
    workdir: Path,
    python: str,
    env: dict[str, str],
    timeout: float,
) -> SuiteResult:
    root = generate(suite, workdir)
    results = {mode: ModeResult(mode) for mode in modes}
    for mode, reason in unavailable.items():
        if mode in results:
            results[mode].skipped = reason
    log = _progress
    log(f"[{suite.name}] generated {suite.files} files / {suite.tests} tests in {root}")

    warm: list[float] = []
    for i in range(warmup):
        # Untimed: warms the OS file cache and (bytecode writing permitted) __pycache__, and
        # proves the suite itself passes before anything is compared with it.
        try:
            out = run_mode("plain", suite, root, python=python, env=env, timeout=timeout)
        except RunFailed as exc:
            log(f"[{suite.name}] warm-up plain run FAILED; nothing timed for this suite")
            for result in results.values():
                if not result.skipped:
                    result.error = "not run: the warm-up plain run failed"
            results["plain"].error = f"warm-up run failed: {exc}"
            return SuiteResult(suite, results, warm)
        warm.append(out.seconds)
        log(f"[{suite.name}] warm-up {i + 1}/{warmup}: plain {out.seconds:.2f}s")

    for rep in range(runs):
        shift = rep % len(modes)
        order = [*modes[shift:], *modes[:shift]]  # rotate the starting mode per repetition
        for position, mode in enumerate(order):
            result = results[mode]
            if result.skipped or result.error:
                continue
            try:
                out = run_mode(mode, suite, root, python=python, env=env, timeout=timeout)
            except RunFailed as exc:
                result.error = str(exc)
                log(f"[{suite.name}] run {rep + 1}/{runs} {mode:<10} FAILED")
                continue
            result.times.append(out.seconds)
            result.slots.append((rep, position))
            if out.stderr_first_line is not None:
                result.stderr_runs += 1
                result.stderr_first_line = result.stderr_first_line or out.stderr_first_line
            log(f"[{suite.name}] run {rep + 1}/{runs} {mode:<10} {out.seconds:8.2f}s")
    return SuiteResult(suite, results, warm)


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- environment


def _probe(python: str, env: dict[str, str], code: str) -> tuple[bool, str]:
    try:
        proc = subprocess.run(
            [python, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=BENCH_DIR,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return False, lines[-1] if lines else f"exit code {proc.returncode}"
    return True, proc.stdout.strip()


def _dist_version(python: str, env: dict[str, str], dist: str) -> str | None:
    ok, out = _probe(python, env, f"import importlib.metadata as m; print(m.version({dist!r}))")
    return out if ok else None


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(REPO_DIR), *args], capture_output=True, text=True, timeout=10, check=True
    ).stdout.strip()


def _git_state() -> str | None:
    try:
        head = _git("rev-parse", "--short", "HEAD")
        dirty = _git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}{' (uncommitted changes)' if dirty else ''}"


def build_env() -> tuple[dict[str, str], list[str]]:
    env = dict(os.environ)
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    removed = [name for name in SCRUBBED_ENV if env.pop(name, None) is not None]
    return env, removed


def byte_compile_plugin(python: str, env: dict[str, str]) -> str:
    """Byte-compile the plugin's package the way ``pip install`` does, and
    return where it is.

    This machine sets ``PYTHONDONTWRITEBYTECODE=1``, so an editable install
    never gets ``__pycache__`` files and every run would compile the plugin
    from source (tens of milliseconds, a cost no installed copy pays); the
    runs themselves keep ``PYTHONDONTWRITEBYTECODE=1`` (no ``.pyc`` files in
    the generated suites), and Python still reads existing ones.
    """
    code = (
        "import compileall, os, pytest_isolation; "
        "path = os.path.dirname(pytest_isolation.__file__); "
        "assert compileall.compile_dir(path, quiet=1), path; "
        "print(path)"
    )
    ok, where = _probe(python, env, code)
    if not ok:
        raise RunFailed(f"byte-compiling the plugin failed: {where}")
    return where


def collect_meta(python: str, env: dict[str, str], removed: list[str]) -> dict[str, Any]:
    ok, py_version = _probe(python, env, "import sys; print(sys.version.split()[0])")
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "python": python,
        "python_version": py_version if ok else None,
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": affinity,
        "pytest": _dist_version(python, env, "pytest"),
        "pytest_isolation": _dist_version(python, env, "pytest-isolation"),
        "pytest_cleanslate": _dist_version(python, env, "pytest-cleanslate"),
        "pytest_xdist": _dist_version(python, env, "pytest-xdist"),
        "git": _git_state(),
        "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE"),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"],
        "scrubbed_env": removed,
    }


def check_availability(python: str, env: dict[str, str], modes: Sequence[str]) -> dict[str, str]:
    """Modes that cannot run at all here, with the reason."""
    missing: dict[str, str] = {}
    if "cleanslate" in modes:
        ok, out = _probe(python, env, "import pytest_cleanslate.plugin")
        if not ok:
            missing["cleanslate"] = f"pytest_cleanslate.plugin not importable ({out})"
    wanted = sorted(XDIST_MODES.intersection(modes))
    if wanted:
        ok, out = _probe(python, env, "import xdist.plugin")
        if not ok:
            for mode in wanted:
                missing[mode] = f"pytest-xdist not importable ({out})"
    return missing


# --------------------------------------------------------------------------- report


def _f(value: float | None, spec: str, none: str = "n/a") -> str:
    return none if value is None else format(value, spec)


def _met(met: bool | None) -> str:
    return "n/a" if met is None else ("met" if met else "MISSED")


def render_header(meta: dict[str, Any], runs: int, warmup: int, timeout: float) -> str:
    pdwb = meta["PYTHONDONTWRITEBYTECODE"]
    lines = [
        "# pytest-isolation file-mode benchmark",
        "",
        f"- date: {meta['date']}",
        f"- python: {meta['python_version']} ({meta['implementation']}) at `{meta['python']}`",
        f"- pytest {meta['pytest']}, pytest-isolation {meta['pytest_isolation']}, "
        f"pytest-cleanslate {meta['pytest_cleanslate'] or 'not installed'}, "
        f"pytest-xdist {meta['pytest_xdist'] or 'not installed'}",
        f"- repository: {meta['git'] or 'unknown'}",
        f"- platform: {meta['platform']}; cpu_count {meta['cpu_count']}, "
        f"usable {meta['cpu_affinity']}",
        f"- PYTHONDONTWRITEBYTECODE: {'unset' if pdwb is None else repr(pdwb)}"
        + (
            " (pytest re-rewrites every test module on every run)"
            if pdwb
            else " (rewritten test modules are cached in __pycache__ after the warm-up)"
        ),
        "- PYTEST_DISABLE_PLUGIN_AUTOLOAD=1"
        + (
            f"; removed from the environment: {', '.join(meta['scrubbed_env'])}"
            if meta["scrubbed_env"]
            else ""
        ),
        f"- {runs} interleaved repetition(s) per mode, {warmup} untimed warm-up run(s) of plain "
        f"per suite, timeout {timeout:g}s per subprocess; times are wall-clock medians",
    ]
    return "\n".join(lines)


def render_suite(result: SuiteResult) -> str:
    suite = result.suite
    lines = [
        "",
        f"## {suite.name}: {suite.description} ({suite.tests} tests)",
        "",
        "| mode | median s | min s | max s | per-file overhead ms | ratio to plain |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    notes: list[str] = []
    for mode, res in result.modes.items():
        if res.skipped:
            lines.append(f"| {mode} | skipped | | | | |")
            notes.append(f"- {mode}: skipped: {res.skipped}")
            continue
        if res.error:
            lines.append(f"| {mode} | FAILED | | | | |")
            detail = res.error.replace("\n", "\n      ")
            notes.append(f"- {mode}: FAILED after {len(res.times)} good run(s):\n      {detail}")
            continue
        lines.append(
            f"| {mode} | {_f(res.median, '.2f')} | {_f(min(res.times), '.2f')} "
            f"| {_f(max(res.times), '.2f')} | {_f(result.overhead_ms(mode), '+.1f')} "
            f"| {_f(result.ratio(mode), '.2f')} |"
        )
        if res.stderr_runs:
            notes.append(
                f"- {mode}: wrote to stderr in {res.stderr_runs}/{len(res.times)} run(s); "
                f"first line: {res.stderr_first_line!r}"
            )
    pairs = result.pair_ratios()
    if pairs:
        lines += [
            "",
            "| mode / baseline | mode median s | baseline median s | ratio |",
            "|---|---:|---:|---:|",
        ]
        for pair in pairs.values():
            lines.append(
                f"| {pair['mode']} / {pair['baseline']} | {_f(pair['mode_median'], '.2f')} "
                f"| {_f(pair['baseline_median'], '.2f')} | {_f(pair['value'], '.2f')} |"
            )
    t = result.targets()
    fr, fc, sl = t["fork_plain_ratio"], t["fork_overhead_vs_cleanslate"], t["spawn_vs_loop"]
    lines += [
        "",
        f"- fork/plain wall ratio: {_f(fr['value'], '.2f')} (target {fr['target']}): "
        f"{_met(fr['met'])}",
        f"- fork per-file overhead / cleanslate per-file overhead: {_f(fc['value'], '.2f')} "
        f"({_f(fc['fork_ms_per_file'], '.1f')} ms / {_f(fc['cleanslate_ms_per_file'], '.1f')} ms;"
        f" target {fc['target']}): {_met(fc['met'])}",
        f"- spawn per-file overhead vs loop per-file overhead: "
        f"{_f(sl['spawn_ms_per_file'], '.1f')} ms vs {_f(sl['loop_ms_per_file'], '.1f')} ms "
        f"(target: spawn no slower): {_met(sl['met'])}",
    ]
    tr = t["thread_ratio"]
    if tr["value"] is not None:
        lines.append(
            f"- auto with a live thread in the parent / auto without: {_f(tr['value'], '.2f')} "
            f"(target {tr['target']}): {_met(tr['met'])}"
        )
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines)


def to_json(
    meta: dict[str, Any], args: argparse.Namespace, results: list[SuiteResult]
) -> dict[str, Any]:
    suites: dict[str, Any] = {}
    for result in results:
        modes: dict[str, Any] = {}
        for mode, res in result.modes.items():
            modes[mode] = {
                "status": "skipped" if res.skipped else "failed" if res.error else "ok",
                "error": res.error or res.skipped,
                "times": res.times,
                "slots": [{"repetition": r, "position": p} for r, p in res.slots],
                "median": res.median,
                "min": min(res.times) if res.ok else None,
                "max": max(res.times) if res.ok else None,
                "per_file_overhead_ms": result.overhead_ms(mode),
                "ratio_to_plain": result.ratio(mode),
                "stderr_runs": res.stderr_runs,
                "stderr_first_line": res.stderr_first_line,
            }
        suites[result.suite.name] = {
            "files": result.suite.files,
            "tests_per_file": result.suite.tests_per_file,
            "tests": result.suite.tests,
            "description": result.suite.description,
            "warmup_seconds": result.warmup_seconds,
            "modes": modes,
            "targets": result.targets(),
            "pair_ratios": result.pair_ratios(),
        }
    return {
        "meta": meta,
        "settings": {
            "runs": args.runs,
            "warmup": args.warmup,
            "timeout": args.timeout,
            "modes": args.mode,
            "commands": {m: ["python", *BASE_ARGS, *MODE_ARGS[m], "PATH"] for m in ALL_MODES},
            "mode_env": MODE_ENV,
        },
        "suites": suites,
    }


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3, help="interleaved repetitions (default 3)")
    parser.add_argument(
        "--suite",
        action="append",
        choices=sorted(SUITES),
        help="suite to run; repeatable (default: all)",
    )
    parser.add_argument(
        "--mode",
        action="append",
        choices=ALL_MODES,
        help="mode to time; repeatable (default: all). plain is always included.",
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="write raw times here")
    parser.add_argument(
        "--warmup", type=int, default=1, help="untimed plain runs per suite first (default 1)"
    )
    parser.add_argument(
        "--timeout", type=float, default=900.0, help="seconds per subprocess (default 900)"
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=DEFAULT_WORKDIR,
        help=f"where suites are generated (default {DEFAULT_WORKDIR.relative_to(REPO_DIR)})",
    )
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="interpreter with pytest and the plugins installed (default: this one)",
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.warmup < 0:
        parser.error("--warmup must not be negative")
    args.suite = args.suite or list(SUITES)
    chosen = set(args.mode or ALL_MODES) | {"plain"}
    args.mode = [m for m in ALL_MODES if m in chosen]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    env, removed = build_env()
    meta = collect_meta(args.python, env, removed)
    unavailable = check_availability(args.python, env, args.mode)
    for mode, reason in unavailable.items():
        _progress(f"{mode}: {reason}; column skipped")

    results = [
        bench_suite(
            SUITES[name],
            args.mode,
            unavailable,
            runs=args.runs,
            warmup=args.warmup,
            workdir=args.workdir.resolve(),
            python=args.python,
            env=env,
            timeout=args.timeout,
        )
        for name in args.suite
    ]

    print(render_header(meta, args.runs, args.warmup, args.timeout))
    for result in results:
        print(render_suite(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(to_json(meta, args, results), indent=2) + "\n")
        print(f"\nraw times written to {args.json}")
    failed = any(res.error for result in results for res in result.modes.values())
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
