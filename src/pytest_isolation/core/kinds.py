"""The kinds of values the parts pass each other as text, one type each, so
that mypy checks every caller.

Each is a ``Literal`` of ``str``: the values are option and ini values, or
cross a process boundary (pickled to a file-mode child, JSON in the run
report and the selector's record), so they stay plain text everywhere.  The
runtime tuples of choices (``settings.MODES`` and the like) are derived from
these with ``typing.get_args``, in the order given here: the first value is
the option's default.  The wire protocol's message kinds are typed in
``filemode/wire.py``, which imports the standard library only; what set
the run's mode, which never leaves the process and is compared, is an
``Enum`` (``settings.ModeSource``).
"""

from __future__ import annotations

from typing import Literal

# -- option values (core/options.py ``choice`` checks them where they are read) --

#: ``--isolation-mode``: every file together (``off``), each file in a process
#: of its own (``file``), or each test (``test``).
Mode = Literal["off", "file", "test"]
#: ``--isolation-start``: how file mode starts a child.
StartMethod = Literal["auto", "fork", "spawn", "forkserver"]
#: The start method a run uses, once ``auto`` is resolved.
Started = Literal["fork", "spawn", "forkserver"]
#: ``--isolation-leaks``: what the leak guard does with a leak.
LeakPolicy = Literal["warn", "error", "quiet", "off"]
#: ``--isolation-retry-scope``: what a retry of a file reruns.
RetryScope = Literal["failed", "file"]
#: ``--isolation-preload``: what the fork server imports before the first child.
Preload = Literal["off", "auto"]
#: ``--isolation-lint``: what the isolation lint does with a finding.
LintLevel = Literal["off", "warn", "error"]
#: ``--isolation-record``: when a run records what each test file executes.
RecordSetting = Literal["auto", "on", "off"]
#: ``--isolation-keep-tmp``: which ``isolated_tmp`` directories are kept.
KeepTmp = Literal["never", "failed", "always"]
#: ``--isolation-shard-strategy``: how test files are split into shards.
ShardStrategy = Literal["auto", "round-robin", "duration"]
#: ``--isolation-scope``: how far the selector follows a changed file.
SelectorScope = Literal["auto", "recorded", "convention", "graph", "impact", "all"]
#: The selector's scopes that follow imports, narrowest first.
GraphScope = Literal["convention", "graph", "impact"]
#: ``--isolation-unmapped``: what a changed file no test maps to does.
Unmapped = Literal["error", "warn", "ignore"]

# -- the leak guard ------------------------------------------------------------

#: The guard's policy: a :data:`LeakPolicy` but ``off``, or ``watch`` (the
#: guard is off, but ``--isolation-twice`` asks what a first run left changed).
GuardPolicy = Literal["warn", "error", "quiet", "watch"]
#: Whose span a window of checking is, and so who owns its leaks.
WindowKind = Literal["test", "fixture", "file"]
#: ``--isolation-twice``: the run of a test that runs twice.
Repeat = Literal["first", "again"]

# -- pytest's own vocabulary -----------------------------------------------------

#: A fixture's scope, as pytest names it (``FixtureDef.scope``).
FixtureScope = Literal["session", "package", "module", "class", "function"]
#: A phase of running a test (``TestReport.when``).
Phase = Literal["setup", "call", "teardown"]
#: When a warning was recorded (``pytest_warning_recorded``'s ``when``).
WarningWhen = Literal["config", "collect", "runtest"]

# -- file mode -------------------------------------------------------------------

#: Where a test file runs: a process of its own, a named group's, or with
#: the files not isolated (``isolation_paths``, conftests, the marker); or a
#: process of its own and each of its tests in a process of their own (``test``).
Placed = Literal["file", "group", "off", "test"]
