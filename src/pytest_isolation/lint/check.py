"""The isolation lint as a pytest plugin: each test file (and each collected
directory's ``conftest.py``) is linted when it is collected.

``warn`` emits one :class:`~pytest_isolation.IsolationLintWarning` per
finding at the file's line; ``error`` fails the file's collection with all
of them, so the run stops before any test.  Findings are cached in pytest's
cache by the file's content, so a re-run parses nothing.  A file-mode child
lints nothing (its parent did); under pytest-xdist the worker ``gw0`` warns
and sends its findings to the controller, which owns the summary.
"""

from __future__ import annotations

import dataclasses
import hashlib
import warnings
from collections import Counter
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from pytest_isolation.core import names
from pytest_isolation.core.globs import Glob
from pytest_isolation.core.keys import IN_CHILD
from pytest_isolation.core.kinds import LintLevel
from pytest_isolation.core.longrepr import LeadingText
from pytest_isolation.core.settings import Settings
from pytest_isolation.core.warnings import IsolationLintWarning
from pytest_isolation.core.warnings import blanket_error
from pytest_isolation.core.words import agreeing
from pytest_isolation.core.words import counted
from pytest_isolation.core.xdist import is_worker
from pytest_isolation.lint import ALLOW_INI
from pytest_isolation.lint.findings import Finding
from pytest_isolation.lint.rules import CODES
from pytest_isolation.lint.rules import RULES_VERSION
from pytest_isolation.lint.rules import check
from pytest_isolation.lint.rules import decode_source

#: The lint's plugin object, when the lint is on.
LINT_KEY = pytest.StashKey["IsolationLint"]()
#: Prefix of the cache keys of linted contents.
CACHE_PREFIX = "isolation/lint/"
#: The xdist worker that reports the findings (every worker collects every file).
REPORTING_WORKER = "gw0"


@dataclasses.dataclass(frozen=True)
class Allowance:
    """One line of ``isolation_lint_allow``: a code, everywhere or in the files a glob matches."""

    code: str
    pattern: Glob | None = None

    def allows(self, code: str, path: str) -> bool:
        return code == self.code and (self.pattern is None or self.pattern.match(path))


def parse_allow(lines: list[str]) -> list[Allowance]:
    """``CODE`` or ``CODE: GLOB`` lines; a bad one is a usage error naming it."""
    allowances = []
    for line in lines:
        code, colon, glob = (part.strip() for part in line.partition(":"))
        if code not in CODES or (colon and not glob):
            raise pytest.UsageError(
                f"{ALLOW_INI} (ini): invalid line {line!r}; expected 'CODE' or 'CODE: GLOB' "
                f"with CODE one of {', '.join(CODES)}"
            )
        source = f"{ALLOW_INI} (ini) line {line!r}"
        allowances.append(Allowance(code, glob_pattern(glob, source) if glob else None))
    return allowances


def glob_pattern(glob: str, source: str) -> Glob:
    """A relative path glob (:mod:`pytest_isolation.core.globs`); a trailing
    ``/`` means everything below."""
    text = glob.strip().replace("\\", "/").removeprefix("./")
    return Glob(text + "**" if text.endswith("/") else text, source)


def register(config: pytest.Config, settings: Settings) -> None:
    """Register the lint (the entry plugin calls this in a process that is
    not a file-mode child, with the lint on); a bad allow-list line stops
    the run here."""
    allowances = parse_allow(list(config.getini(ALLOW_INI)))
    plugin = IsolationLint(config, settings.lint, allowances)
    config.stash[LINT_KEY] = plugin
    config.pluginmanager.register(plugin, names.LINT)
    config.add_cleanup(lambda: config.pluginmanager.unregister(plugin))


class IsolationLint:
    """Lints what is collected, warns or fails the collection, and summarizes."""

    def __init__(
        self, config: pytest.Config, policy: LintLevel, allowances: list[Allowance]
    ) -> None:
        self.config = config
        self.policy = policy
        self.allowances = allowances
        self.base = config.inipath.parent if config.inipath is not None else config.rootpath
        worker = getattr(config, "workerinput", None)
        #: This process warns and records (not an xdist worker other than gw0).
        self.reporting = worker is None or worker.get("workerid") == REPORTING_WORKER
        self.linted: set[Path] = set()
        #: Findings by file, relative to ``base``, in the order linted.
        self.found: dict[str, list[Finding]] = {}
        #: Files whose findings failed their collection: shown there, in full.
        self.shown: set[str] = set()

    @property
    def active(self) -> bool:
        """Not in a forked file-mode child, which inherited this plugin."""
        in_child = self.config.stash.get(IN_CHILD, False)
        return not in_child and (self.reporting or self.policy == "error")

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(
        self, collector: pytest.Collector
    ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
        report = yield
        paths = [path for path in self._targets(collector) if path not in self.linted]
        if not paths or not self.active:
            return report
        self.linted.update(paths)
        findings = [(path, finding) for path in paths for finding in self._lint(path)]
        escalated = False
        if self.policy == "warn" and self.reporting:
            for path, finding in findings:
                try:
                    _warn(self._shown(path), finding)
                except IsolationLintWarning:  # a filter naming it: fail the collection
                    escalated = True
        if findings and (self.policy == "error" or escalated) and report.passed:
            report.outcome = "failed"
            report.longrepr = self._failure(findings)
            self.shown.update(self._relative(path) for path, _ in findings)
        return report

    def _targets(self, collector: pytest.Collector) -> list[Path]:
        if isinstance(collector, pytest.File) and collector.path.suffix == ".py":
            return [collector.path]
        if isinstance(collector, pytest.Directory):
            conftest = collector.path / "conftest.py"
            return [conftest] if conftest.is_file() else []
        return []

    def _lint(self, path: Path) -> list[Finding]:
        try:
            content = path.read_bytes()
        except OSError:
            return []  # collecting it reports why
        relative = self._relative(path)
        findings = [
            finding
            for finding in self._cached_check(content, path)
            if not any(allow.allows(finding.code, relative) for allow in self.allowances)
        ]
        if self.reporting:
            self.found[relative] = findings
        return findings

    def _cached_check(self, content: bytes, path: Path) -> list[Finding]:
        cache = getattr(self.config, "cache", None)  # None under -p no:cacheprovider
        kind = b"conftest" if path.name == "conftest.py" else b"test"
        digest = hashlib.sha256(RULES_VERSION.encode() + b"\0" + kind + b"\0" + content)
        key = CACHE_PREFIX + digest.hexdigest()
        cached = _findings(cache.get(key, None)) if cache is not None else None
        if cached is not None:
            return cached
        findings = check(decode_source(content), str(path))
        if cache is not None:
            cache.set(key, [dataclasses.astuple(finding) for finding in findings])
        return findings

    def _shown(self, path: Path) -> str:
        """The path pytest's warnings summary shows: relative to the rootdir, as a node's."""
        try:
            return str(path.relative_to(self.config.rootpath))
        except ValueError:
            return str(path)

    def _relative(self, path: Path) -> str:
        try:
            return path.relative_to(self.base).as_posix()
        except ValueError:
            return path.as_posix()

    def _failure(self, findings: list[tuple[Path, Finding]]) -> str:
        lines = [f"{self._relative(path)}:{f.line}: {f.text()}" for path, f in findings]
        suppress = "'# isolation: allow CODE' on the line, or isolation_lint_allow"
        # The first line is pytest's short summary line: each code and its
        # lines, the findings' words once, below it.
        lines_of: dict[str, list[str]] = {}
        for _, finding in findings:
            lines_of.setdefault(finding.code, []).append(str(finding.line))
        codes = ", ".join(
            f"{code} at {agreeing(len(at), 'line', 'lines')} {', '.join(at)}"
            for code, at in lines_of.items()
        )
        head = f"isolation lint: {counted(len(findings), 'finding')}: {codes}"
        return LeadingText.of("\n".join([head, *lines, f"(accept a finding with {suppress})"]))

    def pytest_isolation_workeroutput(self, output: dict[str, Any]) -> None:
        if self.reporting:
            output["lint"] = {
                path: [dataclasses.astuple(finding) for finding in found]
                for path, found in self.found.items()
            }
            output["lint_shown"] = sorted(self.shown)

    def pytest_isolation_merge_workeroutput(self, output: dict[str, Any]) -> None:
        for path, entries in output.get("lint", {}).items():
            self.found.setdefault(path, _findings(entries) or [])
        self.shown.update(str(path) for path in output.get("lint_shown", []))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.config.stash.get(IN_CHILD, False) or is_worker(self.config):
            return
        found = [(path, finding) for path, items in self.found.items() for finding in items]
        if not found:
            return
        terminalreporter.section("isolation lint")
        for path, finding in sorted(found, key=lambda pair: (pair[0], pair[1].line)):
            if path not in self.shown:  # not shown in full as a collection error above
                terminalreporter.line(f"{path}:{finding.line} {finding.code} {finding.message}")
        counts = Counter(finding.code for _, finding in found)
        for code, count in sorted(counts.items()):
            terminalreporter.line(f"{code} ({CODES[code]}): {count}")
        files = len({path for path, _ in found})
        errors = sum(1 for path, _ in found if path in self.shown)
        shown = agreeing(errors, "a collection error", "collection errors")
        above = f" ({errors} shown as {shown} above)" if errors else ""
        terminalreporter.line(
            f"{counted(len(found), 'finding')} in {counted(files, 'file')}{above}; "
            "accept one with '# isolation: allow CODE' on its line or isolation_lint_allow"
        )


def _warn(path: str, finding: Finding) -> None:
    """One warning at the file's line; a blanket error filter shows it instead
    of raising it (as the leak guard's warnings), a filter naming it raises it."""
    warning = IsolationLintWarning(finding.text())
    with warnings.catch_warnings():
        if blanket_error(warning):
            warnings.simplefilter("always", IsolationLintWarning)
        warnings.warn_explicit(warning, IsolationLintWarning, path, finding.line)


def _findings(value: object) -> list[Finding] | None:
    """Findings from the cache or a worker's output; None if not that shape."""
    if not isinstance(value, list):
        return None
    findings = []
    for entry in value:
        if not (isinstance(entry, list | tuple) and len(entry) == 4):
            return None
        code, line, message, fix = entry
        if not (isinstance(line, int) and all(isinstance(t, str) for t in (code, message, fix))):
            return None
        findings.append(Finding(code, line, message, fix))
    return findings
