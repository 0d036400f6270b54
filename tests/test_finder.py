"""--isolation-find-polluter: the search on real suites, each probe a real
pytest subprocess, with the exact printed result; the search algorithm on
its own."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from conftest import TIMEOUT
from conftest import literal
from conftest import run_guard
from pytest_isolation.diagnose.bisection import Unit
from pytest_isolation.diagnose.bisection import minimal
from pytest_isolation.diagnose.bisection import one
from pytest_isolation.diagnose.bisection import search
from pytest_isolation.diagnose.bisection import split

FILLER = "def test_one(): pass\ndef test_two(): pass\n"
VICTIM = """
import os

def test_victim():
    assert os.environ.get("MODE") != "debug"
"""
POLLUTER = """
import os

def test_before(): pass

def test_sets_mode():
    os.environ["MODE"] = "debug"

def test_after(): pass
"""


def find(pytester: pytest.Pytester, victim: str, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p",
        "isolation",
        "-p",
        "no:randomly",
        f"--isolation-find-polluter={victim}",
        *args,
        timeout=TIMEOUT,
    )


def lines(result: pytest.RunResult) -> list[str]:
    return [line for line in result.stdout.lines if not line.startswith("isolation: probe ")]


def test_a_polluter_in_another_file(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_a=FILLER, test_b=FILLER, test_c=POLLUTER, test_d=FILLER, test_v=VICTIM, test_z=FILLER
    )
    result = find(pytester, "test_v.py::test_victim", "--isolation-find-json=found.json")
    assert result.ret == 0, result.stderr.str()
    assert lines(result) == [
        "isolation: test_v.py::test_victim: 9 tests in 4 files run before it",
        "isolation: alone it passes",
        "isolation: after all 9 tests before it, it fails: bisecting",
        # the last probe checks for another polluter, after the report
        f"isolation: polluter: test_c.py::test_sets_mode ({_probes(result) - 1} probes)",
        "isolation: what it leaked:",
        "isolation:   [env] os.environ['MODE'] (was unset, now 'debug'), at test_c.py:6 "
        "(test_c.py::test_sets_mode)",
        "isolation: reproduce: pytest test_c.py::test_sets_mode test_v.py::test_victim "
        "-p no:randomly -p isolation --isolation-leaks=off",
        "isolation: --isolation-mode=file prevents it: they are in different files "
        "(checked: test_v.py::test_victim passed)",
    ]
    assert _probes(result) <= 6  # log2(4 files) + log2(3 tests) + checks
    found = json.loads((pytester.path / "found.json").read_text())
    assert found["outcome"] == "found"
    assert found["kind"] == "polluter"
    assert found["culprits"] == ["test_c.py::test_sets_mode"]
    assert (found["alone"], found["after_all"]) == ("passed", "failed")
    assert found["file_mode_prevents"] is True
    assert found["leaks"][0]["category"] == "env"
    assert found["probes"] == _probes(result)
    assert found["others"] == []
    # The printed command reproduces the failure.
    again = run_guard(
        pytester,
        "test_c.py::test_sets_mode",
        "test_v.py::test_victim",
        "-p",
        "no:randomly",
        "--isolation-leaks=off",
    )
    again.assert_outcomes(passed=1, failed=1)


#: Logs every pytest session a search starts (one line per configured session).
SESSION_LOG = """
import os, sys

def pytest_configure(config):
    with open(os.path.join(os.path.dirname(__file__), "sessions.log"), "a") as log:
        log.write(" ".join(sys.argv[1:]) + "\\n")
"""


def test_each_probe_says_which_it_is_of_how_many_at_most(pytester: pytest.Pytester) -> None:
    """Issue 49, item 6: the probe lines count down to a computed bound (the
    rounds left over the files, over the tests of the largest file left, the
    check of the test found, the run without it).  The check, the leak
    report, the file-mode check and the run without it share one batch, and
    the run that says the order also runs the tests before the victim: four
    pytest sessions besides the probes (there were five)."""
    pytester.makepyfile(
        test_a=FILLER, test_b=FILLER, test_c=POLLUTER, test_d=FILLER, test_v=VICTIM, test_z=FILLER
    )
    pytester.makeconftest(SESSION_LOG)
    result = find(pytester, "test_v.py::test_victim", "--isolation-probes=1")
    assert result.ret == 0, result.stderr.str()
    assert [line for line in result.stdout.lines if "probe" in line] == [
        "isolation: probe 1 of at most 6 (4 files left): after 4 tests it passes",
        "isolation: probe 2 of at most 6 (2 files left): after 3 tests it fails",
        "isolation: probe 3 of at most 6 (3 tests left): after 2 tests it fails",
        "isolation: probe 4 of at most 6 (2 tests left): after 1 test it passes",
        "isolation: probe 5 of at most 6 (checking the one test left): after 1 test it fails",
        "isolation: polluter: test_c.py::test_sets_mode (5 probes)",
        "isolation: probe 6 of at most 6: without it, after the other 8 tests it passes: "
        "no other polluter",
    ]
    sessions = (pytester.path / "sessions.log").read_text().splitlines()
    assert len(sessions) == 6 + 4


def test_a_collection_error_before_the_victim_still_bisects(pytester: pytest.Pytester) -> None:
    """The run that says the order stops at the collection error; the victim
    after every test before it is then run as every probe runs it."""
    pytester.makepyfile(
        test_a=FILLER,
        test_b="raise ImportError('broken')\n",
        test_c=POLLUTER,
        test_v=VICTIM,
    )
    pytester.makeconftest(SESSION_LOG)
    result = find(pytester, "test_v.py::test_victim", "--isolation-probes=1")
    assert result.ret == 0, result.stderr.str()
    result.stdout.fnmatch_lines(
        [
            "isolation: test_v.py::test_victim: 5 tests in 2 files run before it",
            "isolation: after all 5 tests before it, it fails: bisecting",
            "isolation: probe 1 of at most 5 (2 files left): after 2 tests it passes",
            "isolation: polluter: test_c.py::test_sets_mode (*)",
        ]
    )
    sessions = (pytester.path / "sessions.log").read_text().splitlines()
    assert len(sessions) == _probes(result) + 5


def test_what_the_victim_reads_is_listed_first_and_the_rest_counted(
    pytester: pytest.Pytester,
) -> None:
    """A polluter that changes many things: the one the victim's failure
    names comes first, re-imports are one line, and the rest are counted."""
    pytester.mkpydir("proj")
    pytester.path.joinpath("proj", "cfg.py").write_text(
        "TIMEOUT = 10\n" + "".join(f"def f{n}(): pass\n" for n in range(8))
    )
    pytester.makepyfile(
        test_a="""
        import importlib, os
        import proj.cfg
        def test_pollutes():
            for n in range(6):
                os.environ[f"NOISE_{n}"] = "1"
            importlib.reload(proj.cfg)
            proj.cfg.TIMEOUT = 0
        """,
        test_v="""
        import proj.cfg
        def test_victim():
            assert proj.cfg.TIMEOUT > 0
        """,
    )
    result = find(pytester, "test_v.py::test_victim", "--isolation-find-json=found.json")
    assert result.ret == 0, result.stderr.str()
    shown = lines(result)
    start = shown.index("isolation: what it leaked:")
    assert shown[start + 1] == (
        "isolation:   [attribute] proj.cfg.TIMEOUT (was 10, now 0), at test_a.py:7 "
        "(test_a.py::test_pollutes)"
    )
    assert shown[start + 6] == "isolation:   and 3 more"
    found = json.loads((pytester.path / "found.json").read_text())
    assert len(found["leaks"]) == 8  # TIMEOUT, the re-import (one line), six variables
    assert sum("re-imported" in leak["what"] for leak in found["leaks"]) == 1


def test_a_polluter_in_the_same_file(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_a=FILLER,
        test_same="""
        import os

        def test_first(): pass

        def test_sets_mode():
            os.environ["MODE"] = "debug"

        def test_victim():
            assert os.environ.get("MODE") != "debug"
        """,
    )
    result = find(pytester, "test_same.py::test_victim", "--isolation-probes=2")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "isolation: polluter: test_same.py::test_sets_mode (* probes)",
            "isolation: --isolation-mode=file does not prevent it: they are in the same file",
        ]
    )


def test_two_tests_needed_together(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_a="import os\ndef test_sets_a(): os.environ['PART_A'] = '1'\n",
        test_b=FILLER,
        test_c="import os\ndef test_sets_b(): os.environ['PART_B'] = '1'\n",
        test_v="import os\ndef test_victim():\n"
        "    assert not ('PART_A' in os.environ and 'PART_B' in os.environ)\n",
    )
    result = find(pytester, "test_v.py::test_victim")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "isolation: polluters, needed together: test_a.py::test_sets_a, "
            "test_c.py::test_sets_b (* probes)",
            "isolation: what they leaked:",
            literal("isolation:   [env] os.environ['PART_A'] *"),
            literal("isolation:   [env] os.environ['PART_B'] *"),
        ]
    )


def test_a_brittle_victim_and_its_state_setter(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_a=FILLER,
        test_b="import os\ndef test_configures(): os.environ['READY'] = '1'\n",
        test_v="import os\ndef test_needs_it(): assert os.environ.get('READY') == '1'\n",
    )
    result = find(pytester, "test_v.py::test_needs_it")
    assert result.ret == 0
    assert lines(result)[:4] == [
        "isolation: test_v.py::test_needs_it: 3 tests in 2 files run before it",
        "isolation: it fails alone: it depends on state an earlier test sets; looking for that",
        "isolation: after all 3 tests before it, it passes: bisecting",
        f"isolation: state-setter: test_b.py::test_configures ({_probes(result)} probes)",
    ]
    result.stdout.fnmatch_lines(
        [
            "isolation: --isolation-mode=file breaks it (the test needs the other file's "
            "state): they are in different files (checked: test_v.py::test_needs_it failed)"
        ]
    )


def test_a_victim_that_is_not_order_dependent(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a=FILLER, test_v="def test_victim(): assert True\n")
    result = find(pytester, "test_v.py::test_victim")
    assert result.ret == 1
    assert lines(result) == [
        "isolation: test_v.py::test_victim: 2 tests in 1 file run before it",
        "isolation: alone it passes",
        "isolation: after all 2 tests before it, it passes too: not order-dependent in this order",
    ]


@pytest.mark.parametrize(
    ("victim", "message"),
    [
        (
            "test_v.py",
            "isolation: --isolation-find-polluter: 'test_v.py' is not a test's node id *",
        ),
        (
            "test_v.py::test_nope",
            "isolation: --isolation-find-polluter: test_v.py::test_nope is not collected by "
            "these paths and options (3 tests collected)",
        ),
    ],
)
def test_bad_victims_are_usage_errors(pytester: pytest.Pytester, victim: str, message: str) -> None:
    pytester.makepyfile(test_a=FILLER, test_v=VICTIM)
    result = find(pytester, victim)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_the_time_limit(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a=FILLER, test_v=VICTIM)
    result = find(pytester, "test_v.py::test_victim", "--isolation-find-timeout=0.01")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "isolation: gave up: --isolation-find-timeout=0.01 s ran out while collecting the "
            "tests and running them up to test_v.py::test_victim"
        ]
    )


def _probes(result: pytest.RunResult) -> int:
    return sum(1 for line in result.stdout.lines if line.startswith("isolation: probe "))


# -- the search on its own ------------------------------------------------------------


class Counter:
    """A predicate over sets of units, counting how many runs it took."""

    def __init__(self, culprits: set[str]) -> None:
        self.culprits = culprits
        self.runs = 0
        #: What the search noted before each round, and how many runs it had made.
        self.notes: list[tuple[str, int, int | None]] = []

    def note(self, text: str, most: int | None) -> None:
        self.notes.append((text, self.runs, most))

    def __call__(self, sets: Sequence[Sequence[Unit]]) -> list[bool]:
        self.runs += len(sets)
        return [self.culprits <= {n for unit in units for n in unit} for units in sets]


def units(count: int) -> list[Unit]:
    return [(f"t{i}",) for i in range(count)]


def test_split_is_contiguous_and_even() -> None:
    assert split(units(5), 2) == [units(5)[:3], units(5)[3:]]
    assert split(units(2), 5) == [[("t0",)], [("t1",)]]


@pytest.mark.parametrize("position", [0, 1, 150, 298, 299])
def test_one_culprit_in_300_takes_about_log2_runs(position: int) -> None:
    predicate = Counter({f"t{position}"})
    assert one(units(300), predicate, width=1) == (f"t{position}",)
    assert predicate.runs <= 10  # ceil(log2(300)) = 9, plus the check


def test_wider_probes_take_fewer_rounds() -> None:
    predicate = Counter({"t123"})
    assert one(units(300), predicate, width=3) == ("t123",)
    assert predicate.runs <= 3 * 5 + 1  # log4(300) < 5 rounds of 3


def test_a_pair_needs_the_minimal_set() -> None:
    predicate = Counter({"t3", "t40"})
    assert one(units(64), predicate, width=1) is None
    assert minimal(units(64), predicate) == [("t3",), ("t40",)]


@pytest.mark.parametrize("width", [1, 2, 3])
@pytest.mark.parametrize(("files", "tests"), [(1, 7), (2, 3), (5, 1), (3, 4), (30, 10)])
def test_every_note_bounds_the_probes_left(width: int, files: int, tests: int) -> None:
    """Issue 49, item 6: for one culprit anywhere, what the search announces
    before each round is never below the probes it then runs, and never
    grows; the culprit found is the same."""
    suite = [tuple(f"f{f}::t{t}" for t in range(tests)) for f in range(files)]
    for culprit in [nodeid for unit in suite for nodeid in unit]:
        predicate = Counter({culprit})
        assert search(suite, predicate, width, predicate.note) == [culprit]
        limits = [runs + most for _, runs, most in predicate.notes if most is not None]
        assert len(limits) == len(predicate.notes) > 0
        assert predicate.runs <= min(limits)
        assert limits == sorted(limits, reverse=True)


@pytest.mark.parametrize(
    "culprits", [{"f1::t2", "f3::t0"}, {"f2::t1", "f2::t3"}], ids=["across-files", "one-file"]
)
def test_a_search_for_a_set_has_no_bound(culprits: set[str]) -> None:
    suite = [tuple(f"f{f}::t{t}" for t in range(4)) for f in range(5)]
    predicate = Counter(culprits)
    assert sorted(search(suite, predicate, 1, predicate.note)) == sorted(culprits)
    unbounded = [text for text, _, most in predicate.notes if most is None]
    assert unbounded
    assert all("looking for a set" in text or "the file left" in text for text in unbounded)


SESSIONS_CONFTEST = """
import os, time

LOG = os.path.join(os.path.dirname(__file__), "sessions.log")

def pytest_configure(config):
    if os.environ.get("PYTEST_ISOLATION_PROBE"):
        with open(LOG, "a") as log:
            log.write(f"start {os.getpid()} {time.monotonic()}\\n")
        time.sleep(0.2)

def pytest_unconfigure(config):
    if os.environ.get("PYTEST_ISOLATION_PROBE"):
        with open(LOG, "a") as log:
            log.write(f"end {os.getpid()} {time.monotonic()}\\n")
"""


@pytest.mark.parametrize(("args", "overlap"), [((), False), (("--isolation-probes=2",), True)])
def test_probes_run_one_at_a_time_unless_asked(
    pytester: pytest.Pytester, args: tuple[str, ...], overlap: bool
) -> None:
    # Probes share the working tree: a test that writes a shared file misleads
    # a probe running beside it (the pollution corpus's h5nav case).
    pytester.makeconftest(SESSIONS_CONFTEST)
    pytester.makepyfile(
        test_a="import os\n\ndef test_polluter():\n    os.environ['POLLUTED'] = '1'\n",
        test_b="def test_other():\n    pass\n",
        test_v="import os\n\ndef test_victim():\n    assert 'POLLUTED' not in os.environ\n",
    )
    result = find(pytester, "test_v.py::test_victim", *args)
    assert result.ret == 0, result.stdout.str()
    running, most = 0, 0
    events = [line.split() for line in (pytester.path / "sessions.log").read_text().splitlines()]
    for kind, _, _ in sorted(events, key=lambda event: float(event[2])):
        running += 1 if kind == "start" else -1
        most = max(most, running)
    assert (most > 1) is overlap, events


def test_search_goes_files_then_tests() -> None:
    files = [tuple(f"f{f}::t{t}" for t in range(10)) for f in range(30)]
    predicate = Counter({"f17::t4"})
    assert search(files, predicate, width=1) == ["f17::t4"]
    assert predicate.runs <= 12  # log2(30) + log2(10) + 2 checks


def test_the_finder_from_a_subdirectory_takes_what_pytest_prints_there(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 31, item 3: from ``tests/``, ``pytest -v`` prints
    ``test_v.py::test_victim``; the finder accepted it, never ran it, and gave
    a verdict ("alone it not run", "not order-dependent")."""
    tests = pytester.mkdir("tests")
    for name, source in (("test_c", POLLUTER), ("test_d", FILLER), ("test_v", VICTIM)):
        (tests / f"{name}.py").write_text(source)
    pytester.makeini("[pytest]\n")
    monkeypatch.chdir(tests)
    shown = run_guard(pytester, "-v", "-p", "no:randomly", "test_v.py")
    shown.stdout.fnmatch_lines(["test_v.py::test_victim PASSED*"])
    result = find(pytester, "test_v.py::test_victim")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(
        [
            "isolation: alone it passes",
            "isolation: polluter: tests/test_c.py::test_sets_mode *",
            "isolation: reproduce: pytest test_c.py::test_sets_mode test_v.py::test_victim *",
        ]
    )


def test_the_finder_from_a_subdirectory_without_an_ini_file(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 46, item 13: without an ini file the rootdir comes from the
    paths given (``..``); a probe that ran ``test_v.py::test_victim`` alone
    got another rootdir, other node ids, and the victim "did not run when
    asked for alone".  Probes run with the user's run's rootdir."""
    tests = pytester.mkdir("tests")
    for name, source in (("test_c", POLLUTER), ("test_v", VICTIM)):
        (tests / f"{name}.py").write_text(source)
    (pytester.path / "test_a.py").write_text(FILLER)
    monkeypatch.chdir(tests)
    result = find(pytester, "test_v.py::test_victim", "..")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(
        [
            "isolation: tests/test_v.py::test_victim: 5 tests in 2 files run before it",
            "isolation: alone it passes",
            "isolation: polluter: tests/test_c.py::test_sets_mode *",
            "isolation: reproduce: pytest test_c.py::test_sets_mode test_v.py::test_victim *",
        ]
    )
    command = next(line for line in result.stdout.lines if "reproduce: pytest " in line)
    again = run_guard(pytester, *command.split("reproduce: pytest ")[1].split())
    again.assert_outcomes(passed=1, failed=1)


def test_a_victim_no_probe_can_run_is_a_usage_error(pytester: pytest.Pytester) -> None:
    """A victim that is collected but that no probe can run alone (a
    conftest deselects it when asked for alone) is an error, not a verdict."""
    pytester.makeconftest(
        """
        def pytest_collection_modifyitems(config, items):
            if len(items) == 1:
                config.hook.pytest_deselected(items=list(items))
                items.clear()
        """
    )
    pytester.makepyfile(test_c=POLLUTER, test_v=VICTIM)
    result = find(pytester, "test_v.py::test_victim")
    assert result.ret == 4
    assert "alone it not run" not in result.stdout.str()
    result.stderr.fnmatch_lines(["*test_v.py::test_victim did not run when asked for alone*"])


def test_several_independent_polluters_are_each_found(pytester: pytest.Pytester) -> None:
    """Issue 31, item 4: the finder stopped at the first of several tests
    that each break the victim; after fixing that one the victim still
    failed, and nothing had said there could be more."""
    other = POLLUTER.replace("test_sets_mode", "test_also_sets_mode")
    pytester.makepyfile(test_a=FILLER, test_c=POLLUTER, test_d=FILLER, test_e=other, test_v=VICTIM)
    result = find(pytester, "test_v.py::test_victim", "--isolation-find-json=found.json")
    assert result.ret == 0, result.stderr.str()
    result.stdout.fnmatch_lines(
        [
            "isolation: polluter: test_*::test_*sets_mode *",
            "isolation: probe *: without it, after the other 9 tests it still fails: another "
            "polluter; bisecting again",
            "isolation: polluter: test_*::test_*sets_mode *",
            "isolation: probe *: without them, after the other 8 tests it passes: no other *",
        ]
    )
    found = json.loads((pytester.path / "found.json").read_text())
    everyone = [*found["culprits"], *(nodeid for more in found["others"] for nodeid in more)]
    assert sorted(everyone) == ["test_c.py::test_sets_mode", "test_e.py::test_also_sets_mode"]


@pytest.mark.parametrize("flag", ["--sw-reset", "--stepwise-reset", "--sw-skip"])
def test_stepwise_options_are_left_out_of_the_probes(pytester: pytest.Pytester, flag: str) -> None:
    """Probes run without pytest's cache, and so without its stepwise plugin,
    whose options they would not know."""
    if flag.endswith("-reset") and pytest.version_tuple < (8, 4):
        pytest.skip(f"{flag} is new in pytest 8.4")
    pytester.makepyfile(test_c=POLLUTER, test_v=VICTIM)
    result = find(pytester, "test_v.py::test_victim", flag)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["isolation: polluter: test_c.py::test_sets_mode *"])


def test_the_order_is_pytest_randomly_s_with_the_run_s_seed(pytester: pytest.Pytester) -> None:
    """With pytest-randomly on, the tests before the victim are those its
    seed puts there, as in the run that failed (each finder run drew a new
    seed for its order)."""
    pytest.importorskip("pytest_randomly")
    pytester.makepyfile(
        **{f"test_{name}": FILLER for name in "abdefgh"}, test_c=POLLUTER, test_v=VICTIM
    )
    seed = "--randomly-seed=1234"
    listed = pytester.runpytest_subprocess(
        "-p", "randomly", seed, "--collect-only", "-q", timeout=TIMEOUT
    )
    order = [line for line in listed.outlines if "::" in line]
    before = order[: order.index("test_v.py::test_victim")]
    for _ in range(2):  # the same answer each time
        result = pytester.runpytest_subprocess(
            "-p",
            "isolation",
            "-p",
            "randomly",
            seed,
            "--isolation-find-polluter=test_v.py::test_victim",
            timeout=TIMEOUT,
        )
        files = len({nodeid.split("::")[0] for nodeid in before})
        expected = f"isolation: test_v.py::test_victim: {len(before)} test* in {files} file*"
        result.stdout.fnmatch_lines([expected + " run before it"])
