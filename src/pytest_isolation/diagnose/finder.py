"""The polluter finder's search: the bisection and what it prints (its
probes are :mod:`.probing`'s).  Imported only when
``--isolation-find-polluter`` is given (see
:mod:`pytest_isolation.diagnose.plugin`)."""

from __future__ import annotations

import dataclasses
import json
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
from pytest_isolation.diagnose.probing import Job
from pytest_isolation.diagnose.probing import Outcome
from pytest_isolation.diagnose.probing import OutOfTime
from pytest_isolation.diagnose.probing import Prober
from pytest_isolation.diagnose.probing import probe_options
from pytest_isolation.diagnose.ranking import rank

#: How many of the culprits' leaks the finder shows, most likely first.
LEAKS_SHOWN = 5


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
    #: The number the search's last probe gets at most, if one test is the
    #: cause; None when the search has no bound (looking for a set).
    most: int | None = None


class Finder:
    """One search: the victim, its probes (how they run and how far they
    have come), and what they have answered so far (every set already run,
    the JSON result)."""

    def __init__(self, config: pytest.Config, victim: str) -> None:
        self.config = config
        self.victim = self._nodeid(victim)
        # One probe at a time unless asked: probes share the working tree, and
        # a test that writes a shared file misleads a probe running beside it
        # (the pollution corpus's h5nav case: "it fails alone").
        width = options.count(config, "isolation_probes", minimum=1) or 1
        limit = options.seconds(config, "isolation_find_timeout")
        self.progress = Progress(started=time.monotonic())
        deadline = None if limit is None else self.progress.started + limit
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
        #: The tests the current search looks among (its "others" probe runs
        #: them without what it finds).
        self.pool: list[str] = []
        #: What was run for a culprit together with the check that proved it.
        self.followed: dict[tuple[str, ...], Followups] = {}
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
        runs = [self._run(units) for units in sets]
        new = [run for run in dict.fromkeys(runs) if run not in self.known]
        for run, outcome in zip(new, self.prober.run_many(new), strict=True):
            self._record(run, outcome)
        return [self.known[run] for run in runs]

    def _run(self, units: Sequence[tuple[str, ...]]) -> tuple[str, ...]:
        chosen = {nodeid for unit in units for nodeid in unit}
        return (*(n for n in self.order if n in chosen), self.victim)

    def _record(self, run: tuple[str, ...], outcome: Outcome) -> None:
        self.known[run] = outcome.victim == self.goal
        if outcome.failure:
            self.failure = outcome.failure
        tests = counted(len(run) - 1, "test")
        self.say(f"{self._probe()}: after {tests} it {_verb(outcome.victim)}")

    def _probe(self, left: str | None = None) -> str:
        """The next probe's number, of how many at most, and the candidates left."""
        self.progress.probes += 1
        most = self.progress.most
        bound = "" if most is None else f" of at most {most}"
        left = self.progress.left if left is None else left
        return f"probe {self.progress.probes}{bound}" + (f" ({left})" if left else "")

    def _note(self, text: str, most: int | None) -> None:
        self.progress.left = text
        others = 1 if self.goal == "failed" else 0
        self.progress.most = None if most is None else self.progress.probes + most + others

    def _check(self, sets: Sequence[Sequence[tuple[str, ...]]]) -> list[bool]:
        """The check of the test a search found, run together with what the
        finder runs next for it (leak report, file-mode check, the others):
        with probes in parallel they cost no round of their own."""
        (units,) = sets
        run = self._run(units)
        if run in self.known:
            return [self.known[run]]
        culprits = list(run[:-1])
        jobs = self._followup_jobs(culprits)
        outcomes = self.prober.run_jobs([self.prober.job(run), *jobs.values()])
        self._record(run, outcomes[0])
        if self.known[run]:
            self.followed[run[:-1]] = Followups(**dict(zip(jobs, outcomes[1:], strict=True)))
        return [self.known[run]]

    def _followup_jobs(self, culprits: list[str]) -> dict[str, Job]:
        """What is run for culprits once found, by :class:`Followups` field."""
        job = self.prober.job
        jobs = {"leaks": job(culprits, ["--isolation-leaks=warn"])}
        if all(file_of(c) != file_of(self.victim) for c in culprits):
            jobs["file_mode"] = job([*culprits, self.victim], ["--isolation-mode=file"])
        if self.goal == "failed":
            jobs["others"] = job([*(n for n in self.pool if n not in culprits), self.victim])
        return jobs

    def _followups(self, culprits: list[str]) -> Followups:
        known = self.followed.pop(tuple(culprits), None)
        if known is not None:
            return known
        jobs = self._followup_jobs(culprits)
        outcomes = self.prober.run_jobs(list(jobs.values()))
        return Followups(**dict(zip(jobs, outcomes, strict=True)))

    # -- the search ------------------------------------------------------------------

    def run(self) -> int:
        try:
            code = self._search()
        except OutOfTime:
            limited = options.raw(self.config, "isolation_find_timeout")[1]
            limit = options.seconds(self.config, "isolation_find_timeout") or 0
            where = self.progress.stage or f"after {_probes(self.progress.probes)}"
            self.say(f"gave up: {limited}={limit:g} s ran out {where}")
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
        alone, after_all = self._collect_and_run_alone()
        preceding = self.order[: self.order.index(victim)]
        files = _files(preceding)
        before = f"{counted(len(preceding), 'test')} in {counted(len(files), 'file')}"
        self.say(f"{victim}: {before} run before it")
        if isinstance(alone, FindError):
            raise alone
        if alone.victim == "not run":
            raise FindError(
                f"--isolation-find-polluter: {victim} did not run when asked for alone "
                "(a probe runs it as pytest runs a node id given on the command line)"
            )
        self.result["alone"] = alone.victim
        if alone.victim == "failed":
            self.goal = "passed"
            self.result["kind"] = "state-setter"
            self.say("it fails alone: it depends on state an earlier test sets; looking for that")
        else:
            self.result["kind"] = "polluter"
            self.say(f"alone it {_verb(alone.victim)}")
        self.progress.stage = (
            f"while running it after the {counted(len(preceding), 'test')} before it"
        )
        if after_all is None or after_all.victim != self.goal:
            # Not run, or it did not come back: asked again as every probe asks.
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
        self.pool = preceding
        culprits = search(files, self.reproduces, self.prober.width, self._note, self._check)
        self.result["culprits"] = culprits
        self.result["outcome"] = "found"
        others = self._report(culprits)
        if others is not None:
            self._others(preceding, culprits, others)
        return 0

    def _collect_and_run_alone(self) -> tuple[Outcome | FindError, Outcome | None]:
        """The run's order (into :attr:`order`) and how the victim does alone:
        both at once when probes run in parallel (neither needs the other).
        The run that says the order also runs the tests up to the victim
        where it can (:meth:`Prober.order_job`): its outcome comes second."""
        victim = self.victim

        def done(index: int) -> None:
            self.progress.stage = f"while running {victim} alone"

        ordered = self.prober.order_job()
        if ordered is not None:
            self.progress.stage = f"while collecting the tests and running them up to {victim}"
        jobs = [ordered or self.prober.collect_job(), self.prober.job([victim])]
        collected, alone = self.prober.attempt(jobs, done)
        if isinstance(collected, FindError):
            raise collected
        self.order = collected.collected

        if victim not in self.order:
            raise FindError(
                f"--isolation-find-polluter: {victim} is not collected by these paths and "
                f"options ({counted(len(self.order), 'test')} collected)"
            )
        return alone, collected if collected.stopped else None

    def _others(self, preceding: list[str], culprits: list[str], outcome: Outcome) -> None:
        """Whether the victim still fails after the tests before it without
        the polluters found so far (several may each break it; ``outcome`` is
        the first such run's); if it does, search again, up to
        :data:`MORE_ROUNDS` times."""
        found: list[list[str]] = []
        left = preceding
        for _ in range(MORE_ROUNDS):
            left = [nodeid for nodeid in left if nodeid not in culprits]
            run = (*left, self.victim)
            self.known[run] = outcome.victim == self.goal
            them = "it" if not found and len(culprits) == 1 else "them"
            count = counted(len(left), "test")
            self.progress.most = self.progress.probes + 1
            said = f"{self._probe('')}: without {them}, after the other {count} it"
            if outcome.victim != self.goal:
                self.say(f"{said} {_verb(outcome.victim)}: no other polluter")
                self.result["others"] = found
                return
            self.say(f"{said} still fails: another polluter; bisecting again")
            self.pool = left
            width = self.prober.width
            culprits = search(_files(left), self.reproduces, width, self._note, self._check)
            found.append(culprits)
            first = dict(self.result)
            outcome = self._report(culprits) or outcome
            self.result = {**first, "others": found}
        self.say(f"stopped after {MORE_ROUNDS} more polluters; there may be others")
        self.result["others"] = found

    def _report(self, culprits: list[str]) -> Outcome | None:
        """Prints what was found; the run without it (when looking for
        polluters), for :meth:`_others`."""
        victim = self.victim
        followups = self._followups(culprits)
        role = "polluter" if self.goal == "failed" else "state-setter"
        if len(culprits) == 1:
            self.say(f"{role}: {culprits[0]} ({_probes(self.progress.probes)})")
        else:
            self.say(
                f"{role}s, needed together: {', '.join(culprits)} ({_probes(self.progress.probes)})"
            )
        leaks = rank(followups.leaks.leaks, self.failure)
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
        self.result["different_files"] = followups.file_mode is not None
        if followups.file_mode is None:
            self.say("--isolation-mode=file does not prevent it: they are in the same file")
            self.result["file_mode_prevents"] = False
            return followups.others
        checked = followups.file_mode.victim
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
        return followups.others


@dataclasses.dataclass(frozen=True)
class Followups:
    """What is run for culprits once found: the leak report, the file-mode
    check (None when they share the victim's file) and the tests before the
    victim without them (None when looking for a state-setter)."""

    leaks: Outcome
    file_mode: Outcome | None = None
    others: Outcome | None = None


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
