"""Reading option and ini values, the one place every feature's values are checked.

Each reader takes the command-line value if given, else (where the option
has one) the ini key of the same name, and raises ``pytest.UsageError``
naming the option or key and the value.  A part that reports bad input its
own way (the selector's ``invalid_input`` refusal, the finder's exit code)
catches it around its reads.
"""

from __future__ import annotations

from pathlib import Path

import pytest


def flag_of(dest: str) -> str:
    """``--isolation-max-items`` for the dest ``isolation_max_items``."""
    return "--" + dest.replace("_", "-")


def raw(config: pytest.Config, dest: str, ini: bool = True) -> tuple[str, str]:
    """The command-line value if given, else the ini value, and where it came from."""
    value = config.getoption(dest)
    if value is not None or not ini:
        return ("" if value is None else str(value)), flag_of(dest)
    return str(config.getini(dest)).strip(), f"{dest} (ini)"


def choice(config: pytest.Config, dest: str, choices: tuple[str, ...], ini: bool = True) -> str:
    """The value of ``dest``, one of ``choices``."""
    value, source = raw(config, dest, ini)
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise pytest.UsageError(f"{source}: invalid value {value!r}; choose from {allowed}")
    return value


def count(
    config: pytest.Config,
    dest: str,
    minimum: int = 0,
    ini: bool = True,
    expected: str = "",
    blank_ok: bool = True,
) -> int | None:
    """A whole number of at least ``minimum``; None if unset (or blank, with
    ``blank_ok``).  ``expected`` overrides the phrase after "expected" in the
    message."""
    value, source = raw(config, dest, ini)
    if not value and (blank_ok or config.getoption(dest) is None):
        return None
    if not (value.isascii() and value.isdigit()) or int(value) < minimum:
        wanted = expected or (
            "a positive whole number" if minimum == 1 else f"a whole number of {minimum} or more"
        )
        raise pytest.UsageError(f"{source}: invalid value {value!r}; expected {wanted}")
    return int(value)


def seconds(config: pytest.Config, dest: str, ini: bool = True) -> float | None:
    """A positive, finite number of seconds; None if unset."""
    value, source = raw(config, dest, ini)
    if not value:
        return None
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if not 0 < number < float("inf"):  # also refuses nan
        raise pytest.UsageError(
            f"{source}: invalid value {value!r}; expected a positive number of seconds"
        )
    return number


def path(config: pytest.Config, dest: str, ini: bool = True) -> tuple[Path, str] | None:
    """A path and where it came from; None if unset.  A command-line value is
    relative to the directory pytest was invoked from, an ini value to the
    ini file's directory (the rootdir without one)."""
    value, source = raw(config, dest, ini)
    if not value:
        return None
    if source == flag_of(dest):
        return config.invocation_params.dir / value, source
    base = config.inipath.parent if config.inipath is not None else config.rootpath
    return base / value, source
