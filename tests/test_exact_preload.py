"""File mode is exact by default (issue 30): preloading is opt-in, and when
on, a child holds only modules its file imports first, in its order.

The oracle is the shell loop: ``pytest -p no:isolation FILE`` in a fresh
interpreter per file; each test here checks that it passes there too."""

from __future__ import annotations

import textwrap

import pytest

from conftest import FILE_MODE
from conftest import TIMEOUT

START_METHODS = ["fork", "forkserver", "spawn"]


def write(pytester: pytest.Pytester, files: dict[str, str]) -> None:
    pytester.makeini("[pytest]\npythonpath = .\n")
    for name, source in files.items():
        path = pytester.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        *FILE_MODE, "-p", "no:cacheprovider", *args, timeout=TIMEOUT
    )


def loop(pytester: pytest.Pytester, names: list[str]) -> list[pytest.RunResult]:
    """The oracle: each file in its own fresh interpreter, without the plugin."""
    return [
        pytester.runpytest_subprocess(
            "-p", "no:isolation", "-p", "no:cacheprovider", name, timeout=TIMEOUT
        )
        for name in names
    ]


def three_files(test: str) -> dict[str, str]:
    return {f"tests/test_{letter}.py": test for letter in "abc"}


#: A module whose import makes state that belongs to one process.
PER_PROCESS = {
    "temp directory": (
        {
            "cachelib.py": """
                import os, tempfile
                CACHE_DIR = tempfile.mkdtemp()
                def put(key, value):
                    with open(os.path.join(CACHE_DIR, key), "w") as f:
                        f.write(value)
                def keys():
                    return sorted(os.listdir(CACHE_DIR))
            """
        },
        """
            import cachelib

            def test_fresh():
                assert cachelib.keys() == []
                cachelib.put("a", "x")
        """,
    ),
    "pid": (
        {
            "mylib.py": """
                import os
                _PID = os.getpid()
                def check():
                    if os.getpid() != _PID:
                        raise RuntimeError("used in another process than the one it was made in")
            """
        },
        """
            import mylib

            def test_same_process():
                mylib.check()
        """,
    ),
    "lock held": (
        {
            "locklib.py": """
                import threading
                LOCK = threading.Lock()
            """
        },
        """
            import locklib

            def test_the_lock_is_free():
                assert locklib.LOCK.acquire(blocking=False)
        """,
    ),
    "capture stream bound": (
        {
            "saylib.py": """
                from sys import stdout
                def say(text):
                    stdout.write(text)
            """
        },
        """
            import saylib

            def test_said(capsys):
                saylib.say("hi")
                assert capsys.readouterr().out == ""  # bound before capsys began
        """,
    ),
}


@pytest.mark.parametrize("start", START_METHODS)
@pytest.mark.parametrize("case", sorted(PER_PROCESS))
def test_by_default_no_file_shares_what_another_s_imports_made(
    pytester: pytest.Pytester, case: str, start: str
) -> None:
    modules, test = PER_PROCESS[case]
    write(pytester, {**modules, **three_files(test)})
    assert all(result.ret == 0 for result in loop(pytester, sorted(three_files(test))))
    result = run(pytester, f"--isolation-start={start}")
    result.assert_outcomes(passed=3)
    assert "preload" not in result.stdout.str()


#: Why each module of PER_PROCESS is not preloaded ("": it may be: a lock
#: made at import is a fresh copy in every child).
REFUSED_BECAUSE = {
    "temp directory": "cachelib: its import makes a temporary directory",
    "pid": "mylib: its import reads the process id (os.getpid)",
    "lock held": "",
    "capture stream bound": "saylib: its import keeps a reference to sys.stdout or sys.stderr",
}


@pytest.mark.parametrize("case", sorted(PER_PROCESS))
def test_preloading_refuses_an_import_that_makes_per_process_state(
    pytester: pytest.Pytester, case: str
) -> None:
    """Asked for, the servers preload only imports that are the same in the
    server as in a file's own child: outcomes are the loop's, and the
    header names the module refused and what its import did."""
    modules, test = PER_PROCESS[case]
    write(pytester, {**modules, **three_files(test)})
    assert all(result.ret == 0 for result in loop(pytester, sorted(three_files(test))))
    result = run(pytester, "--isolation-start=fork", "--isolation-preload=auto")
    result.assert_outcomes(passed=3)
    why = REFUSED_BECAUSE[case]
    if why:
        result.stdout.fnmatch_lines([f"isolation: nothing preloaded: {why}"])
    else:
        result.stdout.fnmatch_lines(
            [
                "isolation: the fork server preloads 1 module that the test files import*",
                "isolation: a preloaded module is imported once, in a fork server*",
            ]
        )


#: Files whose conditional imports do not all run.
CONDITIONAL = {
    "mypkg/__init__.py": "",
    "mypkg/backend_numpy.py": "Array = list\n",
    "fastjson.py": "NAME = 'fast'\n",
    "slowjson.py": "NAME = 'slow'\n",
    "probe.py": "import sys\n\ndef loaded(name):\n    return name in sys.modules\n",
}
CONDITIONAL_TEST = """
    from typing import TYPE_CHECKING
    import mypkg
    import probe
    if TYPE_CHECKING:
        from mypkg.backend_numpy import Array
    try:
        import fastjson as json_impl
    except ImportError:
        import slowjson as json_impl

    def test_only_what_ran_is_imported():
        assert json_impl.NAME == "fast"
        assert not probe.loaded("mypkg.backend_numpy")
        assert not probe.loaded("slowjson")
"""


def test_an_import_that_never_runs_is_never_preloaded(pytester: pytest.Pytester) -> None:
    write(pytester, {**CONDITIONAL, **three_files(CONDITIONAL_TEST)})
    assert all(result.ret == 0 for result in loop(pytester, sorted(three_files(""))))
    result = run(pytester, "--isolation-start=fork", "--isolation-preload=auto")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["isolation: the fork server preloads 2 modules*"])


#: A module whose import reads what another module's import set.
ORDER = {
    "envsetup.py": "import os\nos.environ['APP_MODE'] = 'from envsetup'\n",
    "modelib.py": "import os\nMODE = os.environ.get('APP_MODE', 'default')\n",
}
ORDER_TEST = """
    import envsetup
    import modelib

    def test_the_import_saw_the_environment():
        assert modelib.MODE == "from envsetup"
"""


def test_a_module_is_preloaded_only_after_what_its_file_imports_before_it(
    pytester: pytest.Pytester,
) -> None:
    """``envsetup`` is refused (its import changes the environment), so
    ``modelib``, which each file imports after it, is not preloaded either."""
    write(pytester, {**ORDER, **three_files(ORDER_TEST)})
    assert all(result.ret == 0 for result in loop(pytester, sorted(three_files(""))))
    result = run(pytester, "--isolation-start=fork", "--isolation-preload=auto", "-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        ["isolation: nothing preloaded: envsetup: its import changes the environment"]
    )


# -- refusals remembered between runs ---------------------------------------------

REMEMBERED_LINE = "*refusal* taken from an earlier run with the same files*"


def run_cached(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """A preloading run that keeps pytest's cache (where refusals are kept)."""
    return pytester.runpytest_subprocess(
        *FILE_MODE, "--isolation-preload=auto", "-v", *args, timeout=TIMEOUT
    )


def pid_files(pytester: pytest.Pytester) -> None:
    write(
        pytester,
        {
            "purelib.py": "VALUE = 1\n",
            "pidlib.py": "import os\nPID = os.getpid()\n",
            **three_files(
                """
                import purelib
                import pidlib
                import os

                def test_own_pid():
                    assert pidlib.PID == os.getpid()
                """
            ),
        },
    )


def test_a_refusal_is_remembered_with_the_same_files(pytester: pytest.Pytester) -> None:
    """The second run with the same files refuses the impure module at once,
    for the same reason, and preloads the same: the outcomes are the loop's."""
    pid_files(pytester)
    first = run_cached(pytester)
    first.assert_outcomes(passed=3)
    first.stdout.fnmatch_lines(
        [
            "*the fork server preloads 1 module*",
            "*pidlib not preloaded: its import reads the process id*",
        ]
    )
    first.stdout.no_fnmatch_line(REMEMBERED_LINE)
    second = run_cached(pytester)
    second.assert_outcomes(passed=3)
    second.stdout.fnmatch_lines(
        [
            "*the fork server preloads 1 module*",
            "*pidlib not preloaded: its import reads the process id*",
            "*1 refusal taken from an earlier run with the same files: pidlib*",
        ]
    )
    for oracle in loop(pytester, [f"tests/test_{letter}.py" for letter in "abc"]):
        oracle.assert_outcomes(passed=1)


def test_a_changed_file_makes_its_refusal_void(pytester: pytest.Pytester) -> None:
    """A module refused once, since made pure, is watched again and preloaded."""
    pid_files(pytester)
    run_cached(pytester).assert_outcomes(passed=3)
    (pytester.path / "pidlib.py").write_text("import os\nPID = None\n")
    (pytester.path / "tests" / "test_a.py").write_text(
        "import purelib\nimport pidlib\n\ndef test_pure():\n    assert pidlib.PID is None\n"
    )
    for letter in "bc":
        (pytester.path / "tests" / f"test_{letter}.py").write_text(
            (pytester.path / "tests" / "test_a.py").read_text()
        )
    result = run_cached(pytester)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*the fork server preloads 2 modules*"])
    result.stdout.no_fnmatch_line(REMEMBERED_LINE)
    result.stdout.no_fnmatch_line("*pidlib not preloaded*")


def test_a_changed_environment_makes_every_refusal_void(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An import may read the environment: in another one, no refusal holds."""
    write(
        pytester,
        {
            "envlib.py": """
                import os
                if not os.environ.get("ENVLIB_QUIET"):
                    import time
                    STAMP = time.time()
            """,
            **three_files("import envlib\n\ndef test_loaded():\n    assert envlib\n"),
        },
    )
    first = run_cached(pytester)
    first.assert_outcomes(passed=3)
    first.stdout.fnmatch_lines(["*envlib*its import reads the clock*"])
    monkeypatch.setenv("ENVLIB_QUIET", "1")
    result = run_cached(pytester)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*the fork server preloads 1 module*"])
    result.stdout.no_fnmatch_line(REMEMBERED_LINE)


def test_no_cache_no_remembered_refusals(pytester: pytest.Pytester) -> None:
    """``-p no:cacheprovider``: every run finds its refusals itself."""
    pid_files(pytester)
    for _ in range(2):
        result = run_cached(pytester, "-p", "no:cacheprovider")
        result.assert_outcomes(passed=3)
        result.stdout.fnmatch_lines(["*pidlib not preloaded: its import reads the process id*"])
        result.stdout.no_fnmatch_line(REMEMBERED_LINE)


def test_a_fixed_module_whose_import_raised_is_preloaded_again(
    pytester: pytest.Pytester,
) -> None:
    """An import that raised leaves no module behind: its own file is still
    part of the refusal, so fixing it voids the refusal."""
    write(
        pytester,
        {
            "broken.py": "raise RuntimeError('not yet')\n",
            **three_files(
                """
                import pytest

                def test_a():
                    with pytest.raises(RuntimeError):
                        import broken
                """
            ),
            "tests/test_x.py": "import broken\n\ndef test_x():\n    pass\n",
            "tests/test_y.py": "import broken\n\ndef test_y():\n    pass\n",
        },
    )
    first = run_cached(pytester, "tests/test_x.py", "tests/test_y.py")
    first.assert_outcomes(errors=2)
    first.stdout.fnmatch_lines(["*broken*its import raised RuntimeError*"])
    (pytester.path / "broken.py").write_text("VALUE = 1\n")
    second = run_cached(pytester, "tests/test_x.py", "tests/test_y.py")
    second.assert_outcomes(passed=2)
    second.stdout.fnmatch_lines(["*the fork server preloads 1 module*"])
    second.stdout.no_fnmatch_line(REMEMBERED_LINE)


def test_a_preloaded_import_s_output_shows_under_s_as_in_the_loop(
    pytester: pytest.Pytester,
) -> None:
    """Issue 46 item 6: a module that prints as it is imported was preloaded,
    its output dropped, so ``-s`` showed it once per file in the loop and
    never in file mode."""
    write(
        pytester,
        {
            "loud.py": 'print("LOUD IMPORTED")\n',
            **three_files("import loud\n\ndef test_x():\n    pass\n"),
        },
    )
    oracle = pytester.runpytest_subprocess(
        "-p", "no:isolation", "-s", "tests/test_a.py", timeout=TIMEOUT
    )
    assert oracle.stdout.str().count("LOUD IMPORTED") == 1
    result = run(pytester, "--isolation-preload=auto", "-s", "-v")
    result.assert_outcomes(passed=3)
    assert result.stdout.str().count("LOUD IMPORTED") == 3
    result.stdout.fnmatch_lines(["isolation:*loud: its import writes to stdout or stderr*"])


def test_a_conftest_s_collection_hook_runs_before_the_file_s_imports(
    pytester: pytest.Pytester,
) -> None:
    """Issue 46 item 6: a conftest hook that runs while a file is collected,
    before its module is imported, sets what a module it imports reads at
    import; preloading imported that module before the hook ran."""
    write(
        pytester,
        {
            "tests/conftest.py": """
                import os

                def pytest_collectstart(collector):
                    path = getattr(collector, "path", None)
                    if path is not None and path.suffix == ".py":
                        os.environ["LIB_MODE"] = path.name
            """,
            "lib.py": 'import os\n\nMODE = os.environ.get("LIB_MODE")\n',
            **three_files(
                "import lib\n\ndef test_mode():\n    assert lib.MODE == __file__.split('/')[-1]\n"
            ),
        },
    )
    for oracle in loop(pytester, ["tests/test_a.py", "tests/test_b.py"]):
        oracle.assert_outcomes(passed=1)
    result = run(pytester, "--isolation-preload=auto", "-v")
    result.assert_outcomes(passed=3)
