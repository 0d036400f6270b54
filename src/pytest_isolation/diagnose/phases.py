"""Running a test phase by phase, and a copy of a test function.

pytest has no public API for either (the private details are in
:mod:`pytest_isolation.core.pytest_private`).  ``runtestprotocol`` runs the
three phases in one go and fixes the teardown's next item before the call's
outcome is known, so ``--isolation-twice`` cannot choose between tearing
down only the test's function-scoped fixtures (a repeat follows) and tearing
down as a plain run would.
"""

from __future__ import annotations

import unittest
from typing import Any

import pytest

from pytest_isolation.core import pytest_private
from pytest_isolation.core.kinds import Phase


def run_phase(
    item: pytest.Item, when: Phase, log: bool, nextitem: pytest.Item | None = None
) -> pytest.TestReport:
    """One phase (``setup``, ``call`` or ``teardown``) as pytest runs it: its
    hook, its report made by ``pytest_runtest_makereport``, logged if
    ``log``, and ``--pdb`` on its exception."""
    return pytest_private.call_and_report(item, when, log, nextitem)


def begin(item: pytest.Item) -> None:
    """A test function about to run again gets a new fixture request, as
    pytest's ``runtestprotocol`` gives it."""
    if isinstance(item, pytest.Function):
        pytest_private.renew_request(item)


def release(item: pytest.Item) -> None:
    """After a test function's teardown, its fixture values go, as pytest's
    ``runtestprotocol`` lets them go."""
    if isinstance(item, pytest.Function):
        pytest_private.release_request(item)
        item.funcargs = None  # type: ignore[assignment]


def higher_scoped(item: pytest.Item) -> dict[str, object]:
    """The values of the fixtures above function scope the test has been
    given (read before :func:`release`): what its repeat shares with the
    tests after it."""
    funcargs = getattr(item, "funcargs", None) or {}
    by_name = pytest_private.fixture_definitions(item)
    found: dict[str, object] = {}
    for name, value in funcargs.items():
        definitions = by_name.get(name)
        if definitions and definitions[-1].scope != "function":
            found[name] = value
    return found


def not_repeatable(item: pytest.Item) -> str:
    """Why ``item`` cannot run twice, or "": pytest has no way to copy an
    item that is not a test function (a doctest, a plugin's own item type);
    Hypothesis fails a ``@given`` method called on two instances of its class
    (``HealthCheck.differing_executors``), and unittest makes a new instance
    for every run of a ``TestCase`` method."""
    if not isinstance(item, pytest.Function):
        return type(item).__name__
    if item.cls is not None and issubclass(item.cls, unittest.TestCase) and _hypothesis(item):
        return "Hypothesis test in a unittest.TestCase"
    return ""


def _hypothesis(item: pytest.Function) -> bool:
    return bool(getattr(item.function, "is_hypothesis_test", False))


def twin_of(item: pytest.Function) -> pytest.Function:
    """A new item of the same test function, beside it (the same parent, so
    the same higher-scoped fixtures, and the same node id), with its markers
    and its fixture closure (which holds the definitions of direct
    parameters)."""
    kwargs: dict[str, Any] = {
        "name": item.name,
        "callspec": getattr(item, "callspec", None),
        "fixtureinfo": pytest_private.fixture_info(item),
        "keywords": item.keywords,
        "originalname": item.originalname,
    }
    if item.instance is None or _hypothesis(item):
        # A method gets a new instance, as each test does; a Hypothesis test
        # the same one (Hypothesis refuses a @given method called on another).
        kwargs["callobj"] = item.obj
    twin = type(item).from_parent(item.parent, **kwargs)
    twin.own_markers = list(item.own_markers)  # with those plugins added after collection
    twin.user_properties = list(item.user_properties)
    for name, value in vars(item).items():  # what a plugin or conftest set on the item
        if name not in vars(twin):
            setattr(twin, name, value)
    # What plugins keep in the item's stash (set at collection), as the first run sees it.
    pytest_private.copy_stash(item.stash, twin.stash)
    return twin
