"""Failure explanations: a patch that did not reach the code under test.

``mock.patch("subprocess.run")`` replaces the attribute of ``subprocess``;
a module that did ``from subprocess import run`` before keeps calling the
original.  When a test fails while such a patch was active, and a module
under the rootdir still holds the original under its own name, the failure
report gets a section naming that module and the target to patch instead.
Nothing is added to passing tests.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Generator
from typing import Any

import pytest

from pytest_isolation.guard.mocks import active_patches
from pytest_isolation.guard.mocks import monkeypatch_setattrs

#: Values too common to mean anything when found by identity.
_PLAIN = (int, float, str, bytes, bool, type(None))


@dataclasses.dataclass(frozen=True)
class Patched:
    how: str
    target: Any
    attribute: str
    original: Any
    #: What the patch put in place (a mock knows whether it was called).
    replacement: Any = None

    @property
    def target_name(self) -> str:
        target = self.target
        if isinstance(target, type):
            return f"{target.__module__}.{target.__qualname__}"
        return str(getattr(target, "__name__", type(target).__name__))


#: Patches whose ``with`` block or decorator ended by an exception, this test.
_exited: list[Patched] = []
_wrapped = False


def _wrap_patch_exit() -> None:
    """Record ``mock.patch`` objects left by an exception (``with`` blocks and
    decorators are undone before pytest makes the report).

    Private stdlib detail, unavoidable: ``unittest.mock._patch`` is the class
    behind ``patch``, ``patch.object`` and ``patch.multiple``, and keeps the
    patched object, the attribute and the original in ``target``,
    ``attribute`` and ``temp_original`` until it exits;
    ``tests/test_explain.py`` fails loudly if that changes.
    """
    global _wrapped
    module = sys.modules.get("unittest.mock")
    if module is None or _wrapped:
        return
    patch_class = module._patch
    original_exit = patch_class.__exit__
    default = module.DEFAULT

    def __exit__(self: Any, *exc_info: Any) -> Any:
        if exc_info and exc_info[0] is not None:
            original = getattr(self, "temp_original", default)
            if original is not default and hasattr(self, "target"):
                replacement = getattr(self.target, self.attribute, None)
                _exited.append(
                    Patched("mock.patch", self.target, self.attribute, original, replacement)
                )
        return original_exit(self, *exc_info)

    patch_class.__exit__ = __exit__
    _wrapped = True


def _active(item: pytest.Item) -> list[Patched]:
    """Patches still in place: started mock patches (and pytest-mock's), and
    the test's ``monkeypatch.setattr`` calls."""
    found = []
    for patch in active_patches():
        original = getattr(patch, "temp_original", None)
        if hasattr(patch, "target") and hasattr(patch, "attribute"):
            replacement = getattr(patch.target, patch.attribute, None)
            found.append(
                Patched("mock.patch", patch.target, patch.attribute, original, replacement)
            )
    funcargs = getattr(item, "funcargs", {})
    patcher = funcargs.get("monkeypatch")
    if isinstance(patcher, pytest.MonkeyPatch):
        for target, name, old in monkeypatch_setattrs(patcher):
            replacement = getattr(target, name, None)
            found.append(Patched("monkeypatch.setattr", target, name, old, replacement))
    return found


def holders(patched: Patched, root: str) -> list[str]:
    """``module.name`` of every module under ``root`` that still holds the original."""
    original = patched.original
    if isinstance(original, _PLAIN):
        return []
    found = []
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or not os.path.abspath(path).startswith(root):
            continue
        try:
            names = list(vars(module).items())
        except TypeError:
            continue
        for name, value in names:
            if value is original and not (module is patched.target and name == patched.attribute):
                found.append(f"{module.__name__}.{name}")
    return sorted(found)


def relevant(
    patched: Patched, names: list[str], excinfo: pytest.ExceptionInfo[BaseException] | None
) -> bool:
    """Whether the missed patch can explain this failure: its mock was never
    called (the code under test used another name), or the failure passed
    through a module that holds the original."""
    if getattr(patched.replacement, "called", None) is False:
        return True
    if excinfo is None:
        return False
    holders_globals = {
        id(vars(module))
        for module in (sys.modules.get(name.rpartition(".")[0]) for name in names)
        if module is not None
    }
    return any(id(entry.frame.f_globals) in holders_globals for entry in excinfo.traceback)


def explain(patched: Patched, names: list[str]) -> tuple[str, str]:
    what = f"{patched.target_name}.{patched.attribute}"
    title = f"isolation: patch did not reach {', '.join(names)}"
    lines = [
        f"{patched.how} replaced {what} while the test ran, but these names still refer "
        "to the original:"
    ]
    defined_in = getattr(patched.original, "__module__", None)
    for name in names:
        module = name.rpartition(".")[0]
        if module == defined_in:  # the target re-exports it: the holder is its home
            lines.append(
                f"  {name} (where it is defined; {patched.target_name} imports it from "
                f"{module}, and code in {module} uses its own name)"
            )
        else:
            lines.append(
                f"  {name} (bound before the patch, e.g. by "
                f"'from {patched.target_name} import {patched.attribute}' in {module})"
            )
    example = names[0]
    lines.append(
        f"Code that uses these names never sees the patch: patch where the name is used, "
        f"e.g. mock.patch({example!r}) instead of mock.patch({what!r})."
    )
    return title, "\n".join(lines)


class PatchReach:
    def __init__(self, config: pytest.Config) -> None:
        self.root = os.path.join(os.path.abspath(str(config.rootpath)), "")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self) -> None:
        _exited.clear()
        _wrap_patch_exit()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if report.when == "call" and report.failed:
            seen: set[tuple[int, str]] = set()
            for patched in [*_exited, *_active(item)]:
                key = (id(patched.target), patched.attribute)
                if key in seen:
                    continue
                seen.add(key)
                names = holders(patched, self.root)
                if names and relevant(patched, names, call.excinfo):
                    report.sections.append(explain(patched, names))
        return report
