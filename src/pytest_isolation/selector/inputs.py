"""The changed files a selection starts from: ``--isolation-for`` paths and
files, stdin, and ``--isolation-since`` (git), each normalised to one key."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence
from pathlib import Path

from pytest_isolation.core import outputs
from pytest_isolation.core.kinds import Unmapped
from pytest_isolation.selector.project import Project
from pytest_isolation.selector.project import is_global_trigger


class InvalidInput(Exception):
    """Bad input: the message names the path or option and the value."""


def read_for_values(values: Sequence[str], cwd: Path, stdin: Callable[[], str]) -> list[str]:
    """The raw paths of ``--isolation-for`` values: a path, ``@FILE`` (one path
    per line) or ``-`` (stdin); blank lines and ``#`` lines skipped."""
    paths: list[str] = []
    for value in values:
        if value == "-":
            text = stdin()
        elif value.startswith("@"):
            listing = cwd / value[1:]
            try:
                text = outputs.read_input(listing)
            except OSError as error:
                raise InvalidInput(
                    f"--isolation-for {value}: cannot read {str(listing)!r}: {error.strerror}"
                ) from None
            except UnicodeDecodeError as error:
                raise InvalidInput(
                    f"--isolation-for {value}: cannot read {str(listing)!r}: not UTF-8 text "
                    f"(byte {error.start})"
                ) from None
        else:
            paths.append(value)
            continue
        paths += [
            line.strip()
            for line in text.splitlines()
            if line.strip() and not line.strip().startswith("#")
        ]
    return paths


def _git(args: Sequence[str], cwd: Path) -> str:
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=60
        )
    except FileNotFoundError:
        raise InvalidInput("--isolation-since: the git executable was not found") from None
    if done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, args, done.stdout, done.stderr)
    return done.stdout


def changed_since(ref: str, root: Path) -> tuple[list[Path], Path]:
    """Files changed since ``ref``: committed, staged, unstaged and untracked,
    both names of a rename; absolute paths, and the git top level."""
    try:
        top = Path(_git(["rev-parse", "--show-toplevel"], root).strip())
    except subprocess.CalledProcessError:
        raise InvalidInput(
            f"--isolation-since {ref}: {str(root)!r} is not in a git repository"
        ) from None
    try:
        _git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], top)
    except subprocess.CalledProcessError:
        raise InvalidInput(f"--isolation-since {ref}: unknown git ref {ref!r}") from None
    diff = _git(["diff", "--name-status", "-z", "-M", ref, "--"], top).split("\0")
    names: list[str] = []
    index = 0
    while index < len(diff) and diff[index]:
        status = diff[index]
        count = 2 if status[:1] in {"R", "C"} else 1
        names += diff[index + 1 : index + 1 + count]
        index += 1 + count
    untracked = _git(["ls-files", "--others", "--exclude-standard", "-z"], top).split("\0")
    names += [name for name in untracked if name]
    return [top / name for name in dict.fromkeys(names)], top


def normalise(raw: str, cwd: Path, root: Path) -> tuple[str, Path]:
    """``(key, path)``: resolved against ``cwd``, symlinks resolved, inside ``root``."""
    if not raw or "\0" in raw:
        raise InvalidInput(f"--isolation-for: invalid path {raw!r}")
    path = Path(os.path.realpath(cwd / raw))
    real_root = Path(os.path.realpath(root))
    try:
        relative = path.relative_to(real_root)
    except ValueError:
        raise InvalidInput(f"{raw}: outside the rootdir {str(root)!r}") from None
    key = relative.as_posix()
    return ("" if key == "." else key), path


def known_to_git(path: Path, root: Path) -> bool:
    """Whether git has a history for ``path``: a deleted file still has one,
    a typo never had."""
    try:
        return bool(_git(["log", "-1", "--format=%H", "--", str(path)], root).strip())
    except (subprocess.CalledProcessError, InvalidInput):  # no repository, no git
        return False


def expand(
    keys: Iterable[tuple[str, Path, str]],
    project: Project,
    unmapped: Unmapped,
    deleted: Iterable[str] = (),
) -> tuple[list[str], list[str], list[str]]:
    """Sources (directories expanded to their Python files), global triggers
    met, and warnings; raises on an unmapped file under ``unmapped=error``.

    A missing Python file counts as deleted (its importers are selected)
    only when git says so: ``deleted`` (what ``--isolation-since`` found) or
    a file with a history; anything else is a typo."""
    known_deleted = set(deleted)
    sources: dict[str, None] = {}
    triggers: list[str] = []
    warnings: list[str] = []
    for key, path, raw in keys:
        if path.is_dir():
            prefix = "" if key == "" else key + "/"
            for file in sorted(project.files):
                if file.startswith(prefix):
                    sources[file] = None
            continue
        if is_global_trigger(key):
            triggers.append(key)
            continue
        if key.endswith(".py"):
            if not (path.exists() or key in known_deleted or known_to_git(path, project.root)):
                raise InvalidInput(f"{raw}: no such file, and not one that git knows was deleted")
            sources[key] = None  # a missing one was deleted: its importers are selected
            continue
        if not path.exists():
            raise InvalidInput(f"{raw}: no such file or directory")
        if unmapped == "error":
            raise InvalidInput(
                f"{key}: not a Python file, so no test maps to it "
                "(--isolation-unmapped=warn or ignore skips such files)"
            )
        if unmapped == "warn":
            warnings.append(f"{key}: not a Python file; skipped")
    return list(sources), triggers, warnings


def stdin_text() -> str:
    return sys.stdin.read()


def changed_lines(
    ref: str, top: Path, root: Path, keys: Iterable[str]
) -> dict[str, tuple[set[int], set[int]]]:
    """For each of ``keys`` (rootdir-relative) that git knows: its lines
    changed since ``ref`` as the file is now, and the lines after which
    lines were deleted (``git diff -U0``); an untracked file is all new.
    ``top`` is the repository's top level."""
    wanted = {str(Path(os.path.realpath(root / key))): key for key in keys}
    paths = [os.path.relpath(path, top) for path in wanted]
    found: dict[str, tuple[set[int], set[int]]] = {}
    if not paths:
        return found
    diff = _git(
        ["diff", "-U0", "--no-color", "--no-ext-diff", "--no-renames", ref, "--", *paths], top
    )
    current: tuple[set[int], set[int]] | None = None
    for line in diff.splitlines():
        if line.startswith("+++ "):
            name = line[4:]
            key = wanted.get(str(top / name[2:])) if name.startswith("b/") else None
            current = None if key is None else found.setdefault(key, (set(), set()))
        elif line.startswith("@@") and current is not None:
            start, count = _hunk_new_side(line)
            if count:
                current[0].update(range(start, start + count))
            else:
                current[1].add(start)
    untracked = _git(["ls-files", "--others", "--exclude-standard", "-z", "--", *paths], top)
    for name in filter(None, untracked.split("\0")):
        key = wanted.get(str(top / name))
        if key is not None:
            count = len((top / name).read_bytes().splitlines())
            found[key] = (set(range(1, count + 1)), set())
    return found


def _hunk_new_side(header: str) -> tuple[int, int]:
    """``(start, count)`` of the new side of ``@@ -a,b +c,d @@``."""
    new = header.split(" ")[2].removeprefix("+")
    start, _, count = new.partition(",")
    return int(start), int(count) if count else 1
