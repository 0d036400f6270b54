"""The capped selector's hooks: before the session, changed files become the
test files to run, or a refusal with exit code 4 or 5 and nothing run.

Inert unless ``--isolation-for`` or ``--isolation-since`` is given.
"""

from __future__ import annotations

import os
import sys

import pytest

PLUGIN_NAME = "isolation-select"
CACHE_KEY = "isolation/import-graph"
#: The selected test files, passed to pytest-xdist workers.
WORKER_KEY = "isolation_selected"
#: Opens the full-suite gate when exactly 1, true or yes (any case).
ALLOW_ALL_ENV = "PYTEST_ISOLATION_ALLOW_ALL"
SCOPE_CHOICES = ("convention", "graph", "impact", "all")
UNMAPPED_CHOICES = ("error", "warn", "ignore")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("isolation", "test isolation (pytest-isolation)")
    group.addoption(
        "--isolation-for",
        dest="isolation_for",
        action="append",
        default=[],
        metavar="PATH",
        help="Selector: run the test files that exercise this changed file or directory "
        "(repeatable; @FILE reads one path per line, - reads stdin).",
    )
    group.addoption(
        "--isolation-since",
        dest="isolation_since",
        default=None,
        metavar="REF",
        help="Selector: also the files changed since the git REF (committed, staged, "
        "unstaged, untracked).",
    )
    group.addoption(
        "--isolation-scope",
        dest="isolation_scope",
        default="impact",
        metavar="|".join(SCOPE_CHOICES),
        help="Selector: convention (tests named after the file), graph (also tests importing "
        "it), impact (also through other modules). Default: impact.",
    )
    for flag, default, what in (
        ("--isolation-max-sources", "50", "changed files"),
        ("--isolation-max-test-files", "50", "selected test files"),
        ("--isolation-max-items", None, "tests after collection, -k and -m (default: no cap)"),
        ("--isolation-max-depth", None, "import steps between a test file and a changed file"),
    ):
        group.addoption(
            flag,
            dest=flag.lstrip("-").replace("-", "_"),
            default=default,
            metavar="N",
            help=f"Selector: at most N {what}"
            + (f" (default {default}); over it, nothing runs." if default else "."),
        )
    group.addoption(
        "--isolation-allow-empty",
        dest="isolation_allow_empty",
        action="store_true",
        default=False,
        help="Selector: exit 0 when no test file maps to the changed files (else 5).",
    )
    group.addoption(
        "--isolation-unmapped",
        dest="isolation_unmapped",
        default="error",
        metavar="|".join(UNMAPPED_CHOICES),
        help="Selector: what a changed non-Python file does. Default: error.",
    )
    group.addoption(
        "--isolation-dry-run",
        dest="isolation_dry_run",
        action="store_true",
        default=False,
        help="Selector: print the selected test files and exit without running them.",
    )
    group.addoption(
        "--isolation-explain",
        dest="isolation_explain",
        action="store_true",
        default=False,
        help="Selector: show for each selected test file how it was found.",
    )
    group.addoption(
        "--isolation-json",
        dest="isolation_json",
        default=None,
        metavar="PATH",
        help="Selector: write the decision (also a refusal) as JSON to PATH.",
    )


def active(config: pytest.Config) -> bool:
    return bool(config.getoption("isolation_for") or config.getoption("isolation_since"))


def gate_open() -> bool:
    return os.environ.get(ALLOW_ALL_ENV, "").lower() in {"1", "true", "yes"}


@pytest.hookimpl(tryfirst=True)  # before pytest's main: a refusal runs nothing
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    if not active(config):
        return None
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:  # a pytest-xdist worker: run what the controller selected
        if WORKER_KEY in workerinput:
            config.args = list(workerinput[WORKER_KEY])
        return None
    from pytest_isolation.wire import CHILD_ENV

    if CHILD_ENV in os.environ:  # a spawned file-mode child: the parent selected
        return None
    from pytest_isolation.selector import decision as decide
    from pytest_isolation.selector.run import Selector
    from pytest_isolation.selector.run import record
    from pytest_isolation.selector.run import run_selector

    decision = run_selector(config)
    record(config, decision)
    if decision.outcome != decide.SELECTED:
        sys.stderr.write(decision.message + "\n")
        return decision.exit_code
    if config.getoption("isolation_dry_run"):
        out = sys.stdout
        out.write(decision.header() + "\n")
        for line in [f"isolation: warning: {w}" for w in decision.warnings]:
            out.write(line + "\n")
        if config.getoption("isolation_explain"):
            out.write("\n".join(decision.explain()) + "\n")
        for test in decision.tests:
            out.write(test + "\n")
        return 0
    if decision.scope != "all":
        config.args = [str(config.rootpath / test) for test in decision.tests]
    config.pluginmanager.register(Selector(config, decision), PLUGIN_NAME)
    return None
