"""Session fixtures set up once for all children (``filemode/shared.py``):
set up in the parent, inherited, torn down once, their teardown errors
reported, what a fork cannot carry refused, and the child-start hook."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from conftest import FILE_MODE
from conftest import TIMEOUT
from conftest import run_file_mode

#: A session fixture that records its set-up and teardown, and the hook.
RECORDING = """
    import os
    import pytest
    from pathlib import Path

    EVENTS = Path(__file__).parent / "events.txt"

    def record(text):
        with open(EVENTS, "a") as out:
            out.write(text + "\\n")

    @pytest.fixture(scope="session")
    def data():
        record(f"setup {os.getpid()}")
        yield {"made in": os.getpid()}
        record(f"teardown {os.getpid()}")

    def pytest_isolation_child_started(config, shared):
        record(f"child {os.getpid()} {sorted(shared)}")
"""

USES_DATA = """
    import os

    def test_inherits(data):
        print("made in", data["made in"], "used in", os.getpid())
"""


def _events(pytester: pytest.Pytester, probe: bool = True) -> list[list[str]]:
    """What the fixture and the hook recorded, without the child that only
    collects every file, before the set-up, to find which shared fixtures
    the tests that run use (it inherits none)."""
    lines = (pytester.path / "events.txt").read_text().splitlines()
    events = [line.split(" ", 1) for line in lines]
    kinds = [kind for kind, _ in events]
    first_set_up = kinds.index("setup") if probe and "setup" in kinds else 0
    probes = [event for event in events[:first_set_up] if event[0] == "child"]
    assert len(probes) <= 1, events
    return events[len(probes) :] if probes == events[: len(probes)] else events


def _three_files(pytester: pytest.Pytester) -> None:
    for name in ("test_a", "test_b", "test_c"):
        pytester.makepyfile(**{name: USES_DATA})


def test_a_shared_fixture_is_set_up_once_and_inherited(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nisolation_shared_fixtures = data\n")
    pytester.makeconftest(RECORDING)
    _three_files(pytester)
    result = run_file_mode(pytester, "fork", "-s")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "isolation: shared fixtures set up once for every child, in *: data",
            "isolation: shared fixtures are set up before any test module is imported (what one "
            "registers at import is not in them)",
        ]
    )
    events = _events(pytester)
    kinds = [kind for kind, _ in events]
    assert kinds == ["setup", "child", "child", "child", "teardown"]
    parent = events[0][1]
    assert events[-1][1] == parent
    children = {rest.split()[0] for kind, rest in events if kind == "child"}
    assert len(children) == 3
    assert parent not in children
    assert all(rest.endswith("['data']") for kind, rest in events if kind == "child")
    used = result.stdout.str().count(f"made in {parent} used in")
    assert used == 3


@pytest.mark.parametrize("start", ["spawn", "forkserver"])
def test_other_start_methods_set_the_fixture_up_in_each_child(
    pytester: pytest.Pytester, start: str
) -> None:
    pytester.makeini("[pytest]\nisolation_shared_fixtures = data\n")
    pytester.makeconftest(RECORDING)
    _three_files(pytester)
    result = run_file_mode(pytester, start)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            f"isolation: the shared fixtures (data) are set up in each child: children of the "
            f"start method {start} do not inherit them"
        ]
    )
    kinds = [kind for kind, _ in _events(pytester, probe=False)]  # no set-up in the parent
    assert kinds.count("setup") == 3
    assert kinds.count("teardown") == 3
    assert kinds.count("child") == 3


def test_the_decorator_shares_a_fixture(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        RECORDING.replace(
            '@pytest.fixture(scope="session")\n    def data', "@shared_fixture\n    def data"
        ).replace(
            "import pytest\n", "import pytest\n    from pytest_isolation import shared_fixture\n"
        )
    )
    _three_files(pytester)
    result = run_file_mode(pytester, "fork")
    result.assert_outcomes(passed=3)
    kinds = [kind for kind, _ in _events(pytester)]
    assert kinds == ["setup", "child", "child", "child", "teardown"]


def test_the_decorator_shares_its_definition_not_every_fixture_of_the_name(
    pytester: pytest.Pytester,
) -> None:
    """A function-scoped fixture of the same name in another directory is
    that directory's own (issue 30, item 16): no refusal, not shared."""
    pytester.makeconftest(
        """
        from pytest_isolation import shared_fixture

        @shared_fixture
        def resource():
            return "shared"
        """
    )
    pytester.mkpydir("other")
    (pytester.path / "other" / "conftest.py").write_text(
        "import pytest\n\n@pytest.fixture\ndef resource():\n    return 'own'\n"
    )
    pytester.makepyfile(test_top="def test_top(resource):\n    assert resource == 'shared'\n")
    (pytester.path / "other" / "test_other.py").write_text(
        "def test_other(resource):\n    assert resource == 'own'\n"
    )
    assert pytester.runpytest_subprocess("-p", "no:isolation", timeout=120).ret == 0
    result = run_file_mode(pytester, "fork")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["isolation: shared fixtures set up once for every child, in *"])


def test_the_decorated_fixture_is_an_ordinary_one_without_file_mode(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(
        """
        from pytest_isolation import shared_fixture

        @shared_fixture(name="answer")
        def the_answer():
            return 42
        """
    )
    pytester.makepyfile(test_a="def test_x(answer):\n    assert answer == 42\n")
    result = pytester.runpytest_subprocess("-p", "isolation", timeout=60)
    result.assert_outcomes(passed=1)


def test_a_teardown_error_is_an_error_of_the_last_test(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nisolation_shared_fixtures = broken\n")
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture(scope="session")
        def broken():
            yield 1
            raise RuntimeError("the teardown broke")
        """
    )
    pytester.makepyfile(
        test_a="def test_first(broken):\n    pass\n",
        test_b="def test_last(broken):\n    pass\n",
    )
    result = run_file_mode(pytester, "fork")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        ["*ERROR at teardown of test_last*", "*RuntimeError: the teardown broke*"]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_set_up_error_fails_every_test_that_uses_it(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nisolation_shared_fixtures = broken\n")
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture(scope="session")
        def broken():
            raise RuntimeError("the set-up broke")
        """
    )
    pytester.makepyfile(
        test_a="def test_a(broken):\n    pass\n\ndef test_free():\n    pass\n",
        test_b="def test_b(broken):\n    pass\n",
    )
    result = run_file_mode(pytester, "fork")
    result.assert_outcomes(passed=1, errors=2)
    assert result.stdout.str().count("RuntimeError: the set-up broke") >= 2


def test_a_fixture_that_starts_a_thread_is_refused(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nisolation_shared_fixtures = server\n")
    pytester.makeconftest(
        """
        import threading
        import pytest

        @pytest.fixture(scope="session")
        def server():
            stop = threading.Event()
            thread = threading.Thread(target=stop.wait, name="serving", daemon=True)
            thread.start()
            yield "http://localhost"
            stop.set()
            with open("torn-down.txt", "w") as out:
                out.write("yes")
        """
    )
    pytester.makepyfile(test_a="def test_a(server):\n    pass\n")
    result = run_file_mode(pytester, "fork")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(
        ["*isolation: the set-up of the shared fixtures 'server' started the thread serving*"]
    )
    assert (pytester.path / "torn-down.txt").read_text() == "yes"
    result.stdout.fnmatch_lines(["*no tests ran in*"])


def test_a_value_a_fork_cannot_carry_is_refused(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nisolation_shared_fixtures = pair\n")
    pytester.makeconftest(
        """
        import socket
        import pytest

        @pytest.fixture(scope="session")
        def pair():
            left, right = socket.socketpair()
            yield {"left": left}
            left.close()
            right.close()
        """
    )
    pytester.makepyfile(test_a="def test_a(pair):\n    pass\n")
    result = run_file_mode(pytester, "fork")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["*the shared fixture 'pair' gives a socket (a forked child*"])


def test_an_open_socket_is_refused_unless_the_project_renews_it(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\nisolation_shared_fixtures = hidden\n")
    conftest = """
        import socket
        import pytest

        SOCKETS = []

        @pytest.fixture(scope="session")
        def hidden():
            SOCKETS.extend(socket.socketpair())
            return "connected"
    """
    pytester.makeconftest(conftest)
    pytester.makepyfile(test_a="def test_a(hidden):\n    assert hidden == 'connected'\n")
    result = run_file_mode(pytester, "fork")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["*left 2 socket(s) open, which every forked child would share*"])
    pytester.makeconftest(
        conftest
        + """
        def pytest_isolation_child_started(config, shared):
            SOCKETS[:] = socket.socketpair()
        """
    )
    result = run_file_mode(pytester, "fork")
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("conftest", "message"),
    [
        ("", "isolation_shared_fixtures: no test file sees a fixture named 'data'"),
        (
            "import pytest\n@pytest.fixture\ndef data():\n    return 1\n",
            "isolation_shared_fixtures: 'data' is function-scoped (.: data); only a "
            "session-scoped fixture*",
        ),
        (
            "import pytest\n@pytest.fixture(scope='session', params=[1, 2])\n"
            "def data(request):\n    return request.param\n",
            "isolation_shared_fixtures: 'data' is parametrized (.: data); pytest sets it up "
            "once per parameter*",
        ),
    ],
)
def test_a_name_that_cannot_be_shared_is_a_usage_error(
    pytester: pytest.Pytester, conftest: str, message: str
) -> None:
    pytester.makeini("[pytest]\nisolation_shared_fixtures = data\n")
    pytester.makeconftest(conftest)
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    result = run_file_mode(pytester, "fork")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([f"*isolation: {message}*"])


def test_each_directory_shares_its_own_definition(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nisolation_shared_fixtures = data\n")
    pytester.makeconftest(
        "import pytest\n@pytest.fixture(scope='session')\ndef data():\n    return 'root'\n"
    )
    sub = pytester.mkdir("sub")
    (sub / "conftest.py").write_text(
        "import pytest\n@pytest.fixture(scope='session')\ndef data():\n    return 'sub'\n"
    )
    (sub / "test_sub.py").write_text("def test_sub(data):\n    assert data == 'sub'\n")
    pytester.makepyfile(test_root="def test_root(data):\n    assert data == 'root'\n")
    result = run_file_mode(pytester, "fork")
    result.assert_outcomes(passed=2)


def test_shared_fixtures_reach_a_group_and_the_files_run_together(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(
        "[pytest]\nisolation_shared_fixtures = data\nisolation_paths =\n    test_a.py: off\n"
        "    test_b.py: off\n    test_c.py: group=g\n"
    )
    pytester.makeconftest(RECORDING)
    _three_files(pytester)
    result = run_file_mode(pytester, "fork")
    result.assert_outcomes(passed=3)
    kinds = [kind for kind, _ in _events(pytester)]
    assert kinds == ["setup", "child", "child", "teardown"]


def test_the_private_pytest_details_shared_fixtures_rely_on(pytester: pytest.Pytester) -> None:
    """``filemode/shared.py`` reads pytest's set-up stack, a test's request
    and its fixture definitions; this fails loudly when pytest changes them."""
    item = pytester.getitem(
        "import pytest\n@pytest.fixture(scope='session')\ndef data():\n"
        "    return 1\n\ndef test_func(data):\n    pass\n"
    )
    assert isinstance(item, pytest.Function)
    stack = item.session._setupstate.stack
    assert isinstance(stack, dict)
    assert isinstance(item._request, pytest.FixtureRequest)
    (definition,) = item._fixtureinfo.name2fixturedefs["data"]
    assert definition.scope == "session"
    # inherited.py: a child drops an inherited value, and evaluates skip marks.
    assert definition.cached_result is None
    assert isinstance(definition._finalizers, list)
    from _pytest import skipping

    assert skipping.evaluate_skip_marks(item) is None
    assert skipping.evaluate_xfail_marks(item) is None


def test_each_xdist_worker_sets_the_shared_fixtures_up_once(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makeini("[pytest]\nisolation_shared_fixtures = data\n")
    pytester.makeconftest(RECORDING)
    for name in ("test_a", "test_b", "test_c", "test_d"):
        pytester.makepyfile(**{name: USES_DATA})
    result = run_file_mode(pytester, "fork", "-p", "xdist", "-n", "2")
    result.assert_outcomes(passed=4)
    lines = (pytester.path / "events.txt").read_text().splitlines()
    assert sum(line.endswith("['data']") for line in lines) == 4  # each worker's probe: []
    kinds = [line.split()[0] for line in lines]
    assert 1 <= kinds.count("setup") <= 2
    assert kinds.count("teardown") == kinds.count("setup")


def test_what_a_shared_fixture_puts_into_the_environment_reaches_every_child(
    pytester: pytest.Pytester,
) -> None:
    """As in a plain run, where a session fixture's ``os.environ`` change
    stays for every later test (issue 30, item 11)."""
    pytester.makeini("[pytest]\nisolation_shared_fixtures = service\n")
    pytester.makeconftest(
        """
        import os
        import pytest

        @pytest.fixture(scope="session")
        def service():
            os.environ["SERVICE_URL"] = "http://localhost:1234"
            yield "up"
            del os.environ["SERVICE_URL"]
        """
    )
    uses = """
        import os

        def test_sees_the_url(service):
            assert os.environ.get("SERVICE_URL") == "http://localhost:1234"
    """
    pytester.makepyfile(test_one=uses, test_two=uses)
    assert pytester.runpytest_subprocess("-p", "no:isolation", timeout=120).ret == 0
    result = run_file_mode(pytester, "fork")
    result.assert_outcomes(passed=2)


def test_autouse_session_fixtures_are_set_up_before_the_shared_one(
    pytester: pytest.Pytester,
) -> None:
    """pytest sets up autouse session fixtures first; so does the shared
    set-up, and the header names them (issue 30, item 12)."""
    pytester.makeini("[pytest]\nisolation_shared_fixtures = service\n")
    pytester.makeconftest(
        """
        import os
        import pytest

        @pytest.fixture(scope="session", autouse=True)
        def configured():
            os.environ["CONFIGURED"] = "1"
            yield
            del os.environ["CONFIGURED"]

        @pytest.fixture(scope="session")
        def service():
            assert os.environ.get("CONFIGURED") == "1", "set up before the autouse fixture"
            yield "up"
        """
    )
    uses = """
        def test_uses(service):
            assert service == "up"
    """
    pytester.makepyfile(test_one=uses, test_two=uses)
    assert pytester.runpytest_subprocess("-p", "no:isolation", timeout=120).ret == 0
    result = run_file_mode(pytester, "fork")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "isolation: shared fixtures set up once for every child, in * s: service "
            "(after configured, which pytest sets up first)"
        ]
    )


def test_ctrl_c_in_a_run_with_shared_fixtures_reports_interrupted(
    pytester: pytest.Pytester,
) -> None:
    """Exit code 2 and pytest's KeyboardInterrupt line, as in a plain run:
    the shared teardown after an interrupt no longer reads a capture pytest
    has stopped (issue 30, item 16)."""
    pytester.makeini("[pytest]\nisolation_shared_fixtures = data\n")
    pytester.makeconftest(
        "import pytest\n\n@pytest.fixture(scope='session')\ndef data():\n    yield 1\n"
    )
    pytester.makepyfile(
        test_a="""
        import time
        from pathlib import Path

        def test_waits(data):
            Path("started").write_text("")
            time.sleep(600)
        """
    )
    command = [sys.executable, "-m", "pytest", *FILE_MODE, "--isolation-start=fork"]
    before = signal.signal(signal.SIGINT, signal.SIG_DFL)  # see test_controller's Ctrl-C test
    try:
        process = subprocess.Popen(
            [*command, "-p", "no:randomly"],
            cwd=pytester.path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    finally:
        signal.signal(signal.SIGINT, before)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not (pytester.path / "started").exists():
            assert time.monotonic() < deadline, "the test never started"
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=TIMEOUT)
    finally:
        process.kill()
    assert process.returncode == pytest.ExitCode.INTERRUPTED, output
    assert "KeyboardInterrupt" in output
    assert "Traceback" not in output


@pytest.mark.parametrize("filters", ["", "error::UserWarning"])
def test_a_warning_of_the_shared_set_up_is_in_the_summary(
    pytester: pytest.Pytester, filters: str
) -> None:
    """As in a plain run: in the warnings summary, or, under ``error``, an
    error of every test that uses the fixture (issue 30, item 16)."""
    filter_line = filters or "default"
    pytester.makeini(
        f"[pytest]\nisolation_shared_fixtures = data\nfilterwarnings =\n    {filter_line}\n"
    )
    pytester.makeconftest(
        """
        import warnings
        import pytest

        @pytest.fixture(scope="session")
        def data():
            warnings.warn("from the shared set-up", UserWarning)
            return 1
        """
    )
    uses = "def test_uses(data):\n    assert data == 1\n"
    pytester.makepyfile(test_one=uses, test_two=uses)
    # The oracle: the plugin loaded (its ini key known), file mode off.
    plain = pytester.runpytest_subprocess(
        "-p", "isolation", "--isolation-leaks=off", timeout=TIMEOUT
    )
    result = run_file_mode(pytester, "fork")
    if filters:
        plain.assert_outcomes(errors=2)
        result.assert_outcomes(errors=2)
    else:
        plain.assert_outcomes(passed=2, warnings=1)
        result.assert_outcomes(passed=2, warnings=1)
        result.stdout.fnmatch_lines(["*UserWarning: from the shared set-up"])


def test_a_buffered_file_of_a_shared_fixture_is_written_as_in_a_plain_run(
    pytester: pytest.Pytester,
) -> None:
    """Item 15: a shared fixture's open file, with what its set-up wrote
    still in the buffer: children inherited that buffer (written again by
    any that flushed) and lost their own writes (a child ends with
    ``os._exit``).  The parent flushes it before the fork, each child at
    its end; the file reads as after a plain run."""
    pytester.makeini("[pytest]\nisolation_shared_fixtures = journal\n")
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture(scope="session")
        def journal(tmp_path_factory):
            path = tmp_path_factory.getbasetemp().parent / "journal.txt"
            holder = type("Holder", (), {})()
            holder.out = open(path, "w")
            holder.out.write("set-up\\n")
            yield holder
            holder.out.write("teardown\\n")
            holder.out.close()
        """
    )
    for name in ("one", "two"):
        pytester.makepyfile(
            **{f"test_{name}": f"def test_{name}(journal):\n    journal.out.write('{name}\\n')\n"}
        )
    expected = "set-up\none\ntwo\nteardown\n"
    args = ("-p", "no:randomly", f"--basetemp={pytester.path / 'base'}")
    assert pytester.runpytest_subprocess("-p", "no:isolation", *args, timeout=TIMEOUT).ret == 0
    assert (pytester.path / "journal.txt").read_text() == expected
    (pytester.path / "journal.txt").unlink()
    run_file_mode(pytester, "fork", *args).assert_outcomes(passed=2)
    assert (pytester.path / "journal.txt").read_text() == expected


def test_a_shared_fixture_s_suite_property_is_in_junit_xml(pytester: pytest.Pytester) -> None:
    """Item 16: a shared fixture that records a test suite property (in the
    parent, where junit XML is written): the XML has it, as a plain run's."""
    pytester.makeini("[pytest]\nisolation_shared_fixtures = tagged\n")
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture(scope="session")
        def tagged(record_testsuite_property):
            record_testsuite_property("ARCH", "x86")
            return "x86"
        """
    )
    uses = "def test_tagged(tagged):\n    assert tagged == 'x86'\n"
    pytester.makepyfile(test_one=uses, test_two=uses)
    quiet = ("-W", "ignore::pytest.PytestExperimentalApiWarning")
    plain = pytester.runpytest_subprocess(
        "-p", "no:isolation", *quiet, "--junitxml=plain.xml", timeout=TIMEOUT
    )
    assert plain.ret == 0
    run_file_mode(pytester, "fork", *quiet, "--junitxml=file.xml").assert_outcomes(passed=2)
    wanted = '<property name="ARCH" value="x86" />'
    assert (pytester.path / "plain.xml").read_text().count(wanted) == 1
    assert (pytester.path / "file.xml").read_text().count(wanted) == 1


SERVICE_WITH_A_BAD_TEARDOWN = """
    import pytest

    @pytest.fixture(scope="session")
    def service():
        yield "up"
        raise RuntimeError("teardown failed")
"""


@pytest.mark.parametrize("select", [("-k", "two"), ("test_two.py",), ("test_two.py::test_two",)])
def test_a_shared_fixture_no_selected_test_uses_is_not_set_up(
    pytester: pytest.Pytester, select: tuple[str, ...]
) -> None:
    """Item 14: with ``-k other``, a path or a node id that leaves out every
    test using it, the shared fixture was still set up and torn down, and its
    teardown error failed a run that plain pytest passes.  A throwaway child
    collects the selection first; an unused fixture is not set up."""
    pytester.makeini("[pytest]\nisolation_shared_fixtures = service\n")
    pytester.makeconftest(SERVICE_WITH_A_BAD_TEARDOWN)
    pytester.makepyfile(
        test_one="def test_one(service):\n    pass\n", test_two="def test_two():\n    pass\n"
    )
    plain = pytester.runpytest_subprocess("-p", "no:isolation", *select, timeout=TIMEOUT)
    plain.assert_outcomes(passed=1)
    result = run_file_mode(pytester, "fork", *select)
    result.assert_outcomes(passed=1)
    assert result.ret == plain.ret == 0
    result.stdout.fnmatch_lines(["isolation: no selected test uses the shared fixtures service"])
    assert "shared fixtures set up once" not in result.stdout.str()


def test_a_shared_fixture_a_selected_test_uses_is_set_up(pytester: pytest.Pytester) -> None:
    """The other side: ``-k one`` selects a test that uses it, so it is set up
    once, and its teardown error is the run's, as in a plain run."""
    pytester.makeini("[pytest]\nisolation_shared_fixtures = service\n")
    pytester.makeconftest(SERVICE_WITH_A_BAD_TEARDOWN)
    uses = "def test_one(service):\n    assert service == 'up'\n"
    pytester.makepyfile(test_one=uses, test_three=uses.replace("one", "three"))
    plain = pytester.runpytest_subprocess("-p", "no:isolation", "-k", "one", timeout=TIMEOUT)
    plain.assert_outcomes(passed=1, errors=1)
    result = run_file_mode(pytester, "fork", "-k", "one")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["isolation: shared fixtures set up once for every child, in *"])
    assert "no selected test uses" not in result.stdout.str()


#: A shared fixture built on a session fixture that a subdirectory's conftest
#: or a test module overrides (issue 46 item 5).
BUILT_ON_CONFIG = """
    import os
    import pytest

    @pytest.fixture(scope="session")
    def config():
        return "root"

    @pytest.fixture(scope="session")
    def app(config):
        yield {"config": config, "pid": os.getpid()}

    @pytest.fixture(scope="session")
    def client(app):
        return {"app": app}
"""


def _loop_passes(pytester: pytest.Pytester, *files: str) -> None:
    """The oracle: each file alone, in its own interpreter."""
    for name in files:
        result = pytester.runpytest_subprocess("-p", "isolation", name, timeout=TIMEOUT)
        assert result.ret == 0, (name, result.stdout.str())


def test_a_shared_fixture_is_built_on_the_dependencies_each_test_resolves(
    pytester: pytest.Pytester,
) -> None:
    """A subdirectory's conftest overrides a session fixture the shared one
    requests, and a test module overrides it too: their tests get the shared
    fixture built on their own definition, as each file alone does; so does
    a shared fixture built on it."""
    pytester.makeini("[pytest]\nisolation_shared_fixtures = app client\n")
    pytester.makeconftest(BUILT_ON_CONFIG)
    pytester.mkdir("sub")
    (pytester.path / "sub" / "conftest.py").write_text(
        "import pytest\n\n@pytest.fixture(scope='session')\ndef config():\n    return 'sub'\n"
    )
    (pytester.path / "sub" / "test_sub.py").write_text(
        "def test_sub(app, client):\n"
        "    assert app['config'] == 'sub'\n"
        "    assert client['app'] is app\n"
    )
    pytester.makepyfile(
        test_root="def test_root(app):\n    assert app['config'] == 'root'\n",
        test_module="""
            import pytest

            @pytest.fixture(scope="session")
            def config():
                return "module"

            def test_module(client):
                assert client["app"]["config"] == "module"
        """,
    )
    files = ("test_root.py", "test_module.py", "sub/test_sub.py")
    _loop_passes(pytester, *files)
    result = run_file_mode(pytester, "fork", "-p", "no:randomly")
    result.assert_outcomes(passed=3)


def test_a_shared_fixture_is_shared_where_the_dependencies_are_the_same(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\nisolation_shared_fixtures = app\n")
    pytester.makeconftest(BUILT_ON_CONFIG)
    pytester.makepyfile(
        test_a="import os\n\ndef test_a(app):\n    assert app['pid'] != os.getpid()\n",
        test_b="import os\n\ndef test_b(app):\n    assert app['pid'] != os.getpid()\n",
    )
    result = run_file_mode(pytester, "fork")
    result.assert_outcomes(passed=2)


SET_UP_MARKS = """
    import pytest
    from pathlib import Path

    MARK = Path(__file__).parent / "made-by-db"

    @pytest.fixture(scope="session")
    def db():
        MARK.touch()
        yield 1
        MARK.unlink()
"""


@pytest.mark.parametrize(
    "mark",
    [
        '@pytest.mark.skip(reason="no db here")',
        '@pytest.mark.skipif(True, reason="no db here")',
        "@pytest.mark.xfail(run=False)",
    ],
)
def test_a_shared_fixture_only_skipped_tests_use_is_not_set_up(
    pytester: pytest.Pytester, mark: str
) -> None:
    pytester.makeini("[pytest]\nisolation_shared_fixtures = db\n")
    pytester.makeconftest(SET_UP_MARKS)
    pytester.makepyfile(
        test_a=f"""
            import pytest
            from conftest import MARK

            {mark}
            def test_db(db):
                pass

            def test_nothing_made():
                assert not MARK.exists()
        """
    )
    _loop_passes(pytester, "test_a.py")
    result = run_file_mode(pytester, "fork")
    result.assert_outcomes(
        passed=1, skipped=1 if "skip" in mark else 0, xfailed=int("xfail" in mark)
    )
    result.stdout.fnmatch_lines(["isolation: no selected test uses the shared fixtures db"])
