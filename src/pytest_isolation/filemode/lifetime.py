"""No file-mode process outlives its parent, and SIGTERM ends a run as Ctrl-C does.

Linux's parent-death signal (``prctl(PR_SET_PDEATHSIG)``) sends a process
SIGKILL when its parent ends, however it ends, SIGKILL of the parent
included.  Every forked child and the fork server ask for it first thing;
a spawned child asks before it loads pytest.  ``ctypes`` is imported here,
in the parent, so that a forked child finds it loaded.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from typing import Any

from pytest_isolation.core.signals import signal_name

#: Linux's prctl option: the signal a process gets when its parent ends.
PR_SET_PDEATHSIG = 1


def _find_prctl() -> Any:
    """libc's ``prctl``, looked up once, in the parent: a forked child
    inherits it and calls it without opening libc again."""
    if sys.platform != "linux":
        return None
    try:
        return ctypes.CDLL(None).prctl
    except (OSError, AttributeError):  # no libc to ask: children end as before
        return None


_prctl = _find_prctl()


def die_with_parent(parent: int, number: int = signal.SIGKILL) -> None:
    """Get signal ``number`` when ``parent`` ends (Linux only), and end now if
    it has already gone (between its fork or spawn and this call)."""
    if _prctl is None:
        return
    _prctl(PR_SET_PDEATHSIG, int(number), 0, 0, 0)
    if parent and os.getppid() != parent:
        os._exit(1)


#: The signal a file's process forked by a fork server gets when that server
#: ends (a real-time signal no suite uses; SIGUSR2 where there is none).
SERVER_GONE = int(signal.SIGRTMIN) + 6 if hasattr(signal, "SIGRTMIN") else int(signal.SIGUSR2)


class _Run:
    """The pid of the run's parent, in a file's process forked by a fork server."""

    parent = 0
    #: Its fork server ended since this was last asked (:func:`server_went`).
    server_gone = False


def mark_run_parent(pid: int = 0) -> None:
    """This process (or ``pid``: a spawned fork server's parent) is the run's
    parent: the processes it forks know it (:func:`outlive_server`)."""
    _Run.parent = pid or os.getpid()


def die_with_run(parent: int) -> None:
    """A spawned process (a file's, or the ``forkserver`` server): end with
    ``parent``, the run's parent."""
    die_with_parent(parent)
    mark_run_parent(parent)


def end_with(parent: int) -> None:
    """In a forked process that runs tests: end with ``parent``, or, when a
    fork server forked it, outlive that server while the run's parent runs."""
    run = _Run.parent
    if run and run != parent:
        outlive_server(parent, run)
    else:
        die_with_parent(parent)


def outlive_server(server: int, run: int) -> None:
    """In a file's process that fork server ``server`` forked: when the server
    ends (a test killed it, or the OOM killer did), carry on: the run's
    parent (``run``) still reads this process's reports, and a new server
    serves the next files.  End at once only when the run's parent has gone
    too (Linux; elsewhere, end with the server as before)."""
    if _prctl is None or run <= 0:
        die_with_parent(server)
        return
    _Run.parent = run
    signal.signal(SERVER_GONE, _server_gone)
    _prctl(PR_SET_PDEATHSIG, int(SERVER_GONE), 0, 0, 0)
    if os.getppid() != server:  # it has gone already
        _server_gone(SERVER_GONE, None)


def _server_gone(number: int, frame: object) -> None:
    if not _running(_Run.parent):
        os._exit(1)
    _Run.server_gone = True


def server_went() -> bool:
    """Whether this process's fork server ended since the last call."""
    gone, _Run.server_gone = _Run.server_gone, False
    return gone


#: The kernel's flag of a process on its way out (``PF_EXITING``, in
#: ``/proc/PID/stat``): set as it starts to exit, before it tells its
#: children (their parent-death signal) and well before it is a zombie.
_EXITING = 0x4


def _running(pid: int) -> bool:
    """Whether ``pid`` runs: not exiting, not ended, not a zombie (a killed
    process's state until its parent reaps it).  A fork server's child hears
    of its server's end while the killed run's parent may still be on its
    way out: the exiting flag says so, where its state would not yet."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        state, flags = fields[0], int(fields[6])
    except (OSError, IndexError, ValueError):
        return False
    return state not in (b"Z", b"X") and not flags & _EXITING


def end_with_controller() -> None:
    """In an xdist worker in file mode: end the running child's whole tree as on
    an interrupt when the controller ends or stops, instead of being killed
    with the child's tree left running.

    The worker gets SIGTERM when the controller ends, however it ends (then
    :func:`interrupt_on_ending`).  A controller that stops sends its busy
    workers SIGINT (execnet does, after 5 s); a worker started with SIGINT
    ignored (a shell's background job) takes it all the same."""
    die_with_parent(os.getppid(), signal.SIGTERM)
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


#: Signals that end a file-mode run the way Ctrl-C does: CI cancellation and
#: ``timeout`` send SIGTERM, a closed terminal SIGHUP.
ENDING = (signal.SIGTERM, signal.SIGHUP)


class _Ending:
    """The ending signal this process took, once it took one (0 before)."""

    received = 0


def _interrupt(number: int, frame: object) -> None:
    # Once: a repeat while the run ends (its children's trees, its reports)
    # would cut that short.  Linux sends an xdist worker its parent-death
    # signal again each time it passes from one ending thread of a killed
    # controller to the next; a CI runner may send SIGTERM twice.  Ignored,
    # not handled: at exit Python puts the default back for a signal with a
    # Python handler, and a repeat would then kill the process.
    if _Ending.received:
        return
    _Ending.received = number
    for each in ENDING:
        if signal.getsignal(each) is _interrupt:
            signal.signal(each, signal.SIG_IGN)
    sys.stderr.write(f"isolation: {signal_name(number)} received: ending the run as Ctrl-C does\n")
    raise KeyboardInterrupt


def interrupt_on_ending() -> dict[int, Any]:
    """In the parent: SIGTERM and SIGHUP raise ``KeyboardInterrupt``, so the
    run ends its children and reports what ran (summary, junit XML, exit code
    2).  Only where their handler is the default, and only from the main
    thread; returns what to put back."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    _Ending.received = 0
    saved: dict[int, Any] = {}
    for number in ENDING:
        if signal.getsignal(number) is signal.SIG_DFL:
            saved[number] = signal.signal(number, _interrupt)
    return saved


def put_back(saved: dict[int, Any]) -> None:
    """The handlers from before the run, unless it took an ending signal: then
    repeats stay ignored until the process exits (a default handler would
    kill it before it has written its summary)."""
    for number, handler in saved.items():
        if signal.getsignal(number) is _interrupt:
            signal.signal(number, handler)


def ending_default() -> None:
    """In a forked child: SIGTERM and SIGHUP end it again (the parent's
    handlers are inherited by the fork)."""
    for number in ENDING:
        if signal.getsignal(number) is _interrupt:
            signal.signal(number, signal.SIG_DFL)


#: The suite's ``SIGCHLD`` disposition while the parent keeps the default.
_SUITE_SIGCHLD: list[Any] = []


def wait_for_own_children() -> None:
    """In the parent: ``SIGCHLD`` at its default while it has children of
    its own.  A conftest that ignores it (``signal.signal(SIGCHLD,
    SIG_IGN)``) makes the kernel reap every child at once, and a child's
    exit status is lost: ``os._exit(3)`` read as killed by SIGKILL, or as
    exited with code 0.  Each forked child gets the suite's setting back
    (:func:`suite_sigchld`); :func:`give_back_sigchld` ends it."""
    number = getattr(signal, "SIGCHLD", None)
    if number is not None and not _SUITE_SIGCHLD and signal.getsignal(number) == signal.SIG_IGN:
        _SUITE_SIGCHLD.append(signal.signal(number, signal.SIG_DFL))


def suite_sigchld() -> None:
    """In a forked child: the suite's ``SIGCHLD`` setting, as the parent had it."""
    if _SUITE_SIGCHLD:
        signal.signal(signal.SIGCHLD, _SUITE_SIGCHLD[0])


def give_back_sigchld() -> None:
    """In the parent, once its children are done: the suite's setting again."""
    if _SUITE_SIGCHLD:
        signal.signal(signal.SIGCHLD, _SUITE_SIGCHLD.pop())
