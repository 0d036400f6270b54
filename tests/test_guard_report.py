"""What a person reads of the guard: one warning per changed thing per run,
in file mode as in a plain run; one object under many names is one key;
one summary line per object; long lists say what differs (issue 29)."""

from __future__ import annotations

import pytest
from tests.conftest import GUARD_MODES
from tests.conftest import TIMEOUT
from tests.conftest import warned

REGISTRY = """
class Registry:
    def __init__(self):
        self.generation = 0
        self.mode = "a"
        self.size = 1

registry = Registry()
"""


def _registry_suite(pytester: pytest.Pytester, files: int) -> None:
    """A project object that many modules import by name, changed by a test
    in each of ``files`` files, each reaching it through another module."""
    modules = {f"tools/via{n}.py": "from tools.registry import registry\n" for n in range(files)}
    pytester.makepyfile(
        **{"tools/__init__.py": "", "tools/registry.py": REGISTRY, **modules},
        **{
            f"test_{n}": f"""
                from tools.via{n} import registry

                def test_changes_it():
                    registry.mode = "b"
            """
            for n in range(files)
        },
    )


@pytest.mark.parametrize("mode", sorted(GUARD_MODES))
def test_one_object_under_many_names_warns_once_per_run(
    pytester: pytest.Pytester, mode: str
) -> None:
    _registry_suite(pytester, files=4)
    result = pytester.runpytest_subprocess(*GUARD_MODES[mode], timeout=TIMEOUT)
    result.assert_outcomes(passed=4)
    assert warned(result) == 1
    result.stdout.fnmatch_lines(
        [
            "*LeakedStateWarning: test_*.py::test_changes_it leaked "
            "tools.registry.registry.mode (was 'a', now 'b'), at test_*.py:*",
            "*isolation: * by 4 tests*",
            "[[]attribute] tools.registry.registry.mode (was 'a', now 'b'), at test_*.py:*",
            "  by test_*.py::test_changes_it and 3 more tests",
        ]
    )


def test_the_attributes_of_one_object_are_one_summary_line(pytester: pytest.Pytester) -> None:
    _registry_suite(pytester, files=0)
    pytester.makepyfile(
        test_many="""
        from tools.registry import registry

        def test_changes_three():
            registry.mode = "b"
            registry.size = 9
            registry.generation = 5
        """
    )
    result = pytester.runpytest_subprocess("-p", "isolation", "-p", "leakwarnings", timeout=TIMEOUT)
    result.assert_outcomes(passed=1)
    assert warned(result) == 3
    result.stdout.fnmatch_lines(
        [
            "[[]attribute] tools.registry.registry: 3 attributes changed (generation, mode, size)",
            "  by test_many.py::test_changes_three",
        ]
    )


def test_a_long_list_says_what_differs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_meta="""
        import sys

        class Finder:
            def find_spec(self, *args):
                return None

        def test_appends_a_finder():
            sys.meta_path.append(Finder())
        """
    )
    result = pytester.runpytest_subprocess("-p", "isolation", "-p", "leakwarnings", timeout=TIMEOUT)
    result.assert_outcomes(passed=1)
    assert warned(result) == 1
    result.stdout.fnmatch_lines(["[[]import] sys.meta_path (added <test_meta.Finder object at *>)"])
