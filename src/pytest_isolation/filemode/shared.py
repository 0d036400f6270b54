"""Which session fixtures file mode sets up once for all children: named by
the ini key ``isolation_shared_fixtures`` or defined with
:func:`shared_fixture`."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from typing import Any
from typing import TypeVar
from typing import overload

import pytest

#: The ini key naming shared fixtures.
INI = "isolation_shared_fixtures"
#: The names given to :func:`shared_fixture` (in the conftests imported so far).
DECORATED: set[str] = set()
#: In a file-mode child: the shared fixtures' values it inherited, by name.
SHARED_VALUES = pytest.StashKey[dict[str, object]]()
#: The fixture definitions the parent set up for the shared fixtures (theirs
#: and their dependencies'): a child must never tear them down.
SHARED_DEFINITIONS = pytest.StashKey[list[object]]()
#: Each shared fixture's definition and those of the fixtures it depends on,
#: by name, as the parent resolved them when it set it up: a child whose
#: tests resolve one of them otherwise sets the fixture up itself.
SHARED_CLOSURES = pytest.StashKey[dict[str, dict[str, object]]]()

F = TypeVar("F", bound=Callable[..., Any])


def flush_files(values: dict[str, object]) -> None:
    """Flush the open files the shared fixtures hold (a value, an item of a
    container value or an attribute of one, up to 100 each).  Before the
    children are forked, so that none inherits what the set-up wrote and
    writes it again; in each child before it ends (with ``os._exit``, which
    flushes nothing), so that what its tests wrote is not lost."""
    for value in values.values():
        parts: list[object] = [value]
        if isinstance(value, (list, tuple, set, frozenset)):
            parts.extend(list(value)[:100])
        elif isinstance(value, dict):
            parts.extend(list(value.values())[:100])
        elif not isinstance(value, io.IOBase) and isinstance(
            getattr(value, "__dict__", None), dict
        ):
            parts.extend(list(vars(value).values())[:100])
        for part in parts:
            if isinstance(part, io.IOBase) and not part.closed:
                with contextlib.suppress(OSError, ValueError):  # unwritable, or detached
                    part.flush()


@overload
def shared_fixture(function: F) -> F: ...


@overload
def shared_fixture(*, name: str | None = None) -> Callable[[F], F]: ...


def shared_fixture(function: F | None = None, *, name: str | None = None) -> Any:
    """``@pytest.fixture(scope="session")`` whose value file mode computes
    once, in the process the children are forked from, for all of them::

        @pytest_isolation.shared_fixture
        def dataset():
            return load_big_dataset()

    Under the ``spawn`` and ``forkserver`` start methods, and without file
    mode, it is an ordinary session fixture.
    """

    def decorate(found: F) -> Any:
        DECORATED.add(name or found.__name__)
        setattr(found, _MARK, True)  # this definition, not every fixture of its name
        return pytest.fixture(scope="session", name=name)(found)

    return decorate if function is None else decorate(function)


#: Set on a function :func:`shared_fixture` defines as a fixture.
_MARK = "__pytest_isolation_shared__"


def decorated(function: object) -> bool:
    """Whether :func:`shared_fixture` defined this fixture function."""
    return getattr(function, _MARK, False) is True


def names(config: pytest.Config) -> list[str]:
    """Every shared fixture's name, the ini key's first."""
    listed = [str(name) for name in config.getini(INI)]
    return listed + sorted(DECORATED - set(listed))
