"""The isolation lint: a static check of test files and conftests for what
breaks isolated tests (state changed at import time or without a restore,
hard-coded temporary paths, fixed waits, tests that check nothing).

This module is what the entry plugin imports in every process (its ini
key); the rules and the plugin (:mod:`pytest_isolation.lint.check`) are
imported only when the lint is switched on.
"""

from __future__ import annotations

import pytest

#: The ini key of the allow-list.
ALLOW_INI = "isolation_lint_allow"


def addoption(parser: pytest.Parser) -> None:
    parser.addini(
        ALLOW_INI,
        "Isolation lint findings to accept, one 'CODE' (everywhere) or 'CODE: GLOB' per line; "
        "GLOB is relative to the ini file (** matches any directories).",
        type="linelist",
        default=[],
    )
