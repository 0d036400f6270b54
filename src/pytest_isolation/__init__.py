"""pytest-isolation: test isolation enforced by pytest.

PYTEST_DONT_REWRITE: pytest leaves this package's asserts as they are (they
are no tests), so the fork server of the ``forkserver`` start method may
import it before a child's pytest marks its plugins for rewriting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_isolation.core import startup as _startup  # noqa: F401  (first: sys.path before any conftest)
from pytest_isolation.core.names import VERSION
from pytest_isolation.core.warnings import IsolationLintWarning
from pytest_isolation.core.warnings import IsolationWarning
from pytest_isolation.core.warnings import LeakedStateWarning
from pytest_isolation.filemode.shared import shared_fixture

if TYPE_CHECKING:  # the real imports are lazy, see __getattr__ below
    from pytest_isolation.fixtures import IsolatedTmp as IsolatedTmp
    from pytest_isolation.fixtures.env import IsolatedEnv as IsolatedEnv
    from pytest_isolation.fixtures.env import NetworkDeniedError as NetworkDeniedError
    from pytest_isolation.fixtures.env import RealHomeWriteError as RealHomeWriteError
    from pytest_isolation.fixtures.modules import ModuleMocker as ModuleMocker
    from pytest_isolation.fixtures.modules import check_module_stub as check_module_stub
    from pytest_isolation.fixtures.tmp import TmpDir as TmpDir
    from pytest_isolation.fixtures.tmp import UnsafeRemoval as UnsafeRemoval
    from pytest_isolation.fixtures.tmp import tmp as tmp

__version__ = VERSION
__all__ = [
    "IsolatedEnv",
    "IsolatedTmp",
    "IsolationLintWarning",
    "IsolationWarning",
    "LeakedStateWarning",
    "ModuleMocker",
    "NetworkDeniedError",
    "RealHomeWriteError",
    "TmpDir",
    "UnsafeRemoval",
    "__version__",
    "check_module_stub",
    "shared_fixture",
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
