"""Files the plugin writes at the end of a run (the run report, the stored
durations): checked when pytest starts, written safely when it ends; and
the files it reads, which must be regular files.

A path is checked before any test runs, so a typo costs nothing: it must be
a regular file, a symlink to one, or a new file in a directory this process
may write to (missing directories are made then); a device, a directory or
a path under a regular file is refused, never replaced.  It is written
through a symlink (the link stays), by way of a temporary file beside the
target and ``os.replace``, so a reader never sees half a file.  A failure
at the end is one line, never an exception that would hide the summary,
the junit XML or the exit code.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

import pytest

#: The run report's format (``ci.runreport`` writes it; the record and the merge
#: tool check it): bump the version on any change that could break a reader.
SCHEMA = "pytest-isolation-run-report"
SCHEMA_VERSION = 1


def checked(path: Path, source: str) -> Path:
    """The file ``path`` names (a symlink's target), or a usage error naming
    ``source`` (the option) and the path."""
    target = Path(os.path.realpath(path))
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as error:  # a path under a regular file, no permission to look
        raise pytest.UsageError(f"{source}: cannot write {str(path)!r}: {error.strerror}") from None
    if mode is not None and not stat.S_ISREG(mode):
        raise pytest.UsageError(
            f"{source}: {str(path)!r} exists and is not a regular file; refusing to replace it"
        )
    directory = target.parent
    try:  # CI often names a directory that does not exist yet: made now, not at the end
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise pytest.UsageError(
            f"{source}: cannot write {str(path)!r}: cannot make the directory "
            f"{str(directory)!r}: {error.strerror or error}"
        ) from None
    writable = os.access(target, os.W_OK) if mode is not None else True
    if not (writable and os.access(directory, os.W_OK | os.X_OK)):
        raise pytest.UsageError(f"{source}: cannot write {str(path)!r}: permission denied")
    return target


def write(target: Path, text: str) -> str | None:
    """Write ``text`` to ``target`` (as :func:`checked` returned it) in one
    step; the error, in words, instead of raising."""
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, target)
    except OSError as error:
        with contextlib.suppress(OSError):
            temporary.unlink()
        return f"cannot write {str(target)!r}: {error.strerror or error}"
    return None


def read_input(path: Path) -> str:
    """The text of an input file the user named (a quarantine list, a
    durations file, an ``@FILE`` listing): a regular file only, as UTF-8.
    ``/dev/zero`` or a FIFO would be read forever; they raise ``OSError``
    ("not a regular file") like a missing file, for the caller's message."""
    with open(path, "rb") as stream:
        if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        return stream.read().decode("utf-8")
