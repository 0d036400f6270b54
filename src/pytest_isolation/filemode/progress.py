"""The run's test count while the children are still counting.

The parent never imports a test file, so until a file's child reports its
tests, the session counts the file as the tests it had in the last run
(pytest's cache), or as one.  The terminal's ``[NN%]`` is therefore exact
on a repeat run; on a first run, or after a file gained tests, it can step
back when a child reports more tests than counted.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

#: Cache entry: each test file's node id -> its number of tests in the last run.
CACHE_KEY = "isolation/file-tests"
#: On a test file's placeholder collector: the tests the session counts for it.
COUNTED = pytest.StashKey[int]()
#: In the parent: the tests the children counted in this run, by file node id.
LEARNED = pytest.StashKey[dict[str, int]]()


def _known(config: pytest.Config) -> dict[str, int]:
    cache: pytest.Cache | None = getattr(config, "cache", None)  # -p no:cacheprovider
    found = {} if cache is None else cache.get(CACHE_KEY, {})
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if isinstance(v, int) and v >= 0}


def estimate(session: pytest.Session, files: Sequence[pytest.Collector]) -> None:
    """Count each file as its tests of the last run, before the run starts."""
    known = _known(session.config)
    session.config.stash[LEARNED] = {}
    for file in files:
        counted = known.get(str(file.nodeid), 1)
        file.stash[COUNTED] = counted
        session.testscollected += counted - 1


def correct(file: pytest.Collector, tests: int) -> None:
    """A child counted ``tests`` tests in ``file``: the session counts them."""
    file.session.testscollected += tests - file.stash.get(COUNTED, 1)
    file.stash[COUNTED] = tests
    learned = file.config.stash.get(LEARNED, None)
    if learned is not None:
        learned[str(file.nodeid)] = tests


def forget(file: pytest.Collector) -> None:
    """No child could count ``file``'s tests (its collection died)."""
    correct(file, 0)
    learned = file.config.stash.get(LEARNED, None)
    if learned is not None:
        learned.pop(str(file.nodeid), None)


def save(config: pytest.Config) -> None:
    """Keep this run's counts for the next one's progress."""
    cache: pytest.Cache | None = getattr(config, "cache", None)
    learned = config.stash.get(LEARNED, None)
    if cache is not None and learned:
        cache.set(CACHE_KEY, {**_known(config), **learned})
