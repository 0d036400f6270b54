"""The plugin's group in ``pytest --help`` (issue 49 item 11): related
options side by side, in topic order (the order in which the entry plugin
lists the feature modules and each adds its options); every ini key typed as
what it holds; help texts short enough to read at a glance."""

from __future__ import annotations

import re

import pytest

from conftest import plugin_help
from pytest_isolation.core import options

#: An option's first line in ``--help``, and an ini key's.
OPTION_LINE = re.compile(r"^  (--isolation-[a-z-]+)")
KEY_LINE = re.compile(r"^  (isolation_[a-z_]+) \(([a-z]+)\):")

#: The keys of a truth value and of a number, by the number's kind.
BOOLEANS = {
    "isolation_leaks_deep",
    "isolation_allow_empty",
    "isolation_explain",
    "isolation_env_network",
}
NUMBERS: dict[str, options.Number] = {
    "isolation_timeout": "float",
    "isolation_kill_grace": "float",
    "isolation_test_timeout": "float",
    "isolation_test_memory": "float",
    "isolation_test_cpu": "float",
    "isolation_retries": "int",
    "isolation_max_sources": "int",
    "isolation_max_test_files": "int",
    "isolation_max_items": "int",
    "isolation_max_depth": "int",
    "isolation_probes": "int",
    "isolation_find_timeout": "float",
}


@pytest.fixture(scope="module")
def help_text(tmp_path_factory: pytest.TempPathFactory) -> str:
    text = plugin_help(tmp_path_factory.mktemp("help"), columns=80)
    return text


def entries(text: str, first_line: re.Pattern[str]) -> dict[str, list[str]]:
    """Each entry that ``first_line`` starts, in order, with its help's lines
    (the help column starts at 24; a short name has its help's first line
    beside it)."""
    found: dict[str, list[str]] = {}
    lines: list[str] | None = None
    for line in text.splitlines():
        match = first_line.match(line)
        if match:
            lines = found.setdefault(match[1], [])
            if line[22:24] == "  " and line[24:].strip():
                lines.append(line[24:].strip())
        elif lines is not None and line.startswith(" " * 24) and line.strip():
            lines.append(line.strip())
        else:
            lines = None
    return found


def option_order(text: str) -> list[str]:
    return list(entries(text, OPTION_LINE))


def key_types(text: str) -> dict[str, str]:
    return {match[1]: match[2] for match in map(KEY_LINE.match, text.splitlines()) if match}


def test_the_group_lists_every_option(help_text: str) -> None:
    order = option_order(help_text)
    assert len(order) >= 39
    assert order[:2] == ["--isolation-mode", "--isolation-start"]
    assert len(key_types(help_text)) >= 40


@pytest.mark.parametrize(
    "together",
    [
        ("--isolation-timeout", "--isolation-kill-grace", "--isolation-test-timeout"),
        ("--isolation-test-timeout", "--isolation-test-memory", "--isolation-test-cpu"),
        ("--isolation-retries", "--isolation-retry-scope", "--isolation-quarantine"),
        (
            "--isolation-shard",
            "--isolation-shard-strategy",
            "--isolation-durations",
            "--isolation-store-durations",
        ),
        ("--isolation-report", "--isolation-record"),
        ("--isolation-leaks", "--isolation-leaks-deep"),
        ("--isolation-for", "--isolation-since", "--isolation-dry-run", "--isolation-scope"),
        (
            "--isolation-find-polluter",
            "--isolation-probes",
            "--isolation-find-timeout",
            "--isolation-find-json",
        ),
    ],
)
def test_related_options_are_neighbours(help_text: str, together: tuple[str, ...]) -> None:
    order = option_order(help_text)
    start = order.index(together[0])
    assert tuple(order[start : start + len(together)]) == together


def test_the_topics_come_in_order(help_text: str) -> None:
    """Mode and start, limits, retries and quarantine, shards, reports, the
    guard, the lint, the fixtures, the selector, the diagnoses."""
    order = option_order(help_text)
    topics = [
        "--isolation-preload",
        "--isolation-timeout",
        "--isolation-retries",
        "--isolation-shard",
        "--isolation-report",
        "--isolation-leaks",
        "--isolation-lint",
        "--isolation-keep-tmp",
        "--isolation-for",
        "--isolation-find-polluter",
        "--isolation-twice",
    ]
    assert [order.index(flag) for flag in topics] == sorted(order.index(f) for f in topics)


def test_a_truth_value_key_is_a_bool(help_text: str) -> None:
    types = key_types(help_text)
    assert {key: types[key] for key in BOOLEANS} == dict.fromkeys(BOOLEANS, "bool")


def test_a_number_key_is_an_int_or_a_float_where_pytest_has_them(help_text: str) -> None:
    """pytest 8.4 added the ``int`` and ``float`` ini types; before it the
    key is a string whose help names the number it takes."""
    types = key_types(help_text)
    if options.TYPED_NUMBERS:
        assert {key: types[key] for key in NUMBERS} == NUMBERS
        return
    assert {key: types[key] for key in NUMBERS} == dict.fromkeys(NUMBERS, "string")
    helps = entries(help_text, KEY_LINE)
    for key, kind in NUMBERS.items():
        assert options.NUMBER_WORDS[kind] in " ".join(helps[key]), key


def test_no_option_help_runs_over_four_lines(help_text: str) -> None:
    long = {
        flag: len(lines)
        for flag, lines in entries(help_text, OPTION_LINE).items()
        if len(lines) > 4
    }
    assert long == {}


def test_no_ini_key_help_runs_over_five_lines(help_text: str) -> None:
    long = {
        key: len(lines) for key, lines in entries(help_text, KEY_LINE).items() if len(lines) > 5
    }
    assert long == {}


@pytest.mark.parametrize(
    ("flag", "says"),
    [
        ("--isolation-probes", "how many pytest processes it runs in parallel"),
        ("--isolation-kill-grace", "the SECONDS between SIGTERM and SIGKILL"),
        ("--isolation-since", "run only the test files that exercise the files changed"),
    ],
)
def test_a_help_says_what_the_option_does(help_text: str, flag: str, says: str) -> None:
    """The texts that said it least clearly ("pytest runs at a time")."""
    assert says in " ".join(" ".join(entries(help_text, OPTION_LINE)[flag]).split())
