"""The run's leaks and their terminal summary.

A leak (:class:`pytest_isolation.core.records.Leak`) holds only strings, so a
file-mode child can send it to the parent, whose summary lists the leaks of
every file.  The summary names each leaked key once, with the first test
that changed it and how many did; routine state (counters, lazily created
and lazily filled state, private caches rebuilt) gets one line, and with ``-v`` one line per key.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections import defaultdict
from collections.abc import Callable

import pytest

from pytest_isolation.core.kinds import GuardPolicy
from pytest_isolation.core.kinds import WindowKind
from pytest_isolation.core.records import Leak
from pytest_isolation.core.warnings import LeakedStateWarning
from pytest_isolation.core.warnings import blanket_error
from pytest_isolation.core.words import agreeing
from pytest_isolation.core.words import counted

#: How the routine line counts each kind: (one, many).
KIND_NOUNS = {
    "counter": ("counter advanced", "counters advanced"),
    "created": ("created lazily", "created lazily"),
    "filled": ("filled lazily", "filled lazily"),
    "rebuilt": ("private cache rebuilt", "private caches rebuilt"),
    "ended": ("left by a fixture after the last test", "left by fixtures after the last test"),
    "imported": ("module first imported", "modules first imported"),
    "bookkeeping": ("object's own bookkeeping", "objects' own bookkeeping"),
}


def _key(leak: Leak) -> tuple[str, str]:
    """What one changed thing is: a key of a category; each unstopped patch
    is its own (two tests may patch the same target)."""
    return leak.category, f"{leak.key} at {leak.site}" if leak.category == "mock" else leak.key


class LeakLog:
    """Every leak of the run, grouped by owner (for the counts) and by key
    (for the summary)."""

    def __init__(self, policy: GuardPolicy, notify: Callable[[Leak], None]) -> None:
        self.policy = policy
        self.by_owner: dict[str, list[Leak]] = defaultdict(list)
        #: Every leak of a key, in the order found.
        self.by_key: dict[tuple[str, str], list[Leak]] = defaultdict(list)
        #: Told of every leak the first time it is recorded.
        self.notify = notify

    def first_of_key(self, leak: Leak) -> bool:
        """Whether ``leak`` would be the first of its key by its kind of owner."""
        same_key = self.by_key.get(_key(leak), [])
        return not any(other.kind == leak.kind for other in same_key)

    def add(self, leak: Leak) -> bool:
        """Record a leak; whether it is the first of its key by a test (or by
        a fixture, or by a file): the one to warn about."""
        known = self.by_owner[leak.owner]
        if leak in known:  # the same leak again, from a retry of its file
            return False
        known.append(leak)
        same_key = self.by_key[_key(leak)]
        same_key.append(leak)
        self.notify(leak)
        return sum(1 for other in same_key if other.kind == leak.kind) == 1

    def leaked_keys(self) -> list[list[Leak]]:
        """Each changed thing that is not routine state, with its leaks: what
        the summary's lines name and its last line counts."""
        grouped = ([leak for leak in leaks if not leak.routine] for leaks in self.by_key.values())
        return [leaks for leaks in grouped if leaks]

    def headline(self) -> str:
        keys = self.leaked_keys()
        if not keys:
            return "isolation: no leaks"
        owners = _counted([leak for leaks in keys for leak in leaks])
        return f"isolation: {counted(len(keys), 'leak')} by {owners}"

    def summarize(self, reporter: pytest.TerminalReporter) -> None:
        if not self.by_key:
            return
        groups = sorted(self.by_key.values(), key=lambda leaks: _key(leaks[0]))
        leaked = [group for leaks in groups if (group := [x for x in leaks if not x.routine])]
        routine = [group for leaks in groups if (group := [x for x in leaks if x.routine])]
        if leaked:
            reporter.write_sep("=", self.headline())
            if self.policy == "quiet":
                reporter.write_line("restored quietly; run with --isolation-leaks=warn for details")
                return
            unshown = [group for leaks in leaked if (group := [x for x in leaks if not x.shown])]
            for line, leaks in _per_object(unshown):
                reporter.write_line(line)
                # Without a line, the test it was set during is all there is to go by.
                during = "by" if leaks[0].site else "set during"
                reporter.write_line(f"  {during} {_owners(leaks)}")
            errors = sum(1 for leaks in leaked for leak in leaks if leak.shown)
            if errors:
                more = "and " if unshown else ""
                shown = agreeing(errors, "an error", "errors")
                reporter.write_line(f"{more}{counted(errors, 'leak')} shown as {shown} above")
        if routine:
            self._summarize_routine(reporter, routine)

    def _summarize_routine(
        self, reporter: pytest.TerminalReporter, routine: list[list[Leak]]
    ) -> None:
        """One line; with ``-v``, one line per key; none under ``-q``, which
        shows only what needs a look (routine state is no leak)."""
        if reporter.config.get_verbosity() < 0:
            return
        owners = _counted([leak for leaks in routine for leak in leaks])
        kinds: dict[str, int] = defaultdict(int)
        for leaks in routine:
            kinds[leaks[0].routine] += 1
        counts = ", ".join(
            f"{count} {KIND_NOUNS[kind][count != 1]}" for kind, count in sorted(kinds.items())
        )
        verbose = reporter.config.get_verbosity() > 0
        more = "" if verbose else "; -v lists them"
        restored = {leak.restored for leaks in routine for leak in leaks}
        done = {frozenset({True}): "put back", frozenset({False}): "kept"}.get(
            frozenset(restored), "put back or kept"
        )
        reporter.write_line(
            f"isolation: routine state of {owners} {done} ({counts}; not leaks{more})"
        )
        if not verbose:
            return
        for leaks in routine:
            first = leaks[0]
            count = len({who(leak) for leak in leaks})
            many = f"{count} tests, first " if count > 1 else ""  # agrees: count > 1
            site = f", at {first.site}" if first.site else ""
            reporter.write_line(f"  [{first.category}] {first.what}{site} ({many}{first.owner})")


#: How many attributes of one object a summary line names before "and N more".
NAMED_ATTRIBUTES = 5


def _per_object(leaked: list[list[Leak]]) -> list[tuple[str, list[Leak]]]:
    """One summary line per changed key, except that the attributes of one
    object (a module, a class, an instance) changed together are one line:
    ``[attribute] rich.box.ASCII: 29 attributes changed (top, bottom, ...)``;
    and one object reached under many names is one line (see :func:`_aliases`)."""
    leaked = _aliases(leaked)
    holders: dict[str, list[list[Leak]]] = defaultdict(list)
    for leaks in leaked:
        if leaks[0].category == "attribute" and leaks[0].restored:
            holders[leaks[0].key.rpartition(".")[0]].append(leaks)
    lines: list[tuple[str, list[Leak]]] = []
    done: set[str] = set()
    for leaks in leaked:
        first = leaks[0]
        holder = first.key.rpartition(".")[0]
        group = holders.get(holder, []) if first.category == "attribute" else []
        if len(group) > 1:
            if holder not in done:
                done.add(holder)
                lines.append(_object_line(holder, group))
            continue
        site = f", at {first.site}" if first.site else ""
        undone = "" if first.restored else " (not undone)"
        lines.append((f"[{first.category}] {first.what}{site}{undone}", leaks))
    return lines


def _aliases(leaked: list[list[Leak]]) -> list[list[Leak]]:
    """One change seen under many names (``from app.config import settings``
    in 33 modules, each a key) as one: the same change of the same object (its
    text shows the object's address), by the same owners, at the same site.
    The first name is kept, and the others are counted in its text."""
    groups: dict[tuple[str, ...], list[list[Leak]]] = defaultdict(list)
    order: list[tuple[str, ...]] = []
    for leaks in leaked:
        first = leaks[0]
        change = first.what.removeprefix(first.key)
        if first.category != "attribute" or " at 0x" not in change:
            signature: tuple[str, ...] = (first.category, first.key)
        else:
            owners = tuple(sorted({who(leak) for leak in leaks}))
            signature = ("alias", change, first.site, *owners)
        if signature not in groups:
            order.append(signature)
        groups[signature].append(leaks)
    folded = []
    for signature in order:
        group = groups[signature]
        if len(group) == 1:
            folded.append(group[0])
            continue
        first = group[0][0]
        others = [leaks[0].key for leaks in group[1:]]
        named = ", ".join(others[:NAMED_ATTRIBUTES])
        if len(others) > NAMED_ATTRIBUTES:
            named += f" and {len(others) - NAMED_ATTRIBUTES} more"
        what = f"{first.what}, also as {named}"
        folded.append([dataclasses.replace(first, what=what), *group[0][1:]])
    return folded


def _object_line(holder: str, group: list[list[Leak]]) -> tuple[str, list[Leak]]:
    names = [leaks[0].key.rpartition(".")[2] for leaks in group]
    shown = ", ".join(names[:NAMED_ATTRIBUTES])
    if len(names) > NAMED_ATTRIBUTES:
        shown += f" and {len(names) - NAMED_ATTRIBUTES} more"
    every = [leak for leaks in group for leak in leaks]
    changed = counted(len(names), "attribute")
    return f"[attribute] {holder}: {changed} changed ({shown})", every


def _error_text(pending: list[tuple[Leak, str]]) -> str:
    """A test's leaks as its error: the attributes of one object changed
    together are one line, as in the summary; the owner is left out where
    it is the test, which the error's header and short summary line name."""
    tested = {leak: nodeid for leak, nodeid in pending}
    lines = []
    for line, group in _per_object([[leak] for leak, _ in pending]):
        first = group[0]
        named = first.owner != tested[first]
        if len(group) == 1:
            lines.append(first.message(owner=named))
        else:
            who = f"{first.owner} " if named else ""
            lines.append(f"{who}leaked {line.removeprefix('[attribute] ')}; {first.hint}")
    return "\n".join(lines)


#: How a fixture's owner goes on: the test in whose teardown it was found.
IN_TEARDOWN = " in the teardown of "


def who(leak: Leak) -> str:
    """The owner, counted once: a fixture by its name and scope, whichever
    test's teardown finalized it."""
    return leak.owner.partition(IN_TEARDOWN)[0] if leak.kind == "fixture" else leak.owner


def _counted(leaks: list[Leak]) -> str:
    """``3 tests``, ``1 test and 1 fixture``, ``2 tests, 1 fixture and 1 file``."""
    owners: dict[WindowKind, set[str]] = defaultdict(set)
    for leak in leaks:
        owners[leak.kind].add(who(leak))
    parts = [
        counted(len(owners[kind]), kind) for kind in ("test", "fixture", "file") if owners.get(kind)
    ]
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def _owners(leaks: list[Leak]) -> str:
    """The first owner, and how many others of each kind (tests, fixtures, files)."""
    first = leaks[0].owner
    others: dict[WindowKind, set[str]] = defaultdict(set)
    for leak in leaks:
        if who(leak) != who(leaks[0]):
            others[leak.kind].add(who(leak))
    nouns = {"test": ("more test", "more tests"), "fixture": ("fixture", "fixtures")}
    parts = [
        counted(len(owners), *nouns.get(kind, ("file", "files")))
        for kind, owners in sorted(others.items(), key=lambda pair: pair[0] != "test")
    ]
    return f"{first} and {' and '.join(parts)}" if parts else first


class Settler:
    """Records each window's leaks in the log and reports them as the policy
    says: a warning for the first of each key (``warn``), an error at the
    test's teardown (``error``), nothing but the count (``quiet``), or
    nothing at all (``watch``, ``--isolation-twice`` with the guard off)."""

    def __init__(self, policy: GuardPolicy, log: LeakLog) -> None:
        self.policy = policy
        self.log = log
        #: Messages for the running test's teardown error (``error``).
        self.pending: list[tuple[Leak, str]] = []

    def settle(self, leaks: list[Leak], node: pytest.Item | pytest.Collector) -> list[Warning]:
        """Record and report; returns the warnings ``-W error`` escalated, to raise
        once the guard's own work is done."""
        __tracebackhide__ = True
        if not leaks or self.policy == "watch":
            return []
        leaks = sorted(leaks, key=lambda leak: (leak.category, leak.what))
        escalated: list[Warning] = []
        for leak in leaks:
            if leak.routine:
                self.log.add(leak)
            elif self.policy == "warn" and self.log.first_of_key(leak):
                # One warning per key, the summary counts
                try:
                    warn_on(node, LeakedStateWarning(leak.message()))
                except Warning:  # -W error: every leak is still recorded
                    escalated.append(
                        LeakedStateWarning(leak.message(owner=leak.owner != node.nodeid))
                    )
                    # Only the first escalated warning fails the test: it alone is shown.
                    leak = dataclasses.replace(leak, shown="error" if len(escalated) == 1 else "")
                self.log.add(leak)
            elif self.policy == "error":  # an error at this teardown (or this fixture's)
                self.pending.append((leak, node.nodeid))
                self.log.add(dataclasses.replace(leak, shown="error"))
            else:
                self.log.add(leak)
        return escalated

    def fail_test(self, escalated: list[Warning]) -> None:
        """Fail the test's teardown: with the first warning ``-W error``
        escalated, or under ``--isolation-leaks=error`` with every leak."""
        # No __tracebackhide__: with every entry hidden pytest appends "All
        # traceback entries are hidden" to the message; ``pytrace=False``
        # already shows the message alone.
        pending, self.pending = self.pending, []
        if escalated:
            warning = escalated[0]
            pytest.fail(f"{type(warning).__name__}: {warning}", pytrace=False)
        if pending and self.policy == "error":
            pytest.fail(_error_text(pending), pytrace=False)

    def settle_import(
        self, leaks: list[Leak], collector: pytest.Collector, report: pytest.CollectReport
    ) -> None:
        """A test module's import: the file's collection fails under ``error``
        or when ``-W error`` escalates the warning."""
        escalated = False
        for leak in leaks:
            if self.policy == "warn" and not leak.routine and self.log.first_of_key(leak):
                try:
                    warn_on(collector, LeakedStateWarning(leak.message()))
                except Warning:  # -W error: the file's collection fails instead
                    escalated = True
        leaked = [leak for leak in leaks if not leak.routine]
        failing = bool(leaked) and (self.policy == "error" or escalated) and report.passed
        for leak in leaks:  # the failed collection shows every leak: not repeated
            self.log.add(
                dataclasses.replace(leak, shown="error") if failing and not leak.routine else leak
            )
        if failing:
            report.outcome = "failed"
            report.longrepr = "\n".join(leak.message() for leak in leaked)


@dataclasses.dataclass
class LeakEntry:
    """One entry of the terminal reporter's ``leaks`` count: a changed thing,
    with the first test, fixture or file that leaked it (plugins that read
    every entry of the reporter's ``stats`` find a report-like object with a
    node id)."""

    nodeid: str
    count_towards_summary: bool = True


def leaks_in_summary(reporter: pytest.TerminalReporter, log: LeakLog) -> None:
    """Take the leak warnings out of pytest's warnings summary: each leak is
    shown once, in the leak summary, grouped by key and object, and counted
    in the last line (``2 passed, 3 leaks``) by changed thing, as the
    summary's lines name them.  The warning is still raised, so that
    ``-W``/``filterwarnings`` filters that name ``LeakedStateWarning`` still
    decide what becomes an error or is ignored."""
    keys = log.leaked_keys()
    if keys:
        word = agreeing(len(keys), "leak", "leaks")
        reporter.stats[word] = [LeakEntry(leaks[0].owner) for leaks in keys]
    marker = f": {LeakedStateWarning.__name__}: "
    shown = reporter.stats.get("warnings", [])
    kept = [report for report in shown if marker not in getattr(report, "message", "")]
    if len(kept) != len(shown):
        reporter.stats["warnings"] = kept
        if not kept:
            del reporter.stats["warnings"]


def warn_on(node: pytest.Item | pytest.Collector, warning: Warning) -> None:
    """``node.warn(warning)``, also for an item without a line number (a
    non-Python collector's, such as pygments' snippet files), which pytest's
    ``Node.warn`` refuses with an ``AssertionError``.

    A blanket ``error`` filter (``filterwarnings = error``, ``-W error``)
    does not make a leak an error: the guard is on wherever the plugin is
    installed, and a suite that turns all warnings into errors did not ask
    for its leaks to fail.  The warning is still shown.  A filter that names
    ``LeakedStateWarning`` or ``IsolationWarning`` is obeyed, and
    ``--isolation-leaks=error`` fails the test."""
    __tracebackhide__ = True
    with warnings.catch_warnings():
        if blanket_error(warning):
            warnings.simplefilter("always", type(warning))
        if isinstance(node, pytest.Item) and node.location[1] is None:
            warnings.warn_explicit(warning, type(warning), str(node.path), 0)
        else:
            node.warn(warning)
