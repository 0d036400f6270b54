"""The isolation lint: a static check of test files and conftests for what
breaks isolated tests (state changed at import time or without a restore,
hard-coded temporary paths, fixed waits, tests that check nothing).

Its option and ini keys are :mod:`.plugin`'s; the rules and the plugin
(:mod:`pytest_isolation.lint.check`) are imported only when the lint is
switched on.
"""

from __future__ import annotations

#: The ini key of the allow-list.
ALLOW_INI = "isolation_lint_allow"
