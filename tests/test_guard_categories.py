"""Every kind of leaked state: detected, reported with the test (and the site
where one exists), restored so that the next test sees clean state."""

from __future__ import annotations

import textwrap

import pytest

from conftest import TIMEOUT
from conftest import literal
from conftest import run_guard
from conftest import warned


def line(source: str, text: str) -> int:
    """The line number of the first line containing ``text`` in a pytester file."""
    lines = textwrap.dedent(source).strip().splitlines()
    return next(number for number, content in enumerate(lines, 1) if text in content)


PROCESS_LEAKS = """
    import logging, os, signal, socket, sys, time
    from unittest import mock

    START = os.getcwd()
    HOOK = sys.excepthook

    def test_env():
        os.environ["LEAKY"] = "1"

    def test_env_deleted(monkeypatch):
        os.environ.pop("KEEP_ME")

    def test_cwd(tmp_path):
        os.chdir(tmp_path)

    def test_sys_modules_injected():
        sys.modules["yaml"] = mock.MagicMock()

    def test_sys_modules_replaced():
        sys.modules["json"] = None

    def test_sys_path():
        sys.path.insert(0, "/nowhere")

    def test_meta_path():
        sys.meta_path = list(sys.meta_path)

    def test_argv():
        sys.argv = ["prog", "--flag"]

    def test_stdout():
        sys.stdout = open(os.devnull, "w")

    def test_excepthook():
        sys.excepthook = lambda *args: None

    def test_recursion_limit():
        sys.setrecursionlimit(sys.getrecursionlimit() + 7)

    def test_root_handler():
        logging.root.addHandler(logging.NullHandler())

    def test_root_level():
        logging.root.setLevel(logging.CRITICAL)

    def test_logger_disabled():
        logging.getLogger("app.db").disabled = True

    def test_logger_level():
        logging.getLogger("app.web").setLevel(logging.ERROR)

    def test_signal():
        signal.signal(signal.SIGUSR1, lambda *args: None)

    def test_socket_timeout():
        socket.setdefaulttimeout(3.0)

    def test_umask():
        os.umask(0o077)

    def test_zz_clean_afterwards():
        import json
        assert "LEAKY" not in os.environ and os.environ["KEEP_ME"] == "1"
        assert os.getcwd() == START
        assert "yaml" not in sys.modules and json.dumps(1) == "1"
        assert "/nowhere" not in sys.path and sys.argv != ["prog", "--flag"]
        assert sys.stdout.name != os.devnull
        assert sys.excepthook is HOOK
        assert not any(type(h) is logging.NullHandler for h in logging.root.handlers)
        assert logging.root.level != logging.CRITICAL
        assert not logging.getLogger("app.db").disabled
        assert logging.getLogger("app.web").level == logging.NOTSET
        assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
        assert socket.getdefaulttimeout() is None
        mask = os.umask(0o022); os.umask(mask); assert mask == 0o022
"""


def test_process_wide_state(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEEP_ME", "1")
    pytester.makepyfile(test_process=PROCESS_LEAKS)
    result = run_guard(pytester, "-p", "no:randomly", "-s")
    result.assert_outcomes(passed=19)
    assert warned(result) == 18
    lines = [
        "test_env leaked os.environ['LEAKY'] (was unset, now '1'), "
        f"at test_process.py:{line(PROCESS_LEAKS, 'LEAKY')}; use monkeypatch.setenv/delenv",
        "test_env_deleted leaked os.environ['KEEP_ME'] (was '1', now unset), "
        f"at test_process.py:{line(PROCESS_LEAKS, 'pop(')};*",
        "test_cwd leaked the working directory (was '*', now '*'), "
        f"at test_process.py:{line(PROCESS_LEAKS, 'chdir')};*",
        "test_sys_modules_injected leaked sys.modules['yaml'] (was unset, now <MagicMock *",
        "test_sys_modules_replaced leaked sys.modules['json'] (was <module 'json' *, now None)*",
        "test_sys_path leaked sys.path (added '/nowhere')*",
        "test_meta_path leaked sys.meta_path (rebound to a new list with the same items)*",
        "test_argv leaked sys.argv (was *, now ['prog', '--flag'])*",
        "test_stdout leaked sys.stdout*",
        "test_excepthook leaked sys.excepthook*",
        "test_recursion_limit leaked sys.getrecursionlimit()*",
        "test_root_handler leaked the root logger's handlers*",
        "test_root_level leaked the root logger's level (was WARNING, now CRITICAL)*",
        "test_logger_disabled leaked logger 'app.db' (level, disabled, propagate) "
        "(was NOTSET, enabled, propagate=True, now NOTSET, disabled, propagate=True);*",
        "test_logger_level leaked logger 'app.web'*now ERROR, enabled*",
        "test_signal leaked the handler of SIGUSR1 (was SIG_DFL, now <function *",
        "test_socket_timeout leaked socket.getdefaulttimeout() (was None, now 3.0)*",
        "test_umask leaked the umask (was 0o22, now 0o77)*",
    ]
    result.stdout.fnmatch_lines(
        [literal(f"*LeakedStateWarning: test_process.py::{text}") for text in lines],
        consecutive=False,
    )


MOCK_LEAKS = """
    import os, time, json
    from unittest import mock

    def test_patch():
        mock.patch("os.getcwd", return_value="/nowhere").start()

    def test_patch_object():
        mock.patch.object(time, "time", return_value=0).start()

    def test_patch_dict():
        mock.patch.dict(os.environ, {"PATCHED": "1"}).start()

    def test_patch_multiple():
        mock.patch.multiple(json, dumps=mock.DEFAULT, loads=mock.DEFAULT).start()

    def test_stacked_patches_are_stopped_last_first():
        mock.patch.object(time, "monotonic", return_value=1).start()
        mock.patch.object(time, "monotonic", return_value=2).start()

    def test_zz_clean_afterwards():
        assert os.getcwd() != "/nowhere" and time.time() > 0 and time.monotonic() > 2
        assert "PATCHED" not in os.environ and json.dumps(1) == "1"
        assert not isinstance(time.monotonic, mock.Mock)
"""


PATCH_LINE = line(MOCK_LEAKS, 'return_value="/nowhere"')
PATCH_OBJECT_LINE = line(MOCK_LEAKS, 'time, "time"')


def test_what_a_test_module_assigns_is_watched_per_test(
    pytester: pytest.Pytester, mode: tuple[str, ...]
) -> None:
    """A library's function or class attribute that a test module assigns is
    put back after the test that assigned it, not only at the file's end."""
    pytester.makepyfile(
        test_a="""
            import email.utils
            from unittest import mock
            def test_replaces():
                email.utils.formatdate = lambda *a, **k: "never"
                mock.MagicMock.content = mock.PropertyMock(return_value=1)
            def test_same_file_sees_the_real_ones():
                assert email.utils.formatdate() != "never"
                assert "content" not in vars(mock.MagicMock)
        """
    )
    result = pytester.runpytest_subprocess(*mode, "-p", "no:randomly", timeout=TIMEOUT)
    result.assert_outcomes(passed=2)
    assert warned(result) == 2
    result.stdout.fnmatch_lines(
        [
            "*test_a.py::test_replaces leaked email.utils.formatdate (was <function formatdate*",
            "*test_a.py::test_replaces leaked unittest.mock.MagicMock.content (was unset, now <*",
        ],
        consecutive=False,
    )


def test_mock_patches_are_stopped_with_their_start_site(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mocks=MOCK_LEAKS)
    result = run_guard(pytester, "-p", "no:randomly")
    result.assert_outcomes(passed=6)
    assert warned(result) == 6
    result.stdout.fnmatch_lines(
        [
            "*test_patch leaked an unstopped mock patch of os.getcwd, "
            f"at test_mocks.py:{PATCH_LINE}; stop it*",
            "*test_patch_object leaked an unstopped mock patch of time.time, "
            f"at test_mocks.py:{PATCH_OBJECT_LINE};*",
            "*test_patch_dict leaked an unstopped mock patch of os.environ (patch.dict), "
            f"at test_mocks.py:{line(MOCK_LEAKS, 'patch.dict')};*",
            "*test_patch_multiple leaked an unstopped mock patch of json.* (patch.multiple), "
            f"at test_mocks.py:{line(MOCK_LEAKS, 'patch.multiple')};*",
        ],
        consecutive=False,
    )
    result.stdout.fnmatch_lines(
        [f"*mock patch of time.monotonic, at test_mocks.py:{line(MOCK_LEAKS, 'value=1')};*"],
        consecutive=False,
    )
    result.stdout.fnmatch_lines(
        [f"*mock patch of time.monotonic, at test_mocks.py:{line(MOCK_LEAKS, 'value=2')};*"],
        consecutive=False,
    )
    # Only the guard's leaks were reported: nothing else changed in those tests.
    result.stdout.no_fnmatch_line("*leaked os.getcwd*")
    result.stdout.no_fnmatch_line("*leaked time.time*")


PROJECT = """
    REGISTRY = {}
    DEBUG = False
    _client = None

    def helper():
        return "real"

    class Service:
        instance = "real"
        _cache = None
"""

ATTRIBUTE_LEAKS = """
    import builtins, os, sys
    import app.state as state

    def test_global_flag():
        state.DEBUG = True

    def test_registry_rebound():
        state.REGISTRY = {"x": 1}

    def test_function_replaced():
        state.helper = lambda: "fake"

    def test_singleton_replaced():
        state.Service.instance = "fake"

    def test_lazy_initialisation_is_fine():
        state._client = object()
        state.Service._cache = {}

    def test_new_attribute_is_fine():
        state.added_later = 1

    def test_stdlib_function_replaced():
        os.getpid = lambda: 0

    def test_builtin_replaced():
        builtins.input = lambda *args: "yes"

    def test_sys_attribute():
        sys.platform = "win32"

    def test_stdlib_constant():
        os.SEEK_SET = 5

    def test_submodule_import_is_fine():
        import json.tool

    def test_zz_clean_afterwards():
        assert state.DEBUG is False and state.REGISTRY == {}
        assert state.helper() == "real" and state.Service.instance == "real"
        assert os.getpid() > 0 and sys.platform != "win32" and os.SEEK_SET == 0
        assert builtins.input.__module__ == "builtins"
"""


FAKE_LINE = line(ATTRIBUTE_LEAKS, 'lambda: "fake"')


def test_module_and_class_attributes(pytester: pytest.Pytester) -> None:
    pytester.mkpydir("app")
    pytester.path.joinpath("app", "state.py").write_text(textwrap.dedent(PROJECT))
    pytester.makepyfile(test_attributes=ATTRIBUTE_LEAKS)
    result = run_guard(pytester, "-p", "no:randomly")
    result.assert_outcomes(passed=12)
    assert warned(result) == 11
    result.stdout.fnmatch_lines(
        [
            "*test_global_flag leaked app.state.DEBUG (was False, now True), "
            "at test_attributes.py:*; use monkeypatch.setattr*",
            "*test_registry_rebound leaked app.state.REGISTRY (rebound to a new dict: added 'x')*",
            "*test_function_replaced leaked app.state.helper (was <function helper at *> "
            "defined at app/state.py:6, now <function * defined at"
            f" test_attributes.py:{FAKE_LINE})*",
            "*test_singleton_replaced leaked app.state.Service.instance (was 'real', now 'fake')*",
            "*test_stdlib_function_replaced leaked os.getpid (was <built-in function getpid>*",
            "*test_builtin_replaced leaked builtins.input*",
            "*test_sys_attribute leaked sys.platform (was '*', now 'win32')*",
            "*test_stdlib_constant leaked os.SEEK_SET (was 0, now 5)*",
        ],
        consecutive=False,
    )
    # What looks like lazy initialisation is the test's leak when the test
    # module's own code does it (issue 29): only the project's own code
    # creating state lazily is routine.
    result.stdout.fnmatch_lines(
        [
            "*test_lazy_initialisation_is_fine leaked app.state.Service._cache (was None, now {})*",
            "*test_lazy_initialisation_is_fine leaked app.state._client (was None, now <object*",
            "*test_new_attribute_is_fine leaked app.state.added_later (was unset, now 1)*",
        ],
        consecutive=False,
    )
    result.stdout.no_fnmatch_line("*test_submodule_import_is_fine leaked*")


def test_library_function_replaced_is_found_at_the_file_boundary(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_a="""
            import email.utils, os
            def test_replaces():
                replace = setattr  # hidden from the scan of what the module assigns
                replace(email.utils, "formatdate", lambda *a, **k: "never")
                vars(os)["getpid"] = lambda: 0  # bypasses os's write tracking
            def test_same_file_still_sees_it():
                assert email.utils.formatdate() == "never"
        """,
        test_b="""
            import email.utils, os
            def test_other_file_is_clean():
                assert email.utils.formatdate() != "never"
                assert os.getpid() > 0
        """,
    )
    result = run_guard(pytester, "-p", "no:randomly")
    result.assert_outcomes(passed=3)
    assert warned(result) == 2
    result.stdout.fnmatch_lines(
        ["*test_a.py (one of its tests) leaked os.getpid (was <built-in function getpid>*"]
    )
    result.stdout.fnmatch_lines(
        [
            "*LeakedStateWarning: test_a.py (one of its tests) leaked email.utils.formatdate "
            "(was <function formatdate at *> defined at */email/utils.py:*, now <function "
            "test_replaces.<locals>.<lambda> at *> defined at test_a.py:4); use monkeypatch*"
        ]
    )


PATCHER_LEAKS = """
    import os
    import pytest
    from pyfakefs.fake_filesystem_unittest import Patcher

    KEPT = pytest.MonkeyPatch()

    def test_fakefs_left_active():
        patcher = Patcher()
        patcher.setUp()
        patcher.fs.create_file("/only/in/the/fake")

    def test_monkeypatch_never_undone():
        KEPT.setenv("HANDMADE", "1")
        KEPT.setattr(os, "sep", "|")

    def test_zz_clean_afterwards():
        assert not os.path.exists("/only/in/the/fake")
        assert os.path.exists(os.getcwd())
        assert "HANDMADE" not in os.environ and os.sep == "/"
"""


SEP_LINE = line(PATCHER_LEAKS, '(os, "sep"')


def test_fakefs_patcher_and_monkeypatch_left_active(pytester: pytest.Pytester) -> None:
    pytest.importorskip("pyfakefs")
    pytester.makepyfile(test_patchers=PATCHER_LEAKS)
    result = run_guard(pytester, "-p", "no:randomly", "-p", "pyfakefs.pytest_plugin")
    result.assert_outcomes(passed=3)
    assert warned(result) == 3
    result.stdout.fnmatch_lines(
        [
            "*test_fakefs_left_active leaked an active pyfakefs Patcher (was none, now *); "
            "use the fs fixture*"
        ]
    )
    result.stdout.fnmatch_lines(
        [
            literal(
                "*test_monkeypatch_never_undone leaked os.environ['HANDMADE'] (was unset, now '1') "
                "through a pytest.MonkeyPatch never undone, "
                f"at test_patchers.py:{line(PATCHER_LEAKS, 'HANDMADE')}; call its undo()*"
            )
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*test_monkeypatch_never_undone leaked os.sep (was '/', now '|') through a "
            "pytest.MonkeyPatch never undone, "
            f"at test_patchers.py:{SEP_LINE}; call its undo()*"
        ]
    )


LATE_PATCHER = """
    import os
    import pytest

    KEPT = pytest.MonkeyPatch()
    LATER = []

    def test_first_patcher():
        KEPT.setenv("FIRST", "1")

    def test_the_fixture_s_own_patcher(monkeypatch):
        monkeypatch.setenv("BY_FIXTURE", "1")

    def test_patcher_made_after_the_first_was_found():
        LATER.append(pytest.MonkeyPatch())
        LATER[0].setenv("SECOND", "2")

    def test_zz_both_undone():
        assert not {"FIRST", "SECOND", "BY_FIXTURE"} & set(os.environ)
        assert KEPT._setitem == [] and LATER[0]._setitem == []
"""


def test_a_monkeypatch_made_after_the_first_one_was_found_is_undone_too(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_late=LATE_PATCHER)
    result = run_guard(pytester, "-p", "no:randomly")
    result.assert_outcomes(passed=4)
    assert warned(result) == 2
    for name, value in (("FIRST", "1"), ("SECOND", "2")):
        result.stdout.fnmatch_lines(
            [
                literal(
                    f"*leaked os.environ['{name}'] (was unset, now '{value}') "
                    "through a pytest.MonkeyPatch never undone*"
                )
            ]
        )


LEFTOVERS = """
    import subprocess, sys, threading, time

    def test_thread():
        threading.Thread(target=time.sleep, args=(5,), name="sleeper", daemon=True).start()

    def test_process():
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])

    def test_file():
        open("junk.txt", "w").close()

    def test_thread_that_ends_in_the_grace_period():
        threading.Thread(target=time.sleep, args=(0.05,)).start()
"""


def test_threads_processes_and_files_are_reported_not_undone(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_leftovers=LEFTOVERS)
    result = run_guard(pytester, "-p", "no:randomly")
    result.assert_outcomes(passed=4)
    assert warned(result) == 3
    result.stdout.fnmatch_lines(
        [
            "*test_thread leaked thread 'sleeper' still running (daemon) (not undone); join*",
            "*test_process leaked child process * still running (*-c import time*) "
            "(not undone); wait for it*",
            "*test_file leaked file 'junk.txt' left in the working directory * (not undone);*",
        ],
        consecutive=False,
    )
    result.stdout.no_fnmatch_line("*test_thread_that_ends_in_the_grace_period leaked*")
    assert pytester.path.joinpath("junk.txt").exists()  # reported, never deleted


DEEP = """
    import collections, logging
    import pytest
    import app.state as state

    @pytest.fixture(scope="module")
    def shared():
        return ["seed"]

    def test_module_dict():
        state.REGISTRY["x"] = 1

    def test_class_list():
        state.Service.hooks.append(print)

    def test_deque():
        state.QUEUE.append(1)

    def test_fixture_value(shared):
        shared.append("more")

    def test_logger_handler():
        logging.getLogger("app").addHandler(logging.NullHandler())

    def test_lazy_initialisation():
        state._client = object()

    def test_zz_clean_afterwards(shared):
        assert shared == ["seed"] and logging.getLogger("app").handlers == []
"""

#: Routine state (filled lazily) is kept in its process, as a plain run keeps
#: it: the next file sees it there, not in file mode.
DEEP_NEXT_FILE = """
    import app.state as state

    def test_next_file_starts_clean():
        assert state.REGISTRY == {} and not state.QUEUE
        assert state._client is None
"""


def test_containers_and_logger_handlers_and_the_deep_tier(
    pytester: pytest.Pytester, mode: tuple[str, ...]
) -> None:
    """The default tier lists module-level containers filled in place
    (routine state, kept) and reports a named logger's new handler; the deep
    tier adds class-level containers and the values of higher-scoped fixtures."""
    file_mode = "--isolation-mode=file" in mode
    pytester.mkpydir("app")
    pytester.path.joinpath("app", "state.py").write_text(
        "import collections, logging\nREGISTRY = {}\nQUEUE = collections.deque()\n"
        "_client = None\nlogging.getLogger('app')\nclass Service:\n    hooks = []\n"
    )
    pytester.makepyfile(test_deep=DEEP, test_next=DEEP_NEXT_FILE)
    default = pytester.runpytest_subprocess(*mode, "-p", "no:randomly", "-v", timeout=TIMEOUT)
    default.assert_outcomes(passed=7 if file_mode else 6, failed=1 if file_mode else 2)
    assert warned(default) == 2
    default.stdout.fnmatch_lines(
        [literal("E       AssertionError: assert (['seed', 'more'] == ['seed']*")]
    )
    default.stdout.fnmatch_lines(
        [
            "*test_logger_handler leaked the handlers/filters of logger 'app' "
            "(was none, now handlers [[]<NullHandler (NOTSET)>], 0 filter(s))*",
            # The test module's own code sets it: the test's leak, not routine.
            "*test_lazy_initialisation leaked app.state._client (was None, now <object *",
            "isolation: routine state of 2 tests kept (2 filled lazily*",
            "  [[]container] app.state.QUEUE (mutated in place), filled lazily (added 1)*",
            "  [[]container] app.state.REGISTRY (mutated in place), filled lazily (added 'x')*",
        ],
        consecutive=False,
    )
    default.stdout.no_fnmatch_line("*Service.hooks*")  # class-level: the deep tier's

    deep = pytester.runpytest_subprocess(
        *mode, "-p", "no:randomly", "--isolation-leaks-deep", "-v", timeout=TIMEOUT
    )
    deep.assert_outcomes(passed=8 if file_mode else 7, failed=0 if file_mode else 1)
    assert warned(deep) == 3
    deep.stdout.fnmatch_lines(
        [
            "*test_fixture_value leaked the value of fixture 'shared' (scope=module), mutated in "
            "place (was list of 1 item, now list of 2 items)*",
            "  [[]container] app.state.Service.hooks (mutated in place), filled lazily (added <*",
        ],
        consecutive=False,
    )
