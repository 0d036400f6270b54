"""Where a leak that no hook saw was made (issue 49 item 3): a class
attribute, a project module's global, an item of ``sys.modules`` or of a
test module's constant get the line of the test's (or its fixture's, or its
module's top-level) statement that wrote them; a write made elsewhere says
which test it was set during."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_guard
from pytest_isolation.core.records import Leak
from pytest_isolation.guard.located import Scope
from pytest_isolation.guard.located import Sources

APP = {
    "app/__init__.py": "",
    "app/config.py": (
        "DEBUG = False\n\nclass Settings:\n    level = 1\n\nclass Theme:\n    colour = 'blue'\n"
    ),
    "app/helpers.py": "from app import config\n\ndef turn_on():\n    config.DEBUG = True\n",
}


def make_app(pytester: pytest.Pytester) -> None:
    for name, text in APP.items():
        path = pytester.path / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)


def test_each_write_no_hook_sees_gets_its_test_s_line(pytester: pytest.Pytester) -> None:
    make_app(pytester)
    pytester.makepyfile(
        test_writes="""
        import sys

        import pytest

        from app import config
        from app.config import Settings, Theme

        sys.modules["fake_backend"] = object()

        @pytest.fixture
        def settings():
            Settings.level = 3
            yield

        def test_global():
            x = 1
            config.DEBUG = "yes"

        def test_setattr():
            setattr(Theme, "colour", "red")

        def test_through_a_fixture(settings):
            pass

        def test_sys_modules():
            sys.modules.pop("app.config")
        """
    )
    result = run_guard(pytester, "-p", "no:randomly")
    result.stdout.fnmatch_lines_random(
        [
            "[[]attribute[]] app.config.DEBUG (was False, now 'yes'), at test_writes.py:17",
            "[[]attribute[]] app.config.Theme.colour (was 'blue', now 'red'), at test_writes.py:20",
            "[[]attribute[]] app.config.Settings.level (was 1, now 3), at test_writes.py:12",
            "[[]sys.modules[]] sys.modules[[]'app.config'[]] (was <module *>, now unset), "
            "at test_writes.py:26",
            "[[]sys.modules[]] sys.modules[[]'fake_backend'[]] (was unset, now <object *>), "
            "at test_writes.py:8 (not undone)",
        ]
    )
    assert "set during" not in result.stdout.str()


def test_a_write_made_elsewhere_says_which_test_it_was_set_during(
    pytester: pytest.Pytester,
) -> None:
    make_app(pytester)
    pytester.makepyfile(
        test_alias="""
        from app import config, helpers

        def test_alias():
            cfg = config
            cfg.DEBUG = 1

        def test_helper():
            helpers.turn_on()
        """
    )
    result = run_guard(pytester, "-p", "no:randomly")
    result.stdout.fnmatch_lines(
        [
            "[[]attribute[]] app.config.DEBUG (was False, now 1)",
            "  set during test_alias.py::test_alias and 1 more test",
        ]
    )


def test_a_patch_started_at_import_gets_its_line(pytester: pytest.Pytester) -> None:
    # The test module imports unittest.mock first: its start() ran before the
    # guard could record where (the "at tests/test_m.py" with no line).
    pytester.makepyfile(
        test_m="""
        import json
        from unittest import mock

        mock.patch("json.dumps", lambda *a, **k: "x").start()
        patcher = mock.patch.object(json, "loads")
        patcher.start()

        def test_one():
            pass
        """
    )
    result = run_guard(pytester, "-p", "no:randomly")
    result.stdout.fnmatch_lines_random(
        [
            "[[]mock[]] an unstopped mock patch of json.dumps, at test_m.py:4 (not undone)",
            "[[]mock[]] an unstopped mock patch of json.loads, at test_m.py:6 (not undone)",
        ]
    )


def leak(category: str, key: str) -> Leak:
    return Leak("t", "test", category, key, "what")


def site(source: str, tmp_path: Path, category: str, key: str, first: int | None) -> str:
    path = tmp_path / "test_a.py"
    path.write_text(source)
    return Sources().site(leak(category, key), [Scope(path, first)], lambda p: Path(p).name)


SOURCE = """\
import sys
sys.modules.update({"a": 1})

def test_one():
    obj.Cls.attr = 1
    obj.Cls.attr = 2
    REG["k"] += 1
    del other.attr

@decorated
def test_two():
    setattr(Cls, "attr", 3)

def test_three():
    patcher = mock.patch("pkg.mod.func")
    patcher.start()
    mock.patch.dict(os.environ, {"A": "1"}).start()
    mock.patch.multiple("pkg.mod", func=1).start()
"""


@pytest.mark.parametrize(
    ("category", "key", "first", "expected"),
    [
        ("attribute", "pkg.mod.Cls.attr", 4, "test_a.py:6"),  # the last write in the test
        ("attribute", "pkg.mod.Cls.attr", 10, "test_a.py:12"),  # a decorated test
        ("attribute", "pkg.other.attr", 4, "test_a.py:8"),  # del
        ("attribute", "pkg.Elsewhere.attr", 4, ""),  # another owner
        ("container", "pkg.mod.REG", 4, "test_a.py:7"),
        ("sys.modules", "a", None, "test_a.py:2"),  # at import: the top level
        ("sys.modules", "a", 4, ""),  # not inside the test
        ("env", "A", 4, ""),  # its site comes from the audit hook, not the source
        ("mock", "pkg.mod.func", 14, "test_a.py:16"),  # start() of a named patcher
        ("mock", "os.environ (patch.dict)", 14, "test_a.py:17"),
        ("mock", "pkg.mod.func (patch.multiple)", 14, ""),  # not matched: no line made up
        ("mock", "pkg.mod.func", 4, ""),  # started in another test
    ],
)
def test_the_site_read_from_the_source(
    tmp_path: Path, category: str, key: str, first: int | None, expected: str
) -> None:
    assert site(SOURCE, tmp_path, category, key, first) == expected
