"""Quarantine: known failures that are reported, but do not fail the run.

The file lists one entry per line: a node id (``tests/test_x.py::test_y``,
which also covers its parametrizations and a class's methods), a file or
directory path, or a node-id glob (``tests/net/*::test_*remote*``); ``#``
starts a comment line, and a reason follows `` # `` on an entry's line.
``NAME-linux.txt``, ``NAME-macos.txt`` and ``NAME-windows.txt`` beside
``NAME.txt`` add the entries of the current platform.

A quarantined test's failing reports become skipped with ``wasxfail`` set,
in the process that runs the test (a file-mode child too), so ``-x``,
retries and the exit code never count them; the terminal, junit XML and
the run report show them as quarantined, with the reason.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import posixpath
import re
import sys
from collections.abc import Generator
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_isolation.core import options
from pytest_isolation.core import outputs
from pytest_isolation.core.keys import FILE_PLACEHOLDER
from pytest_isolation.core.nodeid import file_of
from pytest_isolation.core.nodeid import selects
from pytest_isolation.core.nodeid import unbalanced_bracket

#: The platform override's suffix, by ``sys.platform``.
PLATFORMS = {"linux": "linux", "darwin": "macos", "win32": "windows"}
_ABSOLUTE = re.compile(r"^([A-Za-z]:)?[/\\]")


@dataclasses.dataclass(frozen=True)
class Entry:
    pattern: str
    reason: str
    #: ``quarantine.txt:3``, for messages.
    where: str

    @property
    def file_part(self) -> str:
        return file_of(self.pattern)

    @property
    def is_glob(self) -> bool:
        return any(c in self.pattern for c in "*?[")

    def matches(self, nodeid: str) -> bool:
        pattern = self.pattern
        if "::" not in pattern:  # a file or directory (or a glob of them)
            return self.covers_file(file_of(nodeid))
        if selects(pattern, nodeid):
            return True
        return self.is_glob and fnmatch.fnmatchcase(nodeid, pattern)

    def covers_file(self, path: str) -> bool:
        part = self.file_part.rstrip("/")
        if path == part or path.startswith(part + "/"):
            return True
        return self.is_glob and fnmatch.fnmatchcase(path, part)


def parse(text: str, source: str, root: Path) -> list[Entry]:
    """The entries of one quarantine file; a malformed one is a usage error."""
    entries = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pattern, _, reason = line.partition(" # ")
        pattern = pattern.strip()
        where = f"{source}:{number}"

        def refuse(problem: str, where: str = where, pattern: str = pattern) -> None:
            raise pytest.UsageError(f"{where}: {problem}: {pattern!r}")

        file_part = file_of(pattern)
        if not file_part:  # "::test_a", "::": a test of no file would match nothing
            refuse("no file part; write PATH::NAME (or a glob: **::NAME)")
        if "::" in pattern and not pattern.split("::", 1)[1].strip(":"):
            refuse("no test name after '::'; write PATH::NAME, or PATH for the whole file")
        if _ABSOLUTE.match(file_part):
            refuse(f"absolute path; write it relative to the rootdir ({root})")
        normal = posixpath.normpath(file_part.replace("\\", "/"))
        if normal == ".." or normal.startswith("../"):
            refuse(f"the path leaves the rootdir ({root})")
        if unbalanced_bracket(pattern) >= 0:
            refuse("unbalanced '[' in the glob (write '[[]' for a literal '[')")
        entries.append(Entry(pattern, reason.strip(), where))
    return entries


def platform_override(path: Path) -> Path:
    """``quarantine.txt`` -> ``quarantine-linux.txt`` on Linux."""
    name = PLATFORMS.get(sys.platform, sys.platform)
    return path.with_name(f"{path.stem}-{name}{path.suffix}")


def load(path: Path, source: str, root: Path) -> list[Entry]:
    """The entries of the file and of its platform override, if there is one."""
    entries = parse(_read(path, source), path.name, root)
    override = platform_override(path)
    if override.is_file():
        entries += parse(_read(override, source), override.name, root)
    return entries


def _read(path: Path, source: str) -> str:
    try:
        return outputs.read_input(path)
    except OSError as error:
        problem = error.strerror or str(error)
    except UnicodeDecodeError as error:
        problem = f"not UTF-8 text (byte {error.start})"
    raise pytest.UsageError(f"{source}: cannot read the quarantine file {str(path)!r}: {problem}")


def from_config(config: pytest.Config) -> tuple[Path, list[Entry]] | None:
    """The quarantine file named by the option (relative to the current
    directory) or the ini key (relative to the ini file), and its entries."""
    found = options.path(config, "isolation_quarantine")
    if found is None:
        return None
    path, source = found
    return path, load(path, source, config.rootpath)


class Quarantine:
    """Registered as ``isolation-quarantine``, and kept under ``core.keys.QUARANTINE_KEY``,
    in the parent and in file-mode children."""

    def __init__(self, config: pytest.Config, path: Path, entries: list[Entry]) -> None:
        self.config = config
        self.path = path
        self.entries = entries
        self._cache: dict[str, Entry | None] = {}
        #: Quarantined failures, and quarantined tests whose call passed.
        self.failed: dict[str, tuple[Entry, str]] = {}
        self.passing: dict[str, Entry] = {}
        #: Tests the run collected (reported or deselected), and files whose
        #: tests it cannot know (collection failed, or another shard's file).
        self.seen: set[str] = set()
        self.opaque: set[str] = set()
        self.stale: list[tuple[Entry, str]] = []

    def match(self, nodeid: str) -> Entry | None:
        if nodeid not in self._cache:
            self._cache[nodeid] = next((e for e in self.entries if e.matches(nodeid)), None)
        return self._cache[nodeid]

    # -- in the process running the test -----------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        self.apply(report)
        return report

    def apply(self, report: pytest.TestReport) -> None:
        """Make a quarantined test's failing report a quarantined one.

        Also called by file mode's parent for the report it makes when a
        child dies in a test.
        """
        if not report.failed:
            return
        entry = self.match(report.nodeid)
        if entry is not None:
            reason = entry.reason or "no reason given"
            report.outcome = "skipped"
            report.wasxfail = f"quarantined: {reason}"
            report.isolation_quarantined = reason  # type: ignore[attr-defined]
            report.user_properties.append(("isolation_quarantined", reason))

    @pytest.hookimpl(tryfirst=True)  # before the skipping plugin calls it xfailed
    def pytest_report_teststatus(self, report: pytest.TestReport) -> Any:
        if getattr(report, "isolation_quarantined", None) is not None and report.skipped:
            return "quarantined", "Q", ("QUARANTINED", {"yellow": True})
        return None

    # -- in the parent: what it means for the run ----------------------------------

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        nodeid = report.nodeid
        self.seen.add(nodeid)
        entry = self.match(nodeid)
        if entry is None:
            return
        if getattr(report, "isolation_quarantined", None) is not None:
            self.failed.setdefault(nodeid, (entry, _first_line(report)))
            self.passing.pop(nodeid, None)
        elif report.when == "call" and report.passed and nodeid not in self.failed:
            self.passing[nodeid] = entry

    def pytest_deselected(self, items: Sequence[pytest.Item]) -> None:
        for item in items:
            if item.stash.get(FILE_PLACEHOLDER, False):  # another shard's file in file mode
                self.opaque.add(file_of(item.nodeid))
            else:
                self.seen.add(item.nodeid)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed and report.nodeid:
            self.opaque.add(file_of(report.nodeid))

    def pytest_isolation_workeroutput(self, output: dict[str, Any]) -> None:
        output["seen"] = sorted(self.seen)
        output["opaque"] = sorted(self.opaque)

    def pytest_isolation_merge_workeroutput(self, output: dict[str, Any]) -> None:
        self.seen.update(output.get("seen", ()))
        self.opaque.update(output.get("opaque", ()))

    @pytest.hookimpl(tryfirst=True)  # before the terminal summary is written
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        complete = exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
        if complete and not (session.shouldfail or session.shouldstop):
            self.stale = self._stale()

    def _stale(self) -> list[tuple[Entry, str]]:
        """Entries that match nothing, judged only where this run saw everything."""
        files = {file_of(nodeid) for nodeid in self.seen}
        root = self.config.rootpath
        stale = []
        for entry in self.entries:
            if any(entry.matches(nodeid) for nodeid in self.seen):
                continue
            if any(entry.covers_file(path) for path in self.opaque):
                continue  # its tests are unknown to this run
            if any(entry.covers_file(path) for path in files):
                stale.append((entry, "matches no test"))
                continue
            part = entry.file_part
            exists = next(iter(root.glob(part)), None) if entry.is_glob else (root / part).exists()
            if not exists:
                stale.append((entry, "matches no file"))
        return stale

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not (self.failed or self.passing or self.stale):
            return
        write = terminalreporter.write_line
        terminalreporter.write_sep("=", f"isolation: quarantine ({self.path.name})")
        for nodeid, (entry, failure) in self.failed.items():
            write(f"QUARANTINED {nodeid} - {entry.reason or 'no reason given'} ({entry.where})")
            if failure:
                write(f"    {failure}")
        for nodeid, entry in self.passing.items():
            write(f"passes now: remove it from quarantine: {nodeid} ({entry.where})", green=True)
        for entry, why in self.stale:
            write(f"warning: stale entry {entry.where}: {entry.pattern!r} {why}", yellow=True)

    def to_json(self) -> dict[str, Any]:
        return {
            "quarantined": [
                {"nodeid": nodeid, "reason": entry.reason, "entry": entry.where}
                for nodeid, (entry, _) in self.failed.items()
            ],
            "quarantine_passing": [
                {"nodeid": nodeid, "entry": entry.where} for nodeid, entry in self.passing.items()
            ],
            "quarantine_stale": [
                {"entry": entry.where, "pattern": entry.pattern, "why": why}
                for entry, why in self.stale
            ],
        }


def _first_line(report: pytest.TestReport) -> str:
    """The failure's one-line message, e.g. ``AssertionError: assert 1 == 2``."""
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None)
    if message:
        return str(message).splitlines()[0]
    text = str(report.longrepr or "").strip().splitlines()  # file mode's crash message
    return text[0] if text else ""
