"""The run's test count while the children are still counting.

The parent never imports a test file, so until a file's child reports its
tests, the session counts the file as the tests it had in the last run
(pytest's cache) or, on a first run, as the test functions its source
defines (``def test...``, without parametrization).  The terminal's
``[NN%]`` is therefore exact on a repeat run.  When a child reports more
tests than counted, the session takes the extra ones into its count only as
far as the percentage already shown does not drop: the rest is added as
tests finish, and the count is exact once every test has.  So the progress
never steps back.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

import pytest

#: Cache entry: each test file's node id -> its number of tests in the last run.
CACHE_KEY = "isolation/file-tests"
#: On a test file's placeholder collector: the tests the session counts for it.
COUNTED = pytest.StashKey[int]()
#: In the parent: the tests the children counted in this run, by file node id.
LEARNED = pytest.StashKey[dict[str, int]]()


@dataclasses.dataclass
class _Shown:
    """What the terminal's percentage has shown, and the tests not yet counted."""

    #: Tests with a report so far.
    reported: set[str] = dataclasses.field(default_factory=set)
    #: The highest percentage shown.
    high: int = 0
    #: Tests the children reported that the session does not count yet.
    owed: int = 0


_SHOWN = pytest.StashKey[_Shown]()


def _known(config: pytest.Config) -> dict[str, int]:
    cache: pytest.Cache | None = getattr(config, "cache", None)  # -p no:cacheprovider
    found = {} if cache is None else cache.get(CACHE_KEY, {})
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if isinstance(v, int) and v >= 0}


def _defined(file: pytest.Collector, pattern: re.Pattern[str]) -> int:
    """The test functions ``file``'s source defines, counted by name (at least one)."""
    try:
        text = file.path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return 1
    return max(len(pattern.findall(text)), 1)


def _test_functions(config: pytest.Config) -> re.Pattern[str]:
    """``def NAME`` lines whose name ``python_functions`` takes (its prefixes;
    a glob counts every function)."""
    prefixes = [str(p) for p in config.getini("python_functions")]
    names = "|".join(map(re.escape, prefixes))
    if not prefixes or any(set(p) & set("*?[") for p in prefixes):
        names = ""
    return re.compile(rf"^[ \t]*(?:async[ \t]+)?def[ \t]+(?:{names})", re.MULTILINE)


def estimate(session: pytest.Session, files: Sequence[pytest.Collector]) -> None:
    """Count each file as its tests of the last run, or as the test
    functions it defines, before the run starts."""
    config = session.config
    known = _known(config)
    pattern = _test_functions(config)
    config.stash[LEARNED] = {}
    config.stash[_SHOWN] = _Shown()
    for file in files:
        counted = known.get(str(file.nodeid))
        if counted is None:
            counted = _defined(file, pattern)
        file.stash[COUNTED] = counted
        session.testscollected += counted - 1


def correct(file: pytest.Collector, tests: int) -> None:
    """A child counted ``tests`` tests in ``file``: the session counts them,
    the extra ones as far as the percentage shown does not drop."""
    session = file.session
    extra = tests - file.stash.get(COUNTED, 1)
    file.stash[COUNTED] = tests
    shown = session.config.stash.get(_SHOWN, None)
    if shown is None or extra < 0:  # fewer than counted: the percentage only rises
        session.testscollected += extra
    else:
        shown.owed += extra
        _settle(session, shown)
    learned = file.config.stash.get(LEARNED, None)
    if learned is not None:
        learned[str(file.nodeid)] = tests


def reported(session: pytest.Session, nodeid: str) -> None:
    """A test's report is about to be shown: count what is owed as far as
    the percentage does not drop."""
    shown = session.config.stash.get(_SHOWN, None)
    if shown is None:
        return
    shown.reported.add(nodeid)
    _settle(session, shown)
    if session.testscollected:
        shown.high = max(shown.high, len(shown.reported) * 100 // session.testscollected)


def _settle(session: pytest.Session, shown: _Shown) -> None:
    if not shown.owed:
        return
    done = len(shown.reported)
    room = shown.owed if not shown.high else done * 100 // shown.high - session.testscollected
    take = max(min(room, shown.owed), 0)
    session.testscollected += take
    shown.owed -= take


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


def end_line(reporter: pytest.TerminalReporter) -> None:
    """End the terminal's current file line as pytest does when the next file
    begins: with its ``[NN%]``, then a new line, so that what a child writes
    while it collects starts a line of its own.  Private pytest API,
    unavoidable: the percentage is written by
    ``_write_progress_information_filling_space`` when ``_show_progress_info``
    (``tests/test_progress.py`` fails loudly if they change)."""
    if reporter.currentfspath and getattr(reporter, "_show_progress_info", False):
        reporter._write_progress_information_filling_space()
    reporter.ensure_newline()
