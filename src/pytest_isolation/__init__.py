"""pytest-isolation: test isolation enforced by pytest."""

from __future__ import annotations

import pytest

__version__ = "0.1.0.dev0"
__all__ = ["IsolationWarning", "LeakedStateWarning", "__version__"]


class IsolationWarning(pytest.PytestWarning):
    """Base class of the warnings pytest-isolation emits."""

    __module__ = "pytest_isolation"


class LeakedStateWarning(IsolationWarning):
    """A test or fixture left process-wide state changed (the leak guard)."""

    __module__ = "pytest_isolation"
