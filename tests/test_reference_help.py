"""docs/reference.md against ``pytest --help`` and the registered defaults
(issue 33): the same options and ini keys, the same choices, the same
defaults, and for every option its ini key or why it has none.

The options, their values (``off|file``: the plugin lists its choices in the
metavar and checks them itself, so no option has argparse ``choices``) and
the ini keys are read from ``pytest --help``, what a user sees; the defaults
through public API, ``config.getini`` and ``config.getoption`` of a
configuration ``pytester.parseconfig`` parsed without an ini value. If
pytest changes how ``--help`` lays options out, the readers find nothing and
:func:`test_the_readers_find_the_plugin` fails, never a silent pass.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from conftest import plugin_help

REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "reference.md"

#: An option's line in ``--help``: the flag, its value, the start of its help.
OPTION_LINE = re.compile(r"^  (--isolation-[a-z-]+)(?:=(\S+))?(.*)$")
#: An ini key's line in ``--help``.
KEY_LINE = re.compile(r"^  (isolation_[a-z_]+) \(", re.M)
#: What the plugin's help says of an option's default and ini key (``core/options.py``).
HELP_DEFAULT = re.compile(r"Default: (.+?) \(ini (isolation_[a-z_]+)\)\.")
#: An option's or ini key's entry of the reference: its heading (the name in
#: backticks), up to the next heading.
ENTRY = re.compile(r"^###+ `(--isolation-[a-z-]+|isolation_[a-z_]+)`\n(.*?)(?=^#|\Z)", re.M | re.S)
#: The first line of an option's entry: how it is written (``--isolation-x=VALUE``).
USAGE = re.compile(r"\s*`(--isolation-[a-z-]+)(?:=([^`]+))?`\n")
#: The end of an option's entry: its default and ini key, or why it has none.
REFERENCE_DEFAULT = re.compile(r"^Default: (.+?) \(ini key \[`([a-z_]+)`\]\(#([a-z_]+)\)\)", re.M)
NO_KEY = re.compile(r"^No ini key: \S", re.M)
#: An ini key's type and default, the list at the top of its entry.
KEY_FIELDS = re.compile(r"^- (Type|Default): (.+)$", re.M)
#: A choice list: lower-case words between bars (``off|file``, not ``K/N|auto``).
CHOICES = re.compile(r"[a-z][a-z-]*(\|[a-z][a-z-]*)+")


@dataclasses.dataclass(frozen=True)
class Registered:
    """What the plugin registers: each option's value in ``--help`` (empty
    for a flag) and help text, each ini key, and the defaults."""

    options: dict[str, tuple[str, str]]
    keys: set[str]
    #: ``config.getini(key)`` without an ini value.
    key_defaults: dict[str, object]
    #: ``config.getoption(dest)`` without the option.
    option_defaults: dict[str, object]


@dataclasses.dataclass(frozen=True)
class Option:
    #: What follows ``=`` in the entry's first line (empty for a flag; ``None``: no such line).
    metavar: str | None
    #: The ini key the entry names, and the default it states (``None``: none named).
    key: str | None
    default: str | None
    says_why_not: bool


@dataclasses.dataclass(frozen=True)
class Key:
    type: str | None
    default: str | None


def dest_of(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def help_options(text: str) -> dict[str, tuple[str, str]]:
    """Each ``--isolation-*`` option in ``--help``: its value and its help."""
    found: dict[str, tuple[str, list[str]]] = {}
    parts: list[str] | None = None
    for line in text.splitlines():
        match = OPTION_LINE.match(line)
        if match:
            parts = [match[3]]
            found[match[1]] = (match[2] or "", parts)
        elif parts is not None and line.startswith("   "):
            parts.append(line)
        else:
            parts = None
    return {flag: (metavar, " ".join(" ".join(p).split())) for flag, (metavar, p) in found.items()}


def reference_entries(text: str) -> tuple[dict[str, Option], dict[str, Key]]:
    options: dict[str, Option] = {}
    keys: dict[str, Key] = {}
    for name, body in ENTRY.findall(text):
        if name.startswith("--"):
            usage = USAGE.match(body)
            metavar = (usage[2] or "") if usage and usage[1] == name else None
            default = REFERENCE_DEFAULT.search(body)
            key, said = (
                (default[2], default[1]) if default and default[2] == default[3] else (None, None)
            )
            options[name] = Option(metavar, key, said, bool(NO_KEY.search(body)))
        else:
            fields = dict(KEY_FIELDS.findall(body))
            keys[name] = Key(fields.get("Type"), fields.get("Default"))
    return options, keys


def default_problem(stated: str, registered: object) -> str:
    """Why a stated default (`` `50` ``, or words for none) is not the
    registered one; empty if it is."""
    quoted = re.fullmatch(r"`([^`]*)`", stated)
    if quoted:
        return "" if registered == quoted[1] else f"says {stated}, registered {registered!r}"
    return "" if registered in ("", []) else f"says {stated!r}, registered {registered!r}"


def mismatches(registered: Registered, reference: str) -> list[str]:
    """Every disagreement between the plugin and the reference, one line each."""
    options, keys = reference_entries(reference)
    flags, known = registered.options.keys(), registered.keys
    found = [f"{flag}: in --help, not in the reference" for flag in flags - options.keys()]
    found += [f"{flag}: in the reference, not in --help" for flag in options.keys() - flags]
    found += [f"{key}: registered, not in the reference" for key in known - keys.keys()]
    found += [f"{key}: in the reference, not registered" for key in keys.keys() - known]
    for flag in sorted(options.keys() & flags):
        found += [f"{flag}: {p}" for p in _option_problems(registered, flag, options[flag])]
    for key in sorted(keys.keys() & known):
        found += [f"{key}: {p}" for p in _key_problems(registered, key, keys[key])]
    return sorted(found)


def _option_problems(registered: Registered, flag: str, entry: Option) -> list[str]:
    metavar, text = registered.options[flag]
    dest = dest_of(flag)
    problems = []
    if entry.metavar != metavar:
        problems.append(f"--help shows {metavar!r}, the reference {entry.metavar!r}")
    if entry.key is None:
        if not entry.says_why_not:
            problems.append("the reference gives neither its ini key nor why it has none")
        if dest in registered.keys:
            problems.append(f"the ini key {dest} is registered; the reference says none")
        return problems
    if entry.key != dest:
        problems.append(f"the reference names the ini key {entry.key}, not {dest}")
    if dest not in registered.keys:
        return [*problems, f"no ini key {dest} is registered"]
    own = registered.option_defaults[dest]
    if own not in (None, False):  # the ini key would never be read
        problems.append(f"its own default {own!r} hides the ini key")
    default = registered.key_defaults[dest]
    said = HELP_DEFAULT.search(text)
    if said is None or said[2] != dest:
        problems.append(f"--help does not say 'Default: ... (ini {dest}).'")
    elif default not in ("", []) and said[1] != default:
        problems.append(f"--help says the default is {said[1]!r}, registered {default!r}")
    problem = default_problem(str(entry.default), default)
    return [*problems, f"the reference {problem}"] if problem else problems


def _key_problems(registered: Registered, key: str, entry: Key) -> list[str]:
    if entry.type is None or entry.default is None:
        return ["the reference gives no Type: or no Default:"]
    problems = []
    problem = default_problem(entry.default, registered.key_defaults[key])
    if problem:
        problems.append(f"Default: {problem}")
    metavar = registered.options.get("--" + key.replace("_", "-"), ("-", ""))[0]
    if not metavar and entry.type != "bool":
        problems.append(f"the key of a flag: Type: {entry.type!r}, not bool")
    choices = metavar.split("|")
    listed = re.findall(r"`([^`]+)`", entry.type)
    if CHOICES.fullmatch(metavar) and listed != choices:
        problems.append(f"Type: lists {listed}, --help {choices}")
    return problems


# -- what the plugin registers --------------------------------------------------------


def as_ini_text(value: object) -> object:
    """A default of a typed ini key (a bool, a number, None for unset) as
    the reference and ``--help`` write it; a list or a string as it is."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    return str(value) if isinstance(value, (int, float)) else value


@pytest.fixture(scope="module")
def help_text(tmp_path_factory: pytest.TempPathFactory) -> str:
    text = plugin_help(tmp_path_factory.mktemp("help"))
    return text


@pytest.fixture
def registered(pytester: pytest.Pytester, help_text: str) -> Registered:
    pytester.makeini("[pytest]\n")  # no value, and no ini file above to find one in
    config = pytester.parseconfig("-p", "isolation")
    options = help_options(help_text)
    keys = set(KEY_LINE.findall(help_text))
    return Registered(
        options=options,
        keys=keys,
        key_defaults={key: as_ini_text(config.getini(key)) for key in keys},
        option_defaults={dest_of(flag): config.getoption(dest_of(flag)) for flag in options},
    )


@pytest.fixture(scope="module")
def reference() -> str:
    return REFERENCE.read_text(encoding="utf-8")


# -- the check ------------------------------------------------------------------------


def test_the_readers_find_the_plugin(registered: Registered, reference: str) -> None:
    """The parsers see what is there: if pytest's --help or the reference
    changes shape, this fails instead of the comparison passing on nothing."""
    assert len(registered.options) >= 34
    assert registered.options["--isolation-mode"][0] == "off|file|test"
    assert registered.options["--isolation-leaks-deep"][0] == ""
    assert {"isolation_mode", "isolation_report", "isolation_paths"} <= registered.keys
    assert registered.key_defaults["isolation_max_sources"] == "50"
    assert registered.option_defaults["isolation_report"] is None
    options, keys = reference_entries(reference)
    assert options["--isolation-report"] == Option("PATH", "isolation_report", "none", False)
    assert options["--isolation-twice"].says_why_not
    assert keys["isolation_mode"] == Key("`off`, `file` or `test`", "`off`")


def test_help_and_reference_agree(registered: Registered, reference: str) -> None:
    assert mismatches(registered, reference) == []


def test_every_option_that_has_no_ini_key_is_an_action_or_a_target(
    registered: Registered,
) -> None:
    """Issue 33: every option that can sensibly be set per project has a key;
    the others say what one run does (see the reference for why each)."""
    without = {dest_of(flag) for flag in registered.options} - registered.keys
    assert without == {
        "isolation_twice",
        "isolation_store_durations",
        "isolation_for",
        "isolation_since",
        "isolation_dry_run",
        "isolation_find_polluter",
    }


def test_contributing_names_every_option_that_has_no_ini_key(registered: Registered) -> None:
    """Issue 49 item 11: CONTRIBUTING says every option has a key but the
    ones it names, and names exactly those."""
    text = " ".join((REFERENCE.parent.parent / "CONTRIBUTING.md").read_text().split())
    said = re.search(r"has no ini key: the (\w+) are (.*?); an ini key would", text)
    assert said is not None
    named = set(re.findall(r"`(--isolation-[a-z-]+)`", said[2]))
    without = {flag for flag in registered.options if dest_of(flag) not in registered.keys}
    assert named == without
    assert said[1] == {6: "six"}.get(len(without), str(len(without)))


# -- the check fails on a mismatch ----------------------------------------------------


def _without_entry(reference: str, heading: str) -> str:
    start = reference.index(heading)
    end = reference.index("\n#", start + len(heading)) + 1
    return reference[:start] + reference[end:]


def test_an_option_missing_from_the_reference_is_found(
    registered: Registered, reference: str
) -> None:
    changed = _without_entry(reference, "### `--isolation-report`\n")
    assert mismatches(registered, changed) == [
        "--isolation-report: in --help, not in the reference"
    ]


def test_an_option_missing_from_help_is_found(registered: Registered, reference: str) -> None:
    options = {**registered.options}
    del options["--isolation-probes"]
    fewer = dataclasses.replace(registered, options=options)
    assert "--isolation-probes: in the reference, not in --help" in mismatches(fewer, reference)


def test_an_ini_key_missing_from_the_reference_is_found(
    registered: Registered, reference: str
) -> None:
    changed = _without_entry(reference, "### `isolation_max_items`\n")
    assert mismatches(registered, changed) == [
        "isolation_max_items: registered, not in the reference"
    ]


def test_a_different_choice_is_found(registered: Registered, reference: str) -> None:
    changed = reference.replace(
        "\n`--isolation-unmapped=error|warn|ignore`\n", "\n`--isolation-unmapped=error|warn`\n"
    ).replace("- Type: `error`, `warn` or `ignore`", "- Type: `error` or `warn`")
    assert mismatches(registered, changed) == [
        "--isolation-unmapped: --help shows 'error|warn|ignore', the reference 'error|warn'",
        "isolation_unmapped: Type: lists ['error', 'warn'], --help ['error', 'warn', 'ignore']",
    ]


def test_a_different_default_is_found(registered: Registered, reference: str) -> None:
    changed = reference.replace(
        "Default: `50` (ini key [`isolation_max_sources`]",
        "Default: `40` (ini key [`isolation_max_sources`]",
    ).replace("Default: no cap (ini key", "Default: `100` (ini key")
    assert mismatches(registered, changed) == [
        "--isolation-max-items: the reference says `100`, registered ''",
        "--isolation-max-sources: the reference says `40`, registered '50'",
    ]
    block = changed.index("### `isolation_kill_grace`")
    changed = changed[:block] + changed[block:].replace("- Default: `10`", "- Default: `5`", 1)
    assert "isolation_kill_grace: Default: says `5`, registered '10'" in mismatches(
        registered, changed
    )


def test_an_option_without_its_key_or_a_reason_is_found(
    registered: Registered, reference: str
) -> None:
    changed = reference.replace("No ini key: an action, which runs no test;", "An action;")
    assert mismatches(registered, changed) == [
        "--isolation-dry-run: the reference gives neither its ini key nor why it has none"
    ]


def test_an_option_default_that_hides_its_ini_key_is_found(
    registered: Registered, reference: str
) -> None:
    """An option registered with its own default (``default="50"``) never
    falls back to its ini key: ``-o isolation_max_sources=9`` did nothing."""
    hiding = dataclasses.replace(
        registered,
        option_defaults={**registered.option_defaults, "isolation_max_sources": "50"},
    )
    assert mismatches(hiding, reference) == [
        "--isolation-max-sources: its own default '50' hides the ini key"
    ]


def test_an_entry_whose_heading_lost_its_name_is_found(
    registered: Registered, reference: str
) -> None:
    """The name is the heading: a heading that does not name the option is no
    entry of it (on GitHub, a block without a heading showed no name)."""
    changed = reference.replace("### `--isolation-report`\n", "### Run report\n")
    assert mismatches(registered, changed) == [
        "--isolation-report: in --help, not in the reference"
    ]


def test_an_option_without_its_usage_line_is_found(registered: Registered, reference: str) -> None:
    changed = reference.replace("\n`--isolation-probes=N`\n", "\n")
    assert mismatches(registered, changed) == [
        "--isolation-probes: --help shows 'N', the reference None"
    ]
