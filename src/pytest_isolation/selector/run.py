"""Running the selector: from the options to a decision, and the plugin that
carries a selection through the session.  Imported only when the selector
runs (see :mod:`pytest_isolation.selector.plugin`)."""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_isolation.core import options
from pytest_isolation.core import outputs
from pytest_isolation.core import pytest_private
from pytest_isolation.core.keys import COLLECT_IN_CHILD
from pytest_isolation.core.kinds import SelectorScope
from pytest_isolation.core.names import VERSION
from pytest_isolation.core.words import counted
from pytest_isolation.filemode.parent.nodes import ChildCollectionError
from pytest_isolation.filemode.parent.nodes import ChildTest
from pytest_isolation.filemode.parent.nodes import IsolatedFile
from pytest_isolation.filemode.parent.nodes import IsolatedFileItem
from pytest_isolation.record import store
from pytest_isolation.record.store import Record
from pytest_isolation.selector import decision as decide
from pytest_isolation.selector import inputs
from pytest_isolation.selector.decision import Caps
from pytest_isolation.selector.decision import Decision
from pytest_isolation.selector.graph import ImportGraph
from pytest_isolation.selector.graph import load_facts
from pytest_isolation.selector.options import CACHE_KEY
from pytest_isolation.selector.options import CAPS
from pytest_isolation.selector.options import DEFAULT_SCOPE
from pytest_isolation.selector.options import SCOPE_CHOICES
from pytest_isolation.selector.options import UNMAPPED_CHOICES
from pytest_isolation.selector.options import WORKER_KEY
from pytest_isolation.selector.options import gate_open
from pytest_isolation.selector.project import Project
from pytest_isolation.selector.project import build
from pytest_isolation.selector.recorded import STALE
from pytest_isolation.selector.recorded import RecordedScope
from pytest_isolation.selector.scopes import Found
from pytest_isolation.selector.scopes import Selection
from pytest_isolation.selector.scopes import select

__all__ = ["Selector", "record", "run_selector"]


@contextlib.contextmanager
def _refused() -> Iterator[None]:
    """A bad option or ini value is the selector's ``invalid_input`` refusal."""
    try:
        yield
    except pytest.UsageError as error:
        raise inputs.InvalidInput(str(error)) from None


def _caps(config: pytest.Config) -> Caps:
    """The caps given; an empty ini value leaves a cap at its default."""
    given = {
        dest.removeprefix("isolation_"): options.count(config, dest, expected="a whole number")
        for dest in CAPS
    }
    return Caps(**{name: cap for name, cap in given.items() if cap is not None})


def _cache(config: pytest.Config) -> pytest.Cache | None:
    """pytest's cache, before ``pytest_configure`` made ``config.cache``: the
    selector runs in ``pytest_cmdline_main`` (so a refusal runs nothing),
    before the cacheprovider's configure."""
    if config.pluginmanager.get_plugin("cacheprovider") is None:
        return None
    return pytest_private.cache_for_config(config)


def _read_stdin(config: pytest.Config) -> str:
    """Read stdin, which pytest's capturing holds from start-up on."""
    capman: Any = config.pluginmanager.get_plugin("capturemanager")
    if capman is None or not capman.is_globally_capturing():
        return sys.stdin.read()
    capman.suspend_global_capture(in_=True)
    try:
        return sys.stdin.read()
    finally:
        capman.resume_global_capture()
        capman.suspend_global_capture(in_=False)


def _testpaths(config: pytest.Config) -> list[str]:
    root = config.rootpath
    found: list[str] = []
    for entry in config.getini("testpaths"):
        if any(c in entry for c in "*?["):
            found += [os.path.relpath(p, root) for p in sorted(glob.glob(str(root / entry)))]
        else:
            found.append(entry)
    return [p.replace(os.sep, "/") for p in found]


def project_of(config: pytest.Config) -> Project:
    return build(
        config.rootpath,
        config.getini("norecursedirs"),
        config.getini("python_files"),
        _testpaths(config),
        config.getini("pythonpath"),
    )


def run_selector(config: pytest.Config) -> Decision:
    """The whole decision, before any collection; never raises for bad input."""
    scope = options.raw(config, "isolation_scope")[0] or DEFAULT_SCOPE
    decision = Decision(outcome=decide.INVALID_INPUT, scope=scope, caps=Caps())
    try:
        _decide(config, decision)
    except inputs.InvalidInput as error:
        decision.outcome = decide.INVALID_INPUT
        decision.message = f"isolation: {decide.INVALID_INPUT}: {error}"
    return decision


def _decide(config: pytest.Config, decision: Decision) -> None:
    with _refused():
        decision.caps = _caps(config)
        scope = options.choice(config, "isolation_scope", SCOPE_CHOICES, default=DEFAULT_SCOPE)
        decision.scope = scope
        unmapped = options.choice(config, "isolation_unmapped", UNMAPPED_CHOICES)
        decision.allow_empty = options.flag(config, "isolation_allow_empty")
        options.flag(config, "isolation_explain")  # checked now, read where it prints
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        given = " ".join(config.args)
        raise inputs.InvalidInput(
            f"test paths ({given}) cannot be combined with --isolation-for/--isolation-since: "
            "the selector chooses the test files; drop one of them"
        )
    root, cwd = config.rootpath, config.invocation_params.dir
    raw = inputs.read_for_values(
        config.getoption("isolation_for"), cwd, lambda: _read_stdin(config)
    )
    keys = [(*inputs.normalise(path, cwd, root), path) for path in raw]
    since = config.getoption("isolation_since")
    from_git: list[str] = []
    top = root
    if since:
        changed, top = inputs.changed_since(since, root)
        for path in changed:
            try:
                keys.append((*inputs.normalise(str(path), cwd, root), str(path)))
            except inputs.InvalidInput:
                continue  # changed outside the rootdir: not this suite's
            from_git.append(keys[-1][0])
    started = time.perf_counter()
    project = project_of(config)
    sources, triggers, warnings = inputs.expand(keys, project, unmapped, deleted=from_git)
    decision.sources = sources
    decision.warnings = warnings
    decision.phase = "select"
    if scope == "all" or triggers:
        if gate_open():
            decision.outcome = decide.SELECTED
            decision.scope = "all"
            # What the run will run, for the dry run's list and the record.
            decision.tests = {
                test: Found(test, "", 0, "all", (test,)) for test in project.tests_under("")
            }
            return
        why = (
            "--isolation-scope=all asks for the whole suite"
            if scope == "all"
            else f"{', '.join(triggers)} changed, which can change what every test does"
        )
        decision.outcome = decide.ALL_NOT_ALLOWED
        decision.message = (
            f"isolation: {decide.ALL_NOT_ALLOWED}: {why}; the selector does not run the whole "
            "suite. Run pytest without --isolation-for/--isolation-since for a full run."
        )
        return
    record = _usable_record(config, decision, scope) if scope in ("auto", "recorded") else None
    if record is not None:
        lines = inputs.changed_lines(since, top, root, sources) if since else None
        selection = _recorded(config, project, record, lines, decision)
        scope = "recorded"
    else:
        if scope in ("auto", "recorded"):
            scope = decision.scope = "impact"
        graph = _graph(config, project, decision)
        _refuse_unparsable(graph, sources)
        decision.warnings += graph.warnings
        selection = select(project, graph, sources, scope, decision.caps.max_depth)
    decision.selection = selection
    decision.tests = selection.tests
    decision.graph.ms = round((time.perf_counter() - started) * 1000)
    caps = decision.caps
    if not decision.tests:
        deleted = {s for s in sources if s not in project.files}
        decide.empty_reasons(decision, deleted)
        return
    narrower = {}
    if scope != "recorded":
        narrower = {
            narrow: len(select(project, graph, sources, narrow, caps.max_depth).tests)
            for narrow in decide.narrower_scopes(scope)
        }
    if len(sources) > caps.max_sources:
        decide.scope_exceeded(decision, narrower, "sources", len(sources), caps.max_sources)
        return
    if len(decision.tests) > caps.max_test_files:
        count = len(decision.tests)
        decide.scope_exceeded(decision, narrower, "test files", count, caps.max_test_files)
        return
    decision.outcome = decide.SELECTED


def _refuse_unparsable(graph: ImportGraph, sources: list[str]) -> None:
    broken = [(s, graph.facts[s].error) for s in sources if s in graph.facts]
    for source, error in broken:
        if error is not None:
            line, message = error
            raise inputs.InvalidInput(f"{source}:{line}: syntax error: {message}")


def _usable_record(
    config: pytest.Config, decision: Decision, scope: SelectorScope
) -> Record | None:
    """The record of what each test file executed, if one of this Python and
    these packages exists; else None, and the header says why."""
    found = options.path(config, "isolation_record_from")
    if found is not None:
        where = f"--isolation-record-from {found[0]}"
        with _refused():
            record = store.from_report(*found)
    else:
        where = "pytest's cache"
        record = store.load(_cache(config))
    if record is None:
        why = f"no record of what each test file executed in {where} (a file-mode run records one)"
        if scope == "auto" and not options.flag(config, "isolation_explain"):
            return None  # the usual case before a first recorded run: the header says impact
    elif record.environment != store.environment():
        made, now = record.environment, store.environment()
        what = (
            f"{made['python']}, not {now['python']}"
            if made["python"] != now["python"]
            else "other installed packages"
        )
        why = f"the record of what each test file executed in {where} was made with {what}"
    else:
        return record
    decision.record.unused = f"scope={scope}: {why}; scope impact selects instead"
    return None


def _recorded(
    config: pytest.Config,
    project: Project,
    record: Record,
    lines: dict[str, tuple[set[int], set[int]]] | None,
    decision: Decision,
) -> Selection:
    """The ``recorded`` scope's selection; the stale entries' test files by impact."""
    decision.scope = "recorded"
    scope = RecordedScope(project, record, lines)
    sources = decision.sources
    stale = scope.stale(sources)
    outcome = scope.select(sources, stale)
    per_source = outcome.per_source
    if stale:
        graph = _graph(config, project, decision)
        impact = select(project, graph, sources, "impact")
        for source, found in impact.per_source.items():
            for test, way in found.items():
                if test in stale and test not in per_source[source]:
                    per_source[source][test] = dataclasses.replace(way, via=STALE)
    depth = decision.caps.max_depth
    if depth is not None:
        per_source = {
            s: {t: way for t, way in found.items() if way.depth <= depth}
            for s, found in per_source.items()
        }
    stats = decision.record
    stats.tests = sum(1 for test in record.tests if test in project.tests)
    stats.stale = stale
    stats.unrecorded = len(outcome.unrecorded)
    for (test, source), why in outcome.why.items():
        stats.why.setdefault(test, {})[source] = why
    return Selection("recorded", sources, per_source)


def _graph(config: pytest.Config, project: Project, decision: Decision) -> ImportGraph:
    cache = _cache(config)
    cached = cache.get(CACHE_KEY, None) if cache is not None else None
    loaded = load_facts(project, cached, VERSION)
    if cache is not None and loaded.cache != cached:
        cache.set(CACHE_KEY, loaded.cache)
    decision.graph.files = len(loaded.facts)
    decision.graph.reparsed = loaded.reparsed
    return ImportGraph(project, loaded.facts)


class Selector:
    """Registered as ``isolation-select`` in the parent after a selection."""

    def __init__(self, config: pytest.Config, decision: Decision) -> None:
        self.config = config
        self.decision = decision

    def pytest_report_header(self) -> list[str]:
        decision = self.decision
        lines = [decision.header(), *decision.notes()]
        lines += [f"isolation: warning: {w}" for w in decision.warnings]
        if options.flag(self.config, "isolation_explain"):
            lines += decision.explain()
        return lines

    @pytest.hookimpl(optionalhook=True)  # pytest-xdist's; its workers see the invocation args
    def pytest_configure_node(self, node: Any) -> None:
        if self.decision.scope != "all":
            node.workerinput[WORKER_KEY] = list(self.config.args)

    @pytest.hookimpl(trylast=True)  # after -k, -m, --deselect and sharding
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        cap = self.decision.caps.max_items
        if cap is None:
            return
        count = count_items(session)
        if count <= cap:
            return
        decision = self.decision
        decision.phase = "collect"
        decision.outcome = decide.SCOPE_EXCEEDED
        decision.message = (
            f"isolation: {decide.SCOPE_EXCEEDED}: {counted(count, 'test')} in "
            f"{counted(len(decision.tests), 'test file')} after collection, -k and -m, over "
            f"--isolation-max-items={cap}; nothing was "
            "run. Narrow with -k or -m, a narrower --isolation-scope or --isolation-max-depth, "
            "or fewer --isolation-for paths."
        )
        record(self.config, decision)
        sys.stderr.write(decision.message + "\n")
        sys.stderr.flush()
        pytest.exit(f"isolation: {decide.SCOPE_EXCEEDED}", returncode=4)


def count_items(session: pytest.Session) -> int:
    """Tests selected; in file mode the files' children collect them to count."""
    collect_in_child = session.config.stash.get(COLLECT_IN_CHILD, None)
    total = 0
    for item in session.items:
        if collect_in_child is None or not isinstance(item, IsolatedFileItem):
            total += 1
            continue
        file = item.parent
        assert isinstance(file, IsolatedFile)
        try:
            stand_ins = collect_in_child(file)
        except (ChildCollectionError, pytest.skip.Exception):
            continue
        total += sum(
            1
            for test in stand_ins
            if not (isinstance(test, ChildTest) and test.deselected_in_child)
        )
    return total


def record(config: pytest.Config, decision: Decision) -> None:
    target = json_target(config)
    if target is not None:
        failed = outputs.write(target, decision.json_text())
        if failed is not None:
            sys.stderr.write(f"isolation: the decision record was not written: {failed}\n")


def json_target(config: pytest.Config) -> Path | None:
    """Where ``--isolation-json`` (or its ini key) writes the record, checked
    (a usage error before anything runs, see :mod:`pytest_isolation.core.outputs`)."""
    found = options.path(config, "isolation_json")
    return None if found is None else outputs.checked(*found)
