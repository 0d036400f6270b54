"""The selector's options, and the names its hooks and its run share."""

from __future__ import annotations

import os
from typing import get_args

import pytest

from pytest_isolation.core.kinds import SelectorScope
from pytest_isolation.core.kinds import Unmapped
from pytest_isolation.core.names import ALLOW_ALL_ENV
from pytest_isolation.core.options import GROUP
from pytest_isolation.core.options import Setting
from pytest_isolation.core.options import add_flag

CACHE_KEY = "isolation/import-graph"
#: The selected test files, passed to pytest-xdist workers.
WORKER_KEY = "isolation_selected"
SCOPE_CHOICES: tuple[SelectorScope, ...] = get_args(SelectorScope)
DEFAULT_SCOPE: SelectorScope = "auto"
UNMAPPED_CHOICES: tuple[Unmapped, ...] = get_args(Unmapped)


#: The selector's caps, by dest (= ini key), as :class:`.decision.Caps` names them.
CAPS = (
    "isolation_max_sources",
    "isolation_max_test_files",
    "isolation_max_items",
    "isolation_max_depth",
)

#: The selector's settings, by dest (= ini key).  --isolation-for,
#: --isolation-since and --isolation-dry-run say what this one run does: no key.
SETTINGS = {
    "isolation_scope": Setting(
        "Selector: match test files to a change by what they ran (recorded), their name "
        "(convention), imports (graph), imports of imports (impact), or all; auto: "
        "recorded, else impact.",
        "|".join(SCOPE_CHOICES),
        DEFAULT_SCOPE,
    ),
    "isolation_max_sources": Setting(
        "Selector: refuse, running nothing, over N changed files.", "N", "50", number="int"
    ),
    "isolation_max_test_files": Setting(
        "Selector: refuse, running nothing, over N selected test files.",
        "N",
        "50",
        number="int",
    ),
    "isolation_max_items": Setting(
        "Selector: refuse, running nothing, over N selected tests (after -k and -m).",
        "N",
        unset="no cap",
        number="int",
    ),
    "isolation_max_depth": Setting(
        "Selector: follow at most N imports from a test file to a changed file.",
        "N",
        unset="no limit",
        number="int",
    ),
    "isolation_allow_empty": Setting(
        "Selector: exit 0, not 5, when no test file matches the changed files.",
        default="false",
    ),
    "isolation_unmapped": Setting(
        "Selector: what a changed file that is not Python does: refuse (error), warn, or "
        "nothing (ignore).",
        "|".join(UNMAPPED_CHOICES),
        UNMAPPED_CHOICES[0],
    ),
    "isolation_explain": Setting(
        "Selector: show why each test file was selected.", default="false"
    ),
    "isolation_record_from": Setting(
        "Selector: read the record of what each test file ran from this run report "
        "(e.g. the shards' merged) instead of pytest's cache.",
        "PATH",
    ),
    "isolation_json": Setting(
        "Selector: write the selection (or the refusal) as JSON to PATH.",
        "PATH",
    ),
}


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup(*GROUP)
    group.addoption(
        "--isolation-for",
        dest="isolation_for",
        action="append",
        default=[],
        metavar="PATH",
        help="Selector: run only the test files that exercise this changed file or directory "
        "(repeatable; @FILE: one path a line; -: stdin).",
    )
    group.addoption(
        "--isolation-since",
        dest="isolation_since",
        default=None,
        metavar="REF",
        help="Selector: run only the test files that exercise the files changed since the "
        "git REF, uncommitted and untracked ones too.",
    )
    add_flag(
        parser,
        "isolation_dry_run",
        "Selector: print the selected test files and exit without running them.",
    )
    for dest, setting in SETTINGS.items():
        setting.add(parser, dest)


def active(config: pytest.Config) -> bool:
    return bool(config.getoption("isolation_for") or config.getoption("isolation_since"))


def gate_open() -> bool:
    return os.environ.get(ALLOW_ALL_ENV, "").lower() in {"1", "true", "yes"}
