"""Preloading refusals remembered from one run to the next, in pytest's cache.

Each module a fork server refuses to preload costs a server: the parent
starts another one without it, and the imports run again.  What a watched
import did depends on the code it ran and the process it ran in, so a
refusal holds as long as both are the same: the files of every module the
server imported up to the refused one (their content) and the context (the
interpreter, the environment, the working directory, ``sys.path`` and the
modules loaded before).  The next run that plans the same list of preloads
in the same context, with every file unchanged, cuts it before the refused
module at once.

Only refusals are remembered.  Preloading less never changes an outcome (the
file's child imports the module itself, as a fresh ``pytest FILE`` does),
while a remembered "pure" would let an import run unwatched on the word of
an earlier run, and what it does may hang on more than its files (whether a
path exists).  ``--cache-clear`` forgets every refusal; ``-p no:cacheprovider``
keeps none.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import sys
from collections.abc import Sequence
from typing import Any

import pytest

from pytest_isolation.filemode.server import preload

#: Where the verdicts are kept in pytest's cache (``.pytest_cache``).
CACHE_KEY = "isolation/preload-verdicts"
_FORMAT = 1


@dataclasses.dataclass(frozen=True)
class PreloadVerdict:
    """What an earlier run found for a list of preloads: the module it
    refused, and why."""

    refused: str
    why: str


class Verdicts:
    """The refusals of earlier runs that still hold, and this run's new ones."""

    def __init__(self, config: pytest.Config) -> None:
        #: None under ``-p no:cacheprovider``, which takes ``config.cache`` away.
        self.cache: pytest.Cache | None = getattr(config, "cache", None)
        self.context = _context()
        stored: Any = None if self.cache is None else self.cache.get(CACHE_KEY, None)
        same = isinstance(stored, dict) and stored.get("context") == self.context
        entries = stored.get("starts") if same else None
        self._entries: dict[str, dict[str, Any]] = entries if isinstance(entries, dict) else {}
        self._changed = False

    def known(self, start: Sequence[str]) -> PreloadVerdict | None:
        """The verdict for ``start`` if an earlier run found one that still holds."""
        entry = self._entries.get(_key(start))
        if not isinstance(entry, dict):
            return None
        files = entry.get("files")
        if not isinstance(files, dict) or any(
            _digest(path) != digest for path, digest in files.items()
        ):
            self._forget(start)
            return None
        return PreloadVerdict(str(entry.get("refused", "")), str(entry.get("why", "")))

    def remember(self, start: Sequence[str], loaded: preload.Loaded) -> None:
        """Keep the module a server refused for ``start``, and why."""
        if not loaded.refused:  # preloaded, or not one module's doing: found again next time
            return
        files = {path: _digest(path) for path in loaded.files}
        entry = {"refused": loaded.refused, "why": loaded.why, "files": files}
        self._entries[_key(start)] = entry
        self._changed = True

    def _forget(self, start: Sequence[str]) -> None:
        if self._entries.pop(_key(start), None) is not None:
            self._changed = True

    def save(self) -> None:
        if self.cache is not None and self._changed:
            value = {"context": self.context, "starts": self._entries}
            self.cache.set(CACHE_KEY, value)
            self._changed = False


def _key(start: Sequence[str]) -> str:
    return " ".join(start)


def _context() -> str:
    """A digest of what an import can depend on beside its files."""
    parts = [
        f"format {_FORMAT}",
        sys.version,
        sys.executable,
        sys.platform,
        os.getcwd(),
        *sys.path,
        *sorted(f"{name}={value}" for name, value in os.environ.items()),
        *sorted(sys.modules),
    ]
    return hashlib.blake2b("\0".join(parts).encode(errors="replace"), digest_size=16).hexdigest()


def _digest(path: str) -> str:
    """The content digest of the file at ``path`` ("" if it is not a regular
    file that can be read: a cache edited by hand never makes the run read a
    device or a pipe)."""
    if not os.path.isfile(path):
        return ""
    try:
        with open(path, "rb") as file:
            return hashlib.blake2b(file.read(), digest_size=16).hexdigest()
    except OSError:
        return ""
