"""The diagnoses' options: ``--isolation-find-polluter=NODEID`` (which
earlier test makes this one fail, and what it leaked) and
``--isolation-twice`` (:mod:`.twice`: every passing test run again at once).

This module holds the options, the finder's entry hook and the parts the
entry plugin registers; the search is in
:mod:`pytest_isolation.diagnose.finder` (imported only when asked for), each
probe a fresh ``pytest`` subprocess recorded by
:mod:`pytest_isolation.diagnose.probe`, the bisection in
:mod:`pytest_isolation.diagnose.bisection`.

PYTEST_DONT_REWRITE (see the package's docstring).
"""

from __future__ import annotations

import sys

import pytest

from pytest_isolation.core import names
from pytest_isolation.core.options import GROUP
from pytest_isolation.core.options import Setting
from pytest_isolation.core.options import add_flag
from pytest_isolation.core.settings import Settings
from pytest_isolation.core.xdist import is_worker

#: The search's settings, by dest (= ini key); the victim is this one run's: no key.
SETTINGS = {
    "isolation_probes": Setting(
        "--isolation-find-polluter: how many pytest processes it runs in parallel.",
        "N",
        "1",
        number="int",
    ),
    "isolation_find_timeout": Setting(
        "--isolation-find-polluter: give up after SECONDS.",
        "SECONDS",
        unset="no limit",
        number="float",
    ),
    "isolation_find_json": Setting(
        "--isolation-find-polluter: write the result as JSON to PATH.", "PATH"
    ),
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup(*GROUP).addoption(
        "--isolation-find-polluter",
        dest="isolation_find_polluter",
        default=None,
        metavar="NODEID",
        help="Find the earlier tests that make this test fail in the suite (or, if it fails "
        "alone, those it needs), and what they leaked.",
    )
    for dest, setting in SETTINGS.items():
        setting.add(parser, dest)
    add_flag(
        parser,
        "isolation_twice",
        "Run each passing test again at once, in the same process, and report those that "
        "fail when repeated, with what their first run left changed.",
    )


def register_twice(config: pytest.Config, settings: Settings) -> None:
    """``--isolation-twice``, in file-mode children and xdist workers too:
    they run the tests."""
    if settings.twice:
        from pytest_isolation.diagnose.twice import Twice
        from pytest_isolation.diagnose.twice import check_compatible

        check_compatible(config)
        config.pluginmanager.register(Twice(config), names.TWICE)


def register_patch_reach(config: pytest.Config) -> None:
    """What each patch a test starts reaches, for the leak report."""
    from pytest_isolation.diagnose.patches import PatchReach

    config.pluginmanager.register(PatchReach(config), names.PATCHES)


@pytest.hookimpl(tryfirst=True)  # before pytest's main: the finder runs pytest itself
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    victim = config.getoption("isolation_find_polluter")
    if not victim or is_worker(config):
        return None
    # Imported only when asked for: every pytest process (file-mode children too) loads this module.
    from pytest_isolation.diagnose.finder import Finder
    from pytest_isolation.diagnose.probing import FindError

    try:
        finder = Finder(config, str(victim))
        return finder.run()
    except (FindError, pytest.UsageError) as error:
        sys.stderr.write(f"isolation: {error}\n")
        return int(pytest.ExitCode.USAGE_ERROR)
