"""The limits of a test's process: wall time, memory and CPU time.

Wall time is the forking process's clock (a hang in C code cannot escape
it); memory and CPU time are the kernel's limits on the test's process
(``RLIMIT_AS`` above what the process had when it was forked, and
``RLIMIT_CPU``, whole seconds rounded up), so that an allocation over the
memory limit fails with ``MemoryError`` where it is made and a busy loop
gets ``SIGXCPU``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from collections.abc import Mapping
from typing import Any

import pytest

try:  # imported here, once: a test's process that imported it would pay each time
    import resource
except ImportError:  # no kernel limits (Windows): refused at start
    resource = None  # type: ignore[assignment]

#: The marker that runs a test in a process of its own, with its arguments.
MARKER = "isolation_process"
MARKER_HELP = (
    f"{MARKER}(timeout=SECONDS, memory=MB, cpu=SECONDS): run the test in a process of its "
    "own (pytest-isolation), with these limits (0: none; default: the run's "
    "--isolation-test-timeout, --isolation-test-memory, --isolation-test-cpu)."
)
_ARGUMENTS = ("timeout", "memory", "cpu")


@dataclasses.dataclass(frozen=True)
class Limits:
    """How long, how much memory and how much CPU time a test's process may
    take; ``None``: no limit."""

    timeout: float | None = None
    #: Megabytes the process may grow by (its address space).
    memory: float | None = None
    cpu: float | None = None

    def over(self, **given: float | None) -> Limits:
        """These limits with those ``given`` (0: none) in their place."""
        chosen = {name: value for name, value in given.items() if value is not None}
        return dataclasses.replace(
            self, **{name: (value or None) for name, value in chosen.items()}
        )

    def of_marker(self, item: pytest.Item) -> Limits:
        """The limits of ``item``'s ``isolation_process`` marker over these."""
        marker = item.get_closest_marker(MARKER)
        if marker is None:
            return self
        return self.over(**marker_arguments(marker.kwargs, marker.args, str(item.nodeid)))

    def text(self) -> str:
        """``time 2 s, memory 512 MB, CPU none``."""
        return ", ".join(
            f"{name} {_number(value)} {unit}" if value else f"{name} none"
            for name, value, unit in (
                ("time", self.timeout, "s"),
                ("memory", self.memory, "MB"),
                ("CPU", self.cpu, "s"),
            )
        )

    def apply_here(self) -> None:
        """In the test's process: the kernel's limits on memory and CPU time."""
        if self.memory:
            grown = address_space() + int(self.memory * 1024 * 1024)
            _lower(resource.RLIMIT_AS, grown)
        if self.cpu:
            seconds = max(1, math.ceil(self.cpu))
            _lower(resource.RLIMIT_CPU, seconds, seconds + 1)


def _lower(which: int, soft: int, hard: int | None = None) -> None:
    """Lower a limit; never above the hard limit the process already has."""
    _, current_hard = resource.getrlimit(which)
    ceiling = current_hard if current_hard != resource.RLIM_INFINITY else None
    wanted_hard = soft if hard is None else hard
    if ceiling is not None:
        soft, wanted_hard = min(soft, ceiling), min(wanted_hard, ceiling)
    resource.setrlimit(which, (soft, wanted_hard))


def address_space() -> int:
    """Bytes of this process's address space (``/proc/self/statm``)."""
    with open("/proc/self/statm", "rb") as statm:
        pages = int(statm.read().split()[0])
    return pages * os.sysconf("SC_PAGE_SIZE")


def memory_limit_supported() -> bool:
    """Linux: the address space is readable and the kernel enforces ``RLIMIT_AS``."""
    return sys.platform == "linux" and os.path.exists("/proc/self/statm")


def marker_arguments(
    kwargs: Mapping[str, Any], args: tuple[Any, ...], where: str
) -> dict[str, float | None]:
    """The marker's ``timeout``, ``memory`` and ``cpu``; a usage error naming
    ``where`` for anything else."""
    if args:
        raise pytest.UsageError(
            f"{where}: @pytest.mark.{MARKER} takes keyword arguments only "
            f"(timeout=SECONDS, memory=MB, cpu=SECONDS), got {args!r}"
        )
    unknown = sorted(set(kwargs) - set(_ARGUMENTS))
    if unknown:
        raise pytest.UsageError(
            f"{where}: @pytest.mark.{MARKER}: unknown argument {unknown[0]!r}; "
            "choose from timeout, memory, cpu"
        )
    found: dict[str, float | None] = {}
    for name in _ARGUMENTS:
        value = kwargs.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise pytest.UsageError(
                f"{where}: @pytest.mark.{MARKER}({name}={value!r}): give a number >= 0 "
                "(0: no limit)"
            )
        found[name] = float(value)
    return found


def _number(value: float) -> str:
    return f"{value:g}"
