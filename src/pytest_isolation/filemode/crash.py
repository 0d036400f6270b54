"""The reports file mode makes for a child that died: a failed test where it
died in one, a failed collection where it died collecting."""

from __future__ import annotations

import pytest

from pytest_isolation.ci.quarantine import QUARANTINE_KEY

Location = tuple[str, int | None, str]


def with_tail(text: str, tail: str) -> str:
    """The message, and the end of the child's stderr where it wrote any."""
    text = f"isolation: {text}"
    if tail.strip():
        text += f"\n\n--- last lines of its stderr ---\n{tail.rstrip()}"
    return text


def failed_test(
    config: pytest.Config, nodeid: str, location: Location, when: str, text: str
) -> pytest.TestReport:
    report = pytest.TestReport(
        nodeid=nodeid,
        location=location,
        keywords={},
        outcome="failed",
        longrepr=text,
        when=when,  # type: ignore[arg-type]
    )
    quarantine = config.stash.get(QUARANTINE_KEY, None)
    if quarantine is not None:  # a quarantined test that crashed is quarantined too
        quarantine.apply(report)
    return report


def failed_collection(file: pytest.Collector, text: str) -> pytest.CollectReport:
    return pytest.CollectReport(file.nodeid, "failed", longrepr=text, result=[])
