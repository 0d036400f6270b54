"""What a fork cannot carry: the shared fixtures' set-up may leave no
thread, open socket or value a forked child could not use as its own."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import threading

import pytest


class Refused(Exception):
    """A shared fixture's set-up left something a forked child cannot inherit."""


def sockets() -> set[int]:
    """This process's open sockets (Linux: ``/proc/self/fd``)."""
    try:
        fds = [int(entry) for entry in os.listdir("/proc/self/fd")]
    except OSError:
        return set()
    found = set()
    for fd in fds:
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                found.add(fd)
        except OSError:
            continue
    return found


#: Values a forked child cannot use as its own: the type and why.
_UNSAFE: tuple[tuple[type, str], ...] = (
    (threading.Thread, "a thread does not survive a fork"),
    (socket.socket, "a forked child would talk on the same connection"),
    (subprocess.Popen, "only the process that started a process can wait for it"),
)


def _unsafe_types() -> tuple[tuple[type, str], ...]:
    """:data:`_UNSAFE` and those of modules already imported (never imported here)."""
    found = list(_UNSAFE)
    futures = sys.modules.get("concurrent.futures")
    if futures is not None:
        found.append((futures.Executor, "its workers do not survive a fork"))
    asyncio = sys.modules.get("asyncio")
    if asyncio is not None:
        found.append((asyncio.AbstractEventLoop, "an event loop does not survive a fork"))
    pool = sys.modules.get("multiprocessing.pool")
    if pool is not None:
        found.append((pool.Pool, "its workers do not survive a fork"))
    return tuple(found)


def unsafe_part(value: object) -> str | None:
    """What in ``value`` (itself, or one level of a container) a fork cannot carry."""
    parts: list[object] = [value]
    if isinstance(value, (list, tuple, set, frozenset)):
        parts.extend(list(value)[:100])
    elif isinstance(value, dict):
        parts.extend(list(value.values())[:100])
    for part in parts:
        for kind, why in _unsafe_types():
            if isinstance(part, kind):
                return f"a {type(part).__qualname__} ({why})"
    return None


def check(
    values: dict[str, object],
    threads: set[threading.Thread],
    before: set[int],
    config: pytest.Config,
) -> None:
    fixtures = ", ".join(map(repr, values))
    started = [t.name for t in threading.enumerate() if t not in threads and t.is_alive()]
    if started:
        raise Refused(
            f"the set-up of the shared fixtures {fixtures} started the thread "
            f"{', '.join(started)}, which a forked child would not have"
        )
    for name, value in values.items():
        part = unsafe_part(value)
        if part is not None:
            raise Refused(f"the shared fixture {name!r} gives {part}")
    opened = sorted(sockets() - before)
    renews = config.pluginmanager.hook.pytest_isolation_child_started.get_hookimpls()
    if opened and not renews:
        raise Refused(
            f"the set-up of the shared fixtures {fixtures} left {len(opened)} socket(s) open, "
            "which every forked child would share; close them, or renew them in each child in "
            "a pytest_isolation_child_started hook (which says the project takes care of it)"
        )
