"""Reading option and ini values, the one place every feature's values are checked.

Each reader takes the command-line value if given, else the ini key of the
same name (every option read here has one, registered by :class:`Setting`;
what says what one run does, a target or an action, has none and is read
with ``config.getoption``), and raises ``pytest.UsageError`` naming the
option or key and the value.  A part that reports bad input its
own way (the selector's ``invalid_input`` refusal, the finder's exit code)
catches it around its reads.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path
from typing import Literal
from typing import TypeVar

import pytest

#: The most seconds any option takes: a week.  Anything longer is a typo
#: (``select()`` and the kill timers overflow long before float's range ends).
MAX_SECONDS = 7 * 24 * 3600.0
#: The most seconds between SIGTERM and SIGKILL: a process that ignores
#: SIGTERM must not keep the run waiting longer.
MAX_KILL_GRACE = 600.0
#: The largest whole number any option takes.
MAX_COUNT = 1_000_000


#: The values of an option with a fixed set of them (a ``Literal`` of
#: :mod:`pytest_isolation.core.kinds`).
C = TypeVar("C", bound=str)


#: The plugin's option group: its name and its title in ``pytest --help``.
GROUP = ("isolation", "test isolation (pytest-isolation)")


#: pytest's ini types for numbers, "int" and "float", came with pytest 8.4; before
#: it a number's key is a string, and its help says which number it takes.
TYPED_NUMBERS = pytest.version_tuple[:2] >= (8, 4)
#: A number's kind, and how the help of a key typed as a string names it.
Number = Literal["int", "float"]
NUMBER_WORDS: dict[Number, str] = {"int": "a whole number", "float": "a number"}


@dataclasses.dataclass(frozen=True)
class Setting:
    """An option with an ini key of the same name as its dest, one help text
    for both.  The option's own default is None (False for a flag), so that
    an option not given falls back to the ini key, which is typed: a flag's
    is a bool, a number's an int or a float (see :data:`TYPED_NUMBERS`)."""

    text: str
    #: The option's value in ``--help`` (``off|file``, ``PATH``); empty for a flag.
    metavar: str = ""
    #: The ini key's default, as ini text (``""``: unset).
    default: str = ""
    #: What an unset default means, in words (``no limit``).
    unset: str = "none"
    #: The kind of number the option takes, if it takes one.
    number: Number | None = None

    @classmethod
    def of_choices(cls, text: str, choices: tuple[str, ...]) -> Setting:
        """An option of a fixed set of values, the first its default."""
        return cls(text, "|".join(choices), choices[0])

    def add(self, parser: pytest.Parser, dest: str) -> None:
        name = flag_of(dest)
        text = f"{self.text} Default: {self.default or self.unset}"
        kind: dict[str, object] = (
            {"metavar": self.metavar, "default": None}
            if self.metavar
            else {"action": "store_true", "default": False}
        )
        parser.getgroup(*GROUP).addoption(name, dest=dest, help=f"{text} (ini {dest}).", **kind)
        ini_type, default = self._ini_type()
        given = f"read when {name} is not given" if self.metavar else f"{name} turns it on"
        if self.number is not None and ini_type == "string":
            given = f"{NUMBER_WORDS[self.number]}, {given}"
        elif self.metavar == "PATH":
            given = f"relative to the ini file, {given}"
        parser.addini(dest, f"{text}; {given}.", type=ini_type, default=default)

    def _ini_type(self) -> tuple[Literal["string", "bool", "int", "float"], object]:
        """The ini key's pytest type and its default of that type (None: unset)."""
        if not self.metavar:
            return "bool", TRUTH.get(self.default, False)
        if self.number is None or not TYPED_NUMBERS:
            return "string", self.default
        if not self.default:
            return self.number, None
        return self.number, int(self.default) if whole(self.default) else float(self.default)


def add_flag(parser: pytest.Parser, dest: str, text: str) -> None:
    """A flag that says what one run does (an action), with no ini key."""
    parser.getgroup(*GROUP).addoption(
        flag_of(dest), dest=dest, action="store_true", default=False, help=text
    )


def add_lines(parser: pytest.Parser, key: str, text: str, kind: str = "linelist") -> None:
    """An ini key of many values (``linelist``: one a line; ``args``: split
    as a shell would), empty by default, with no option."""
    parser.addini(key, text, type=kind, default=[])  # type: ignore[arg-type]


def blank_options(config: pytest.Config) -> list[str]:
    """The plugin's command-line options given an empty value
    (``--isolation-shard=`` in a CI template): an error, never "unset"."""
    blank = []
    for dest, value in sorted(vars(config.option).items()):
        if not dest.startswith("isolation_"):
            continue
        values = value if isinstance(value, list) else [value]
        if any(isinstance(item, str) and not item.strip() for item in values):
            blank.append(flag_of(dest))
    return blank


def flag_of(dest: str) -> str:
    """``--isolation-max-items`` for the dest ``isolation_max_items``."""
    return "--" + dest.replace("_", "-")


def raw(config: pytest.Config, dest: str) -> tuple[str, str]:
    """The command-line value if given, else the ini value, and where it came from."""
    value = config.getoption(dest)
    if value is not None:
        return str(value), flag_of(dest)
    return ini_text(config, dest), f"{dest} (ini)"


def ini_text(config: pytest.Config, dest: str) -> str:
    """The ini value as text ("" if unset), which each reader checks: a value
    pytest typed (a number, a bool) written back, and a value pytest refused
    to convert as the user wrote it, so that the reader's message names the
    key and the value, not pytest's ``int()``."""
    try:
        value = config.getini(dest)
    except (ValueError, TypeError, pytest.UsageError) as error:
        return refused_value(error, dest)
    return "" if value is None else str(value).strip()


#: The quoted value that ends pytest's message for an ini value it cannot
#: convert: ``int()``'s and ``float()``'s own (``...: 'x'``), its truth value
#: check's (``invalid truth value 'x'``), a TOML value's (``got str: 'x'``).
REFUSED = re.compile(r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")$""")


def refused_value(error: Exception, dest: str) -> str:
    """The value pytest's ``error`` quotes last, stripped; a usage error
    naming the key and pytest's message when it quotes none (the shapes of
    pytest's messages are undocumented: ``tests/test_bad_input.py`` and
    ``tests/test_options_ini.py`` check the usage errors of real runs on
    every supported pytest, and fail if a release changes them)."""
    found = REFUSED.search(str(error).rstrip())
    if found is None:
        raise pytest.UsageError(f"{dest} (ini): {error}") from None
    return str(ast.literal_eval(found[1])).strip()


def choice(config: pytest.Config, dest: str, choices: tuple[C, ...], default: C | None = None) -> C:
    """The value of ``dest``, one of ``choices`` (and typed as they are); an
    empty ini value means the default, ``default`` or else ``choices[0]``."""
    value, source = raw(config, dest)
    if not value and source.endswith("(ini)"):
        return choices[0] if default is None else default
    chosen = one_of(value, choices)
    if chosen is None:
        allowed = ", ".join(repr(c) for c in choices)
        raise pytest.UsageError(f"{source}: invalid value {value!r}; choose from {allowed}")
    return chosen


def one_of(value: str, choices: tuple[C, ...]) -> C | None:
    """``value`` as the one of ``choices`` it equals, typed as they are; None
    if it is none of them (the one check that narrows user input to a kind)."""
    return next((c for c in choices if c == value), None)


#: The truth values an ini key takes, as pytest's ``bool`` ini type reads them.
TRUTH = {"true": True, "yes": True, "on": True, "1": True, "y": True, "t": True}
TRUTH.update({"false": False, "no": False, "off": False, "0": False, "n": False, "f": False})


def boolean(config: pytest.Config, dest: str, default: bool = False) -> bool:
    """A true/false ini key, of pytest's ``bool`` type (whose own message for
    a bad value names no key: this one does); empty means ``default``."""
    value = ini_text(config, dest)
    if not value:
        return default
    if value.lower() not in TRUTH:
        raise pytest.UsageError(
            f"{dest} (ini): invalid truth value {value!r}; expected true or false"
        )
    return TRUTH[value.lower()]


def flag(config: pytest.Config, dest: str) -> bool:
    """A flag with an ini key: on when given, else the key's truth value (the
    flag only turns it on; ``-o KEY=false`` turns off an ini ``true``)."""
    return bool(config.getoption(dest)) or boolean(config, dest)


def whole(text: str) -> bool:
    """ASCII digits only (``int()`` also takes ``" 3"``, ``"+3"`` and ``"٣"``)."""
    return text.isascii() and text.isdigit()


def count(
    config: pytest.Config,
    dest: str,
    minimum: int = 0,
    expected: str = "",
    maximum: int = MAX_COUNT,
) -> int | None:
    """A whole number from ``minimum`` to ``maximum``; None if unset.
    ``expected`` overrides the phrase after "expected" in the message."""
    value, source = raw(config, dest)
    if not value:
        return None
    number = int(value) if whole(value) else None
    if number is None or not minimum <= number <= maximum:
        wanted = expected or (
            "a positive whole number" if minimum == 1 else f"a whole number of {minimum} or more"
        )
        if number is not None and number > maximum:
            wanted += f", at most {maximum}"
        raise pytest.UsageError(f"{source}: invalid value {value!r}; expected {wanted}")
    return number


def seconds(config: pytest.Config, dest: str, maximum: float = MAX_SECONDS) -> float | None:
    """A positive number of seconds, at most ``maximum``; None if unset."""
    value, source = raw(config, dest)
    if not value:
        return None
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if not 0 < number <= maximum:  # also refuses nan
        raise pytest.UsageError(
            f"{source}: invalid value {value!r}; expected a positive number of seconds, "
            f"at most {maximum:g}"
        )
    return number


def limit(config: pytest.Config, dest: str, unit: str, maximum: float) -> float | None:
    """A limit: a number of ``unit`` from 0 to ``maximum``, 0 (or unset) for none."""
    value, source = raw(config, dest)
    if not value:
        return None
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not 0 <= number <= maximum:  # also refuses nan
        raise pytest.UsageError(
            f"{source}: invalid value {value!r}; expected a number of {unit} from 0 (no limit) "
            f"to {maximum:.0f}"
        )
    return number or None


def path(config: pytest.Config, dest: str) -> tuple[Path, str] | None:
    """A path and where it came from; None if unset.  A command-line value is
    relative to the directory pytest was invoked from, an ini value to the
    ini file's directory (the rootdir without one)."""
    value, source = raw(config, dest)
    if not value:
        return None
    if source == flag_of(dest):
        return config.invocation_params.dir / value, source
    base = config.inipath.parent if config.inipath is not None else config.rootpath
    return base / value, source


def relative(config: pytest.Config, path: Path) -> Path:
    """``path`` as a user writes it where pytest was started: relative to
    that directory when below it (``--isolation-report=out/r.json`` stays
    ``out/r.json`` in messages), else as it is."""
    try:
        return path.relative_to(config.invocation_params.dir)
    except ValueError:
        return path
