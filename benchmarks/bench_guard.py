"""Benchmark of what pytest-isolation's leak guard costs on trivial tests.

Generates a suite of trivial tests (``def test_N(): pass``) in a temporary directory, then:

* times ``python -m pytest -p isolation -q -p no:cacheprovider SUITE`` with
  ``--isolation-leaks=off`` (``off``), ``--isolation-leaks=warn`` (``warn``) and
  ``--isolation-leaks=warn --isolation-leaks-deep`` (``deep``), interleaved
  in an order rotated every round, and reports the medians, the ratios of the medians
  and the per-round ratios;
* runs the suite in-process from a small driver script that wraps ``LeakGuard``'s
  ``pytest_runtest_setup`` and ``pytest_runtest_teardown`` wrappers with
  ``time.perf_counter`` accumulators, and reports the microseconds per test spent in the
  guard's own code (before and after its ``yield``, not the inner hooks).

See ``benchmarks/README.md``. Run with the interpreter that has pytest and the plugin installed::

    .venv/bin/python benchmarks/bench_guard.py [--runs 5] [--files 20] [--tests 100]

Standard library only (plus ``bench_filemode`` next to it): pytest and the plugin are only
ever used through subprocesses.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bench_filemode import REPO_DIR
from bench_filemode import Outcome
from bench_filemode import RunFailed
from bench_filemode import Suite
from bench_filemode import build_env
from bench_filemode import byte_compile_plugin
from bench_filemode import collect_meta
from bench_filemode import generate
from bench_filemode import run_pytest

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_OUTPUT = BENCH_DIR / "results-guard.md"

PYTEST_ARGS = ("-p", "isolation", "-q", "-p", "no:cacheprovider")
MODES: dict[str, tuple[str, ...]] = {
    "off": ("--isolation-leaks=off",),
    "warn": ("--isolation-leaks=warn",),
    "deep": ("--isolation-leaks=warn", "--isolation-leaks-deep"),
}
GUARDED = ("warn", "deep")  # modes in which the guard is registered (timed in-process)

# Written to the temporary directory and run as ``python DRIVER OUT.json PYTEST-ARGS...``.
DRIVER = '''\
"""Times LeakGuard's own setup/teardown hook code (bench_guard.py writes and runs this)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from collections.abc import Generator
from typing import Any

import pytest

Wrapper = Callable[..., Generator[None, Any, Any]]
perf = time.perf_counter
totals: dict[str, float] = {
    "setup_before": 0.0, "setup_after": 0.0, "teardown_before": 0.0, "teardown_after": 0.0
}
calls: dict[str, int] = {"setup": 0, "teardown": 0}


def _drive(gen: Generator[None, Any, Any], part: str) -> Generator[None, Any, Any]:
    """Run the guard's generator *gen* around the inner hooks, timing only its own steps."""
    start = perf()
    try:
        next(gen)  # the guard's code up to its yield
    finally:
        totals[part + "_before"] += perf() - start
    try:
        result = yield  # the inner hooks: not timed
    except BaseException as exc:
        start = perf()
        try:
            gen.throw(exc)
        except StopIteration as stop:
            return stop.value
        finally:
            totals[part + "_after"] += perf() - start
        raise RuntimeError("LeakGuard's wrapper yielded twice") from None
    start = perf()
    try:
        gen.send(result)  # the guard's code after its yield
    except StopIteration as stop:
        return stop.value
    finally:
        totals[part + "_after"] += perf() - start
    raise RuntimeError("LeakGuard's wrapper yielded twice")


def _keep_marker(wrapper: Wrapper, original: Wrapper) -> Wrapper:
    wrapper.__dict__.update(original.__dict__)  # pluggy's hookimpl options (pytest_impl)
    wrapper.__name__, wrapper.__qualname__ = original.__name__, original.__qualname__
    return wrapper


class Patcher:
    @pytest.hookimpl(tryfirst=True)  # before the plugin's (trylast) pytest_configure
    def pytest_configure(self, config: pytest.Config) -> None:
        from pytest_isolation.guard.watch import LeakGuard

        setup: Wrapper = LeakGuard.pytest_runtest_setup
        teardown: Wrapper = LeakGuard.pytest_runtest_teardown

        def pytest_runtest_setup(self: Any, item: pytest.Item) -> Generator[None, Any, Any]:
            calls["setup"] += 1
            return (yield from _drive(setup(self, item), "setup"))

        def pytest_runtest_teardown(
            self: Any, item: pytest.Item, nextitem: pytest.Item | None
        ) -> Generator[None, Any, Any]:
            calls["teardown"] += 1
            return (yield from _drive(teardown(self, item, nextitem), "teardown"))

        wrapped = ((pytest_runtest_setup, setup), (pytest_runtest_teardown, teardown))
        for wrapper, original in wrapped:
            setattr(LeakGuard, original.__name__, _keep_marker(wrapper, original))


def main() -> int:
    out, args = sys.argv[1], sys.argv[2:]
    code = pytest.main(args, plugins=[Patcher()])
    with open(out, "w") as f:
        json.dump({"exit": int(code), "totals": totals, "calls": calls}, f)
    return int(code)


if __name__ == "__main__":
    raise SystemExit(main())
'''


def _render_pass(index: int, tests: int) -> str:
    del index  # every file alike
    return "".join(f"def test_{t}(): pass\n" for t in range(tests))


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def pytest_cmd(python: str, mode: str, root: Path) -> list[str]:
    return [python, "-m", "pytest", *PYTEST_ARGS, *MODES[mode], str(root)]


@dataclasses.dataclass
class HookTimes:
    """One in-process run: microseconds per test in the guard's own hook code."""

    setup_us: float
    teardown_us: float

    @property
    def total_us(self) -> float:
        return self.setup_us + self.teardown_us


def time_hooks(
    python: str, mode: str, root: Path, driver: Path, *, env: dict[str, str], tests: int, t: float
) -> HookTimes:
    out = driver.with_name(f"hooks-{mode}.json")
    out.unlink(missing_ok=True)
    cmd = [python, str(driver), str(out), *PYTEST_ARGS, *MODES[mode], str(root)]
    run_pytest(cmd, cwd=root, env=env, timeout=t, expect_passed=tests)
    data = json.loads(out.read_text())
    calls, totals = data["calls"], data["totals"]
    if calls != {"setup": tests, "teardown": tests}:
        raise RunFailed(f"guard hooks called {calls}, expected {tests} each: {shlex.join(cmd)}")
    per_test = {part: 1e6 * seconds / tests for part, seconds in totals.items()}
    return HookTimes(
        per_test["setup_before"] + per_test["setup_after"],
        per_test["teardown_before"] + per_test["teardown_after"],
    )


# --------------------------------------------------------------------------- report


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}"


def _clock_section(title: str, times: dict[str, list[float]], runs: int, tests: int) -> list[str]:
    """One clock's table of runs, its per-round ratios and the summary lines."""
    off = statistics.median(times["off"])
    lines = [
        "",
        f"## {title}",
        "",
        "| mode | pytest options | median s | runs s | median / median(off) |",
        "|---|---|---:|---|---:|",
    ]
    for mode, values in times.items():
        opts = " ".join([*PYTEST_ARGS, *MODES[mode]])
        each = ", ".join(f"{t:.2f}" for t in values)
        median = statistics.median(values)
        lines.append(f"| {mode} | `{opts}` | {median:.2f} | {each} | {_ratio(median, off)} |")
    lines += [
        "",
        "Per round (each mode's run against the `off` run of the same round):",
        "",
        "| round | off s | warn s | deep s | warn/off | deep/off |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    per_round = {
        mode: [t / o for t, o in zip(times[mode], times["off"], strict=True)] for mode in GUARDED
    }
    for i in range(runs):
        lines.append(
            f"| {i + 1} | {times['off'][i]:.2f} | {times['warn'][i]:.2f} | {times['deep'][i]:.2f} "
            f"| {per_round['warn'][i]:.3f} | {per_round['deep'][i]:.3f} |"
        )
    lines += [
        f"| median | | | | {statistics.median(per_round['warn']):.3f} "
        f"| {statistics.median(per_round['deep']):.3f} |",
        "",
    ]
    for mode in GUARDED:
        median = statistics.median(times[mode])
        lines.append(
            f"- {mode}/off: ratio of medians {_ratio(median, off)}, median of per-round ratios "
            f"{statistics.median(per_round[mode]):.3f}; "
            f"(median({mode}) - median(off)) / tests = {1e6 * (median - off) / tests:+.0f} "
            "µs/test (includes the guard's fixed start-up cost)"
        )
    return lines


#: The clocks each run is timed by, as the report names them.
CLOCKS = {
    "wall": "Wall clock",
    "cpu": "CPU time (user + system of the run and its children)",
}


def render(
    args: argparse.Namespace,
    meta: dict[str, object],
    suite: Suite,
    clocks: dict[str, dict[str, list[float]]],
    hooks: dict[str, list[HookTimes]],
) -> str:
    py = meta["python_version"]
    lines = [
        "# pytest-isolation leak-guard benchmark",
        "",
        f"- command: `{shlex.join([sys.executable, *sys.argv])}`",
        f"- date: {meta['date']}",
        f"- python {py}, pytest {meta['pytest']}, pytest-isolation {meta['pytest_isolation']}",
        f"- repository: {meta['git'] or 'unknown'}",
        f"- platform: {meta['platform']}",
        f"- machine: {meta['cpu_count']} cores (usable {meta['cpu_affinity']}), shared VM: "
        "noisy, treat differences of a few percent as noise",
        "- environment of the runs: PYTHONDONTWRITEBYTECODE=1, PYTEST_DISABLE_PLUGIN_AUTOLOAD=1; "
        f"the plugin byte-compiled first, as an installed copy is ({meta['compiled']})",
        f"- suite: {suite.description} ({suite.tests} tests), generated in a temporary directory",
        f"- {args.runs} interleaved round(s) (off, warn, deep; the order rotates every round) "
        f"after {args.warmup} untimed warm-up round(s); each subprocess timed by the wall "
        "clock and by its CPU time",
    ]
    for clock, title in CLOCKS.items():
        lines += _clock_section(title, clocks[clock], args.runs, suite.tests)
    lines += [
        "",
        "## Guard hooks in-process",
        "",
        "Time inside `LeakGuard.pytest_runtest_setup` and `LeakGuard.pytest_runtest_teardown` "
        "themselves (before and after their `yield`; the inner hooks, fixtures and the test "
        "are not counted), per test, from a driver calling `pytest.main` in a subprocess, "
        f"{args.runs} run(s) per mode, interleaved. Medians over the runs; the total is the "
        "median of each run's setup + teardown.",
        "",
        "| mode | setup µs/test | teardown µs/test | setup + teardown µs/test "
        "| every run's sum µs/test |",
        "|---|---:|---:|---:|---|",
    ]
    for mode, runs_ in hooks.items():
        setup = statistics.median(h.setup_us for h in runs_)
        teardown = statistics.median(h.teardown_us for h in runs_)
        total = statistics.median(h.total_us for h in runs_)
        each = ", ".join(f"{h.total_us:.1f}" for h in runs_)
        lines.append(f"| {mode} | {setup:.1f} | {teardown:.1f} | **{total:.1f}** | {each} |")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--files", type=int, default=20, help="test files (default 20)")
    parser.add_argument("--tests", type=int, default=100, help="tests per file (default 100)")
    parser.add_argument(
        "--warmup", type=int, default=1, help="untimed rounds of every mode first (default 1)"
    )
    parser.add_argument(
        "--timeout", type=float, default=900.0, help="seconds per subprocess (default 900)"
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=DEFAULT_OUTPUT,
        help=f"Markdown results file (default {DEFAULT_OUTPUT.relative_to(REPO_DIR)})",
    )
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="interpreter with pytest and the plugin installed (default: this one)",
    )
    args = parser.parse_args(argv)
    for name in ("runs", "files", "tests"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if args.warmup < 0:
        parser.error("--warmup must not be negative")
    return args


def bench(
    args: argparse.Namespace, env: dict[str, str], tmp: Path
) -> tuple[Suite, dict[str, dict[str, list[float]]], dict[str, list[HookTimes]]]:
    suite = Suite(
        "guard",
        args.files,
        args.tests,
        f"{args.files} files x {args.tests} tests `def test_N(): pass`",
        _render_pass,
    )
    root = generate(suite, tmp)
    driver = tmp / "guard_driver.py"
    driver.write_text(DRIVER)
    _progress(f"generated {suite.files} files / {suite.tests} tests in {root}")

    def timed_run(mode: str) -> Outcome:
        cmd = pytest_cmd(args.python, mode, root)
        return run_pytest(cmd, cwd=root, env=env, timeout=args.timeout, expect_passed=suite.tests)

    for i in range(args.warmup):
        for mode in MODES:
            _progress(f"warm-up {i + 1}/{args.warmup} {mode:<4} {timed_run(mode).seconds:6.2f}s")
    wall: dict[str, list[float]] = {mode: [] for mode in MODES}
    cpu: dict[str, list[float]] = {mode: [] for mode in MODES}
    modes = list(MODES)
    for i in range(args.runs):
        # Rotate the order each round, so no mode always runs first or last.
        for mode in modes[i % len(modes) :] + modes[: i % len(modes)]:
            outcome = timed_run(mode)
            wall[mode].append(outcome.seconds)
            cpu[mode].append(outcome.cpu_seconds)
            _progress(
                f"run   {i + 1}/{args.runs} {mode:<4} wall {outcome.seconds:6.2f}s "
                f"cpu {outcome.cpu_seconds:6.2f}s"
            )
    hooks: dict[str, list[HookTimes]] = {mode: [] for mode in GUARDED}
    for i in range(args.runs):
        for mode in GUARDED:
            h = time_hooks(
                args.python, mode, root, driver, env=env, tests=suite.tests, t=args.timeout
            )
            hooks[mode].append(h)
            _progress(
                f"hooks {i + 1}/{args.runs} {mode:<4} setup {h.setup_us:6.1f} "
                f"teardown {h.teardown_us:6.1f} µs/test"
            )
    return suite, {"wall": wall, "cpu": cpu}, hooks


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    env, removed = build_env()
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    meta = collect_meta(args.python, env, removed)
    with tempfile.TemporaryDirectory(prefix="bench_guard-") as tmp:
        try:
            meta["compiled"] = byte_compile_plugin(args.python, env)
            suite, clocks, hooks = bench(args, env, Path(tmp))
        except RunFailed as exc:
            _progress(f"FAILED: {exc}")
            return 1
    report = render(args, meta, suite, clocks, hooks)
    args.output.write_text(report)
    print(report, end="")
    _progress(f"written to {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
