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
from pathlib import Path

import pytest

from pytest_isolation.core import pytest_private

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


def _defined(path: Path, pattern: re.Pattern[str]) -> int:
    """The test functions the source at ``path`` defines, counted by name (at least one)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
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
            counted = _defined(file.path, pattern)
        file.stash[COUNTED] = counted
        session.testscollected += counted - 1


def correct(file: pytest.Collector, tests: int) -> None:
    """A child counted ``tests`` tests in ``file``: the session counts them,
    the extra ones as far as the percentage shown does not drop."""
    _recount(file.session, file.stash.get(COUNTED, 1), tests)
    file.stash[COUNTED] = tests
    learned = file.config.stash.get(LEARNED, None)
    if learned is not None:
        learned[str(file.nodeid)] = tests


def _recount(session: pytest.Session, counted: int, tests: int) -> None:
    extra = tests - counted
    shown = session.config.stash.get(_SHOWN, None)
    if shown is None or extra < 0:  # fewer than counted: the percentage only rises
        session.testscollected += extra
    else:
        shown.owed += extra
        _settle(session, shown)


class WorkersFiles:
    """The xdist controller's count of its workers' files' tests: each file
    is counted as the tests it had in the last run, or as the test
    functions it defines, until a worker's report says how many its child
    collected; the percentage never steps back, as in one process."""

    def __init__(self) -> None:
        #: The tests counted for each file, by the file's node id.
        self.counted: dict[str, int] | None = None
        self.files: list[str] = []

    def collected(self, ids: Sequence[str]) -> None:
        """A worker collected these placeholders (every worker the same)."""
        self.files = [nodeid.split("::", 1)[0] for nodeid in ids]

    def correct(self, session: pytest.Session, nodeid: str, tests: int) -> None:
        """``nodeid``'s file has ``tests`` tests (a worker's child said)."""
        counted = self._counted(session)
        path = nodeid.split("::", 1)[0]
        _recount(session, counted.get(path, 1), tests)
        counted[path] = tests

    def reported(self, session: pytest.Session, nodeid: str) -> None:
        self._counted(session)
        reported(session, nodeid)

    def displayed(self, session: pytest.Session) -> None:
        displayed(session)

    def _counted(self, session: pytest.Session) -> dict[str, int]:
        """The estimates, made once xdist counted each file as one test."""
        if self.counted is None:
            config = session.config
            known, pattern = _known(config), _test_functions(config)
            self.counted = {
                path: known.get(path) or _defined(config.rootpath / path, pattern)
                for path in self.files
            }
            config.stash[_SHOWN] = _Shown()
            session.testscollected = sum(self.counted.values()) or session.testscollected
        return self.counted


def reported(session: pytest.Session, nodeid: str) -> None:
    """A test's report is about to be shown: count what is owed as far as
    the percentage does not drop."""
    shown = session.config.stash.get(_SHOWN, None)
    if shown is None:
        return
    shown.reported.add(nodeid)
    _settle(session, shown, coming=nodeid)


def displayed(session: pytest.Session) -> None:
    """The terminal may have shown a percentage: the highest one it showed."""
    shown = session.config.stash.get(_SHOWN, None)
    if shown is not None and session.testscollected:
        done = _counted_by_terminal(session, shown)
        shown.high = max(shown.high, done * 100 // session.testscollected)


def _settle(session: pytest.Session, shown: _Shown, coming: str = "") -> None:
    """Count what is owed as far as the next percentage shown does not drop
    below the highest one shown: the next one counts the test ``coming``
    (whose report is being shown) too."""
    if not shown.owed:
        return
    displayed(session)  # the highest shown so far, the last one included
    terminal = _terminal_set(session)
    if terminal is None:  # the tests reported here, ``coming`` included
        done = len(shown.reported)
    else:
        done = len(terminal) + int(
            bool(coming) and not pytest_private.progress_holds(terminal, coming)
        )
    room = shown.owed if not shown.high else done * 100 // shown.high - session.testscollected
    take = max(min(room, shown.owed), 0)
    session.testscollected += take
    shown.owed -= take


def _counted_by_terminal(session: pytest.Session, shown: _Shown) -> int:
    """The tests the terminal's percentage counts so far (under xdist the
    reports of two workers interleave: only the terminal's own count says
    what it shows).  Without it, the tests reported here."""
    counted = _terminal_set(session)
    return len(counted) if counted is not None else len(shown.reported)


def _terminal_set(session: pytest.Session) -> set[object] | None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    return pytest_private.progress_reported(reporter)


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
    while it collects starts a line of its own."""
    if reporter.currentfspath:
        pytest_private.write_progress_filling_space(reporter)
    reporter.ensure_newline()
