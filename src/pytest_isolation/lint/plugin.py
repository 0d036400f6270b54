"""The isolation lint's option and ini key; the rules and the plugin
(:mod:`.check`) are imported only when the lint is switched on.

PYTEST_DONT_REWRITE (see the package's docstring).
"""

from __future__ import annotations

import pytest

from pytest_isolation.core.options import Setting
from pytest_isolation.core.options import add_lines
from pytest_isolation.core.settings import LINT
from pytest_isolation.core.settings import Settings
from pytest_isolation.lint import ALLOW_INI

LINT_SETTING = Setting.of_choices(
    "Check test files and conftests, when collected, for isolation mistakes (mocks at "
    "import time, /tmp paths, ...): warn, error (fail their collection) or off.",
    LINT,
)


def pytest_addoption(parser: pytest.Parser) -> None:
    LINT_SETTING.add(parser, "isolation_lint")
    add_lines(
        parser,
        ALLOW_INI,
        "Isolation lint findings to accept, one 'CODE' (everywhere) or 'CODE: GLOB' per line; "
        "GLOB is relative to the ini file (** matches any directories).",
    )


def register(config: pytest.Config, settings: Settings, in_child: bool) -> None:
    """The lint, when switched on, outside file-mode children (a spawned
    child's parent linted its file)."""
    if settings.lint != "off" and not in_child:
        from pytest_isolation.lint.check import register as register_lint

        register_lint(config, settings)
