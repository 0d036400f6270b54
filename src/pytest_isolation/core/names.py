"""Names the parts of the plugin share: its version, registered plugin names
and the environment variables passed between processes."""

from __future__ import annotations

#: The package's version (``pytest_isolation.__version__``).
VERSION = "0.1.0.dev0"

#: The check of every option's input, before any part reads its own.
INPUT_CHECK = "isolation-input"
#: The leak guard, in the parent and in file-mode children.
GUARD = "isolation-guard"
#: The isolation lint of test files, where they are collected (never in a file-mode child).
LINT = "isolation-lint"
#: File mode's controller (the parent side of file mode).
CONTROLLER = "isolation-controller"
#: Runs the chosen tests each in a process of its own, and says so in the header.
PER_TEST = "isolation-process-per-test"
PER_TEST_HEADER = "isolation-process-per-test-header"
#: In a test's own process: sends its reports, warnings and leaks to the forking process.
TEST_FORWARDER = "isolation-test-forwarder"
#: Sends a file-mode child's running test's log records to the parent.
CHILD_LOGS = "isolation-child-logs"
#: The plugin inside a file-mode child that streams the file to the parent.
CHILD = "isolation-child"
#: A plain run's refusal of files that ask for processes of their own.
LATE_OPT_IN = "isolation-late-opt-in"
#: Says which file-mode options a run made plain by the environment ignores.
IGNORED = "isolation-ignored"
#: The CI features' plugins.
QUARANTINE = "isolation-quarantine"
SHARDING = "isolation-shard"
RUN_REPORT = "isolation-runlog"
RECORD_KEEPER = "isolation-record"
PLAIN_RECORDING = "isolation-record-plain"
#: Failure explanations (a patch that did not reach its target).
PATCHES = "isolation-explain"
#: The selector, once it has selected.
SELECTOR = "isolation-select"
#: ``--isolation-twice``: runs each test twice and reports failed repeats.
TWICE = "isolation-twice"
#: The polluter finder's recorder in each of its probe runs.
PROBE = "isolation-probe"
#: pytest-xdist: the plugin that exchanges each feature's state between
#: workers and controller, and file mode's part on either side.
XDIST_OUTPUT = "isolation-xdist-output"
XDIST_WORKER = "isolation-xdist-worker"
XDIST_CONTROLLER = "isolation-xdist-controller"

#: The parent's plugins that a forked child unregisters: the run is the parent's business.
PARENT_ONLY = (CONTROLLER, SHARDING, RUN_REPORT, RECORD_KEEPER, PLAIN_RECORDING)

#: What the entry plugin imports when a file-mode child configures (its parts
#: are imported when switched on), beside pytest's debugger: the zygote
#: imports them once for all its children (``tests/test_forkserver.py``
#: checks that a child imports none of them itself).
CHILD_CONFIGURE_IMPORTS = (
    "pdb",
    "pytest_isolation.diagnose.patches",
    "pytest_isolation.filemode.child.plugin",
    "pytest_isolation.filemode.child.start",
    "pytest_isolation.filemode.compat",
    "pytest_isolation.guard.watch",
    "pytest_isolation.pertest.chosen",
    "pytest_isolation.pertest.ending",
    "pytest_isolation.pertest.processes",
    "pytest_isolation.pertest.replay",
    "pytest_isolation.pertest.running",
    "pytest_isolation.pertest.scoped",
    "pytest_isolation.pertest.testchild",
    "pytest_isolation.pertest.waiting",
)

#: Tells a spawned interpreter it is a file-mode child (its value: the child's spec).
CHILD_ENV = "PYTEST_ISOLATION_CHILD"
#: Names the file a polluter-finder probe writes its record to.
PROBE_ENV = "PYTEST_ISOLATION_PROBE"
#: The test after which a polluter-finder probe that runs the user's paths stops.
PROBE_UNTIL_ENV = "PYTEST_ISOLATION_PROBE_UNTIL"
#: Opens the selector's full-suite gate when exactly 1, true or yes (any case).
ALLOW_ALL_ENV = "PYTEST_ISOLATION_ALLOW_ALL"
