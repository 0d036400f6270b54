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
        "Selector: recorded (the tests whose recorded run executed what changed), convention "
        "(tests named after the file), graph (also tests importing it), impact (also through "
        "other modules), all (the whole suite, only where "
        f"{ALLOW_ALL_ENV} allows it), or auto (recorded where a record of this Python and "
        "these packages exists, else impact).",
        "|".join(SCOPE_CHOICES),
        DEFAULT_SCOPE,
    ),
    "isolation_max_sources": Setting(
        "Selector: at most N changed files; over it, nothing runs.", "N", "50"
    ),
    "isolation_max_test_files": Setting(
        "Selector: at most N selected test files; over it, nothing runs.", "N", "50"
    ),
    "isolation_max_items": Setting(
        "Selector: at most N tests after collection, -k and -m; over it, nothing runs.",
        "N",
        unset="no cap",
    ),
    "isolation_max_depth": Setting(
        "Selector: at most N import steps between a test file and a changed file.",
        "N",
        unset="no limit",
    ),
    "isolation_allow_empty": Setting(
        "Selector: exit 0 when no test file maps to the changed files (else 5).",
        default="false",
    ),
    "isolation_unmapped": Setting(
        "Selector: what a changed non-Python file does.",
        "|".join(UNMAPPED_CHOICES),
        UNMAPPED_CHOICES[0],
    ),
    "isolation_explain": Setting(
        "Selector: show for each selected test file how it was found.", default="false"
    ),
    "isolation_record_from": Setting(
        "Selector: read the record of what each test file executed from this run report "
        "(--isolation-report, or shards' reports merged) instead of pytest's cache; an ini "
        "value is relative to the ini file.",
        "PATH",
    ),
    "isolation_json": Setting(
        "Selector: write the decision (also a refusal) as JSON to PATH; an ini value is "
        "relative to the ini file.",
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
