"""The leak guard's options, ini keys and marker; the guard itself
(:mod:`.watch`) is imported only when it runs.

PYTEST_DONT_REWRITE (see the package's docstring).
"""

from __future__ import annotations

import pytest

from pytest_isolation.core import names
from pytest_isolation.core.keys import GUARD_KEY
from pytest_isolation.core.options import Setting
from pytest_isolation.core.options import add_lines
from pytest_isolation.core.settings import LEAK_POLICIES
from pytest_isolation.core.settings import Settings

#: The guard's policy, by dest (= ini key).
LEAKS = Setting(
    "Leak guard: put back what a test leaves changed (mock patches, os.environ, module "
    "globals, ...) and warn, fail the test (error) or only count it (quiet); off: no guard.",
    "|".join(LEAK_POLICIES),
    LEAK_POLICIES[0],
)

#: The deep tier, as ``guard/snapshots.py`` and ``guard/watch.py`` switch it on.
DEEP = Setting(
    "Leak guard: also check containers mutated in place in classes, nested containers "
    "and higher-scoped fixture values (slower).",
    default="false",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    LEAKS.add(parser, "isolation_leaks")
    DEEP.add(parser, "isolation_leaks_deep")
    add_lines(
        parser,
        "isolation_allow_leaks",
        "Leaks the guard allows everywhere, one 'category' or 'category:pattern' per line "
        "(e.g. env:MYAPP_*).",
    )


def register(config: pytest.Config, settings: Settings) -> None:
    """The guard, when it runs (or ``--isolation-twice`` asks what each first
    run left: found, never put back)."""
    if settings.leaks == "off" and not settings.twice:
        return
    from pytest_isolation.guard.watch import LeakGuard

    policy = "watch" if settings.leaks == "off" else settings.leaks
    guard = LeakGuard(config, policy, settings.deep)
    config.stash[GUARD_KEY] = guard
    config.pluginmanager.register(guard, names.GUARD)
