"""Conftest hooks that need a file's real tests run where those tests are.

In file mode the parent collects one placeholder per file and never imports
a test module; the children collect the real tests.  A conftest's
``pytest_collection_modifyitems`` is written for real tests (it reads
``item.function``, markers of parametrized cases, fixture names), so the
parent leaves conftests out of that hook: each child calls them with its
file's tests, where they mark, skip, deselect and reorder as usual.  What
they cannot do is reorder across files, which the run says at start.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_isolation.core import pytest_private

HOOK = "pytest_collection_modifyitems"


def conftests(config: pytest.Config) -> list[object]:
    """The conftest modules loaded so far."""
    return [
        plugin
        for plugin in config.pluginmanager.get_plugins()
        if os.path.basename(getattr(plugin, "__file__", None) or "") == "conftest.py"
    ]


def with_item_hook(config: pytest.Config) -> list[str]:
    """Paths of the loaded conftests that implement :data:`HOOK`."""
    return sorted(str(getattr(p, "__file__", "")) for p in conftests(config) if hasattr(p, HOOK))


class _WithoutConftests:
    """Calls :data:`HOOK` without the conftests loaded at the time of the call
    (collection loads them as it walks the directories)."""

    def __init__(self, config: pytest.Config, original: Any) -> None:
        self.config = config
        self.original = original

    def __call__(self, **kwargs: Any) -> Any:
        # The subset is made from the real caller.
        pytest_private.set_hook_caller(self.config, HOOK, self.original)
        try:
            caller = self.config.pluginmanager.subset_hook_caller(HOOK, conftests(self.config))
        finally:
            pytest_private.set_hook_caller(self.config, HOOK, self)
        return caller(**kwargs)

    def __getattr__(self, name: str) -> Any:  # the rest of pluggy's caller interface
        return getattr(self.original, name)


@contextlib.contextmanager
def item_hook_without_conftests(config: pytest.Config) -> Iterator[None]:
    """While the parent collects, its :data:`HOOK` call leaves out conftests.

    The hook's caller is replaced for the collection only
    (:func:`.pytest_private.set_hook_caller`); ``tests/test_controller.py``
    fails loudly if a conftest's hook is called with placeholders again.
    """
    original = getattr(config.hook, HOOK)
    pytest_private.set_hook_caller(config, HOOK, _WithoutConftests(config, original))
    try:
        yield
    finally:
        pytest_private.set_hook_caller(config, HOOK, original)
