"""The warning classes of the plugin, re-exported by :mod:`pytest_isolation`."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

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


def blanket_error(warning: Warning) -> bool:
    """Whether the filter that decides ``warning`` is an ``error`` filter for
    warnings in general rather than for this plugin's (``-W error``,
    ``filterwarnings = error``): the leak guard and the lint show their
    warnings then, and obey only a filter that names them."""
    text = str(warning)
    for action, message, category, _module, _line in warnings.filters:
        if not issubclass(type(warning), category):
            continue
        if message is not None and not message.match(text):
            continue
        named = isinstance(category, type) and issubclass(category, IsolationWarning)
        return action == "error" and not named
    return False


def warning_category(module: str, qualname: str) -> type[Warning]:
    """The warning class by name, or a stand-in of that name.

    A category defined in a test module cannot be imported by the parent
    (it never imports test modules); the summary only needs its name.
    """
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except Exception:
        found = None
    if isinstance(found, type) and issubclass(found, Warning):
        return found
    return type(qualname.rpartition(".")[2], (UserWarning,), {"__module__": module})


def rebuilt(
    module: str, qualname: str, message: str, filename: str, lineno: int
) -> warnings.WarningMessage:
    """A warning another process recorded, from what crossed the pipe
    (``wire.warning_payload``): its category found by name, or a stand-in."""
    category = warning_category(module, qualname)
    return warnings.WarningMessage(category(message), category, filename, lineno)
