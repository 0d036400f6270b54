"""What a test's process that died, or went over a limit, is reported as: a
failed report of the phase it was in, leading with the cause, then the
phase's captured output and log records, and the stacks of a time limit or
a fatal error."""

from __future__ import annotations

import dataclasses
import signal

import pytest

from pytest_isolation.core.keys import QUARANTINE_KEY
from pytest_isolation.core.kinds import Phase
from pytest_isolation.core.longrepr import LeadingText
from pytest_isolation.filemode.processes import describe_exit
from pytest_isolation.pertest.limits import Limits
from pytest_isolation.pertest.waiting import Ended

#: The signals a failed allocation can end a process with (in C code that
#: does not raise ``MemoryError``).
_OUT_OF_MEMORY = frozenset(
    int(getattr(signal, name))
    for name in ("SIGKILL", "SIGSEGV", "SIGABRT", "SIGBUS")
    if hasattr(signal, name)
)


@dataclasses.dataclass(frozen=True)
class Timer:
    """pytest-timeout's timer, as armed in the test's process."""

    seconds: float
    method: str


def cause(ended: Ended, limits: Limits, timer: Timer | None, phase: Phase) -> str:
    """Why the test's process ended before its test did, in words."""
    code = ended.returncode
    if ended.timed_out:
        return f"over its {limits.timeout:g} s time limit: the test's process was killed"
    if code < 0:
        number = -code
        if number == getattr(signal, "SIGXCPU", None) and limits.cpu:
            return (
                f"over its {limits.cpu:g} s CPU time limit: the test's process was killed "
                "by SIGXCPU"
            )
        text = f"the test's process {describe_exit(code)} during its {phase}"
        if limits.memory and number in _OUT_OF_MEMORY:
            text += f" (its memory limit: {limits.memory:g} MB)"
        return text
    if timer is not None and timer.method == "thread" and code == 1:
        return (
            f"over pytest-timeout's {timer.seconds:g} s limit: its thread method ended the "
            "test's process (exit code 1)"
        )
    return f"the test's process {describe_exit(code)} during its {phase}"


def died(
    item: pytest.Item,
    phase: Phase,
    text: str,
    earlier: pytest.TestReport | None,
    captured: tuple[str, str, str],
    duration: float,
) -> pytest.TestReport:
    """The failed report of the phase the process died in: ``text`` first,
    the sections of the phases before, then this phase's captured stdout,
    stderr and log (``captured``)."""
    sections = list(earlier.sections) if earlier is not None else []
    for name, content in zip(("stdout", "stderr", "log"), captured, strict=True):
        if content:
            sections.append((f"Captured {name} {phase}", content))
    report = pytest.TestReport(
        nodeid=item.nodeid,
        location=item.location,
        keywords=dict.fromkeys(item.keywords, 1),
        outcome="failed",
        longrepr=LeadingText.of(text),
        when=phase,
        sections=sections,
        duration=duration,
        user_properties=list(item.user_properties),
    )
    quarantine = item.config.stash.get(QUARANTINE_KEY, None)
    if quarantine is not None:  # a quarantined test that crashed is quarantined too
        quarantine.apply(report)
    return report


def explained(cause_text: str, dump: str, full: bool) -> str:
    """The report's text: the cause, then the test's frames of the dump."""
    from pytest_isolation.filemode.parent.stacks import split_dump  # only when one died

    text = f"isolation: {cause_text}"
    stacks, rest = split_dump(dump, full)
    stacks = stacks or rest.strip()
    if stacks:
        text += f"\n\n{stacks}"
    return text


def over_memory(report: pytest.TestReport, limits: Limits) -> bool:
    """Whether the phase failed because an allocation went over the memory limit."""
    if not (report.failed and limits.memory):
        return False
    crash = getattr(report.longrepr, "reprcrash", None)
    message = str(getattr(crash, "message", "") or "")
    return message.startswith("MemoryError") or "\nE   MemoryError" in f"\n{report.longreprtext}"


def lead_with_memory_limit(report: pytest.TestReport, limits: Limits) -> None:
    """Make a phase that failed with ``MemoryError`` under a memory limit say so first."""
    text = (
        f"isolation: over its {limits.memory:g} MB memory limit: an allocation failed "
        f"(MemoryError)\n\n{report.longreprtext}"
    )
    report.longrepr = LeadingText.of(text)
