"""The parent/child wire protocol of file mode.

A child process sends length-prefixed pickled ``(kind, payload)`` tuples over
one pipe.  Reports travel as the dicts made by pytest's own
``pytest_report_to_serializable`` hook, so nothing here depends on the
internals of pytest's report classes.  This module is imported by the child:
it must stay stdlib-only.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import select
import struct
import time
from collections.abc import Iterator
from typing import Any
from typing import BinaryIO
from typing import Final
from typing import Literal

# Bound at import: tests patch ``os.write`` (syrupy's own suite denies it to
# test its file lock), which must not cut a child off from its parent.
_write = os.write
_read = os.read

#: Bumped whenever a message kind or payload changes shape.
PROTOCOL_VERSION = 8

_HEADER = struct.Struct(">I")

#: What a message is: its first item, which says what its payload holds
#: (kept here, not in ``pytest_isolation.core.kinds``: this module imports
#: the standard library only).  Every constant below is one of them.
MessageKind = Literal[
    "start",
    "hello",
    "collectreport",
    "deselected",
    "notfound",
    "collected",
    "uses",
    "logstart",
    "report",
    "warning",
    "leak",
    "write",
    "junit",
    "kept",
    "repeating",
    "logfinish",
    "done",
    "status",
    "executed",
    "interrupted",
    "finished",
    "exiting",
    "server-ended",
    "logrecord",
    "timer",
]

# Parent to a prepared (warm) forked child: the spec and the file's item index.
START: Final[MessageKind] = "start"

# Message kinds, in the order a child normally sends them.
HELLO: Final[MessageKind] = "hello"
COLLECTREPORT: Final[MessageKind] = "collectreport"
DESELECTED: Final[MessageKind] = "deselected"
NOTFOUND: Final[MessageKind] = "notfound"
COLLECTED: Final[MessageKind] = "collected"
#: Which of the shared fixtures the spec asked about the selected tests use.
USES: Final[MessageKind] = "uses"
LOGSTART: Final[MessageKind] = "logstart"
REPORT: Final[MessageKind] = "report"
WARNING: Final[MessageKind] = "warning"
LEAK: Final[MessageKind] = "leak"
#: Text the child wrote with its terminal writer (``--setup-show``, live logs).
WRITE: Final[MessageKind] = "write"
#: junit XML data a test recorded beside its reports (:mod:`.junit`).
JUNIT: Final[MessageKind] = "junit"
KEPT: Final[MessageKind] = "kept"
#: ``--isolation-twice``: the running test's repeat starts.
REPEATING: Final[MessageKind] = "repeating"
LOGFINISH: Final[MessageKind] = "logfinish"
#: A file of a shared process (a group, the files not isolated) has run; the
#: process goes on with its next file.
DONE: Final[MessageKind] = "done"
#: The exit status a plugin raised at the end of the child's session.
STATUS: Final[MessageKind] = "status"
#: What the child executed, when it ran all of its file's tests (``ChildSpec.record``).
EXECUTED: Final[MessageKind] = "executed"
INTERRUPTED: Final[MessageKind] = "interrupted"
FINISHED: Final[MessageKind] = "finished"
#: After its unconfigure, the exit code the child ends with: read when the
#: fork server that would tell it has gone (a test killed it).
EXITING: Final[MessageKind] = "exiting"
#: The fork server of the child ended while a test ran (``nodeid``).
SERVER_ENDED: Final[MessageKind] = "server-ended"

# A test's own process to the process it was forked from (``pertest``),
# beside ``report``, ``warning``, ``leak`` and ``interrupted``:
#: A log record of the running test, as its report would show it.
LOGRECORD: Final[MessageKind] = "logrecord"
#: pytest-timeout armed its timer for the test: its seconds and method.
TIMER: Final[MessageKind] = "timer"

Message = tuple[MessageKind, dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class ChildSpec:
    """What the parent asks one child to do."""

    # Attributes: one message of the protocol, each field something the child
    # must be told; splitting it would only split the message.
    #: Absolute path of the test file.
    path: str
    #: ``::``-name tuples from ``path::name`` arguments; ``None`` runs the whole file.
    selectors: tuple[tuple[str, ...], ...] | None = None
    #: Node ids already run by an earlier child of the same file (crash resume).
    skip: frozenset[str] = frozenset()
    #: Failures left before ``-x``/``--maxfail`` stops the run; 0 means no limit.
    maxfail: int = 0
    #: Only collect and announce the node ids.
    collect_only: bool = False
    #: The files that run after ``path`` in the same process (a group's, or the
    #: files not isolated), in run order, each with its selectors.
    more: tuple[tuple[str, tuple[tuple[str, ...], ...] | None], ...] = ()
    #: The placement each file's own ``isolation`` marker gave the parent, spelled
    #: (``group=db``), for the files that have one: the child checks it once imported.
    marked: tuple[tuple[str, str], ...] = ()
    #: Shared fixtures: say which of them the selected tests use (:data:`USES`).
    uses: tuple[str, ...] = ()
    #: The files of this child that the run's own arguments name (pytest
    #: collects a named file as a test module whatever ``python_files`` says).
    named: tuple[str, ...] = ()
    #: Spawn only: the write end of the pipe, and ``sys.path[0]`` of the parent.
    fd: int = -1
    path0: str = ""
    #: Spawn only: the ``__file__`` and ``__spec__.name`` of the parent's ``__main__``.
    main_file: str = ""
    main_name: str = ""
    #: Spawn only: the parent's ``sys.argv[0]`` (``-c`` in the spawned interpreter).
    argv0: str = ""
    #: Spawn only: the parent's pid (the child ends if its parent has already gone).
    parent: int = 0
    #: The recursion headroom of the parent's run loop (0: unknown): a
    #: spawned child runs its tests as deep (:mod:`.depth`).
    loop_room: int = 0
    #: Spawn from a pytest-xdist worker: the worker's ``workerinput`` (JSON values).
    workerinput: dict[str, Any] | None = None
    #: Record what the file's tests execute, under this root (``--isolation-record``).
    record: str = ""
    #: Where the child's capture files are, for the parent to read when it dies.
    capture_dir: str = ""

    def to_env(self) -> str:
        data = dataclasses.asdict(self)
        data["skip"] = sorted(self.skip)
        return json.dumps(data)

    @classmethod
    def from_env(cls, text: str) -> ChildSpec:
        data = json.loads(text)
        data["selectors"] = _selectors(data["selectors"])
        data["skip"] = frozenset(data["skip"])
        data["more"] = tuple((path, _selectors(found)) for path, found in data["more"])
        data["marked"] = tuple((path, spelled) for path, spelled in data["marked"])
        data["named"] = tuple(data.get("named", ()))
        data["uses"] = tuple(data.get("uses", ()))
        return cls(**data)

    @property
    def files(self) -> list[tuple[str, tuple[tuple[str, ...], ...] | None]]:
        """Every file the process runs, in order, with its selectors."""
        return [(self.path, self.selectors), *self.more]


def _selectors(found: list[list[str]] | None) -> tuple[tuple[str, ...], ...] | None:
    return None if found is None else tuple(map(tuple, found))


def sendable_properties(
    properties: list[tuple[str, object]],
) -> tuple[list[tuple[str, object]], list[str]]:
    """What a test recorded with ``record_property`` (a report's
    ``user_properties``), each value as it is when it can be sent to the
    parent, else as its text (what pytest's JUnit XML report writes); and a
    sentence for each value that could not be sent."""
    sent: list[tuple[str, object]] = []
    unsent: list[str] = []
    for name, value in properties:
        try:
            pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as error:
            try:
                text = str(value)
            except Exception:
                text = object.__repr__(value)
            sent.append((name, text))
            unsent.append(
                f"record_property {name!r}: its value could not be sent from the test's "
                f"process ({type(error).__name__}: {error}); sent as its text, as the JUnit "
                "XML report writes it"
            )
        else:
            sent.append((name, value))
    return sent, unsent


def report_data(config: Any, report: Any) -> dict[str, Any]:
    """``report`` as it crosses to the parent: the dict of pytest's own
    ``pytest_report_to_serializable`` hook (``config.hook``), with the user
    properties pickle cannot carry moved to a section."""
    data: dict[str, Any] = config.hook.pytest_report_to_serializable(config=config, report=report)
    properties = data.get("user_properties")
    if properties:
        data["user_properties"], unsent = sendable_properties(list(properties))
        if unsent:
            sections = list(data.get("sections") or [])
            data["sections"] = [*sections, ("isolation", "\n".join(unsent))]
    return data


def warning_payload(
    warning_message: Any, when: str, nodeid: str, location: tuple[str, int, str] | None
) -> dict[str, Any]:
    """A recorded warning (``pytest_warning_recorded``'s arguments) as it
    crosses to the parent: its category by name, its text and its place
    (the parent rebuilds it: ``core.warnings.rebuilt``)."""
    category = warning_message.category
    return {
        "module": category.__module__,
        "qualname": category.__qualname__,
        "message": str(warning_message.message),
        "filename": warning_message.filename,
        "lineno": warning_message.lineno,
        "when": when,
        "nodeid": str(nodeid),
        "location": location,
    }


class _Adopted:
    #: A test's own process forked from a child (``pertest``), which speaks
    #: for the child while the child waits for it.
    pid = 0


def adopt_senders() -> None:
    """In a test's own process: the senders of the process it was forked
    from send from this one (that process waits until it ends)."""
    _Adopted.pid = os.getpid()


class Sender:
    """The child's end: writes whole messages to a pipe."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pid = os.getpid()

    def send(self, kind: MessageKind, **payload: Any) -> None:
        if os.getpid() != self.pid and os.getpid() != _Adopted.pid:
            _end_forked_copy(self.pid)
        body = pickle.dumps((kind, payload), protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(_HEADER.pack(len(body)) + body)
        while view:
            view = view[_write(self.fd, view) :]


def _end_forked_copy(child: int) -> None:
    """A test forked the child and its copy went on into pytest
    (``if os.fork() == 0: return``): only the child talks to the parent, so
    the copy ends here, saying so, instead of running the file's other tests."""
    _write(
        2,
        f"isolation: process {os.getpid()}, forked by a test in process {child}, "
        f"returned into pytest; it ends here\n".encode(),
    )
    os._exit(0)


class TimedOut(Exception):
    """The deadline passed before the child's next message (or its end)."""


def receive(stream: BinaryIO, deadline: float | None = None) -> Iterator[Message]:
    """Yield messages until the child closes its end (exit or crash).

    A message cut short by a dying child is dropped: the caller learns of the
    death from the process status, not from a half message.  With a
    ``deadline`` (``time.monotonic()``), raises :class:`TimedOut` when it
    passes while waiting.
    """
    return Receiver(stream).messages(deadline)


class Receiver:
    """The messages on one stream.  What was read but not yet yielded outlives
    an interrupt while waiting, so that :meth:`drain` can still give it."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        try:
            self.fd = stream.fileno()
        except (OSError, ValueError):  # an in-memory stream (tests): read it directly
            self.fd = -1
        self.buffer = bytearray()

    def messages(self, deadline: float | None = None) -> Iterator[Message]:
        """As :func:`receive`."""
        while True:
            yield from self._whole()
            if deadline is not None and self.fd >= 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not select.select([self.fd], [], [], remaining)[0]:
                    raise TimedOut
            if not self._read_more():
                return

    def drain(self, seconds: float) -> Iterator[Message]:
        """The whole messages left, once the writer has ended: what is read
        until the end of the stream, for at most ``seconds`` (a descendant
        that escaped its end may still hold the pipe open)."""
        deadline = time.monotonic() + seconds
        while self.fd >= 0:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self.fd], [], [], remaining)[0]:
                break
            if not self._read_more():
                break
        return self._whole()

    def _whole(self) -> Iterator[Message]:
        buffer = self.buffer
        while len(buffer) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(buffer)
            if len(buffer) < _HEADER.size + size:
                break
            body = bytes(buffer[_HEADER.size : _HEADER.size + size])
            del buffer[: _HEADER.size + size]
            yield pickle.loads(body)

    def _read_more(self) -> bool:
        chunk = _read(self.fd, 1 << 16) if self.fd >= 0 else self.stream.read(1 << 16)
        self.buffer += chunk
        return bool(chunk)
