"""The polluter finder's probes: pytest run in subprocesses on a set of
tests, each reporting through :mod:`pytest_isolation.diagnose.probe` how the
victim did, as many at once as ``--isolation-probes`` allows, until the
search's time runs out.  The search itself is :mod:`.finder`'s."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_isolation.core.names import PROBE_ENV
from pytest_isolation.core.names import PROBE_UNTIL_ENV

#: Options of the finder itself, and others that change what a probe runs or
#: where it reports: left out of the probes, with their values.
_TAKE_VALUE = frozenset(
    {
        "--isolation-find-polluter",
        "--isolation-probes",
        "--isolation-find-timeout",
        "--isolation-find-json",
        "--isolation-report",
        "--isolation-mode",
        "--isolation-shard",
        "--isolation-retries",
        "--isolation-timeout",
        "--isolation-json",
        "--isolation-for",
        "--isolation-since",
        "-n",
        "--numprocesses",
        "--maxfail",
        "--randomly-seed",
        "--lfnf",
        "--last-failed-no-failures",
        "--junitxml",
        "--junit-xml",
        "--basetemp",  # parallel probes must not share (and empty) one directory
    }
)
_DROP = frozenset(
    {
        "--lf",
        "--last-failed",
        "--ff",
        "--failed-first",
        "--nf",
        "--new-first",
        "--sw",
        "--stepwise",
        "--sw-skip",
        "--stepwise-skip",
        "--sw-reset",  # probes run without the cache, so without pytest's stepwise
        "--stepwise-reset",
        "--cache-clear",
        "-x",
        "--exitfirst",
        "--pdb",
        "--trace",
        "--isolation-dry-run",
        "--isolation-explain",
        "--randomly-dont-reorganize",
        "--randomly-dont-reset-seed",
    }
)


#: A run report the ini file asks for is the user's run's: a probe writes none.
_NO_REPORT = ("-o", "isolation_report=")


class FindError(Exception):
    """Bad input to the finder: the message names the option and value."""


class OutOfTime(Exception):
    pass


@dataclasses.dataclass
class Outcome:
    victim: str
    leaks: list[dict[str, Any]]
    collected: list[str]
    errors: list[str]
    #: The victim's failure text, when it failed.
    failure: str = ""
    #: Whether the run stopped right after the victim, as its :class:`Job` asked.
    stopped: bool = False


@dataclasses.dataclass(frozen=True)
class Job:
    """One probe: pytest's arguments, and the test after which it stops
    (empty: it runs all it collects)."""

    args: tuple[str, ...]
    until: str = ""


def probe_options(config: pytest.Config) -> list[str]:
    """The invocation's options for the probes: without its test paths, the
    finder's options, and what would change a probe's selection or order."""
    args = [str(a) for a in config.invocation_params.args]
    positional = set(config.args) if config.args_source == pytest.Config.ArgsSource.ARGS else set()
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if arg in positional or name in _DROP:
            continue
        if name in _TAKE_VALUE:
            skip = "=" not in arg
            continue
        if arg.startswith("-n") and arg[2:] and (arg[2:].isdigit() or arg[2:] == "auto"):
            continue
        kept.append(arg)
    return kept


class Prober:
    """Runs one search's probes: in the invocation directory, with the
    invocation's options less what would change a probe's selection or
    order (:func:`probe_options`), ``width`` at once, until ``deadline``."""

    def __init__(
        self, config: pytest.Config, victim: str, width: int, deadline: float | None
    ) -> None:
        self.config = config
        self.victim = victim
        self.width = width
        self.deadline = deadline
        self.options = probe_options(config)
        if not any(arg.split("=", 1)[0] == "--rootdir" for arg in self.options):
            # Without an ini file the rootdir comes from the paths given: a
            # probe given other paths would get another, and other node ids.
            self.options.append(f"--rootdir={config.rootpath}")
        if config.pluginmanager.has_plugin("xdist"):
            self.options += ["-n", "0"]
        self.paths = list(config.args)

    def argument(self, nodeid: str) -> str:
        """A node id (rootdir-relative) as an argument of a probe, which runs
        in the invocation directory, as the user's pytest did."""
        path, _, names = nodeid.partition("::")
        where = os.path.relpath(self.config.rootpath / path, self.config.invocation_params.dir)
        return f"{Path(where).as_posix()}::{names}"

    def _remaining(self) -> float | None:
        if self.deadline is None:
            return None
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise OutOfTime
        return left

    def _start(self, job: Job) -> tuple[subprocess.Popen[bytes], str]:
        handle, path = tempfile.mkstemp(prefix="isolation-probe-", suffix=".json")
        os.close(handle)
        env = {**os.environ, PROBE_ENV: path}
        if job.until:
            env[PROBE_UNTIL_ENV] = job.until
        command = [sys.executable, "-m", "pytest", *job.args]
        process = subprocess.Popen(
            command,
            cwd=self.config.invocation_params.dir,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        return process, path

    def _finish(self, process: subprocess.Popen[bytes], path: str) -> Outcome:
        try:
            _, stderr = process.communicate(timeout=self._remaining())
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            os.unlink(path)
            raise OutOfTime from None
        try:
            with open(path, encoding="utf-8") as file:
                data = json.load(file)
        except (OSError, ValueError):
            tail = stderr.decode(errors="replace").strip().splitlines()[-5:]
            raise FindError(
                "a probe run of pytest ended without a result (exit code "
                f"{process.returncode}): " + " / ".join(tail)
            ) from None
        finally:
            if os.path.exists(path):
                os.unlink(path)
        return Outcome(
            victim=data["outcomes"].get(self.victim, "not run"),
            leaks=data["leaks"],
            collected=data["collected"],
            errors=data["collection_errors"],
            failure=data.get("failures", {}).get(self.victim, ""),
            stopped=data.get("stopped", False),
        )

    def job(self, nodeids: Sequence[str], extra: Sequence[str] = ()) -> Job:
        """A probe of ``nodeids`` (the victim last), in this order."""
        args = [
            *self.options,
            *_NO_REPORT,
            "-p",
            "pytest_isolation.diagnose.probe",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
            "--isolation-leaks=off",
            *extra,
            *map(self.argument, nodeids),
        ]
        return Job(tuple(args))

    def collect_job(self) -> Job:
        """The collection: the run's order, pytest-randomly's where it is on,
        with this run's seed (the probes then run without it, in this
        order)."""
        seed = []
        if self.config.pluginmanager.has_plugin("randomly"):
            seed = [f"--randomly-seed={self.config.getoption('randomly_seed')}"]
        args = [
            *self.options,
            *seed,
            *_NO_REPORT,
            "-p",
            "pytest_isolation.diagnose.probe",
            "-p",
            "no:cacheprovider",
            "--isolation-leaks=off",
            "--collect-only",
            "-q",
            *self.paths,
        ]
        return Job(tuple(args))

    def order_job(self) -> Job | None:
        """The run's paths up to the victim: its order, and how the victim
        does after every test before it, in one run; None under
        pytest-randomly, whose order the probes run without it."""
        if self.config.pluginmanager.has_plugin("randomly"):
            return None
        args = [*self.job([]).args, *self.paths]
        return Job(tuple(args), until=self.victim)

    def run_many(self, runs: Sequence[Sequence[str]], extra: Sequence[str] = ()) -> list[Outcome]:
        return self.run_jobs([self.job(nodeids, extra) for nodeids in runs])

    def run_jobs(
        self, jobs: Sequence[Job], done: Callable[[int], None] | None = None
    ) -> list[Outcome]:
        """Each job's outcome, ``width`` at a time; the first that ended
        without a result raises its :class:`FindError`."""
        outcomes = self.attempt(jobs, done)
        for outcome in outcomes:
            if isinstance(outcome, FindError):
                raise outcome
        return [outcome for outcome in outcomes if isinstance(outcome, Outcome)]

    def attempt(
        self, jobs: Sequence[Job], done: Callable[[int], None] | None = None
    ) -> list[Outcome | FindError]:
        """Each job's outcome or why it has none, ``width`` at a time, in
        order; ``done(index)`` is told as each is read (where a time limit
        would cut the batch short)."""
        outcomes: list[Outcome | FindError] = []
        for start in range(0, len(jobs), self.width):
            batch = [self._start(job) for job in jobs[start : start + self.width]]
            try:
                for process, path in batch:
                    try:
                        outcomes.append(self._finish(process, path))
                    except FindError as error:
                        outcomes.append(error)
                    if done is not None:
                        done(len(outcomes) - 1)
            except BaseException:
                for process, path in batch:
                    if process.poll() is None:
                        os.killpg(process.pid, signal.SIGKILL)
                        process.wait()
                    if os.path.exists(path):
                        os.unlink(path)
                raise
        return outcomes

    def collect(self) -> list[str]:
        """The run's order (see :meth:`collect_job`)."""
        return self.run_jobs([self.collect_job()])[0].collected
