"""The deep tier's fixture values: a class-, module-, package- or
session-scoped fixture's value (a dict, list, set or deque) that a test
requesting it mutated in place."""

from __future__ import annotations

import pytest

from pytest_isolation.core.kinds import FixtureScope
from pytest_isolation.core.records import Leak
from pytest_isolation.guard import allow
from pytest_isolation.guard.deep import CONTAINERS
from pytest_isolation.guard.deep import Content
from pytest_isolation.guard.deep import restore_content
from pytest_isolation.guard.windows import Window


class FixtureValues:
    """The values of the higher-scoped fixtures alive, and those the running
    test requested, as they were when it started."""

    def __init__(self, restores: bool) -> None:
        self.restores = restores
        #: By fixture name: (scope, value).
        self.scoped: dict[str, tuple[FixtureScope, object]] = {}
        #: By fixture name: (scope, content when the test started).
        self.saved: dict[str, tuple[FixtureScope, Content]] = {}

    def remember(self, item: pytest.Item) -> None:
        """The higher-scoped fixture values (containers) a test requested, as it starts."""
        self.saved = {}
        for name, value in getattr(item, "funcargs", {}).items():
            scoped = self.scoped.get(name)
            if scoped is not None and scoped[1] is value and issubclass(type(value), CONTAINERS):
                self.saved[name] = (scoped[0], Content(value))

    def leaks(self, window: Window, restore: bool = True) -> list[Leak]:
        """Higher-scoped fixture values the test mutated in place, put back
        unless ``restore`` is false (then kept for the window's end)."""
        leaks = []
        saved = self.saved
        if restore:
            self.saved = {}
        for name, (scope, content) in saved.items():
            now = Content(content.container)
            if now == content or allow.allowed(window.allowances, "fixture-value", name):
                continue
            if restore and self.restores:
                restore_content(content.container, content.items)
            what = (
                f"the value of fixture {name!r} (scope={scope}), mutated in place "
                f"(was {content!r}, now {now!r})"
            )
            leaks.append(
                Leak(
                    window.owner,
                    "test",
                    "fixture-value",
                    name,
                    what,
                    hint="copy the value in the test, or make the fixture function-scoped",
                )
            )
        return leaks
