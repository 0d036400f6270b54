"""File mode beside the plugins real suites run, each in every start method:
pytest-cov, pytest-timeout, pytest-randomly, pytest-rerunfailures, pyfakefs,
pytest-mock, pytest-asyncio and hypothesis."""

from __future__ import annotations

import re
import sys

import pytest

from conftest import run_file_mode
from conftest import run_guard
from conftest import run_plain


def needs(module: str) -> None:
    pytest.importorskip(module)


# -- pytest-cov ---------------------------------------------------------------------

CALC = """
def add(a, b):
    return a + b


def sub(a, b):
    return a - b


def mul(a, b):
    if a == 0:
        return 0
    return a * b
"""


def missing(result: pytest.RunResult) -> str:
    line = next(line for line in result.outlines if line.startswith("mypkg/calc.py"))
    return re.split(r"\s+", line, maxsplit=4)[-1]


@pytest.mark.parametrize("workers", [(), ("-p", "xdist", "-n", "2")], ids=["one", "xdist"])
def test_pytest_cov_sees_the_same_lines(
    pytester: pytest.Pytester, start: str, workers: tuple[str, ...]
) -> None:
    needs("pytest_cov")
    if workers:
        needs("xdist")
    pytester.mkpydir("mypkg").joinpath("calc.py").write_text(CALC)
    pytester.makepyfile(
        test_add="from mypkg.calc import add\ndef test_add(): assert add(1, 2) == 3\n",
        test_mul="from mypkg.calc import mul\ndef test_mul(): assert mul(2, 3) == 6\n",
    )
    args = ("-p", "pytest_cov", "--cov=mypkg", "--cov-report=term-missing", *workers)
    plain = run_plain(pytester, *args)
    isolated = run_file_mode(pytester, start, *args)
    assert missing(plain) == "7, 12"
    assert missing(isolated) == missing(plain)
    assert isolated.ret == plain.ret == 0


# -- pytest-timeout -------------------------------------------------------------------


@pytest.mark.parametrize("method", ["signal", "thread"])
def test_pytest_timeout_in_children(pytester: pytest.Pytester, start: str, method: str) -> None:
    needs("pytest_timeout")
    pytester.makepyfile(
        test_slow="import time\ndef test_slow(): time.sleep(30)\ndef test_after(): pass\n",
        test_other="def test_other(): pass\n",
    )
    result = run_file_mode(
        pytester, start, "-p", "pytest_timeout", "--timeout=1", f"--timeout-method={method}"
    )
    result.assert_outcomes(passed=2, failed=1)
    if method == "signal":  # the test fails in its child, which goes on
        result.stdout.fnmatch_lines(["*Failed: Timeout (>1.0s) from pytest-timeout*"])
    else:  # pytest-timeout ends the process: the child's crash is reported, the file resumes
        result.stdout.fnmatch_lines(
            [
                "*isolation: over pytest-timeout's 1 s limit: its thread method ended the "
                "process (exit code 1) while running test_slow (call), the process of "
                "test_slow.py*",
            ]
        )
        result.stdout.fnmatch_lines(["*+ Timeout +*"])  # pytest-timeout's stack dump
    result.stdout.no_fnmatch_line("*leaked*")


# -- pytest-randomly ------------------------------------------------------------------


def test_pytest_randomly_orders_as_without_file_mode(pytester: pytest.Pytester, start: str) -> None:
    needs("pytest_randomly")
    body = "def test_1(): pass\ndef test_2(): pass\nclass TestK:\n    def test_x(self): pass\n"
    pytester.makepyfile(**{f"test_{name}": body for name in "abcdef"})
    pkg = pytester.mkpydir("pkg")
    pkg.joinpath("test_in_pkg.py").write_text(body)

    def order(result: pytest.RunResult) -> list[str]:
        return [line.split()[0] for line in result.outlines if " PASSED" in line]

    for seed in ("1", "2"):
        plain = run_plain(pytester, "-p", "randomly", f"--randomly-seed={seed}", "-v")
        isolated = run_file_mode(pytester, start, "-p", "randomly", f"--randomly-seed={seed}", "-v")
        assert order(isolated) == order(plain)
        assert len(order(plain)) == 21
        assert isolated.stdout.str().count("randomly-seed") == 1


# -- pytest-rerunfailures -------------------------------------------------------------


def test_pytest_rerunfailures_in_children(
    pytester: pytest.Pytester, start: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    needs("pytest_rerunfailures")
    monkeypatch.setenv("RERUN_MARK", str(pytester.path.parent / f"{pytester.path.name}.mark"))
    pytester.makepyfile(
        test_flaky="""
        import os, pathlib

        def test_once():
            mark = pathlib.Path(os.environ["RERUN_MARK"])
            if not mark.exists():
                mark.write_text("")
                assert False
        """
    )
    result = run_file_mode(pytester, start, "-p", "pytest_rerunfailures", "--reruns=2", "-v")
    assert result.parseoutcomes() == {"passed": 1, "rerun": 1}
    result.stdout.fnmatch_lines(
        ["test_flaky.py::test_once RERUN*", "test_flaky.py::test_once PASSED*"]
    )


# -- plugins whose tests must simply pass --------------------------------------------------


@pytest.mark.parametrize(
    ("module", "plugin", "test"),
    [
        (
            "pyfakefs",
            "pyfakefs.pytest_plugin",
            "import os\ndef test_fake(fs):\n    fs.create_file('/x/y.txt', contents='z')\n"
            "    assert open('/x/y.txt').read() == 'z'\n    assert os.path.exists('/x')\n",
        ),
        (
            "pytest_mock",
            "pytest_mock",
            "import os\ndef test_mock(mocker):\n    mocker.patch('os.getcwd', return_value='/m')\n"
            "    assert os.getcwd() == '/m'\n",
        ),
        (
            "pytest_asyncio",
            "pytest_asyncio.plugin",
            "import asyncio, pytest\n@pytest.mark.asyncio\nasync def test_async():\n"
            "    await asyncio.sleep(0)\n",
        ),
        (
            "hypothesis",
            "_hypothesis_pytestplugin",
            "from hypothesis import given, strategies as st\n@given(st.integers())\n"
            "def test_prop(n):\n    assert n + 0 == n\n",
        ),
    ],
    ids=["pyfakefs", "pytest-mock", "pytest-asyncio", "hypothesis"],
)
def test_plugin_tests_pass_in_file_mode(
    pytester: pytest.Pytester, start: str, module: str, plugin: str, test: str
) -> None:
    needs(module)
    pytester.makepyfile(test_plugin=test, test_second=test.replace("def test_", "def test_2_"))
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    result = run_file_mode(pytester, start, "-p", plugin)
    result.assert_outcomes(passed=2)
    result.stdout.no_fnmatch_line("*leaked*")


def test_hypothesis_under_xdist_in_file_mode(pytester: pytest.Pytester) -> None:
    needs("hypothesis")
    needs("xdist")
    test = (
        "from hypothesis import given, strategies as st\n@given(st.text())\ndef test_t(s): pass\n"
    )
    pytester.makepyfile(**{f"test_h{n}": test for n in range(4)})
    result = run_file_mode(
        pytester, "fork", "-p", "xdist", "-n", "2", "-p", "_hypothesis_pytestplugin"
    )
    result.assert_outcomes(passed=4)
    assert (pytester.path / ".hypothesis").is_dir()
    assert run_guard(pytester, "-p", "_hypothesis_pytestplugin").ret == 0


def test_rerunfailures_server_thread_does_not_force_spawn(pytester: pytest.Pytester) -> None:
    """pytest-rerunfailures starts an idle server thread whenever pytest-xdist
    is installed; ``auto`` still forks beside it, and says so."""
    needs("pytest_rerunfailures")
    needs("xdist")
    pytester.makepyfile(test_one="def test_a(): pass\n")
    result = pytester.runpytest_subprocess(
        "-p",
        "xdist",
        "-p",
        "pytest_rerunfailures",
        "-p",
        "isolation",
        "--isolation-mode=file",
        timeout=120,
    )
    result.assert_outcomes(passed=1)
    if sys.platform == "linux":
        result.stdout.fnmatch_lines(
            [
                "isolation: file mode, * (start method fork: auto, beside pytest-rerunfailures' "
                "status-server thread)"
            ]
        )
