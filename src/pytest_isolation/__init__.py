"""pytest-isolation: test isolation enforced by pytest."""

from __future__ import annotations

import pytest

__version__ = "0.1.0.dev0"
__all__ = [
    "IsolatedEnv",
    "IsolatedTmp",
    "IsolationWarning",
    "LeakedStateWarning",
    "ModuleMocker",
    "NetworkDeniedError",
    "RealHomeWriteError",
    "TmpDir",
    "UnsafeRemoval",
    "__version__",
    "check_module_stub",
    "tmp",
]

#: Public names defined in the fixtures package, imported on first use so that
#: ``import pytest_isolation`` (done by every file-mode child) stays light.
_LAZY = {
    "IsolatedEnv": "pytest_isolation.fixtures.env",
    "NetworkDeniedError": "pytest_isolation.fixtures.env",
    "RealHomeWriteError": "pytest_isolation.fixtures.env",
    "IsolatedTmp": "pytest_isolation.fixtures",
    "ModuleMocker": "pytest_isolation.fixtures.modules",
    "check_module_stub": "pytest_isolation.fixtures.modules",
    "TmpDir": "pytest_isolation.fixtures.tmp",
    "UnsafeRemoval": "pytest_isolation.fixtures.tmp",
    "tmp": "pytest_isolation.fixtures.tmp",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_isolation' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


class IsolationWarning(pytest.PytestWarning):
    """Base class of the warnings pytest-isolation emits."""

    __module__ = "pytest_isolation"


class LeakedStateWarning(IsolationWarning):
    """A test or fixture left process-wide state changed (the leak guard)."""

    __module__ = "pytest_isolation"
