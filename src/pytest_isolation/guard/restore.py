"""Putting back what a window changed: patchers stopped first (that puts
back all they changed, as their author meant), forgotten
``pytest.MonkeyPatch`` objects undone, the rest key by key where
:mod:`.safety` says it is safe; never a closed resource, never a module
re-imported (code elsewhere already holds its new classes)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from pytest_isolation.core.kinds import WindowKind
from pytest_isolation.core.records import Leak
from pytest_isolation.guard.interpreter import StreamState
from pytest_isolation.guard.messages import describe
from pytest_isolation.guard.messages import fold_reimports
from pytest_isolation.guard.messages import part_of_reimport
from pytest_isolation.guard.messages import reimported_modules
from pytest_isolation.guard.mocks import forgotten_monkeypatches
from pytest_isolation.guard.mocks import monkeypatch_records
from pytest_isolation.guard.mocks import start_site
from pytest_isolation.guard.mocks import stop_patches
from pytest_isolation.guard.recorders import Recorders
from pytest_isolation.guard.safety import kept_because
from pytest_isolation.guard.sites import BY_MONKEYPATCH
from pytest_isolation.guard.state import Category
from pytest_isolation.guard.state import is_closed
from pytest_isolation.guard.verdict import Verdict
from pytest_isolation.guard.windows import Found
from pytest_isolation.guard.windows import Seen

#: Categories whose leaks a forgotten ``pytest.MonkeyPatch`` can explain.
MONKEYPATCHABLE = frozenset({"env", "attribute", "cwd", "import", "sys.modules"})
MONKEYPATCH_HINT = "call its undo(), or use the monkeypatch fixture or MonkeyPatch.context()"


class Restorer:
    """Puts a window's leaks back and describes each; under the ``watch``
    policy (``--isolation-twice`` with the guard off) it does nothing."""

    def __init__(self, verdict: Verdict, recorders: Recorders, restores: bool) -> None:
        self.verdict = verdict
        self.recorders = recorders
        self.restores = restores

    def restore(
        self,
        owner: str,
        kind: WindowKind,
        found: list[Found],
        seen: Seen | None = None,
        saved: Mapping[Category, object] | None = None,
    ) -> list[Leak]:
        """Put leaked state back: patchers stopped, forgotten MonkeyPatches
        undone, the rest key by key."""
        if not found or not self.restores:
            return []  # the watch policy reports nothing: no message to build
        leaks = []
        sites = {
            id(item.new): start_site(item.new) for item in found if item.category.name == "mock"
        }
        stop_patches([item.new for item in found if item.category.name == "mock"])
        undone = set()
        routines = [self.verdict.routine(item) for item in found]
        candidates = [  # a heap scan: only for what could be a MonkeyPatch's leak
            (item.category.name, item.key, item.old)
            for item, routine in zip(found, routines, strict=True)
            if item.category.name in MONKEYPATCHABLE and not routine
        ]
        if candidates:
            for patcher in forgotten_monkeypatches(candidates):
                undone |= {(category, key) for category, key, _ in monkeypatch_records(patcher)}
                patcher.undo()
        reimported = reimported_modules(found)
        contents = (saved or {}).get(self.verdict.containers) or {}
        assert isinstance(contents, dict)
        for item, routine in zip(found, routines, strict=True):
            hint = item.category.hint
            via = (item.category.name, item.key) in undone
            # A re-import is reported, never undone: code elsewhere already
            # holds the new classes (Django REST framework's api_settings
            # resolved its filter backends to them), and old and new would mix.
            reimport = part_of_reimport(item, reimported)
            handled = via or reimport or item.category.name == "mock"
            closed = not handled and is_closed(item.old)
            kept = (
                ""
                if handled or closed
                else kept_because(
                    item,
                    routine,
                    contents,
                    self._bound_by_a_test(item),
                    self.verdict.containers.held_by_an_object(item.key),
                )
            )
            if not (handled or closed or kept):
                try:
                    item.category.restore(item.key, item.old)
                except Exception as error:
                    hint = f"could not be restored ({error!r}); {hint}"
            site = self.recorders.site_of(item, sites.get(id(item.new)), seen)
            leak = describe(owner, kind, item, hint, site, routine)
            if kept:
                what = leak.what if kept == "kept" else f"{leak.what}, {kept}"
                leak = dataclasses.replace(leak, what=what, restored=False)
            elif reimport:
                leak = dataclasses.replace(leak, restored=False)
            elif closed:
                what = f"{leak.what}; the old value is closed, so it was not put back"
                leak = dataclasses.replace(leak, what=what, restored=False)
            elif isinstance(item.new, StreamState) and item.new.closed:
                # Rebinding the name does not reopen what the test closed
                # (pytest's capture file: every later test's capture fails).
                what = f"{leak.what}; the test closed the stream, which cannot be reopened"
                leak = dataclasses.replace(leak, what=what, restored=False)
            if via or leak.site.endswith(BY_MONKEYPATCH):
                site = leak.site.removesuffix(BY_MONKEYPATCH)
                what = f"{leak.what} through a pytest.MonkeyPatch never undone"
                leak = dataclasses.replace(leak, what=what, site=site, hint=MONKEYPATCH_HINT)
            leaks.append((item, leak))
        return fold_reimports(leaks)

    def _bound_by_a_test(self, item: Found) -> bool:
        """An attribute the test module's own code binds (``Registry.PLUGINS = {...}``)."""
        if item.category.name != "attribute":
            return False
        where = getattr(item.category, "where", {}).get(item.key)
        return isinstance(where, tuple) and self.verdict.watch.assigned_by_a_test(*where)
