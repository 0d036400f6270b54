"""File mode is exact for what the fork shares (issue 30): a stream a
module bound at import, before the fork, stays usable and identical to the
child's ``sys.stdout``/``sys.stderr``, as pytest's global capture keeps it
for the whole of a plain run."""

from __future__ import annotations

import pytest

from conftest import FILE_MODE
from conftest import TIMEOUT

STREAMS = {
    "mymod.py": """
        import logging
        from sys import stdout, stderr
        handler = logging.StreamHandler()
    """,
    "conftest.py": "import mymod\n",
    "test_streams.py": """
        import logging
        import sys
        import mymod

        def test_the_bound_streams_are_the_test_s():
            assert mymod.stdout is sys.stdout
            assert mymod.stderr is sys.stderr
            assert mymod.handler.stream is sys.stderr

        def test_the_bound_streams_can_be_written():
            mymod.stdout.write("out\\n")
            mymod.stdout.flush()
            mymod.stderr.write("err\\n")
            mymod.handler.emit(logging.makeLogRecord({"msg": "logged"}))
            mymod.handler.flush()
            assert not mymod.stdout.closed and not mymod.handler.stream.closed

        def test_what_the_test_prints_is_its_own(capsys):
            print("mine")
            assert capsys.readouterr().out == "mine\\n"
    """,
}


@pytest.mark.parametrize("start", ["fork", "forkserver", "spawn"])
def test_a_stream_bound_at_import_is_the_child_s(pytester: pytest.Pytester, start: str) -> None:
    for name, source in STREAMS.items():
        pytester.makepyfile(**{name.removesuffix(".py"): source})
    oracle = pytester.runpytest_subprocess("-p", "no:isolation", timeout=TIMEOUT)
    oracle.assert_outcomes(passed=3)
    result = pytester.runpytest_subprocess(
        *FILE_MODE, f"--isolation-start={start}", timeout=TIMEOUT
    )
    result.assert_outcomes(passed=3)


def test_a_failing_test_s_output_is_reported_once(pytester: pytest.Pytester) -> None:
    """The child's capture files are its own: the parent's report of a
    failing test shows that test's output, and nothing the parent captured."""
    pytester.makepyfile(
        conftest="print('printed by the conftest at import')\n",
        test_one="""
        def test_fails():
            print("printed by the test")
            assert False
        """,
    )
    result = pytester.runpytest_subprocess(*FILE_MODE, "--isolation-start=fork", timeout=TIMEOUT)
    result.assert_outcomes(failed=1)
    assert result.stdout.lines.count("printed by the test") == 1  # under "Captured stdout call"
    assert "printed by the conftest at import" not in result.stdout.str()
