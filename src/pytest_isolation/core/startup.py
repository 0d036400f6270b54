"""What the interpreter set up before pytest changed it.

``PATH0`` is read when this package is first imported: pytest loads its
plugins (this one among them) before the first conftest, and the first
conftest's folder is inserted in front of ``sys.path``
(``--import-mode=prepend``).  :class:`Started` is read per run, as the
initial conftests are about to load (:func:`record`).  A spawned child, or
the fork server, takes these over: a fresh ``pytest FILE`` starts from
them, and its own start-up (the conftests' imports) then changes them
again."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys

import pytest

#: ``sys.path[0]`` as the interpreter set it: the working directory under
#: ``python -m pytest``, the script's folder under the ``pytest`` script.
PATH0: str = sys.path[0] if sys.path else ""


@dataclasses.dataclass(frozen=True)
class Started:
    """What the process had before the first conftest was imported."""

    #: The environment (a conftest's ``os.environ["PATH"] += ...`` at
    #: import is not in it, so a child's own import does it once).
    environ: dict[str, str]
    #: The file descriptors above 2 it inherited from whatever started it
    #: (a make jobserver, a CI runner's pipe): open and inheritable, where
    #: Python opens its own non-inheritable.
    fds: tuple[int, ...]

    def open_fds(self) -> tuple[int, ...]:
        """Those of :attr:`fds` still open and inheritable."""
        return tuple(fd for fd in self.fds if _inheritable(fd))


#: The run's :class:`Started` (absent when this plugin was loaded by a conftest).
STARTED = pytest.StashKey[Started]()


def record(config: pytest.Config) -> None:
    """Note what the process has now, before the first conftest."""
    config.stash[STARTED] = Started(dict(os.environ), _inherited_fds())


def _inherited_fds() -> tuple[int, ...]:
    try:
        names = os.listdir("/dev/fd")  # Linux and macOS
    except OSError:
        return ()
    fds = sorted(int(name) for name in names if name.isdigit())
    return tuple(fd for fd in fds if fd > 2 and _inheritable(fd))


def _inheritable(fd: int) -> bool:
    with contextlib.suppress(OSError):  # closed (the listing's own fd, by now)
        return os.get_inheritable(fd)
    return False
