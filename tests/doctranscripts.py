"""Executable docs: run the shell transcripts of a Markdown page and compare their output.

The format is described in CONTRIBUTING.md, "Executable docs". In short: a heading
starts a section, and each section runs in a fresh directory of its own; a fenced
block just below ``<!-- file: PATH -->`` is written to PATH there; a ```console
block is a transcript, ``$ COMMAND`` lines each followed by the output the doc
expects, run in that directory in document order; ``<!-- not run: REASON -->``
keeps a block from running. The output is normalised (paths, durations, versions,
addresses) before it is compared, and ``...`` in the expected output stands for any
run of lines (alone on a line) or any text (inside a line).
"""

from __future__ import annotations

import difflib
import functools
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

import pytest_isolation

#: Every command of a transcript is bounded (seconds).
COMMAND_TIMEOUT = 60

#: Fenced blocks that look like shell sessions or their output: each must run or say why not.
TRANSCRIPT_LANGUAGES = frozenset({"console", "text", "bash", "sh", "shell", "shell-session"})

#: The installed pytest plugin whose docs these are; every other one is kept out of the runs.
PLUGIN = "isolation"

ELLIPSIS = "..."

_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^`\s]*)")
_DIRECTIVE = re.compile(r"^\s*<!--\s*([a-z][a-z ]*?)\s*:\s*(.*?)\s*-->\s*$")
_EXIT = re.compile(r"\s#\s*exit\s+(-?\d+)\b")
_DIRECTIVES = frozenset({"file", "not run", "plugins"})


@dataclass(frozen=True)
class Command:
    """One ``$ COMMAND`` line of a transcript and the output the doc shows below it."""

    line: int
    text: str
    exit: int
    expected: tuple[str, ...]


@dataclass(frozen=True)
class Block:
    """A fenced block and the directives (HTML comments) on the lines just above it."""

    line: int
    language: str
    body: str
    directives: dict[str, str] = field(default_factory=dict)

    @property
    def file(self) -> str | None:
        return self.directives.get("file")

    @property
    def reason_not_run(self) -> str | None:
        return self.directives.get("not run") or None

    @property
    def plugins(self) -> tuple[str, ...]:
        names = self.directives.get("plugins", "")
        return tuple(name.strip() for name in names.split(",") if name.strip())

    @property
    def is_transcript(self) -> bool:
        runs = self.language == "console" and self.body.startswith("$ ")
        return runs and self.file is None and self.reason_not_run is None


@dataclass(frozen=True)
class Section:
    """The blocks under one heading: they share one directory when they run."""

    doc: str
    slug: str
    line: int
    blocks: tuple[Block, ...]

    @property
    def runs(self) -> bool:
        return any(block.is_transcript for block in self.blocks)


@dataclass(frozen=True)
class Doc:
    name: str
    sections: tuple[Section, ...]
    problems: tuple[str, ...]

    def unaccounted(self) -> list[str]:
        """Blocks that look like a transcript or its output, but neither run nor say why not."""
        return [
            f"{self.name}:{block.line}: a ```{block.language} block that neither runs nor says"
            " why not: make it a ```console transcript ($ COMMAND, then the output), or put"
            " `<!-- not run: REASON -->` on the line above it"
            for section in self.sections
            for block in section.blocks
            if block.language in TRANSCRIPT_LANGUAGES
            and not block.is_transcript
            and block.file is None
            and block.reason_not_run is None
        ]


def read(path: Path, root: Path) -> Doc:
    return parse(path.read_text(encoding="utf-8"), path.relative_to(root).as_posix())


def parse(text: str, name: str) -> Doc:
    """Split a Markdown text into sections of fenced blocks (headings in fences are code)."""
    lines = text.splitlines()
    problems: list[str] = []
    sections: list[Section] = []
    title, start = "", 1
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        heading = _HEADING.match(lines[index])
        fence = _FENCE.match(lines[index])
        if heading:
            sections.append(Section(name, _slug(title), start, tuple(blocks)))
            title, start, blocks = heading.group(2), index + 1, []
        elif fence:
            block, index = _block(lines, index, fence)
            directives = _directives(lines, block.line - 1, f"{name}:{block.line}", problems)
            blocks.append(Block(block.line, block.language, block.body, directives))
        index += 1
    sections.append(Section(name, _slug(title), start, tuple(blocks)))
    return Doc(name, _unique_slugs(sections), tuple(problems))


def _block(lines: list[str], index: int, fence: re.Match[str]) -> tuple[Block, int]:
    """The fenced block opening at ``lines[index]``, and the index of its closing line."""
    indent, marks, language = fence.group(1), fence.group(2), fence.group(3)
    closing = re.compile(rf"^\s*{re.escape(marks[0])}{{{len(marks)},}}\s*$")
    end = index + 1
    while end < len(lines) and not closing.match(lines[end]):
        end += 1
    body = [_dedent(line, len(indent)) for line in lines[index + 1 : end]]
    return Block(index + 1, language, "\n".join(body)), end


def _dedent(line: str, width: int) -> str:
    # Inside a list item the fence and its content are indented alike.
    spaces = len(line) - len(line.lstrip(" "))
    return line[min(spaces, width) :]


def _directives(
    lines: list[str], fence_index: int, where: str, problems: list[str]
) -> dict[str, str]:
    found: dict[str, str] = {}
    index = fence_index - 1
    while index >= 0 and (directive := _DIRECTIVE.match(lines[index])):
        key, value = directive.group(1), directive.group(2)
        if key not in _DIRECTIVES:
            problems.append(f"{where}: unknown directive {key!r} (known: {sorted(_DIRECTIVES)})")
        elif not value:
            problems.append(f"{where}: the directive {key!r} needs a value")
        found[key] = value
        index -= 1
    return found


def _slug(title: str) -> str:
    # GitHub's heading anchors (MyST's with myst_heading_anchors are the same for plain titles).
    text = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return text.replace(" ", "-") or "top"


def _unique_slugs(sections: list[Section]) -> tuple[Section, ...]:
    seen: dict[str, int] = {}
    unique = []
    for section in sections:
        count = seen.get(section.slug, 0)
        seen[section.slug] = count + 1
        slug = f"{section.slug}-{count}" if count else section.slug
        unique.append(Section(section.doc, slug, section.line, section.blocks))
    return tuple(unique)


def commands(block: Block) -> Iterator[Command]:
    """The ``$`` lines of a transcript, each with the output lines below it."""
    lines = block.body.splitlines()
    starts = [index for index, line in enumerate(lines) if line.startswith("$ ")]
    for position, first in enumerate(starts):
        stop = starts[position + 1] if position + 1 < len(starts) else len(lines)
        text, after = _command_text(lines, first, stop)
        exit_comment = _EXIT.search(text)
        yield Command(
            line=block.line + 1 + first,
            text=text,
            exit=int(exit_comment.group(1)) if exit_comment else 0,
            expected=tuple(lines[after:stop]),
        )


def _command_text(lines: list[str], first: int, stop: int) -> tuple[str, int]:
    # A command continues on the next line after a trailing backslash, as in a shell.
    parts = [lines[first][2:]]
    index = first + 1
    while parts[-1].endswith("\\") and index < stop:
        parts.append(lines[index].removeprefix("> "))
        index += 1
    return "\n".join(parts), index


# Running


@dataclass(frozen=True)
class Workspace:
    """The directories of one section's run: the project (the working directory) and its HOME,
    TMPDIR and the ``pytest``/``python`` commands, each shown in the docs under a fixed name."""

    root: Path

    @property
    def project(self) -> Path:
        return self.root / "project"

    def make(self) -> None:
        for name in ("project", "home", "tmp", "bin", "lib"):
            (self.root / name).mkdir(parents=True, exist_ok=True)
        # `pytest` runs as the console script pip installs (argv[0] `pytest`, its own directory
        # first on sys.path, not the working directory as under `python -m pytest`), but
        # with this interpreter; `python` is this interpreter.
        script = self.root / "lib" / "pytest"
        script.write_text(_console_script("pytest", "pytest"))
        for name, arguments in {"python": "", "pytest": f' "{script}"'}.items():
            wrapper = self.root / "bin" / name
            wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}"{arguments} "$@"\n')
            wrapper.chmod(0o755)

    def env(self, plugins: Sequence[str]) -> dict[str, str]:
        """A clean environment: nothing from the caller's but PATH, and only this plugin."""
        return {
            "PATH": f"{self.root / 'bin'}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
            "HOME": str(self.root / "home"),
            "TMPDIR": str(self.root / "tmp"),
            "LC_ALL": "C.UTF-8",
            "COLUMNS": "80",
            "LINES": "24",
            "TERM": "dumb",
            "NO_COLOR": "1",
            "PY_COLORS": "0",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": "0",
            "PYTEST_ADDOPTS": " ".join(f"-p no:{name}" for name in other_plugins(plugins)),
            "GIT_AUTHOR_NAME": "Docs",
            "GIT_AUTHOR_EMAIL": "docs@example.com",
            "GIT_COMMITTER_NAME": "Docs",
            "GIT_COMMITTER_EMAIL": "docs@example.com",
            "GIT_CONFIG_NOSYSTEM": "1",
        }

    def paths(self) -> list[tuple[str, str]]:
        """Absolute paths a run may print, longest first, and what the docs show instead."""
        shown = {
            self.project: "/path/to/project",
            self.root / "home": "/home/user",
            self.root / "tmp": "/tmp",
            Path(pytest_isolation.__file__).parent: "/path/to/site-packages/pytest_isolation",
            Path(sysconfig.get_paths()["purelib"]): "/path/to/site-packages",
            Path(sysconfig.get_paths()["platlib"]): "/path/to/site-packages",
            Path(sysconfig.get_paths()["stdlib"]): "/path/to/python/lib",
            Path(sys.prefix): "/path/to/venv",
            Path(sys.base_prefix): "/path/to/python",
        }
        pairs = {(str(p), name) for path, name in shown.items() for p in (path, path.resolve())}
        return sorted(pairs, key=lambda pair: -len(pair[0]))


def _console_script(distribution: str, name: str) -> str:
    """The script pip writes for a console entry point (pytest 9.1 moved pytest's)."""
    (entry,) = [
        entry
        for entry in importlib.metadata.distribution(distribution).entry_points
        if entry.group == "console_scripts" and entry.name == name
    ]
    return f"import sys\nfrom {entry.module} import {entry.attr}\nsys.exit({entry.attr}())\n"


def other_plugins(wanted: Sequence[str]) -> list[str]:
    """Every installed pytest plugin but this one and the ``wanted``: the runs must not depend
    on what else is installed (the header's ``plugins:`` line, their warnings, their options).
    Blocking them (``-p no:NAME``), rather than turning auto-loading off, keeps the plugin
    loading by its entry point, as it does for a user, and ``-p no:isolation`` meaning what it
    says."""
    names = {entry.name for entry in importlib.metadata.entry_points(group="pytest11")}
    return sorted(names - {PLUGIN, *wanted})


def run_section(section: Section, root: Path) -> list[str]:
    """Write the section's files and run its transcripts in order; the mismatches found."""
    workspace = Workspace(root)
    workspace.make()
    failures: list[str] = []
    for block in section.blocks:
        if block.file is not None:
            _write(workspace.project, block, section.doc)
        elif block.is_transcript:
            for command in commands(block):
                failures.extend(_check(workspace, command, block.plugins, section.doc))
    return failures


def _write(project: Path, block: Block, doc: str) -> None:
    relative = Path(str(block.file))
    if relative.is_absolute() or ".." in relative.parts:
        raise ValueError(f"{doc}:{block.line}: file {block.file!r} must be a relative path inside")
    target = project / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(block.body + "\n", encoding="utf-8")


def _check(workspace: Workspace, command: Command, plugins: Sequence[str], doc: str) -> list[str]:
    where = f"{doc}:{command.line}: `{command.text}`"
    try:
        done = subprocess.run(
            [shutil.which("bash") or "/bin/sh", "-c", command.text],
            cwd=workspace.project,
            env=workspace.env(plugins),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return [f"{where} did not end within {COMMAND_TIMEOUT} s"]
    actual = Output.of(_replace_paths(done.stdout.decode(errors="replace"), workspace.paths()))
    expected = Output.of("\n".join(command.expected))
    failures = []
    if done.returncode != command.exit:
        failures.append(
            f"{where} exited {done.returncode}, the doc says {command.exit}"
            " (a non-zero exit is written as a `# exit N` comment at the end of the command)"
        )
    if not matches(expected.canonical, actual.canonical):
        failures.append(
            f"{where} printed other output than the doc shows\n{diff(expected, actual)}"
        )
    return failures


# Comparing


def _replace_paths(text: str, paths: Sequence[tuple[str, str]]) -> str:
    for path, shown in paths:
        text = text.replace(path, shown)
    return text


def _plugins_line(found: re.Match[str]) -> str:
    return found.group(1) + re.sub(r"-\d[^\s,]*", "-VERSION", found.group(2))


#: What differs between two runs of the same command, made the same on both sides; the
#: docs can show realistic values (``in 0.12s``, ``pytest-9.0.2``).
_CANONICAL: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    (
        re.compile(r"^platform \S+ -- Python [^\s,]+, pytest-[^\s,]+, pluggy-[^\s,]+"),
        "platform PLATFORM -- Python VERSION, pytest-VERSION, pluggy-VERSION",
    ),
    (re.compile(r"^(plugins: )(.*)$"), _plugins_line),
    (re.compile(r"\b\d+\.\d\d( ?s)\b"), r"N.NN\1"),
    (re.compile(r"\(\d+:\d\d:\d\d\)"), "(H:MM:SS)"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "0x..."),
    (re.compile(r"\bid='?\d{4,}'?"), "id=..."),
    (re.compile(r"\b(pid|process|child)([ =])\d+\b"), r"\1\2PID"),
    (re.compile(r"\bpytest-of-[^/\s]+"), "pytest-of-USER"),
    # The fill of a separator line depends on the length of its text (a duration).
    (re.compile(r"^([=_!-])\1{2,} (.*?) \1{2,}$"), r"\1\1\1 \2 \1\1\1"),
)


@dataclass(frozen=True)
class Output:
    """Lines of output as shown (``shown``) and as compared (``canonical``), one for one."""

    shown: tuple[str, ...]
    canonical: tuple[str, ...]

    @classmethod
    def of(cls, text: str) -> Output:
        shown = [line.rstrip() for line in text.splitlines()]
        while shown and not shown[-1]:
            shown.pop()
        return cls(tuple(shown), tuple(_canonical(line) for line in shown))


def normalise(text: str) -> list[str]:
    return list(Output.of(text).canonical)


def _canonical(line: str) -> str:
    for pattern, replacement in _CANONICAL:
        line = pattern.sub(replacement, line)
    return line


def matches(expected: Sequence[str], actual: Sequence[str]) -> bool:
    """Whether the output fits the doc's, ``...`` standing for any lines or any text."""
    # The run's positions each prefix of the doc can end at (no regex over the whole text,
    # whose backtracking over several `...` lines can take exponential time).
    reachable = {0}
    for line in expected:
        if line == ELLIPSIS:
            reachable = set(range(min(reachable), len(actual) + 1)) if reachable else set()
        else:
            reachable = {at + 1 for at in reachable if at < len(actual) and fits(line, actual[at])}
    return len(actual) in reachable


@functools.cache
def _line_pattern(line: str) -> re.Pattern[str]:
    return re.compile(".*?".join(re.escape(piece) for piece in line.split(ELLIPSIS)))


def fits(expected: str, actual: str) -> bool:
    """Whether one line of output fits one line of the doc (``...`` stands for any text)."""
    return _line_pattern(expected).fullmatch(actual) is not None


def diff(expected: Output, actual: Output) -> str:
    """A unified diff of the canonical lines, doc (-) against run (+), showing each side's own
    text (so the run's lines can be pasted into the doc), the lines a ``...`` stands for
    folded into it."""
    folded = _fold(expected.canonical, actual.canonical)
    ours = [expected.shown[at] if side == "doc" else actual.shown[at] for side, at in folded]
    theirs = [
        expected.canonical[at] if side == "doc" else actual.canonical[at] for side, at in folded
    ]
    lines = ["--- doc", "+++ run"]
    matcher = difflib.SequenceMatcher(None, expected.canonical, theirs, autojunk=False)
    for group in matcher.get_grouped_opcodes(3):
        first, last = group[0], group[-1]
        lines.append(
            f"@@ -{first[1] + 1},{last[2] - first[1]} +{first[3] + 1},{last[4] - first[3]} @@"
        )
        for tag, doc_from, doc_to, run_from, run_to in group:
            if tag == "equal":
                lines.extend(" " + line for line in expected.shown[doc_from:doc_to])
                continue
            lines.extend("-" + line for line in expected.shown[doc_from:doc_to])
            lines.extend("+" + line for line in ours[run_from:run_to])
    return "\n".join(lines)


def _fold(expected: Sequence[str], actual: Sequence[str]) -> list[tuple[str, int]]:
    """The run's lines as ("run", index), except those the doc's lines fit, and those its
    ``...`` stands for, which become the doc's line, ("doc", index)."""
    folded: list[tuple[str, int]] = []
    position = 0
    for index, line in enumerate(expected):
        if line == ELLIPSIS:
            folded.append(("doc", index))
            position = _next_fit(expected[index + 1 :], actual, position)
        elif position < len(actual):
            folded.append(("doc", index) if fits(line, actual[position]) else ("run", position))
            position += 1
    return folded + [("run", at) for at in range(position, len(actual))]


def _next_fit(rest: Sequence[str], actual: Sequence[str], position: int) -> int:
    """Where the doc's next literal line appears in the run (else the likeliest place)."""
    following = next((line for line in rest if line != ELLIPSIS), None)
    if following is None:
        return len(actual)
    for index in range(position, len(actual)):
        if fits(following, actual[index]):
            return index
    likeness = [
        (difflib.SequenceMatcher(None, following, actual[index]).ratio(), -index)
        for index in range(position, len(actual))
    ]
    best = max(likeness, default=(0.0, -position))
    return -best[1] if best[0] >= 0.6 else position
