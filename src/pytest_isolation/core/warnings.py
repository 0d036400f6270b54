"""The warning classes of the plugin, re-exported by :mod:`pytest_isolation`."""

from __future__ import annotations

import pytest


class IsolationWarning(pytest.PytestWarning):
    """Base class of the warnings pytest-isolation emits."""

    __module__ = "pytest_isolation"


class LeakedStateWarning(IsolationWarning):
    """A test or fixture left process-wide state changed (the leak guard)."""

    __module__ = "pytest_isolation"


class IsolationLintWarning(IsolationWarning):
    """A test file breaks a rule of isolated tests (the isolation lint)."""

    __module__ = "pytest_isolation"
