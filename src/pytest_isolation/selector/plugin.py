"""The capped selector's hooks: before the session, changed files become the
test files to run, or a refusal with exit code 4 or 5 and nothing run.

Inert unless ``--isolation-for`` or ``--isolation-since`` is given.

PYTEST_DONT_REWRITE (see the package's docstring).
"""

from __future__ import annotations

import os
import sys

import pytest

from pytest_isolation.core import names
from pytest_isolation.core import options
from pytest_isolation.core.names import CHILD_ENV
from pytest_isolation.selector.options import WORKER_KEY
from pytest_isolation.selector.options import active
from pytest_isolation.selector.options import add_options


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(tryfirst=True)  # before pytest's main: a refusal runs nothing
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    if not active(config):
        if config.getoption("isolation_dry_run"):  # it would run the whole suite
            raise pytest.UsageError(
                "--isolation-dry-run shows what the selector would run: it needs "
                "--isolation-for or --isolation-since"
            )
        return None
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:  # a pytest-xdist worker: run what the controller selected
        if WORKER_KEY in workerinput:
            config.args = list(workerinput[WORKER_KEY])
        return None
    if CHILD_ENV in os.environ:  # a spawned file-mode child: the parent selected
        return None
    # Imported only when the selector runs: every pytest process loads this module.
    from pytest_isolation.selector import decision as decide
    from pytest_isolation.selector.run import Selector
    from pytest_isolation.selector.run import json_target
    from pytest_isolation.selector.run import record
    from pytest_isolation.selector.run import run_selector

    json_target(config)  # a path that cannot be written: a usage error before anything

    decision = run_selector(config)
    record(config, decision)
    if decision.outcome != decide.SELECTED:
        sys.stderr.write(decision.message + "\n")
        return decision.exit_code
    if config.getoption("isolation_dry_run"):
        out = sys.stdout
        for line in [decision.header(), *decision.notes()]:
            out.write(line + "\n")
        for line in [f"isolation: warning: {w}" for w in decision.warnings]:
            out.write(line + "\n")
        if options.flag(config, "isolation_explain"):
            out.write("\n".join(decision.explain()) + "\n")
        for test in decision.tests:
            out.write(test + "\n")
        return 0
    if decision.scope != "all":
        config.args = [str(config.rootpath / test) for test in decision.tests]
    config.pluginmanager.register(Selector(config, decision), names.SELECTOR)
    return None
