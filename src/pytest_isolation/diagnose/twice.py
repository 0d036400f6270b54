"""``--isolation-twice``: every test that passes runs again at once, in the
same process, to find tests that break their own state.

The repeat is the same test function (a copy of its item beside it):
function-scoped fixtures are set up anew, higher-scoped ones are shared,
as pytest shares them between two tests of a file.  Between the two runs
only the test's function-scoped fixtures are torn down; the leak guard
reports what the first run left changed, as it would after a single run,
and puts it back only after the repeat, so a test that breaks its own state
where the guard would restore it still fails its repeat.

The first run is reported as pytest reports it.  A repeat that passes is not
reported; one that fails is reported once more under the test's node id, as
a failure of its own kind ("passes once, fails when repeated"), with its
traceback and what the first run left changed.  The teardown of the
higher-scoped fixtures that comes after the repeat is the test's teardown.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator
from collections.abc import Sequence
from typing import Any

import pytest

from pytest_isolation.core.keys import FILE_PLACEHOLDER
from pytest_isolation.core.keys import FIRST_RUN_LEFT
from pytest_isolation.core.keys import REPEAT
from pytest_isolation.core.keys import REPEAT_ATTR
from pytest_isolation.core.kinds import Phase
from pytest_isolation.core.records import Leak
from pytest_isolation.core.words import agreeing
from pytest_isolation.core.words import counted
from pytest_isolation.diagnose import phases

#: On the call report of a test that ran once only: why (the type of its item).
ONCE_ATTR = "isolation_once"
#: On an item that runs once only: why.
ONCE = pytest.StashKey[str]()
KIND = "passes once, fails when repeated"
SECTION = f"isolation: {KIND}"
NOTHING_SEEN = (
    "The leak guard saw no change the first run left in the state it watches (module "
    "globals, class attributes, os.environ, the working directory, sys.modules, mock "
    "patches, logging, ...): look for state it does not watch, such as a file outside "
    "tmp_path, a database, or a cache kept by a library; --isolation-leaks-deep also watches "
    "lists, dicts and sets changed in place."
)
#: Options that run no test, or print each set-up once.
INCOMPATIBLE = {
    "setuponly": "--setup-only runs no test",
    "setupplan": "--setup-plan runs no test",
    "setupshow": "--setup-show shows each test's set-up once",
}


def check_compatible(config: pytest.Config) -> None:
    """Refuse options whose run ``--isolation-twice`` would change."""
    for dest, why in INCOMPATIBLE.items():
        if config.getoption(dest, False):
            raise pytest.UsageError(
                f"--isolation-twice cannot run with {why}; use one or the other"
            )
    if config.getoption("reruns", 0):
        raise pytest.UsageError(
            "--isolation-twice cannot run with --reruns (pytest-rerunfailures): --reruns runs "
            "a failed test again until it passes, --isolation-twice runs a passed test again "
            "to see it fail; use one or the other"
        )


class Twice:
    """Registered as ``isolation-twice`` under ``--isolation-twice``: runs the
    tests (in the process that runs them), and reports the repeats that
    failed (in the process that owns the terminal)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.failed: list[pytest.TestReport] = []
        self.once: Counter[str] = Counter()
        #: Each test whose repeat changed a higher-scoped fixture, and those put back.
        self.put_back: list[tuple[str, list[str]]] = []

    def pytest_report_header(self) -> str:
        return (
            "isolation: --isolation-twice: each test that passes runs again at once, in the "
            "same process"
        )

    @pytest.hookimpl(tryfirst=True)  # instead of pytest's runner, which runs each test once
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> bool | None:
        if item.stash.get(FILE_PLACEHOLDER, False):
            return None  # file mode's parent: the child runs the file's tests twice
        why = phases.not_repeatable(item)
        if why or not isinstance(item, pytest.Function):
            item.stash[ONCE] = why
            return None  # pytest runs it once; its call report says so
        item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        run_twice(item, phases.twin_of(item), nextitem)
        item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if report.when == "call" and ONCE in item.stash:
            setattr(report, ONCE_ATTR, item.stash[ONCE])
        return report

    def pytest_report_teststatus(self, report: pytest.TestReport) -> tuple[str, str, str] | None:
        if not hasattr(report, REPEAT_ATTR) or not report.failed:
            return None
        if report.when == "call":
            return "failed", "R", "FAILED WHEN REPEATED"
        return "error", "R", "ERROR WHEN REPEATED"

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        names = getattr(report, PUT_BACK_ATTR, None)
        if names:
            self.put_back.append((str(report.nodeid), list(names)))
        if hasattr(report, REPEAT_ATTR) and report.failed:
            self.failed.append(report)
        once = getattr(report, ONCE_ATTR, None)
        if once is not None:
            self.once[str(once)] += 1

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        for nodeid, names in self.put_back:
            fixtures = ", ".join(repr(name) for name in names)
            terminalreporter.write_line(
                f"isolation: --isolation-twice put back {fixtures} after the repeat of {nodeid}, "
                "which changed it (the tests after it see it as after one run)"
            )
        if self.failed:
            count = len(self.failed)
            tests = f"{counted(count, 'test')} {agreeing(count, 'passes', 'pass')} once and "
            tests += agreeing(count, "fails", "fail")
            terminalreporter.write_sep("=", f"isolation: {tests} when repeated")
            for report in self.failed:
                terminalreporter.write_line(report.nodeid)
                left = getattr(report, REPEAT_ATTR, [])
                for line in left or ["(the leak guard saw no change its first run left)"]:
                    terminalreporter.write_line(f"  {line}")
        if self.once:
            kinds = ", ".join(f"{kind}: {n}" for kind, n in sorted(self.once.items()))
            total = sum(self.once.values())
            terminalreporter.write_line(
                f"isolation: {counted(total, 'test')} ran once, not twice "
                f"({kinds}): --isolation-twice repeats Python test functions"
            )


def run_twice(item: pytest.Item, twin: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Run ``item``, then, if it passed, ``twin`` at once; log what pytest
    would have logged for one run, and a failed repeat."""
    phases.begin(item)
    try:
        setup = phases.run_phase(item, "setup", log=True)
        call = phases.run_phase(item, "call", log=True) if setup.passed else None
        stopping = _stopping(item)
        if call is None or not call.passed or hasattr(call, "wasxfail") or stopping:
            phases.run_phase(item, "teardown", log=True, nextitem=None if stopping else nextitem)
            return
        item.stash[REPEAT] = "first"
        first_teardown = phases.run_phase(item, "teardown", log=False, nextitem=twin)
        shared = Kept(phases.higher_scoped(item))
    finally:
        phases.release(item)
        if REPEAT in item.stash:
            del item.stash[REPEAT]
    left = item.stash.get(FIRST_RUN_LEFT, [])
    twin.stash[REPEAT] = "again"
    repeat = _run(twin, nextitem)
    put_back = shared.put_back()  # the tests after it see what they would after one run
    ihook = item.ihook
    teardown = _teardown(first_teardown, repeat[-1])
    if put_back:  # said in the summary of the process that owns the terminal
        setattr(teardown, PUT_BACK_ATTR, put_back)
    ihook.pytest_runtest_logreport(report=teardown)
    failed = [report for report in repeat[:-1] if report.failed]
    if failed:
        report = failed[0]
        setattr(report, REPEAT_ATTR, [_line(leak) for leak in left])
        report.sections.append((SECTION, _explain(left)))
        ihook.pytest_runtest_logreport(report=report)
        ihook.pytest_runtest_logreport(report=_closing(report, repeat[-1]))


#: On the teardown report of a test whose repeat changed a higher-scoped
#: fixture's value: the fixtures put back.
PUT_BACK_ATTR = "isolation_put_back"


class Kept:
    """Copies of the containers among the higher-scoped fixture values a test
    uses, taken after its first run: its repeat shares them with the tests
    after it (a module-scoped list it pops from), which must see them as
    after one run."""

    def __init__(self, values: dict[str, object]) -> None:
        self.kept: dict[str, tuple[Any, Any]] = {}  # a container and its copy
        for name, value in values.items():
            if isinstance(value, (list, dict, set, bytearray)):
                self.kept[name] = (value, value.copy())

    def put_back(self) -> list[str]:
        """Put back in place what the repeat changed; the names."""
        changed = []
        for name, (value, copy) in self.kept.items():
            if value != copy:
                changed.append(name)
                if isinstance(value, (list, bytearray)):
                    value[:] = copy
                elif isinstance(value, (dict, set)):
                    value.clear()
                    value.update(copy)
        return changed


def _run(item: pytest.Item, nextitem: pytest.Item | None) -> list[pytest.TestReport]:
    """The repeat's phases, unlogged; the last is its teardown."""
    try:
        reports = [phases.run_phase(item, "setup", log=False)]
        if reports[0].passed:
            reports.append(phases.run_phase(item, "call", log=False))
        reports.append(
            phases.run_phase(
                item, "teardown", log=False, nextitem=None if _stopping(item) else nextitem
            )
        )
    finally:
        phases.release(item)
    return reports


def _stopping(item: pytest.Item) -> bool:
    """The session is about to stop: the teardown tears everything down (no
    next item), as pytest's runner does, and no test runs again."""
    return bool(item.session.shouldfail or item.session.shouldstop)


def _teardown(first: pytest.TestReport, last: pytest.TestReport) -> pytest.TestReport:
    """The test's one teardown report: the first run's teardown of its
    function-scoped fixtures and, after the repeat, the teardown of the
    repeat's and of the higher-scoped ones (an error there is the test's
    teardown error, as in a plain run)."""
    report = first if first.failed or last.passed else last
    sections = [*first.sections, *_phase_sections(last, "teardown")]
    if first.failed and last.failed:
        sections.append(("isolation: also at teardown, after the repeat", str(last.longrepr)))
    report.sections = sections
    report.duration = first.duration + last.duration
    report.user_properties = first.user_properties
    return report


def _closing(report: pytest.TestReport, teardown: pytest.TestReport) -> pytest.TestReport:
    """A passed teardown report that closes the failed repeat's entry (junit
    writes an entry's captured output at its teardown)."""
    closing = pytest.TestReport(
        nodeid=report.nodeid,
        location=report.location,
        keywords=dict(report.keywords),
        outcome="passed",
        longrepr=None,
        when="teardown",
        sections=[s for s in teardown.sections if not s[0].startswith("isolation:")],
        duration=0.0,
        user_properties=[*teardown.user_properties, ("isolation", KIND)],
    )
    setattr(closing, REPEAT_ATTR, getattr(report, REPEAT_ATTR))
    return closing


def _phase_sections(report: pytest.TestReport, when: Phase) -> list[tuple[str, str]]:
    """A report's captured-output sections of one phase (a report carries its
    item's sections of every phase so far)."""
    return [section for section in report.sections if section[0].endswith(f" {when}")]


def _line(leak: Leak) -> str:
    site = f", at {leak.site}" if leak.site else ""
    return f"[{leak.category}] {leak.what}{site}"


def _explain(left: Sequence[Leak]) -> str:
    head = (
        "This test passed, then failed when run again at once in the same process "
        "(--isolation-twice): its first run changes state that its next run depends on. "
    )
    if not left:
        return head + NOTHING_SEEN
    lines = "\n".join(f"  {_line(leak)}" for leak in left)
    return head + f"What its first run left changed:\n{lines}"
