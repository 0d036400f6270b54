"""Options and plugins file mode cannot combine.

Each child ends its session like a pytest-xdist worker, so a plugin's
per-test work is done in the child; what some plugins make of the whole
run at its end (a table, a JSON file, a summary, unused snapshots) would be
made in each child from that child's file alone.  Where the plugin can do
without that part, file mode turns it off before the plugin is configured,
as pytest-benchmark does itself under xdist, and the header says so; where
the command line asks for it, file mode refuses at start.
"""

from __future__ import annotations

import itertools
import os
import sys
import types

import pytest

from pytest_isolation.core import pytest_private

#: The prefix of pytest's own modules.
_PYTEST_MODULES = f"{pytest_private.PYTEST_PACKAGE}."


def benchmarks_run(config: pytest.Config) -> bool:
    """pytest-benchmark measures in this run (it turns itself off under xdist)."""
    if config.getoption("benchmark_skip", None) is None:  # the plugin's options: not loaded
        return False
    if config.getoption("benchmark_skip"):
        return False
    disabled = config.getoption("benchmark_disable", False)
    return not disabled or bool(config.getoption("benchmark_enable", False))


#: pytest-benchmark's options that ask for what only the whole run's results give.
_BENCHMARK_RESULTS = {
    "benchmark_json": "--benchmark-json",
    "benchmark_save": "--benchmark-save",
    "benchmark_autosave": "--benchmark-autosave",
    "benchmark_compare": "--benchmark-compare",
    "benchmark_compare_fail": "--benchmark-compare-fail",
    "benchmark_histogram": "--benchmark-histogram",
    "benchmark_only": "--benchmark-only",
    "benchmark_enable": "--benchmark-enable",
}
#: Set when file mode turned pytest-benchmark's measuring off (the header says so).
BENCHMARKS_OFF = pytest.StashKey[bool]()


def benchmark_results_asked(config: pytest.Config) -> list[str]:
    return [flag for dest, flag in _BENCHMARK_RESULTS.items() if config.getoption(dest, None)]


def turn_off_benchmarks(config: pytest.Config) -> None:
    """Before configure: run benchmarks once, unmeasured (``--benchmark-disable``),
    as pytest-benchmark does itself under pytest-xdist, unless the command
    line asks for their results (then :func:`refuse_uncombinable` refuses)."""
    if benchmarks_run(config) and not benchmark_results_asked(config):
        config.option.benchmark_disable = True
        config.stash[BENCHMARKS_OFF] = True


def refuse_uncombinable(config: pytest.Config) -> None:
    """Refuse, naming the plugin, what would lose results."""
    asked = benchmark_results_asked(config)
    if asked and benchmarks_run(config) and config.getoption("dist", "no") in ("no", None):
        raise pytest.UsageError(
            "--isolation-mode=file cannot combine pytest-benchmark's results "
            f"({', '.join(asked)}): each file's process would measure, print and save its "
            "own; run benchmarks without --isolation-mode=file"
        )


#: Set when file mode turned syrupy's unused-snapshot check off (the header says so).
UNUSED_SNAPSHOTS_OFF = pytest.StashKey[bool]()


def turn_off_unused_snapshots(config: pytest.Config) -> None:
    """Before configure: syrupy looks for unused snapshots in each file's
    process, where the snapshots other files use look unused (and would be
    deleted under ``--snapshot-update``), so the check is off
    (``--snapshot-disable-unused``)."""
    if config.getoption("disable_unused_snapshots", True):  # off already, or no syrupy
        return
    config.option.disable_unused_snapshots = True
    config.stash[UNUSED_SNAPSHOTS_OFF] = True


def before_configure(config: pytest.Config) -> None:
    """What file mode changes in other plugins' options before they read them."""
    turn_off_benchmarks(config)
    turn_off_unused_snapshots(config)


def notices(config: pytest.Config) -> list[str]:
    """What the header says about plugins whose end-of-run report narrows."""
    found = []
    if config.stash.get(BENCHMARKS_OFF, False):
        found.append(
            "isolation: pytest-benchmark: benchmarks run once, unmeasured (--benchmark-disable), "
            "as under pytest-xdist: each file runs in a process of its own"
        )
    if config.pluginmanager.has_plugin("syrupy"):
        unused = (
            "; unused snapshots are not looked for (--snapshot-disable-unused): each process "
            "sees only its file's tests"
            if config.stash.get(UNUSED_SNAPSHOTS_OFF, False)
            else ""
        )
        found.append(
            "isolation: syrupy compares and writes snapshots in each file's process, and its "
            f"summary is not shown{unused}"
        )
    return found


def check_compatible(config: pytest.Config) -> None:
    """Refuse option combinations file mode cannot honour."""
    option = config.option
    if os.name == "nt":
        raise pytest.UsageError("--isolation-mode=file is not supported on Windows yet")
    for flag, dest in (("--pdb", "usepdb"), ("--trace", "trace")):
        if getattr(option, dest, False):
            raise pytest.UsageError(
                f"--isolation-mode=file cannot be combined with {flag}: the debugger would run "
                f"in a child without a terminal; run the file without --isolation-mode=file"
            )
    if getattr(option, "stepwise", False) or getattr(option, "stepwise_skip", False):
        raise pytest.UsageError(
            "--isolation-mode=file cannot be combined with --stepwise/--sw: stepwise skips the "
            "tests before the last failure, which only each file's process collects; run "
            "--stepwise without --isolation-mode=file"
        )
    refuse_uncombinable(config)


def modules(config: pytest.Config) -> list[str]:
    """What a child that runs pytest itself imports before its conftests, as
    this process did, and may import earlier: pytest's own modules, and the
    plugins of installed distributions (entry points) and those named by
    ``-p`` and ``PYTEST_PLUGINS``, each only if pytest does not rewrite its
    asserts (``--assert=plain``, or ``PYTEST_DONT_REWRITE`` in its package's
    docstring, as this plugin has): pytest rewrites such a module as it
    imports it, and warns about one imported before.  Plugins a conftest
    names (``pytest_plugins``) are left out: the child imports them after the
    conftest's own code ran."""
    early = {
        module.__name__
        for module, _ in config.pluginmanager.list_plugin_distinfo()
        if isinstance(module, types.ModuleType)
    }
    early.update(_named_plugins(config))
    early.add("pytest_isolation")
    rewrites = config.getoption("assertmode", "rewrite") != "plain"
    names = [
        name
        for name, module in list(sys.modules.items())
        if name.startswith(_PYTEST_MODULES) and not (rewrites and _rewritten(module))
    ]
    for name in sorted(early):
        top = sys.modules.get(name.partition(".")[0])
        if name not in sys.modules or top is None:
            continue
        if rewrites and "PYTEST_DONT_REWRITE" not in str(getattr(top, "__doc__", "") or ""):
            continue
        names += [
            loaded
            for loaded in list(sys.modules)
            if loaded == name or (name == top.__name__ and loaded.startswith(name + "."))
        ]
    return list(dict.fromkeys(names))


def _rewritten(module: object) -> bool:
    """Whether pytest's assertion rewriting imported ``module`` here (as
    ``_pytest.pytester_assertions``, which pytester names): a child's pytest
    would rewrite it, so it is not imported before;
    ``tests/test_forkserver.py::test_pytester_s_assertions_are_rewritten_in_the_child``
    fails loudly if that changes."""
    return pytest_private.imported_by_assertion_rewriting(module)


def _named_plugins(config: pytest.Config) -> set[str]:
    """The modules ``-p NAME`` and ``PYTEST_PLUGINS`` name (``no:`` left out)."""
    args = list(config.invocation_params.args)
    named = [value for flag, value in itertools.pairwise(args) if flag == "-p"]
    named += [arg[2:] for arg in args if arg.startswith("-p") and len(arg) > 2]
    named += os.environ.get("PYTEST_PLUGINS", "").split(",")
    return {name.strip() for name in named if name.strip() and not name.startswith("no:")}
