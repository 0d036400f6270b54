"""The polluter finder's search: the bisection and what it prints (its
probes are :mod:`.probing`'s).  Imported only when
``--isolation-find-polluter`` is given (see
:mod:`pytest_isolation.diagnose.plugin`)."""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_isolation.core import options
from pytest_isolation.core import outputs
from pytest_isolation.core.nodeid import file_of
from pytest_isolation.core.words import counted
from pytest_isolation.diagnose.bisection import search
from pytest_isolation.diagnose.probing import FindError
from pytest_isolation.diagnose.probing import OutOfTime
from pytest_isolation.diagnose.probing import Prober
from pytest_isolation.diagnose.probing import probe_options

#: How many of the culprits' leaks the finder shows, most likely first.
LEAKS_SHOWN = 5

#: Kinds of state, the likeliest cause of another test's failure first.
LIKELY = (
    "env",
    "attribute",
    "container",
    "sys.modules",
    "mock",
    "cwd",
    "import",
    "logging",
    "logger",
    "fakefs",
    "interpreter",
    "process",
    "fixture-value",
    "files",
    "threads",
    "processes",
)


def rank(leaks: list[dict[str, Any]], failure: str) -> list[dict[str, Any]]:
    """Leaks most likely to explain the victim's failure first: those whose
    name appears in its failure text (state the victim's code read), then by
    kind (see :data:`LIKELY`); routine state (counters, caches) last."""

    def key(leak: dict[str, Any]) -> tuple[int, int, int]:
        return (1 if leak.get("routine") else 0, -_named(leak, failure), _kind(leak))

    return sorted(leaks, key=key)


def _named(leak: dict[str, Any], failure: str) -> int:
    """How specifically the victim's failure names the leaked key: the length
    of the longest of its dotted tails (``proj.cfg.TIMEOUT``, ``cfg.TIMEOUT``,
    ``TIMEOUT``) found as a word in the text; 0 if none is."""
    parts = [part for part in re.split(r"[^A-Za-z0-9_.]+", str(leak.get("key", ""))) if part]
    best = 0
    for part in parts:
        names = part.split(".")
        for start in range(len(names)):
            tail = ".".join(names[start:])
            if len(tail) > max(best, 2) and re.search(rf"(?<![\w.]){re.escape(tail)}\b", failure):
                best = len(tail)
                break
    return best


def _kind(leak: dict[str, Any]) -> int:
    kind = str(leak.get("category", ""))
    return LIKELY.index(kind) if kind in LIKELY else len(LIKELY)


@dataclasses.dataclass
class Progress:
    """How far a search has come: for its lines, and for where it was when
    its time ran out."""

    #: When it started (``time.monotonic()``).
    started: float
    #: The probes of the bisections and of the checks for another polluter.
    probes: int = 0
    #: Where the search is before the bisection (what a time limit cut
    #: short); None once the bisection has begun, which counts its probes.
    stage: str | None = "while collecting the tests"
    #: How many candidates the current round of the search has left.
    left: str = ""


class Finder:
    """One search: the victim, its probes (how they run and how far they
    have come), and what they have answered so far (every set already run,
    the JSON result)."""

    def __init__(self, config: pytest.Config, victim: str) -> None:
        self.config = config
        self.victim = self._nodeid(victim)
        width = options.count(config, "isolation_probes", minimum=1) or 1
        limit = options.seconds(config, "isolation_find_timeout")
        self.progress = Progress(started=time.monotonic())
        deadline = None if limit is None else self.progress.started + limit
        self.limit = limit
        self.prober = Prober(config, self.victim, width, deadline)
        found = options.path(config, "isolation_find_json")
        #: Checked now: a bad path must not cost the whole search.
        self.json_target = None if found is None else outputs.checked(*found)
        #: Each set already run, with whether it reproduced.
        self.known: dict[tuple[str, ...], bool] = {}
        self.goal = "failed"
        #: The victim's failure text from the last probe where it failed.
        self.failure = ""
        self.order: list[str] = []
        self.result: dict[str, Any] = {"version": 1, "victim": self.victim}

    # -- input ---------------------------------------------------------------------

    def _nodeid(self, raw: str) -> str:
        path, sep, names = raw.partition("::")
        if not sep or not names or not path:
            raise FindError(
                f"--isolation-find-polluter: {raw!r} is not a test's node id "
                "(expected PATH::NAME, as pytest -v prints it)"
            )
        absolute = Path(self.config.invocation_params.dir, path)
        try:
            path = absolute.resolve().relative_to(self.config.rootpath.resolve()).as_posix()
        except ValueError:
            raise FindError(
                f"--isolation-find-polluter: {raw!r} is outside the rootdir "
                f"{str(self.config.rootpath)!r}"
            ) from None
        return f"{path}::{names}"

    # -- output --------------------------------------------------------------------

    def say(self, line: str) -> None:
        sys.stdout.write(f"isolation: {line}\n")
        sys.stdout.flush()

    # -- probes --------------------------------------------------------------------

    def reproduces(self, sets: Sequence[Sequence[tuple[str, ...]]]) -> list[bool]:
        """Whether the victim's outcome comes back after each set; a set already
        run is answered from memory."""
        runs = []
        for units in sets:
            chosen = {nodeid for unit in units for nodeid in unit}
            runs.append((*(n for n in self.order if n in chosen), self.victim))
        new = [run for run in dict.fromkeys(runs) if run not in self.known]
        for run, outcome in zip(new, self.prober.run_many(new), strict=True):
            self.progress.probes += 1
            self.known[run] = outcome.victim == self.goal
            if outcome.failure:
                self.failure = outcome.failure
            verb = _verb(outcome.victim)
            count = len(run) - 1
            tests = counted(count, "test")
            left = f" ({self.progress.left})" if self.progress.left else ""
            self.say(f"probe {self.progress.probes}{left}: after {tests} it {verb}")
        return [self.known[run] for run in runs]

    def _note(self, text: str) -> None:
        self.progress.left = text

    # -- the search ------------------------------------------------------------------

    def run(self) -> int:
        try:
            code = self._search()
        except OutOfTime:
            limited = options.raw(self.config, "isolation_find_timeout")[1]
            where = self.progress.stage or f"after {_probes(self.progress.probes)}"
            self.say(f"gave up: {limited}={self.limit:g} s ran out {where}")
            self.result["outcome"] = "timed-out"
            code = 1
        self.result["probes"] = self.progress.probes
        self.result["seconds"] = round(time.monotonic() - self.progress.started, 3)
        if self.json_target is not None:
            failed = outputs.write(self.json_target, json.dumps(self.result, indent=2) + "\n")
            if failed is not None:
                self.say(f"result not written: {failed}")
        return code

    def _search(self) -> int:
        victim = self.victim
        self.order = self.prober.collect()
        if victim not in self.order:
            raise FindError(
                f"--isolation-find-polluter: {victim} is not collected by these paths and "
                f"options ({counted(len(self.order), 'test')} collected)"
            )
        preceding = self.order[: self.order.index(victim)]
        files = _files(preceding)
        before = f"{counted(len(preceding), 'test')} in {counted(len(files), 'file')}"
        self.say(f"{victim}: {before} run before it")
        self.progress.stage = f"while running {victim} alone"
        alone = self.prober.run_many([[victim]])[0].victim
        if alone == "not run":
            raise FindError(
                f"--isolation-find-polluter: {victim} did not run when asked for alone "
                "(a probe runs it as pytest runs a node id given on the command line)"
            )
        self.result["alone"] = alone
        if alone == "failed":
            self.goal = "passed"
            self.result["kind"] = "state-setter"
            self.say("it fails alone: it depends on state an earlier test sets; looking for that")
        else:
            self.result["kind"] = "polluter"
            self.say(f"alone it {_verb(alone)}")
        self.progress.stage = (
            f"while running it after the {counted(len(preceding), 'test')} before it"
        )
        after_all = self.prober.run_many([[*preceding, victim]])[0]
        self.progress.stage = None
        after = after_all.victim
        self.failure = after_all.failure or self.failure
        self.result["after_all"] = after
        if after != self.goal:
            verb = _verb(after)
            self.say(
                f"after all {counted(len(preceding), 'test')} before it, it {verb} too: not "
                "order-dependent in this order"
            )
            self.result["outcome"] = "not-order-dependent"
            return 1
        verb = _verb(after)
        self.say(f"after all {counted(len(preceding), 'test')} before it, it {verb}: bisecting")
        self.known[(*preceding, victim)] = True
        culprits = search(files, self.reproduces, self.prober.width, self._note)
        self.result["culprits"] = culprits
        self.result["outcome"] = "found"
        self._report(culprits)
        if self.goal == "failed":
            self._others(preceding, culprits)
        return 0

    def _others(self, preceding: list[str], culprits: list[str]) -> None:
        """Whether the victim still fails after the tests before it without
        the polluters found so far (several may each break it); if it does,
        search again, up to :data:`MORE_ROUNDS` times."""
        found: list[list[str]] = []
        left = preceding
        for _ in range(MORE_ROUNDS):
            left = [nodeid for nodeid in left if nodeid not in culprits]
            run = (*left, self.victim)
            outcome = self.prober.run_many([run])[0]
            self.progress.probes += 1
            self.known[run] = outcome.victim == self.goal
            them = "it" if not found and len(culprits) == 1 else "them"
            verb = _verb(outcome.victim)
            count = counted(len(left), "test")
            said = f"probe {self.progress.probes}: without {them}, after the other {count} it"
            if outcome.victim != self.goal:
                self.say(f"{said} {verb}: no other polluter")
                self.result["others"] = found
                return
            self.say(f"{said} still fails: another polluter; bisecting again")
            culprits = search(_files(left), self.reproduces, self.prober.width, self._note)
            found.append(culprits)
            first = dict(self.result)
            self._report(culprits)
            self.result = {**first, "others": found}
        self.say(f"stopped after {MORE_ROUNDS} more polluters; there may be others")
        self.result["others"] = found

    def _report(self, culprits: list[str]) -> None:
        victim = self.victim
        role = "polluter" if self.goal == "failed" else "state-setter"
        if len(culprits) == 1:
            self.say(f"{role}: {culprits[0]} ({_probes(self.progress.probes)})")
        else:
            self.say(
                f"{role}s, needed together: {', '.join(culprits)} ({_probes(self.progress.probes)})"
            )
        leaks = rank(
            self.prober.run_many([culprits], extra=["--isolation-leaks=warn"])[0].leaks,
            self.failure,
        )
        self.result["leaks"] = leaks
        if leaks:
            self.say("what it leaked:" if len(culprits) == 1 else "what they leaked:")
            for leak in leaks[:LEAKS_SHOWN]:
                site = f", at {leak['site']}" if leak.get("site") else ""
                self.say(f"  [{leak['category']}] {leak['what']}{site} ({leak['owner']})")
            if len(leaks) > LEAKS_SHOWN:
                more = len(leaks) - LEAKS_SHOWN
                where = "" if self.json_target else " (--isolation-find-json lists them)"
                self.say(f"  and {more} more{where}")
        else:
            self.say("the leak guard found nothing it watches changed (see the limitations)")
        options = _without_plugin(probe_options(self.config), "isolation")
        command = [
            "pytest",
            *map(self.prober.argument, [*culprits, victim]),
            *options,
            "-p",
            "isolation",
            "--isolation-leaks=off",
        ]
        if self.config.pluginmanager.has_plugin("randomly"):  # its order is not the probes'
            command = [*_without_plugin(command, "randomly"), "-p", "no:randomly"]
        reproduce = " ".join(_quote(part) for part in command)
        self.result["reproduce"] = reproduce
        self.say(f"reproduce: {reproduce}")
        victim_file = file_of(victim)
        apart = all(file_of(c) != victim_file for c in culprits)
        self.result["different_files"] = apart
        if not apart:
            self.say("--isolation-mode=file does not prevent it: they are in the same file")
            self.result["file_mode_prevents"] = False
            return
        in_file_mode = ["--isolation-mode=file"]
        checked = self.prober.run_many([[*culprits, victim]], extra=in_file_mode)[0].victim
        prevents = checked != self.goal
        self.result["file_mode_prevents"] = prevents
        if self.goal == "failed":
            verdict = "prevents it" if prevents else "does not prevent it"
        else:
            verdict = (
                "breaks it (the test needs the other file's state)" if prevents else "keeps it"
            )
        self.say(
            f"--isolation-mode=file {verdict}: they are in different files "
            f"(checked: {victim} {checked})"
        )


#: How many more polluters the finder looks for after the first.
MORE_ROUNDS = 5


#: What the victim does in a probe, by its outcome: one tense throughout.
VERBS = {"failed": "fails", "passed": "passes", "skipped": "is skipped", "not run": "does not run"}


def _verb(outcome: str) -> str:
    return VERBS.get(outcome, outcome)


def _probes(count: int) -> str:
    return counted(count, "probe")


def _files(nodeids: Sequence[str]) -> list[tuple[str, ...]]:
    """Consecutive tests of one file, grouped, in order."""
    groups: list[list[str]] = []
    for nodeid in nodeids:
        path = file_of(nodeid)
        if groups and file_of(groups[-1][0]) == path:
            groups[-1].append(nodeid)
        else:
            groups.append([nodeid])
    return [tuple(group) for group in groups]


def _without_plugin(options: list[str], name: str) -> list[str]:
    """``options`` without ``-p NAME`` / ``-pNAME``."""
    kept: list[str] = []
    skip = False
    for index, arg in enumerate(options):
        if skip:
            skip = False
            continue
        if arg == "-p" and index + 1 < len(options) and options[index + 1] == name:
            skip = True
            continue
        if arg == f"-p{name}":
            continue
        kept.append(arg)
    return kept


def _quote(part: str) -> str:
    return shlex.quote(part)
