"""The reports file mode makes for a child that died: a failed test where it
died in one, a failed collection where it died collecting."""

from __future__ import annotations

from typing import NoReturn

import pytest

from pytest_isolation.core.keys import QUARANTINE_KEY
from pytest_isolation.core.kinds import Phase
from pytest_isolation.core.longrepr import LeadingText
from pytest_isolation.filemode.parent.stacks import split_dump

Location = tuple[str, int | None, str]


def with_tail(text: str, tail: str, full: bool = False) -> str:
    """The message (the cause first), the test's own frames from the child's
    faulthandler dump, and the rest of the end of its stderr, if any."""
    text = f"isolation: {text}"
    dump, rest = split_dump(tail, full)
    if dump:
        text += f"\n\n{dump}"
    if rest.strip():
        text += f"\n\n--- last lines of its stderr ---\n{rest.strip(chr(10)).rstrip()}"
    return text


def failed_test(
    config: pytest.Config,
    nodeid: str,
    location: Location,
    when: Phase,
    text: str,
    captured: tuple[str, str, str] = ("", "", ""),
) -> pytest.TestReport:
    """The failed report of a test that died in ``when``: ``text`` first,
    then what the phase had printed and logged (``captured``: stdout,
    stderr, log)."""
    sections = [
        (f"Captured {name} {when}", content)
        for name, content in zip(("stdout", "stderr", "log"), captured, strict=True)
        if content
    ]
    report = pytest.TestReport(
        nodeid=nodeid,
        location=location,
        keywords={},
        outcome="failed",
        longrepr=LeadingText.of(text),
        when=when,
        sections=sections,
    )
    quarantine = config.stash.get(QUARANTINE_KEY, None)
    if quarantine is not None:  # a quarantined test that crashed is quarantined too
        quarantine.apply(report)
    return report


def failed_collection(file: pytest.Collector, text: str) -> pytest.CollectReport:
    return pytest.CollectReport(file.nodeid, "failed", longrepr=text, result=[])


def interrupt_at(where: tuple[str, int] | None) -> NoReturn:
    """Raise the child's KeyboardInterrupt again, from where it was raised.

    pytest shows an interrupted run's location from the traceback's last
    entry; compiled under the test's file name and line, that entry is the
    test's line (its source shown from the file), as in a plain run.
    """
    if where is None:
        raise KeyboardInterrupt
    path, line = where
    code = compile("\n" * (line - 1) + "raise KeyboardInterrupt", path, "exec")
    exec(code, {})
    raise KeyboardInterrupt  # not reached: the code raises
