"""Replaying one file's child messages into the parent's hooks.

The parent's terminal reporter, junitxml, cacheprovider (``--lf``), the
``-x`` logic and every other plugin see the same hook calls as in an ordinary
run, with the real node ids of the child's tests.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from pytest_isolation import wire
from pytest_isolation.placeholder import ChildTest

Location = tuple[str, int | None, str]


def warning_category(module: str, qualname: str) -> type[Warning]:
    """The warning class by name, or a stand-in of that name.

    A category defined in a test module cannot be imported by the parent
    (it never imports test modules); the summary only needs its name.
    """
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except Exception:
        found = None
    if isinstance(found, type) and issubclass(found, Warning):
        return found
    return type(qualname.rpartition(".")[2], (UserWarning,), {"__module__": module})


class FileRelay:
    """Replays the messages of the children of one test file.

    One relay lives for all attempts at a file: after a crash the rest of the
    file runs in a new child, and only the first attempt's collection
    (collected count, deselections, collection reports) is replayed.
    """

    def __init__(
        self,
        file: pytest.Collector,
        on_notfound: Callable[[str], None],
        collect_only: bool = False,
    ) -> None:
        self.file = file
        #: ``--collect-only``: collection problems are kept for the placeholder
        #: to raise, not replayed, and the session counts the stand-ins itself.
        self.collect_only = collect_only
        self.config = file.config
        self.ihook = file.ihook
        self.on_notfound = on_notfound
        self.attempt = 0
        #: Node ids the first child collected (after deselection); None until known.
        self.collected: list[str] | None = None
        #: Node ids whose protocol is complete (including crashed ones).
        self.done: list[str] = []
        self.inflight: tuple[str, Location] | None = None
        self.phases: set[str] = set()
        #: Collection reports that did not pass (errors, module-level skips).
        self.problems: list[pytest.CollectReport] = []
        #: ``--collect-only``: what the child deselected, for the parent to deselect.
        self.deselected: list[str] = []
        self.finished = False
        #: The child saw Ctrl-C (no reason) or ``pytest.exit(reason, returncode)``.
        self.interrupted = False
        self.exit_reason: str | None = None
        self.exit_code: int | None = None
        self._handlers: dict[str, Callable[..., None]] = {
            wire.HELLO: self._hello,
            wire.COLLECTREPORT: self._collectreport,
            wire.DESELECTED: self._deselected,
            wire.NOTFOUND: self._notfound,
            wire.COLLECTED: self._collected,
            wire.LOGSTART: self._logstart,
            wire.REPORT: self._report,
            wire.WARNING: self._warning,
            wire.LEAK: self._leak,
            wire.KEPT: self._kept,
            wire.LOGFINISH: self._logfinish,
            wire.INTERRUPTED: self._interrupted,
            wire.FINISHED: self._finished,
        }

    def handle(self, kind: str, payload: dict[str, Any]) -> None:
        self._handlers[kind](**payload)

    def next_attempt(self) -> None:
        self.attempt += 1
        self.finished = False

    @property
    def remaining(self) -> list[str]:
        done = set(self.done)
        return [nodeid for nodeid in self.collected or () if nodeid not in done]

    def _first(self) -> bool:
        return self.attempt == 0

    def _hello(self, version: int, pid: int) -> None:
        if version != wire.PROTOCOL_VERSION:
            raise RuntimeError(
                f"isolation: child {pid} speaks protocol {version}, "
                f"the parent {wire.PROTOCOL_VERSION}; reinstall pytest-isolation"
            )

    def _collectreport(self, data: dict[str, Any]) -> None:
        if not self._first():
            return
        report = self.config.hook.pytest_report_from_serializable(config=self.config, data=data)
        self.problems.append(report)
        if not self.collect_only:
            self.ihook.pytest_collectreport(report=report)

    def _deselected(self, nodeids: list[str]) -> None:
        if self.collect_only:
            self.deselected.extend(nodeids)
        elif self._first():
            items = [ChildTest.for_nodeid(self.file, nodeid) for nodeid in nodeids]
            self.config.hook.pytest_deselected(items=items)

    def _notfound(self, arg: str) -> None:
        if self._first():
            self.on_notfound(arg)

    def _collected(self, nodeids: list[str]) -> None:
        if self._first():
            self.collected = nodeids
            if self.collect_only:
                return
            # The placeholder counted as one test; progress needs the real count.
            self.file.session.testscollected += len(nodeids) - 1

    def _logstart(self, nodeid: str, location: Location) -> None:
        self.inflight = (nodeid, location)
        self.phases = set()
        self.ihook.pytest_runtest_logstart(nodeid=nodeid, location=location)

    def _report(self, data: dict[str, Any]) -> None:
        report = self.config.hook.pytest_report_from_serializable(config=self.config, data=data)
        self.phases.add(report.when)
        self.ihook.pytest_runtest_logreport(report=report)

    def _warning(
        self,
        module: str,
        qualname: str,
        message: str,
        filename: str,
        lineno: int,
        when: str,
        nodeid: str,
        location: tuple[str, int, str] | None,
    ) -> None:
        category = warning_category(module, qualname)
        record = warnings.WarningMessage(category(message), category, filename, lineno)
        self.config.hook.pytest_warning_recorded.call_historic(
            kwargs={"warning_message": record, "when": when, "nodeid": nodeid, "location": location}
        )

    def _leak(self, fields: dict[str, Any]) -> None:
        guard = self.config.pluginmanager.get_plugin(wire.GUARD_NAME)
        if guard is not None:
            guard.record(fields)

    def _kept(self, lines: list[str]) -> None:
        from pytest_isolation.fixtures import KEPT_KEY

        self.config.stash.setdefault(KEPT_KEY, []).extend(lines)

    def _logfinish(self, nodeid: str, location: Location) -> None:
        self.ihook.pytest_runtest_logfinish(nodeid=nodeid, location=location)
        self.done.append(nodeid)
        self.inflight = None

    def _interrupted(self, reason: str | None, returncode: int | None) -> None:
        self.interrupted = True
        self.exit_reason = reason
        self.exit_code = returncode

    def _finished(self) -> None:
        self.finished = True

    def crashed(self, how: str, stderr_tail: str) -> bool:
        """Report a child that died; return whether the rest of the file can resume."""
        path = self.file.nodeid
        if self.inflight is not None:
            nodeid, location = self.inflight
            name = nodeid.split("::", 1)[-1]
            when = "teardown" if "call" in self.phases else "call"
            text = f"the process running {path} {how} while running {name} ({when})"
            self._fail_test(nodeid, location, when, _with_tail(text, stderr_tail))
            self.ihook.pytest_runtest_logfinish(nodeid=nodeid, location=location)
            self.done.append(nodeid)
            self.inflight = None
            return bool(self.remaining)
        if self.collected is None:
            text = f"the process collecting {path} {how}"
            self._fail_collection(_with_tail(text, stderr_tail))
            self.file.session.testscollected -= 1
            return False
        text = f"the process running {path} {how} after its last test"
        if self.done:
            last = self.done[-1]
            self._fail_test(last, (path, None, last), "teardown", _with_tail(text, stderr_tail))
        else:
            self._fail_collection(_with_tail(text, stderr_tail))
        return bool(self.remaining)

    def _fail_test(self, nodeid: str, location: Location, when: str, text: str) -> None:
        report = pytest.TestReport(
            nodeid=nodeid,
            location=location,
            keywords={},
            outcome="failed",
            longrepr=text,
            when=when,  # type: ignore[arg-type]
        )
        self.ihook.pytest_runtest_logreport(report=report)

    def _fail_collection(self, text: str) -> None:
        report = pytest.CollectReport(self.file.nodeid, "failed", longrepr=text, result=[])
        self.problems.append(report)
        self.ihook.pytest_collectreport(report=report)


def _with_tail(text: str, tail: str) -> str:
    text = f"isolation: {text}"
    if tail.strip():
        text += f"\n\n--- last lines of its stderr ---\n{tail.rstrip()}"
    return text
