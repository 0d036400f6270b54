"""The option of the record of what each test file executed, and its
plugins, registered by the CI features with the run report that holds it.

PYTEST_DONT_REWRITE (see the package's docstring).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_isolation.core import names
from pytest_isolation.core.options import Setting
from pytest_isolation.core.settings import RECORD
from pytest_isolation.core.settings import Settings

if TYPE_CHECKING:  # the record is imported when this run records
    from pytest_isolation.record.recording import ReportHolder

RECORD_SETTING = Setting.of_choices(
    "Record what each test file's tests execute, for --isolation-scope=recorded: in "
    "file mode (auto), in any run (on), or never (off).",
    RECORD,
)


def pytest_addoption(parser: pytest.Parser) -> None:
    RECORD_SETTING.add(parser, "isolation_record")


def register(config: pytest.Config, settings: Settings, report: ReportHolder, plain: bool) -> None:
    """The keeper of the record, when this run records; in a plain run (not
    an xdist controller: its workers record), what the tests execute too."""
    if not settings.recording:
        return
    from pytest_isolation.record.recording import PlainRecording
    from pytest_isolation.record.recording import RecordKeeper

    keeper = RecordKeeper(config, report)
    config.pluginmanager.register(keeper, names.RECORD_KEEPER)
    if settings.mode != "file" and plain:
        config.pluginmanager.register(PlainRecording(config, keeper), names.PLAIN_RECORDING)
