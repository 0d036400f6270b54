"""The selector's options, and the names its hooks and its run share."""

from __future__ import annotations

import os

import pytest

from pytest_isolation.core.names import ALLOW_ALL_ENV

CACHE_KEY = "isolation/import-graph"
#: The selected test files, passed to pytest-xdist workers.
WORKER_KEY = "isolation_selected"
SCOPE_CHOICES = ("convention", "graph", "impact", "all")
UNMAPPED_CHOICES = ("error", "warn", "ignore")


def add_options(parser: pytest.Parser) -> None:
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
