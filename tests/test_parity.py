"""File mode reports what a plain run reports, for every start method."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from conftest import FILE_MODE
from conftest import TIMEOUT
from conftest import run_file_mode
from conftest import run_plain

MIXED = {
    "conftest.py": """
        import pytest

        @pytest.fixture(scope="session")
        def session_value():
            return 42

        @pytest.fixture
        def broken():
            raise RuntimeError("fixture setup broke")
    """,
    "test_outcomes.py": """
        import logging
        import sys
        import warnings
        import pytest

        def test_pass(session_value):
            assert session_value == 42

        def test_fail():
            print("stdout of test_fail")
            sys.stderr.write("stderr of test_fail\\n")
            logging.getLogger("t").warning("log of test_fail")
            assert 1 + 1 == 3

        def test_error(broken):
            pass

        def test_skip():
            pytest.skip("not today")

        @pytest.mark.xfail(reason="known")
        def test_xfail():
            assert False

        @pytest.mark.xfail(reason="fixed?")
        def test_xpass():
            pass

        def test_warns():
            warnings.warn(UserWarning("careful"))

        @pytest.mark.parametrize("n", [1, 2, 3])
        def test_param(n):
            assert n != 2

        @pytest.mark.slow
        def test_marked():
            pass
    """,
    "pkg/__init__.py": "",
    "pkg/conftest.py": """
        import pytest

        @pytest.fixture(scope="package")
        def package_value():
            return "p"

        @pytest.fixture(scope="module")
        def module_value(package_value):
            return "m" + package_value

        @pytest.fixture(scope="class")
        def class_value():
            return "c"
    """,
    "pkg/test_classes.py": """
        import unittest

        class TestThings:
            def test_method(self, module_value, class_value):
                assert module_value + class_value == "mpc"

            def test_method_fails(self):
                assert [1, 2] == [1, 3]

        class CaseTest(unittest.TestCase):
            def setUp(self):
                self.value = 1

            def test_unit(self):
                self.assertEqual(self.value, 1)

            def test_unit_fails(self):
                self.assertEqual(self.value, 2)
    """,
    "test_empty.py": "x = 1\n",
}

INI = """
    [pytest]
    markers =
        slow: slow tests
    junit_family = xunit1
"""


@pytest.fixture
def mixed(pytester: pytest.Pytester) -> pytest.Pytester:
    for name, text in MIXED.items():
        path = pytester.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(__import__("textwrap").dedent(text))
    pytester.makeini(INI)
    return pytester


def result_lines(result: pytest.RunResult) -> list[str]:
    """The ``-v`` result lines, without the progress column."""
    pattern = re.compile(r"^(\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)")
    found = (pattern.match(line) for line in result.outlines)
    return sorted(f"{m[1]} {m[2]}" for m in found if m)


def short_summary(result: pytest.RunResult) -> list[str]:
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if "short test summary info" in line)
    return sorted(line for line in lines[start + 1 : -1])


def junit_cases(path: str) -> list[tuple[str, str, str, str]]:
    cases = []
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome = ",".join(sorted(child.tag for child in case if child.tag != "properties"))
        message = next((c.get("message", "") for c in case if c.tag in ("failure", "error")), "")
        cases.append((case.get("classname", ""), case.get("name", ""), outcome, message))
    return sorted(cases)


def test_summary_counts_and_lines_match(mixed: pytest.Pytester, start: str) -> None:
    args = ("-v", "-rA", "-p", "no:randomly")
    plain = run_plain(mixed, *args)
    isolated = run_file_mode(mixed, start, *args)
    assert plain.parseoutcomes() == isolated.parseoutcomes()
    assert isolated.parseoutcomes() == {
        "failed": 4,
        "passed": 7,
        "skipped": 1,
        "xfailed": 1,
        "xpassed": 1,
        "errors": 1,
        "warnings": 1,
    }
    assert result_lines(plain) == result_lines(isolated)
    assert short_summary(plain) == short_summary(isolated)
    assert plain.ret == isolated.ret == pytest.ExitCode.TESTS_FAILED


def test_failure_sections_and_warnings_summary(mixed: pytest.Pytester, start: str) -> None:
    result = run_file_mode(mixed, start)
    result.stdout.fnmatch_lines(
        [
            "*- Captured stdout call -*",
            "stdout of test_fail",
            "*- Captured stderr call -*",
            "stderr of test_fail",
            "*- Captured log call -*",
            "WARNING  t:test_outcomes.py:* log of test_fail",
        ]
    )
    result.stdout.fnmatch_lines(
        ["*= warnings summary =*", "test_outcomes.py::test_warns", "*UserWarning: careful"]
    )
    result.stdout.fnmatch_lines(["*fixture setup broke*"])


def test_junit_has_one_case_per_test(mixed: pytest.Pytester, start: str) -> None:
    plain = run_plain(mixed, "--junitxml=plain.xml")
    isolated = run_file_mode(mixed, start, "--junitxml=isolated.xml")
    assert plain.ret == isolated.ret == 1
    plain_cases = junit_cases(str(mixed.path / "plain.xml"))
    assert junit_cases(str(mixed.path / "isolated.xml")) == plain_cases
    assert len(plain_cases) == 15


def test_collect_only_ids_match(mixed: pytest.Pytester, start: str) -> None:
    plain = run_plain(mixed, "--collect-only", "-q")
    isolated = run_file_mode(mixed, start, "--collect-only", "-q")
    assert plain.ret == isolated.ret == 0
    ids = [line for line in plain.outlines if "::" in line]
    assert len(ids) == 15
    assert [line for line in isolated.outlines if "::" in line] == ids
    isolated.stdout.fnmatch_lines(["15 tests collected*"])


@pytest.mark.parametrize(
    "selection",
    [
        ("-k", "param or method"),
        ("-m", "slow"),
        ("-m", "not slow", "-k", "not fails"),
        ("--deselect", "test_outcomes.py::test_fail", "--deselect", "pkg/test_classes.py"),
        ("test_outcomes.py::test_param", "pkg/test_classes.py::TestThings"),
        ("test_outcomes.py::test_param[3]", "pkg/test_classes.py::CaseTest::test_unit"),
    ],
    ids=["keyword", "mark", "both", "deselect", "node-ids", "exact-ids"],
)
def test_selection_selects_the_same_tests(
    mixed: pytest.Pytester, start: str, selection: tuple[str, ...]
) -> None:
    plain = run_plain(mixed, "-v", *selection)
    isolated = run_file_mode(mixed, start, "-v", *selection)
    assert result_lines(isolated) == result_lines(plain)
    assert result_lines(plain)
    assert isolated.parseoutcomes() == plain.parseoutcomes()
    assert isolated.ret == plain.ret


def test_collect_only_with_keyword_counts_deselected(mixed: pytest.Pytester, start: str) -> None:
    plain = run_plain(mixed, "--collect-only", "-q", "-k", "param")
    isolated = run_file_mode(mixed, start, "--collect-only", "-q", "-k", "param")
    assert isolated.outlines[:3] == plain.outlines[:3]
    isolated.stdout.fnmatch_lines(["3/15 tests collected (12 deselected)*"])


def test_durations_lists_child_tests(mixed: pytest.Pytester, start: str) -> None:
    result = run_file_mode(mixed, start, "--durations=0", "--durations-min=0")
    result.stdout.fnmatch_lines(["*slowest durations*", "*call*test_outcomes.py::test_pass*"])


def test_exit_code_no_tests_collected(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(test_nothing="x = 1\n")
    result = run_file_mode(pytester, start)
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["*no tests ran*"])


def test_exit_code_all_deselected(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(test_one="def test_a(): pass\n")
    plain = run_plain(pytester, "-k", "nomatch")
    isolated = run_file_mode(pytester, start, "-k", "nomatch")
    assert isolated.ret == plain.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    isolated.stdout.fnmatch_lines(["*1 deselected*"])


def test_exit_code_passing_run(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(test_one="def test_a(): pass\n", test_two="def test_b(): pass\n")
    result = run_file_mode(pytester, start)
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=2)


# -- what a plain run says beside the outcomes (issue 14) ------------------------------


def test_two_test_files_with_one_module_name_fail_to_collect(
    pytester: pytest.Pytester, start: str
) -> None:
    """Without ``__init__.py`` both import as ``test_api``: a plain run stops."""
    for folder in ("a", "b"):
        pytester.mkdir(folder).joinpath("test_api.py").write_text("def test_x(): pass\n")
    plain = run_plain(pytester)
    isolated = run_file_mode(pytester, start)
    for result in (plain, isolated):
        assert result.ret == pytest.ExitCode.INTERRUPTED
        result.assert_outcomes(errors=1)
        result.stdout.fnmatch_lines(
            [
                "*ERROR collecting b/test_api.py*",
                "import file mismatch:",
                "imported module 'test_api' has this __file__ attribute:",
                f"  {pytester.path / 'a' / 'test_api.py'}",
                "which is not the same as the test file we want to collect:",
                f"  {pytester.path / 'b' / 'test_api.py'}",
                "*Interrupted: 1 error during collection*",
            ]
        )
    importlib = run_file_mode(pytester, start, "--import-mode=importlib")
    importlib.assert_outcomes(passed=2)


def test_text_files_with_one_name_are_no_module_mismatch(
    pytester: pytest.Pytester, start: str
) -> None:
    """Doctest text files (and other collectors' files) are not imported."""
    for folder in ("a", "b"):
        pytester.mkdir(folder).joinpath("test_doc.txt").write_text(">>> 1 + 1\n2\n")
    args = ("--doctest-glob=test_*.txt",)
    run_plain(pytester, *args).assert_outcomes(passed=2)
    run_file_mode(pytester, start, *args).assert_outcomes(passed=2)


def test_a_config_warning_is_counted_once(pytester: pytest.Pytester, start: str) -> None:
    pytester.makeini("[pytest]\nunknown_key = 1\n")
    for name in ("test_1", "test_2", "test_3"):
        pytester.makepyfile(**{name: "def test_x(): pass\n"})
    for result in (run_plain(pytester), run_file_mode(pytester, start)):
        result.assert_outcomes(passed=3, warnings=1)
        assert result.stdout.str().count("Unknown config option: unknown_key") == 1


def test_pytest_cov_adds_no_warning(pytester: pytest.Pytester, start: str) -> None:
    pytest.importorskip("pytest_cov")
    pytester.mkpydir("mypkg").joinpath("calc.py").write_text("def add(a, b):\n    return a + b\n")
    pytester.makepyfile(test_add="from mypkg.calc import add\ndef test_add(): assert add(1, 2)\n")
    result = run_file_mode(pytester, start, "-p", "pytest_cov", "--cov=mypkg")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["TOTAL * 100%"])
    assert "No data was collected" not in result.stdout.str() + result.stderr.str()


SEVEN = {
    "test_a": "def test_1(): pass\ndef test_2(): pass\n",
    "test_b": "import os\ndef test_3(): pass\n"
    "def test_4(): assert not os.path.exists('BROKEN')\ndef test_5(): pass\n",
    "test_c": "def test_6(): pass\ndef test_7(): pass\n",
}


def test_failed_first_runs_the_failed_file_first(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(**SEVEN)
    pytester.path.joinpath("BROKEN").touch()
    run_file_mode(pytester, start).assert_outcomes(passed=6, failed=1)
    result = run_file_mode(pytester, start, "--ff", "-v")
    result.assert_outcomes(passed=6, failed=1)
    result.stdout.fnmatch_lines(
        [
            "run-last-failure: rerun previous 1 failure first",
            "test_b.py::test_4 FAILED*",
            "test_b.py::test_3 PASSED*",
            "test_b.py::test_5 PASSED*",
            "test_a.py::test_1 PASSED*",
        ]
    )
    last = run_file_mode(pytester, start, "--lf")
    last.assert_outcomes(failed=1)
    last.stdout.fnmatch_lines(["run-last-failure: rerun previous 1 failure (skipped 2 files)"])


def test_stepwise_is_refused(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(**SEVEN)
    result = run_file_mode(pytester, start, "--sw")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*cannot be combined with --stepwise/--sw*"])


def test_setup_show_lines_are_in_place(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(
        test_s="""
        import pytest

        @pytest.fixture
        def f():
            yield 1

        def test_a(f):
            pass

        def test_b(f):
            pass
        """
    )

    def shown(result: pytest.RunResult) -> list[str]:
        lines = result.outlines
        return lines[lines.index("test_s.py ") : lines.index("test_s.py ") + 7]

    plain = shown(run_plain(pytester, "--setup-show"))
    assert plain[1].strip() == "SETUP    F f"
    assert shown(run_file_mode(pytester, start, "--setup-show")) == plain


def test_a_keyboard_interrupt_is_located_at_its_test(pytester: pytest.Pytester, start: str) -> None:
    pytester.makepyfile(
        test_k="def test_a(): pass\ndef test_k():\n    raise KeyboardInterrupt\n"
        "def test_c(): pass\n"
    )
    for result in (run_plain(pytester), run_file_mode(pytester, start)):
        assert result.ret == pytest.ExitCode.INTERRUPTED
        result.stdout.fnmatch_lines([f"{pytester.path / 'test_k.py'}:3: KeyboardInterrupt"])


def test_every_file_starts_from_the_run_s_environment(
    pytester: pytest.Pytester, start: str
) -> None:
    """A non-Python item runs in the parent; what it sets reaches no file's
    child, whichever the start method."""
    pytester.makeconftest(
        """
        import os
        import pytest

        class SetsEnv(pytest.Item):
            def runtest(self):
                os.environ["FROM_ITEM"] = "1"

        class EnvFile(pytest.File):
            def collect(self):
                yield SetsEnv.from_parent(self, name="sets")

        def pytest_collect_file(file_path, parent):
            if file_path.suffix == ".env":
                return EnvFile.from_parent(parent, path=file_path)
        """
    )
    pytester.path.joinpath("a.env").write_text("")
    pytester.makepyfile(
        test_1="import os\ndef test_x(): assert 'FROM_ITEM' not in os.environ\n",
        test_2="import os\ndef test_y(): assert 'FROM_ITEM' not in os.environ\n",
    )
    result = run_file_mode(pytester, start, "--isolation-leaks=off", "-p", "no:randomly")
    result.assert_outcomes(passed=3)


def test_a_child_makes_no_node_for_the_other_files(pytester: pytest.Pytester, start: str) -> None:
    """Speed: pytest's collection of a named file makes a node for every
    other file of its directory first; the parent has made those once for
    the run, and no child makes them again (a spawned child prunes them)."""
    pytester.makeconftest(
        """
        import os

        def pytest_collect_file(file_path, parent):
            if file_path.suffix == ".py" and file_path.name.startswith("test_"):
                with open(os.path.join(os.path.dirname(__file__), "seen.txt"), "a") as out:
                    out.write(f"{os.getpid()} {file_path.name}\\n")
        """
    )
    for name in ("test_1.py", "test_2.py", "test_3.py"):
        pytester.makepyfile(**{name[:-3]: "def test_x():\n    pass\n"})
    run_file_mode(pytester, start).assert_outcomes(passed=3)
    seen: dict[str, set[str]] = {}
    for line in (pytester.path / "seen.txt").read_text().splitlines():
        pid, name = line.split()
        seen.setdefault(pid, set()).add(name)
    everything = {"test_1.py", "test_2.py", "test_3.py"}
    assert sum(names == everything for names in seen.values()) == 1  # the parent's
    children = [names for names in seen.values() if names != everything]
    assert sorted(len(names) for names in children) == [1, 1, 1]


def test_a_package_fixture_runs_once_per_file(pytester: pytest.Pytester, start: str) -> None:
    """Documented: each file's process is a session of its own, so a
    package-scoped fixture of a package with two test files runs twice."""
    package = pytester.mkpydir("pkg")
    package.joinpath("conftest.py").write_text(
        "import os, pytest\n"
        "@pytest.fixture(scope='package')\n"
        "def shared():\n"
        "    with open(os.path.join(os.path.dirname(__file__), 'setups.txt'), 'a') as out:\n"
        "        out.write('x')\n"
    )
    for name in ("test_1.py", "test_2.py"):
        package.joinpath(name).write_text("def test_x(shared): pass\n")
    run_plain(pytester).assert_outcomes(passed=2)
    assert package.joinpath("setups.txt").read_text() == "x"
    package.joinpath("setups.txt").unlink()
    run_file_mode(pytester, start).assert_outcomes(passed=2)
    assert package.joinpath("setups.txt").read_text() == "xx"


def test_main_module_is_the_plain_run_s(pytester: pytest.Pytester, start: str) -> None:
    """multiprocessing's spawn start method and tests read ``__main__``'s file
    and module name; a spawned child has the parent's."""
    pytester.makepyfile(
        test_m="""
        import multiprocessing, os, sys

        def square(x):
            return x * x

        def test_main(request):
            main = sys.modules["__main__"]
            with open(request.config.rootpath / f"{os.getpid()}.main", "w") as out:
                out.write(f"{main.__file__} {main.__spec__.name}")

        def test_spawn_pool():
            with multiprocessing.get_context("spawn").Pool(1) as pool:
                assert pool.map(square, [2]) == [4]
        """
    )
    plain = run_plain(pytester)
    plain.assert_outcomes(passed=2)
    isolated = run_file_mode(pytester, start)
    isolated.assert_outcomes(passed=2)
    seen = sorted(path.read_text() for path in pytester.path.glob("*.main"))
    assert len(seen) == 2
    assert seen[0] == seen[1]
    assert seen[0].endswith("__main__.py pytest.__main__")


def test_gc_finds_the_objects_made_before_the_fork(pytester: pytest.Pytester, start: str) -> None:
    """``gc.get_objects()`` sees what conftests made (django-extensions'
    ``list_signals`` finds signals that way), although the parent freezes
    its objects before forking."""
    pytester.makeconftest("class Marker:\n    pass\n\nMARK = Marker()\n")
    pytester.makepyfile(
        test_gc="import gc\nimport conftest\n\n"
        "def test_seen():\n    assert any(o is conftest.MARK for o in gc.get_objects())\n"
    )
    run_file_mode(pytester, start).assert_outcomes(passed=1)


def test_gc_s_referrers_are_those_of_a_plain_run(pytester: pytest.Pytester, start: str) -> None:
    """anyio's refcycle tests check what refers to an exception inside a
    coroutine: a child's ``gc`` finds what a plain run's finds (which depends
    on the Python version), no referrer of its own."""
    pytester.makepyfile(
        test_refs="""
        import gc
        from pathlib import Path

        async def referrers():
            exc = ValueError()
            return [type(referrer).__name__ for referrer in gc.get_referrers(exc)]

        def test_record_the_referrers():
            coroutine = referrers()
            try:
                coroutine.send(None)
            except StopIteration as stop:
                Path("referrers.txt").write_text(repr(stop.value))
        """
    )
    run_plain(pytester).assert_outcomes(passed=1)
    plain = (pytester.path / "referrers.txt").read_text()
    run_file_mode(pytester, start).assert_outcomes(passed=1)
    assert (pytester.path / "referrers.txt").read_text() == plain


def test_gc_collects_a_cycle_through_an_object_made_before_the_fork(
    pytester: pytest.Pytester, start: str
) -> None:
    """A child keeps what it inherited frozen (its collector then skips the
    parent's heap), but a test's ``gc.collect()`` sees everything, as in a
    plain run: a cycle a conftest made, once unreachable, is collected, and
    the freeze count is the plain run's."""
    pytester.makeconftest(
        """
        import weakref

        class Node:
            pass

        HOLDER = [Node()]
        HOLDER[0].me = HOLDER[0]
        REF = weakref.ref(HOLDER[0])
        """
    )
    pytester.makepyfile(
        test_cycle="""
        import gc
        import conftest

        def test_freed():
            conftest.HOLDER.clear()
            gc.collect()
            assert conftest.REF() is None

        def test_nothing_frozen_as_seen_from_a_test():
            assert gc.get_freeze_count() == 0
        """
    )
    run_plain(pytester).assert_outcomes(passed=2)
    run_file_mode(pytester, start).assert_outcomes(passed=2)


def test_a_file_that_never_looks_leaves_the_inherited_objects_frozen(
    pytester: pytest.Pytester,
) -> None:
    """Speed: a forked child's collector, and the last one of its session,
    leave the parent's heap alone until a test looks at every object; the
    file's own garbage is still collected at the session's end, as in a
    plain run (its finalizer's error is reported)."""
    pytester.makepyfile(
        test_frozen="""
        import gc
        from pytest_isolation.core import frozen

        class Cyclic:
            def __init__(self):
                self.me = self

            def __del__(self):
                raise ValueError("the file's own garbage")

        def test_still_frozen():
            Cyclic()
            assert frozen.is_frozen()

        def test_looking_thaws():
            gc.get_referrers(object())
            assert not frozen.is_frozen()
        """
    )
    result = run_file_mode(pytester, "fork", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    if _PYTEST_VERSION >= (8, 4):
        # pytest 8.4+ collects at the session's end and reports it on stderr.
        # Older ones collect nothing there: a plain run prints it at the
        # interpreter's exit, which a child skips (docs/explanation/limitations.md);
        # only an automatic collection during the tests, by chance, reports it.
        assert "ValueError: the file's own garbage" in result.stdout.str() + result.stderr.str()


_PYTEST_VERSION = tuple(int(part) for part in pytest.__version__.split(".")[:2])


def test_a_test_that_patches_os_write_keeps_its_child_talking(
    pytester: pytest.Pytester, start: str
) -> None:
    """syrupy's suite denies ``os.write`` to test its file lock."""
    pytester.makepyfile(
        test_w="""
        import os

        def deny(fd, data):
            raise PermissionError("denied")

        def test_denied(monkeypatch):
            monkeypatch.setattr(os, "write", deny)
            assert True

        def test_after():
            pass
        """
    )
    run_file_mode(pytester, start).assert_outcomes(passed=2)


def test_two_test_files_of_one_name_fail_as_in_a_plain_run(pytester: pytest.Pytester) -> None:
    """Issue 46 item 9, decided (docs/howto/file-mode.md): without
    ``__init__.py`` files, ``a/test_same.py`` and ``b/test_same.py`` fail a
    plain run with "import file mismatch"; the per-file loop passes both,
    but file mode keeps the plain run's error, so that a suite does not pass
    only in file mode."""
    for folder, name in (("a", "test_a"), ("b", "test_b")):
        pytester.mkdir(folder)
        (pytester.path / folder / "test_same.py").write_text(f"def {name}():\n    pass\n")
    plain = pytester.runpytest_subprocess("-p", "no:isolation", timeout=TIMEOUT)
    assert plain.ret == pytest.ExitCode.INTERRUPTED
    plain.stdout.fnmatch_lines(["*import file mismatch*"])
    result = pytester.runpytest_subprocess(*FILE_MODE, timeout=TIMEOUT)
    assert result.ret == plain.ret
    result.stdout.fnmatch_lines(["*ERROR collecting b/test_same.py*", "*import file mismatch*"])
