"""Two tests in one file: the first rebinds a project global and never puts it
back.  File mode cannot help here (both run in the same process); the leak
guard restores the global after the first test and names it."""

import settings


def test_turns_debug_on() -> None:
    settings.DEBUG = True
    assert settings.DEBUG


def test_debug_is_off_by_default() -> None:
    assert settings.DEBUG is False
