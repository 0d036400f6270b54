"""What a file's child inherits, under each start method (issue 46, item 4).

A conftest sets one piece of each kind of interpreter and process state
at import; each inner test, named after its row of the inventory in
``docs/explanation/how-it-works.md`` ("What a child inherits"), asserts
it as the loop oracle sees it: ``pytest -p no:isolation FILE`` in a fresh
interpreter per file.  The run is started as a shell or a CI runner would
start it: through a launcher that ignores SIGINT, blocks SIGUSR2 and hands
down an open file descriptor, with interpreter options.  Where a start
method differs by design (``docs/explanation/limitations.md``), the row
asserts the documented behaviour for it (``INNER_START``).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from conftest import FILE_MODE
from conftest import TIMEOUT
from pytest_isolation.filemode.processes import interpreter_options

START_METHODS = ["fork", "forkserver", "spawn"]

#: Started as ``python launch.py ARGS``: what a shell or a CI runner gives
#: the pytest it starts, then ``exec`` of the interpreter with ARGS.
LAUNCHER = """
    import os, signal, sys

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a shell's background job
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})
    fd = os.open(__file__, os.O_RDONLY)  # a make jobserver, a CI runner's pipe
    os.set_inheritable(fd, True)
    os.environ["INHERITED_FD"] = str(fd)
    os.environ["INHERITED_INO"] = str(os.fstat(fd).st_ino)
    os.environ["NICE_AT_START"] = str(os.nice(0))
    os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
"""

#: The interpreter options the run starts with (``python OPTIONS -m pytest``).
OPTIONS = ("-X", "dev", "-W", "ignore::ImportWarning")

CONFTEST = """
    import atexit, codecs, decimal, faulthandler, gc, locale, logging, os, random
    import resource, signal, sys, time, warnings

    HERE = os.path.dirname(os.path.abspath(__file__))

    sys.setrecursionlimit(4321)
    sys.setswitchinterval(0.0123)
    sys.set_int_max_str_digits(5555)
    sys.dont_write_bytecode = True
    sys.setdlopenflags(sys.getdlopenflags() | os.RTLD_GLOBAL)

    sys.path.insert(0, os.path.join(HERE, "extra"))
    import markermod

    def search(name):
        return codecs.lookup("utf-8") if name == "probe_codec" else None

    codecs.register(search)

    def excepthook(*args):
        sys.__excepthook__(*args)

    def displayhook(value):
        sys.__displayhook__(value)

    sys.excepthook = excepthook
    sys.displayhook = displayhook

    os.environ["SET_AT_IMPORT"] = "yes"
    os.environ["PROBE_PATH"] = os.environ.get("PROBE_PATH", "") + ":added"
    os.environ["TZ"] = "PRB-3"
    time.tzset()
    os.chdir(os.path.join(HERE, "sub"))
    os.umask(0o027)

    def on_usr1(number, frame):
        pass

    signal.signal(signal.SIGUSR1, on_usr1)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGWINCH})

    logging.getLogger().setLevel(logging.INFO)
    named = logging.getLogger("probe.named")
    named.setLevel(logging.ERROR)
    named.addHandler(logging.NullHandler())
    logging.disable(logging.DEBUG)
    logging.captureWarnings(True)
    warnings.filterwarnings("ignore", message="dropped filter")  # pytest drops it

    def pytest_configure(config):
        warnings.filterwarnings("ignore", message="kept filter")
        os.environ["PROBE_PATH"] += ":configured"

    LOCALE = None
    for name in ("C.UTF-8", "C.utf8", "en_US.UTF-8"):
        try:
            LOCALE = locale.setlocale(locale.LC_NUMERIC, name)
            break
        except locale.Error:
            continue

    # A watchdog for the whole run, and a timer with a handler of its own.
    faulthandler.dump_traceback_later(600)
    signal.signal(signal.SIGALRM, on_usr1)
    signal.setitimer(signal.ITIMER_REAL, 600)

    def at_exit():
        with open(os.path.join(HERE, "atexit.log"), "a") as log:
            log.write(f"{os.getpid()}\\n")

    atexit.register(at_exit)

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    NOFILE = min(1000, soft)
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, hard))
    resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))

    OPENED = open(os.path.join(HERE, "opened.txt"), "w")

    gc.set_threshold(1234, 11, 12)
    gc.disable()
    decimal.getcontext().prec = 7
    random.seed(1234)

    FORKED = []
    os.register_at_fork(after_in_child=lambda: FORKED.append(os.getpid()))
    if int(os.environ["NICE_AT_START"]) < 18:
        os.nice(1)
"""

#: One test per row of the inventory; the oracle passes every one.
ROWS = """
    import codecs, decimal, faulthandler, gc, locale, logging, os, random, resource
    import signal, sys, time, warnings

    import pytest

    import conftest

    START = os.environ["INNER_START"]  # "loop" for the oracle


    def test_faulthandler_watchdog():
        assert faulthandler.is_enabled()
        threads = len(os.listdir("/proc/self/task"))
        # pytest's faulthandler plugin calls this at every failure (the inner
        # runs leave it out): it must not wait for a thread a fork left behind
        faulthandler.cancel_dump_traceback_later()
        deadline = time.monotonic() + 5  # the thread may still be ending
        while len(os.listdir("/proc/self/task")) == threads and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(os.listdir("/proc/self/task")) == threads - 1  # its thread ran
        faulthandler.dump_traceback_later(600)


    def test_interpreter_options():
        assert sys.flags.dev_mode
        assert "ignore::ImportWarning" in sys.warnoptions
        assert sys.warnoptions.count("ignore::ImportWarning") == 1


    def test_sys_settings():
        assert sys.getrecursionlimit() == 4321
        assert sys.getswitchinterval() == 0.0123
        assert sys.get_int_max_str_digits() == 5555
        assert sys.dont_write_bytecode
        assert sys.getdlopenflags() & os.RTLD_GLOBAL


    def test_sys_path_modules_and_codecs():
        assert os.path.join(conftest.HERE, "extra") in sys.path
        assert "markermod" in sys.modules
        assert codecs.lookup("probe_codec").name == "utf-8"


    def test_interpreter_hooks():
        assert sys.excepthook is conftest.excepthook
        assert sys.displayhook is conftest.displayhook


    def test_environment():
        assert os.environ["SET_AT_IMPORT"] == "yes"
        # added once, not once per start-up
        assert os.environ["PROBE_PATH"] == ":added:configured"


    def test_time_zone():
        assert time.tzname[0] == "PRB"
        assert time.timezone == -3 * 3600


    def test_working_directory():
        assert os.getcwd() == os.path.join(conftest.HERE, "sub")


    def test_umask():
        mask = os.umask(0)
        os.umask(mask)
        assert mask == 0o027


    def test_signal_handlers_and_mask():
        assert signal.getsignal(signal.SIGUSR1) is conftest.on_usr1
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN  # as the launcher left it
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        assert {signal.SIGWINCH, signal.SIGUSR2} <= blocked


    def test_logging():
        assert logging.getLogger().level == logging.INFO
        named = logging.getLogger("probe.named")
        assert named.level == logging.ERROR
        assert [type(h).__name__ for h in named.handlers] == ["NullHandler"]
        assert logging.root.manager.disable == logging.DEBUG
        assert logging._warnings_showwarning is not None  # captureWarnings(True)


    def test_warning_filters():
        patterns = [message.pattern for _, message, *_ in warnings.filters if message]
        # pytest keeps what pytest_configure sets since it applies the run's
        # filters there (_catch_configured_warnings); before, it dropped it.
        keeps = hasattr(pytest.Config, "_catch_configured_warnings")
        assert ("kept filter" in patterns) == keeps
        assert "dropped filter" not in patterns  # pytest restores them after the import


    def test_locale():
        assert conftest.LOCALE is not None
        assert locale.setlocale(locale.LC_NUMERIC) == conftest.LOCALE


    def test_interval_timers():
        left, interval = signal.getitimer(signal.ITIMER_REAL)
        assert 0 < left <= 600
        assert signal.getsignal(signal.SIGALRM) is conftest.on_usr1


    def test_resource_limits():
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == conftest.NOFILE
        assert resource.getrlimit(resource.RLIMIT_CORE)[0] == 0


    def test_open_files():
        opened = os.fstat(conftest.OPENED.fileno())
        assert opened.st_ino == os.stat(os.path.join(conftest.HERE, "opened.txt")).st_ino


    def test_inherited_file_descriptors():
        fd = int(os.environ["INHERITED_FD"])
        assert os.fstat(fd).st_ino == int(os.environ["INHERITED_INO"])


    def test_garbage_collector():
        assert gc.get_threshold() == (1234, 11, 12)
        assert not gc.isenabled()


    def test_decimal_context():
        assert decimal.getcontext().prec == 7


    def test_random_seed():
        assert random.random() == random.Random(1234).random()


    def test_fork_handlers():
        # Documented: every process file mode forks runs them (fork: the
        # origin, the fork server and the child each; forkserver: the child)
        ran = {"loop": 0, "spawn": 0, "forkserver": 1, "fork": 3}[START]
        assert len(conftest.FORKED) == ran


    def test_niceness():
        # Documented: a spawned interpreter starts at the parent's niceness,
        # and its conftest's os.nice(1) adds to it again
        if int(os.environ["NICE_AT_START"]) >= 18:
            return
        raised = {"loop": 1, "fork": 1, "forkserver": 2, "spawn": 2}[START]
        assert os.nice(0) - int(os.environ["NICE_AT_START"]) == raised


    def test_process_session():
        # Documented: each child leads a session of its own (ending it ends
        # what it started), where a plain run is in the launcher's
        assert (os.getsid(0) == os.getpid()) == (START != "loop")
"""

#: The rows, each the name of one inner test.
ROW_NAMES = re.findall(r"^def (test_\w+)", ROWS.replace("\n    ", "\n"), flags=re.MULTILINE)

#: How each row of the inventory's table begins, and the inner test of the row
#: (``atexit``: the outer tests count the handler's runs).
DOC_ROWS = {
    "Interpreter options": "test_interpreter_options",
    "`sys` settings": "test_sys_settings",
    "`sys.path`": "test_sys_path_modules_and_codecs",
    "`sys.excepthook`": "test_interpreter_hooks",
    "`os.environ`": "test_environment",
    "Time zone": "test_time_zone",
    "Working directory": "test_working_directory",
    "`os.umask`": "test_umask",
    "Signal handlers": "test_signal_handlers_and_mask",
    "Logging": "test_logging",
    "Warning filters": "test_warning_filters",
    "Locale": "test_locale",
    "faulthandler": "test_faulthandler_watchdog",
    "Interval timers": "test_interval_timers",
    "Resource limits": "test_resource_limits",
    "Files the conftest opened": "test_open_files",
    "File descriptors inherited": "test_inherited_file_descriptors",
    "Garbage collector": "test_garbage_collector",
    "`decimal` context": "test_decimal_context",
    "`random`": "test_random_seed",
    "Fork handlers": "test_fork_handlers",
    "Niceness": "test_niceness",
    "Process session": "test_process_session",
    "`atexit`": "atexit",
}

HOW_IT_WORKS = Path(__file__).resolve().parent.parent / "docs/explanation/how-it-works.md"


def _make_suite(pytester: pytest.Pytester) -> None:
    pytester.mkdir("sub")
    pytester.mkdir("extra").joinpath("markermod.py").write_text("VALUE = 1\n")
    pytester.makepyfile(launch=LAUNCHER, conftest=CONFTEST, test_a=ROWS, test_b=ROWS)


def _rows_failed(result: pytest.RunResult) -> list[str]:
    """The rows (inner test names) that failed or errored, in either file."""
    failed = re.findall(r"^(?:FAILED|ERROR) test_\w\.py::(test_\w+)", result.stdout.str(), re.M)
    return sorted(set(failed))


def _atexit_runs(pytester: pytest.Pytester) -> int:
    log = pytester.path / "atexit.log"
    runs = len(log.read_text().split()) if log.exists() else 0
    log.unlink(missing_ok=True)
    return runs


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """pytest, started through the launcher with the interpreter options."""
    return pytester.run(
        sys.executable,
        "launch.py",
        *OPTIONS,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        # pytest's faulthandler plugin cancels the watchdog at every failure:
        # in a child whose watchdog a fork broke, each failing row would wait
        # for --isolation-timeout (the watchdog's row cancels it itself)
        "-p",
        "no:faulthandler",
        "-rfE",
        *args,
        timeout=TIMEOUT,
    )


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    _make_suite(pytester)
    monkeypatch.delenv("PROBE_PATH", raising=False)
    return pytester


def test_the_loop_oracle_sees_each_row_as_the_conftest_set_it(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each file alone in a fresh interpreter: the rows' expectations are
    the oracle's."""
    monkeypatch.setenv("INNER_START", "loop")
    for file in ("test_a.py", "test_b.py"):
        result = _run(suite, "-p", "no:isolation", file)
        assert _rows_failed(result) == []
        result.assert_outcomes(passed=len(ROW_NAMES))
        assert _atexit_runs(suite) == 1  # atexit: at the end of each file's process


@pytest.mark.parametrize("start", START_METHODS)
def test_every_kind_of_child_starts_with_what_the_conftest_set(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, start: str
) -> None:
    """Every row as the oracle has it (or as documented), in every file's child."""
    monkeypatch.setenv("INNER_START", start)
    result = _run(suite, *FILE_MODE, f"--isolation-start={start}", "--isolation-timeout=10")
    assert _rows_failed(result) == [], f"rows that differ under {start}"
    result.assert_outcomes(passed=2 * len(ROW_NAMES))
    # atexit (documented): the children end with os._exit; the handler the
    # parent's conftest import registered runs once, at the end of the run
    assert _atexit_runs(suite) == 1


def test_interpreter_options_leave_pythonwarnings_to_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ``-W`` option that ``PYTHONWARNINGS`` gave is not repeated on the
    command line (the new interpreter reads the variable too); ``-X``
    options the standard library's helper leaves out are passed."""
    warnoptions = [*sys.warnoptions, "ignore:probe-env", "error:probe-cmdline"]
    monkeypatch.setattr(sys, "warnoptions", warnoptions)
    monkeypatch.setattr(sys, "_xoptions", {"int_max_str_digits": "5000", "importtime": True})
    options = interpreter_options({"PYTHONWARNINGS": "ignore:probe-env"})
    assert "-Werror:probe-cmdline" in options
    assert "-Wignore:probe-env" not in options
    assert "-Wignore:probe-env" in interpreter_options({})
    given = [options[at + 1] for at, option in enumerate(options) if option == "-X"]
    assert given.count("int_max_str_digits=5000") == 1  # the helper leaves it out
    assert given.count("importtime") == 1  # the helper passes it


def test_each_row_of_the_inventory_is_tested() -> None:
    """The table in how-it-works.md, "What a child inherits", has a row for
    each kind of state tested here, and no other."""
    text = HOW_IT_WORKS.read_text()
    section = text[text.index("### What a child inherits") : text.index("### The wire protocol")]
    rows = [line for line in section.splitlines() if line.startswith("| ")][2:]  # no header
    kinds = [row.split(" | ")[0].removeprefix("| ") for row in rows]
    tested = [next((t for p, t in DOC_ROWS.items() if kind.startswith(p)), kind) for kind in kinds]
    assert sorted(tested) == sorted([*ROW_NAMES, "atexit"])
