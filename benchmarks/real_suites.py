"""Conformance harness: real projects' test suites, plain and with pytest-isolation.

For every project in ``PROJECTS`` it downloads the sdist, builds a venv with the project, its
test requirements, pytest 9 and this repository's plugin (editable), then runs the suite in
four modes, each in a fresh copy of the extracted tree:

* ``plain`` -- ``python -m pytest -p no:isolation ARGS`` (the plugin off entirely)
* ``fork``  -- ``python -m pytest --isolation-mode=file --isolation-start=fork ARGS``
* ``spawn`` -- ``python -m pytest --isolation-mode=file --isolation-start=spawn ARGS``
* ``guard`` -- ``python -m pytest ARGS`` (the plugin loaded: the leak guard only)

and compares every mode with ``plain``: per-test outcomes from the junit XML, files the run
wrote into its tree, exit code, wall time and leak warnings. See ``benchmarks/README.md``.

The ``loop`` mode is file mode's oracle, the shell loop: ``python -m pytest -p no:isolation
OPTIONS FILE`` in a fresh interpreter for each test file the suite collects, one after another
in one tree. When it runs, every file-mode run is also compared with it, test by test: a
difference from the loop is the plugin's, unless the loop itself differs from plain there (a
test that depends on another file of the suite).

    python benchmarks/real_suites.py [--projects NAME ...] [--modes MODE ...] [--runs N]
        [--work DIR] [--plugin PATH] [--python EXE] [--timeout S] [--rebuild]
        [--out PATH] [--json PATH]

Standard library only. It downloads from the package index: not part of CI.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import filecmp
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import time
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import _machine  # beside this script: work directories and interpreters

REPO_DIR = Path(__file__).resolve().parent.parent
DEFAULT_WORK = _machine.work_dir("realsuites")
#: The venvs' Python without ``--python``: found on PATH, else under pyenv (``_machine``).
PYTHON_VERSION = "3.11"
PYTEST_REQ = "pytest>=9,<10"

MODES: dict[str, tuple[str, ...]] = {
    "plain": ("-p", "no:isolation"),
    "fork": ("--isolation-mode=file", "--isolation-start=fork"),
    "spawn": ("--isolation-mode=file", "--isolation-start=spawn"),
    "guard": (),
    # File mode under pytest-xdist, two workers (not run by default).
    "fork-n2": ("--isolation-mode=file", "--isolation-start=fork", "-n", "2"),
    # The shell loop, file mode's oracle (not run by default): see run_loop.
    "loop": ("-p", "no:isolation"),
    # File mode without the leak guard (not run by default): what file mode alone changes.
    "fork-noguard": ("--isolation-mode=file", "--isolation-start=fork", "--isolation-leaks=off"),
    # File mode without the selector's record (not run by default): what the record costs.
    "fork-norecord": ("--isolation-mode=file", "--isolation-start=fork", "--isolation-record=off"),
    # File mode with the forkserver start method (not run by default).
    "forkserver": ("--isolation-mode=file", "--isolation-start=forkserver"),
    # File mode with the preloading fork server (opt-in; not run by default): what preloading
    # changes.
    "fork-preload": (
        "--isolation-mode=file",
        "--isolation-start=fork",
        "--isolation-preload=auto",
    ),
    # File mode with pytest-django's test database created once for every child
    # (not run by default; Django projects only).
    "fork-shared-db": (
        "--isolation-mode=file",
        "--isolation-start=fork",
        "-o",
        "isolation_shared_fixtures=django_db_setup",
    ),
    # Every passing test run a second time at once (--isolation-twice; not run by default):
    # the guard on, and in file mode. Differences from plain are the tests whose repeat fails.
    "twice": ("--isolation-twice",),
    "twice-fork": ("--isolation-mode=file", "--isolation-start=fork", "--isolation-twice"),
    # Every test in a process of its own (not run by default): differences from plain are
    # tests that depend on what an earlier test of their process left behind.
    "test": ("--isolation-mode=test",),
    # The same under pytest-xdist, two workers (not run by default).
    "test-n2": ("--isolation-mode=test", "-n", "2"),
}
#: The modes run without --modes.
DEFAULT_MODES = ("plain", "fork", "spawn", "guard")

# These would change what pytest runs; removed for every mode alike.
SCRUBBED_ENV = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD")

# Caches that a run writes and that say nothing about the suite's behaviour.
IGNORED_DIRS = frozenset({"__pycache__", ".pytest_cache", ".hypothesis"})
IGNORED_SUFFIXES = (".pyc",)

# The plugin's copy for building its editable install: its metadata and code, no caches.
PLUGIN_COPY_IGNORE = shutil.ignore_patterns(
    ".git", ".venv*", ".tox", "*.egg-info", "__pycache__", "*_cache", "tests", "docs",
    "benchmarks", "examples",
)  # fmt: skip


# --------------------------------------------------------------------------- the projects


@dataclasses.dataclass(frozen=True)
class Project:
    """One real project: where its suite comes from and how it is run."""

    name: str  # PyPI name
    version: str
    requirements: tuple[str, ...]  # what its tests need besides the project and pytest
    args: tuple[str, ...]  # pytest arguments, relative to the extracted sdist
    why: str
    env: tuple[tuple[str, str], ...] = ()
    extras: str = ""  # e.g. "[trio]", installed with the project
    pytest_req: str = PYTEST_REQ  # a suite that needs another pytest (private API) says so
    # The release's source archive, for a project whose sdist has no tests: its tree is
    # the one the suite runs in (the sdist still installs the project).
    source: str = ""


PROJECTS: list[Project] = [
    Project(
        name="attrs",
        version="26.1.0",
        requirements=("hypothesis==6.170.17", "pympler", "cloudpickle"),
        args=("tests", "--hypothesis-seed=0"),
        why="Hypothesis-driven suite (property tests over generated classes); the seed is "
        "fixed so that every mode draws the same examples.",
    ),
    Project(
        name="python-dateutil",
        version="4.0.0",
        requirements=("hypothesis==6.170.17", "freezegun", "pytest-cov", "attrs"),
        args=("tests", "--hypothesis-seed=0"),
        why="unittest-style suite (TestCase classes, setUp/tearDown); it changes TZ and "
        "calls time.tzset(), process-wide state the guard must see and file mode contain.",
    ),
    Project(
        name="more-itertools",
        version="11.2.1",
        requirements=(),
        args=("tests",),
        why="unittest-style suite (TestCase classes only), two large test files: per-file "
        "overhead is negligible, so the ratios show the pure cost of the machinery.",
    ),
    Project(
        name="asgiref",
        version="3.13.0",
        requirements=("pytest-asyncio==1.5.0",),
        args=("tests",),
        why="asyncio suite with pytest-asyncio (event loops per test, sync_to_async thread "
        "pools, contextvars): loops and threads that must not leak across files.",
    ),
    Project(
        name="anyio",
        version="4.16.0",
        requirements=(
            "trio",
            "hypothesis==6.170.17",
            "psutil",
            "pytest-mock",
            "trustme",
            "truststore",
            "uvloop",
            "blockbuster",
            "pytest-timeout",
        ),
        # test_sockets.py needs IPv6, which this machine lacks (108 failures plain);
        # test_pytest_plugin.py is 38 pytester sessions taking 45 s: both left out.
        args=(
            "tests",
            "-m",
            "not network",
            "--ignore=tests/test_sockets.py",
            "--ignore=tests/test_pytest_plugin.py",
            "--hypothesis-seed=0",
        ),
        why="anyio's own pytest plugin (every async test on asyncio, asyncio+uvloop and "
        "trio), worker processes, subprocesses and threads; a large async suite.",
    ),
    Project(
        name="django-extensions",
        version="4.1",
        requirements=(
            "Django==5.2.19",
            "pytest-django==4.14.0",
            "pytest-cov",
            "factory-boy",
            "shortuuid",
            "pygments",
            "werkzeug",
            "python-dateutil",
            "aiosmtpd",
        ),
        args=("django_extensions", "tests"),
        why="pytest-django suite with a Django test database (sqlite in memory, "
        "@pytest.mark.django_db), settings, management commands writing files, and "
        "pytest-cov from the project's addopts.",
    ),
    Project(
        name="djangorestframework",
        version="3.18.3",
        requirements=(
            "Django==5.2.19",
            "pytest-django==4.14.0",
            "dj-database-url",
            "importlib-metadata",
            "pytest-cov",
        ),
        args=("tests",),
        why="pytest-django suite of Django TestCase classes and pytest tests on the test "
        "database (sqlite), settings configured in conftest's pytest_configure, "
        "--no-migrations.",
    ),
    Project(
        name="syrupy",
        version="7.0.2",
        requirements=(
            "hypothesis==6.170.17",
            "pytest-benchmark",
            "pytest-xdist",
            "pydantic",
            "attrs",
            "invoke",
        ),
        # tests/integration (pytester sessions, some with xdist) takes over 10 minutes
        # here and hung once in an in-process xdist run: left out.
        args=("tests/syrupy", "tests/examples", "--hypothesis-seed=0"),
        why="Snapshot testing: syrupy's own unit suite asserts against the .ambr/.raw "
        "snapshots shipped in the sdist, and syrupy checks for unused snapshots across the "
        "whole session at its end (a session-wide view file mode must not break).",
    ),
    Project(
        name="jsonschema",
        version="4.26.0",
        requirements=("jsonpath-ng",),
        args=("jsonschema/tests",),
        why="Large suite (thousands of tests generated from the JSON-Schema-Test-Suite "
        "data shipped in the sdist), unittest-style TestCase classes.",
    ),
    Project(
        name="pygments",
        version="2.21.0",
        requirements=("wcag-contrast-ratio",),
        args=("tests",),
        why="Large suite (every lexer against golden output files: a snapshot-style suite "
        "with files compared, not written); many files, many parametrised tests.",
    ),
    Project(
        name="click",
        version="8.5.1",
        requirements=(),
        args=("tests",),
        why="CLI suite: CliRunner swaps sys.stdin/stdout, os.environ and the cwd inside "
        "tests; isolated_filesystem writes and removes temp trees.",
    ),
    Project(
        name="structlog",
        version="26.1.0",
        requirements=("pytest-asyncio==1.5.0", "simplejson", "time-machine", "rich", "greenlet"),
        args=("tests",),
        why="Logging library configured at import: importing structlog builds its "
        "process-wide default configuration (module-level _CONFIG: processors, wrapper "
        "class, a PrintLoggerFactory on stdout); the tests reconfigure and reset it, "
        "create stdlib loggers, add handlers and ProcessorFormatters, and use time-machine.",
    ),
    Project(
        name="flask",
        version="3.1.3",
        requirements=("asgiref", "greenlet", "python-dotenv"),
        # Its conftest and tests/test_cli.py use _pytest.monkeypatch.notset, which pytest 9
        # no longer has (every test errors): this one suite runs on pytest 8.
        args=("tests",),
        pytest_req="pytest>=8.4,<9",
        why="Web-application framework: app and request contexts (contextvars), the "
        "test client, blueprints, sessions, CLI; the app's logger gets flask's "
        "default_handler on first use and werkzeug adds its own handler lazily; "
        "filterwarnings = error.",
    ),
    Project(
        name="humanize",
        version="4.17.0",
        requirements=("freezegun", "pytest-benchmark"),
        args=("src", "tests"),
        why="Time patched in tests: freezegun's freeze_time around naturaltime/naturalday "
        "tests (fake datetime classes bound while the patch is active), gettext "
        "catalogues activated and deactivated (humanize.i18n globals), doctests of the "
        "package; filterwarnings = error.",
    ),
    Project(
        name="dateparser",
        version="1.5.0",
        requirements=("parameterized", "langdetect", "convertdate", "hijridate"),
        args=("tests",),
        why="Very large parametrised suite (over 20,000 tests from parameterized.expand "
        "over every language's data), unittest-style classes; settings changed through "
        "a module-level settings object and decorators.",
    ),
    Project(
        name="rich",
        version="14.3.3",
        requirements=("attrs",),
        args=("tests",),
        source="https://github.com/Textualize/rich/archive/refs/tags/v14.3.3.tar.gz",
        why="Terminal rendering: a process-wide Console bound to sys.stdout at first use, "
        "environment-driven colour detection (TERM, NO_COLOR, FORCE_COLOR, COLUMNS read "
        "at console creation), the pygments lexers it imports for syntax highlighting, "
        "and many small test files; its sdist has no tests, so they come from the tag.",
    ),
]


# --------------------------------------------------------------------------- results


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One test's outcome in one run, from the junit XML."""

    kind: str  # passed, failed, error, skipped, xfail, xpass(strict), or a+b for several
    message: str  # first line of the failure/error/skip message


@dataclasses.dataclass(frozen=True)
class Leaks:
    """The guard's leak report in one run's terminal output."""

    warning_lines: int  # lines of the warnings summary naming LeakedStateWarning
    summary: str  # "13 tests, 1 fixture and 3 files" from "isolation: N leaks by ..."
    categories: dict[str, int]  # "[env]", "[sys.modules]", ... lines of that section
    entries: list[str]  # that section's lines: "test id" then "  [category] what"


@dataclasses.dataclass(frozen=True)
class Run:
    """One run of one project's suite in one mode."""

    mode: str
    index: int
    exit_code: int | None  # None: the harness killed it at the timeout
    wall: float
    outcomes: dict[str, Outcome]
    files: dict[str, str]  # path relative to the tree -> created, changed or deleted
    leaks: Leaks
    problem: str  # why the run failed as a run (timeout, no junit), else ""
    output: str  # path of the captured terminal output


@dataclasses.dataclass(frozen=True)
class TestDiff:
    test: str
    plain: str  # the outcome kind in plain, or "absent"
    other: str
    message: str  # first line of the other run's message (else plain's)


@dataclasses.dataclass
class ProjectResult:
    project: Project
    runs: list[Run]
    versions: dict[str, str]  # pytest, plugin, python in the project's venv
    error: str = ""  # set when the project could not be set up


# --------------------------------------------------------------------------- small helpers


def log(message: str) -> None:
    print(f"[real_suites] {message}", file=sys.stderr, flush=True)


def norm(name: str) -> str:
    """PyPI-normalised name (or name-version), for matching sdist file names."""
    return re.sub(r"[-_.]+", "-", name).lower()


def run_checked(cmd: Sequence[str | Path], env: dict[str, str] | None = None) -> str:
    """Run a set-up command; on failure stop with its output (set-up must not half-work)."""
    proc = subprocess.run(
        [str(c) for c in cmd], env=env, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-3000:]
        raise RuntimeError(f"command failed ({proc.returncode}): {' '.join(map(str, cmd))}\n{tail}")
    return proc.stdout


def base_env(work: Path) -> dict[str, str]:
    """The environment of every pytest run and probe, the same for every mode.

    Bytecode goes to a prefix outside the trees: the plugin is imported (editable) from the
    repository, which nothing here may write to, and the trees stay free of caches.  It is
    written there (``PYTHONDONTWRITEBYTECODE``, which this machine sets, is dropped), as on
    a developer's machine: otherwise pytest rewrites the asserts of every module of the
    plugin (an installed pytest plugin's modules are rewritten) from source in every run,
    about 0.15 s that no installed plugin costs where bytecode is cached.  Both modes are
    treated alike: each run's tree (one path per mode and repetition) caches its test files.

    ``PYTHONHASHSEED`` is fixed: a test id made from a set's order (structlog's
    ``parameter_strings5``) then names the same test in every process, the loop's fresh
    interpreters as the forked children, which inherit their parent's seed.
    """
    scrubbed = (*SCRUBBED_ENV, "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in scrubbed}
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    env["PYTHONHASHSEED"] = "0"
    return env


def venv_python(work: Path, project: Project) -> Path:
    return work / "venvs" / f"{project.name}-{project.version}" / "bin" / "python"


def pristine_tree(work: Path, project: Project) -> Path:
    return work / "trees" / f"{project.name}-{project.version}"


def default_python() -> str:
    try:
        return _machine.find_python(PYTHON_VERSION)
    except _machine.PythonNotFound as exc:
        raise SystemExit(f"real_suites.py: {exc}; pass --python EXE") from None


# --------------------------------------------------------------------------- set-up


def find_sdist(folder: Path, project: Project) -> Path | None:
    want = norm(f"{project.name}-{project.version}")
    for path in sorted(folder.glob("*")):
        stem = re.sub(r"\.(tar\.gz|tgz|zip|tar\.bz2)$", "", path.name)
        if stem != path.name and norm(stem) == want:
            return path
    return None


def fetch_sdist(work: Path, python: str, project: Project) -> Path:
    """The project's sdist, downloaded once into the cache."""
    folder = work / "sdists"
    folder.mkdir(parents=True, exist_ok=True)
    cached = find_sdist(folder, project)
    if cached is not None:
        return cached
    log(f"{project.name}: downloading the sdist")
    spec = f"{project.name}=={project.version}"
    pip = [python, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:"]
    run_checked([*pip, "--dest", folder, spec])
    found = find_sdist(folder, project)
    if found is None:
        raise RuntimeError(f"pip download {spec} left no sdist in {folder}")
    return found


def fetch_source(work: Path, project: Project) -> Path:
    """The release's source archive (``project.source``), downloaded once into the cache."""
    path = work / "sdists" / f"{project.name}-{project.version}-source.tar.gz"
    if not path.is_file():
        log(f"{project.name}: downloading the release's source")
        path.parent.mkdir(parents=True, exist_ok=True)
        with urllib.request.urlopen(project.source, timeout=300) as response:
            data = response.read()
        path.with_suffix(".part").write_bytes(data)
        path.with_suffix(".part").rename(path)
    return path


def extract(sdist: Path, dest: Path) -> None:
    """Extract the sdist's single top-level folder as ``dest`` (the pristine tree)."""
    scratch = dest.with_name(dest.name + ".extracting")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    if sdist.name.endswith(".zip"):
        shutil.unpack_archive(sdist, scratch)
    else:
        with tarfile.open(sdist) as archive:
            # The data filter refuses absolute paths and links out of the tree.
            archive.extractall(scratch, filter="data")
    tops = list(scratch.iterdir())
    if len(tops) != 1 or not tops[0].is_dir():
        raise RuntimeError(f"{sdist.name}: expected one top-level folder, found {tops}")
    shutil.rmtree(dest, ignore_errors=True)
    tops[0].rename(dest)
    scratch.rmdir()


def install_spec(project: Project, sdist: Path) -> list[str]:
    # From the sdist file, not the pristine tree: an in-tree build would write into it.
    return [f"{project.name}{project.extras} @ {sdist.as_uri()}", *project.requirements]


def install_plugin(work: Path, py: Path, plugin: Path) -> None:
    """Install the plugin editable, pointing at ``plugin/src``, without writing into it.

    ``pip install -e PLUGIN`` would (re)write ``src/*.egg-info`` in the plugin's tree, which
    another engineer may be editing. So the editable wheel is built from a copy of the
    plugin's metadata and code, and the static path its .pth adds is then pointed back at
    ``plugin/src``: the same install as ``pip install -e PLUGIN``, code changes in
    ``plugin/src`` are live; only a change of entry points or metadata needs ``--rebuild``.
    """
    copy = work / "plugin-copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(plugin, copy, ignore=PLUGIN_COPY_IGNORE)
    run_checked([py, "-m", "pip", "install", "-q", "--no-deps", "-e", copy])
    purelib = run_checked([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    pths = sorted(Path(purelib.strip()).glob("__editable__*pytest_isolation*.pth"))
    if len(pths) != 1 or pths[0].read_text().strip() != str(copy / "src"):
        raise RuntimeError(f"unexpected editable install of the plugin: {pths}")
    pths[0].write_text(f"{plugin / 'src'}\n")
    shutil.rmtree(copy)


def precompile(work: Path, py: Path, *folders: Path | str) -> None:
    """Byte-compile into the prefix cache, so no run pays for compiling the libraries.

    (pip compiles what it installs, but next to the sources; the runs look in the prefix.)
    """
    cmd = [str(py), "-m", "compileall", "-q", "-j0", *map(str, folders)]
    subprocess.run(cmd, env=base_env(work), capture_output=True, check=False)


def venv_stamp(project: Project, sdist: Path) -> str:
    return json.dumps({"install": install_spec(project, sdist), "pytest": project.pytest_req})


def build_venv(work: Path, python: str, project: Project, plugin: Path, rebuild: bool) -> Path:
    """The project's venv (cached: rebuilt with --rebuild or when its requirements change)."""
    sdist = fetch_sdist(work, python, project)
    tree = pristine_tree(work, project)
    if rebuild or not tree.is_dir():
        extract(fetch_source(work, project) if project.source else sdist, tree)
    py = venv_python(work, project)
    stamp = py.parent.parent / "real-suites-stamp.json"
    if not rebuild and stamp.is_file() and stamp.read_text() == venv_stamp(project, sdist):
        return py
    log(f"{project.name}: building the venv")
    shutil.rmtree(py.parent.parent, ignore_errors=True)
    run_checked([python, "-m", "venv", py.parent.parent])
    install = [*install_spec(project, sdist), project.pytest_req]
    run_checked([py, "-m", "pip", "install", "-q", *install])
    install_plugin(work, py, plugin)
    purelib = run_checked([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    precompile(work, py, purelib.strip())
    stamp.write_text(venv_stamp(project, sdist))
    return py


VERSIONS_PROBE = """\
import importlib.metadata as m, importlib.util as u, json, sys
print(json.dumps({
    "python": sys.version.split()[0],
    "pytest": m.version("pytest"),
    "plugin": m.version("pytest-isolation"),
    "plugin_path": u.find_spec("pytest_isolation").origin,
    "randomly": u.find_spec("pytest_randomly") is not None,
}))
"""


def probe_versions(work: Path, py: Path) -> dict[str, Any]:
    return dict(json.loads(run_checked([py, "-c", VERSIONS_PROBE], env=base_env(work))))


# --------------------------------------------------------------------------- one run


def listing(root: Path) -> set[str]:
    """Files under ``root``, relative, without the caches a run leaves everywhere."""
    found: set[str] = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in IGNORED_DIRS]
        rel = Path(folder).relative_to(root)
        found.update((rel / f).as_posix() for f in files if not f.endswith(IGNORED_SUFFIXES))
    return found


def differs(before: Path, after: Path) -> bool:
    a, b = before.lstat(), after.lstat()
    if a.st_size != b.st_size:
        return True
    if a.st_mtime_ns == b.st_mtime_ns:  # copytree keeps mtimes: an untouched file
        return False
    return not filecmp.cmp(before, after, shallow=False)


def written_files(pristine: Path, tree: Path) -> dict[str, str]:
    """What the run did to its tree: path -> created, changed or deleted."""
    before, after = listing(pristine), listing(tree)
    result = {p: "created" for p in after - before}
    result.update({p: "deleted" for p in before - after})
    for p in before & after:
        if differs(pristine / p, tree / p):
            result[p] = "changed"
    return dict(sorted(result.items()))


def first_line(text: str | None) -> str:
    line = next((s.strip() for s in (text or "").splitlines() if s.strip()), "")
    return line if len(line) <= 240 else line[:237] + "..."


def outcome_of(case: ET.Element) -> Outcome:
    kinds: list[str] = []
    message = ""
    for child in case:
        text = child.get("message") or child.text
        if child.tag == "failure":
            xpass = (child.get("message") or "").startswith("[XPASS(strict)]")
            kinds.append("xpass(strict)" if xpass else "failed")
        elif child.tag == "error":
            kinds.append("error")
        elif child.tag == "skipped":
            kinds.append("xfail" if child.get("type") == "pytest.xfail" else "skipped")
        else:
            continue  # system-out, system-err, properties
        message = message or first_line(text)
    return Outcome("+".join(kinds) or "passed", message)


def parse_junit(path: Path) -> dict[str, Outcome]:
    """Test id (classname::name) -> outcome; a repeated id gets " #2", " #3", ..."""
    outcomes: dict[str, Outcome] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        test = f"{case.get('classname', '')}::{case.get('name', '')}"
        key, n = test, 1
        while key in outcomes:
            n += 1
            key = f"{test} #{n}"
        outcomes[key] = outcome_of(case)
    return outcomes


# A section's title line, or a line that ends one ("-- Docs: ...", "--- generated xml ---").
SECTION_RE = re.compile(r"^(=+ .* =+|-+ .* -+|-- Docs: .*)$")


def section(lines: list[str], title: str) -> list[str]:
    """The lines of one ``===== title =====`` section of pytest's terminal output."""
    for i, line in enumerate(lines):
        if SECTION_RE.match(line) and f" {title} " in line:
            end = next((j for j in range(i + 1, len(lines)) if SECTION_RE.match(lines[j])), None)
            return lines[i + 1 : end]
    return []


def leaks_in(output: str) -> Leaks:
    lines = output.splitlines()
    warnings = section(lines, "warnings summary")
    # "isolation: 4 leaks by 2 tests and 1 file" (before issue 49: "... leaked state")
    count = re.search(r"^=+ isolation: (?:\d+ leaks? by (.+)|(.+) leaked state) =+$", output, re.M)
    entries = [line.rstrip() for line in section(lines, "isolation:") if line.strip()]
    return Leaks(
        warning_lines=sum("LeakedStateWarning" in line for line in warnings),
        summary=(count.group(1) or count.group(2)) if count else "",
        categories=categories_in(entries),
        entries=entries,
    )


def categories_in(entries: Sequence[str]) -> dict[str, int]:
    """Entries per category in the leak section: its "[category] what" lines."""
    categories: dict[str, int] = {}
    for line in entries:
        found = re.match(r"^\s*\[([^\]]+)\]", line)
        if found:
            categories[found.group(1)] = categories.get(found.group(1), 0) + 1
    return dict(sorted(categories.items()))


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """End the run's whole process group: children, servers, file-mode workers."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def execute(
    cmd: list[str], cwd: Path, env: dict[str, str], out: Path, timeout: float
) -> int | None:
    """Run ``cmd``; its exit code, or None when it outlived ``timeout`` and was killed."""
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=sink,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            code: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        # Stragglers (a server a test forgot, a stuck child) must not disturb the next run.
        kill_group(proc)
        proc.wait()
    return code


@dataclasses.dataclass(frozen=True)
class Context:
    work: Path
    timeout: float
    randomly: bool  # pytest-randomly is installed: pin the order


def run_once(ctx: Context, project: Project, py: Path, mode: str, index: int) -> Run:
    if mode == "loop":
        return run_loop(ctx, project, py, index)
    run_dir = ctx.work / "runs" / project.name / f"{mode}-{index}"
    shutil.rmtree(run_dir, ignore_errors=True)
    tree, junit, out = run_dir / "tree", run_dir / "junit.xml", run_dir / "output.txt"
    pristine = pristine_tree(ctx.work, project)
    shutil.copytree(pristine, tree, symlinks=True)
    cmd = [str(py), "-m", "pytest", *MODES[mode], *project.args, f"--junitxml={junit}"]
    cmd += ["-p", "no:randomly"] if ctx.randomly else []
    env = {**base_env(ctx.work), **dict(project.env)}
    start = time.perf_counter()
    code = execute(cmd, tree, env, out, ctx.timeout)
    wall = time.perf_counter() - start
    problem = "" if code is not None else f"killed at the {ctx.timeout:.0f}s timeout"
    try:
        outcomes = parse_junit(junit)
    except (OSError, ET.ParseError) as exc:
        outcomes, problem = {}, problem or f"no junit XML ({exc.__class__.__name__})"
    text = out.read_text(errors="replace")
    files = written_files(pristine, tree)
    return Run(mode, index, code, wall, outcomes, files, leaks_in(text), problem, str(out))


def test_files(
    ctx: Context, project: Project, py: Path, tree: Path, env: dict[str, str], out: Path
) -> tuple[list[str], str]:
    """The files of the suite's collected tests, in collection order, and those skipped
    whole at collection (junit's records of the collection: ``tests.pkg.test_x`` for
    ``tests/pkg/test_x.py``), or why there are none."""
    junit = out.with_suffix(".xml")
    cmd = [str(py), "-m", "pytest", "-p", "no:isolation", "--collect-only", "-q"]
    cmd += [*project.args, f"--junitxml={junit}"]
    cmd += ["-p", "no:randomly"] if ctx.randomly else []
    code = execute(cmd, tree, env, out, ctx.timeout)
    files: dict[str, None] = {}
    for line in out.read_text(errors="replace").splitlines():
        if "::" in line and not line.startswith(" "):
            files.setdefault(_in_tree(tree, line.split("::", 1)[0], project.args), None)
    with contextlib.suppress(OSError, ET.ParseError):
        for case in ET.parse(junit).getroot().iter("testcase"):
            module = case.get("name", "") if not case.get("classname") else ""
            path = module.replace(".", "/") + ".py"
            if module and (tree / path).is_file():
                files.setdefault(path, None)
    # A plugin may fail a collect-only session that listed every test (syrupy: unused
    # snapshots): the list is what counts.
    return list(files), "" if files or code in (0, 5) else f"collection exited {code}"


def _in_tree(tree: Path, name: str, args: tuple[str, ...]) -> str:
    """A collected file's path from the tree's top: node ids are relative to the
    rootdir, which is a folder of the arguments when it has its own ini file (rich's
    ``tests/pytest.ini``)."""
    if (tree / name).is_file():
        return name
    for arg in args:
        if not arg.startswith("-") and (tree / arg / name).is_file():
            return f"{arg.rstrip('/')}/{name}"
    return name


def run_loop(ctx: Context, project: Project, py: Path, index: int) -> Run:
    """The shell loop: each collected test file in a fresh interpreter, without the
    plugin, with the suite's options (its arguments that are not paths), in one tree."""
    run_dir = ctx.work / "runs" / project.name / f"loop-{index}"
    shutil.rmtree(run_dir, ignore_errors=True)
    tree, out = run_dir / "tree", run_dir / "output.txt"
    pristine = pristine_tree(ctx.work, project)
    shutil.copytree(pristine, tree, symlinks=True)
    (run_dir / "junit").mkdir()
    env = {**base_env(ctx.work), **dict(project.env)}
    start = time.perf_counter()
    files, problem = test_files(ctx, project, py, tree, env, run_dir / "collect.txt")
    options = [arg for arg in project.args if arg.startswith("-") or not (tree / arg).exists()]
    outcomes: dict[str, Outcome] = {}
    codes: list[int | None] = []
    texts: list[str] = []
    for number, name in enumerate(files):
        junit, file_out = run_dir / "junit" / f"{number}.xml", run_dir / "junit" / f"{number}.txt"
        cmd = [str(py), "-m", "pytest", *MODES["loop"], *options, name, f"--junitxml={junit}"]
        cmd += ["-p", "no:randomly"] if ctx.randomly else []
        codes.append(execute(cmd, tree, env, file_out, ctx.timeout))
        texts.append(file_out.read_text(errors="replace"))
        try:
            found = parse_junit(junit)
        except (OSError, ET.ParseError) as exc:
            problem = problem or f"{name}: no junit XML ({exc.__class__.__name__})"
            continue
        for test, outcome in found.items():
            key, n = test, 1
            while key in outcomes:
                n += 1
                key = f"{test} #{n}"
            outcomes[key] = outcome
    wall = time.perf_counter() - start
    if any(code is None for code in codes):
        problem = problem or f"a file was killed at the {ctx.timeout:.0f}s timeout"
    failing = [code for code in codes if code not in (0, 5, None)]
    code = failing[0] if failing else (0 if files else 5)
    out.write_text("\n".join(texts))
    files_written = written_files(pristine, tree)
    return Run("loop", index, code, wall, outcomes, files_written, leaks_in(""), problem, str(out))


# --------------------------------------------------------------------------- comparison


def test_diffs(plain: Run, other: Run) -> list[TestDiff]:
    """Every test whose outcome differs, or that only one of the runs has."""
    diffs = []
    for test in sorted(plain.outcomes.keys() | other.outcomes.keys()):
        a, b = plain.outcomes.get(test), other.outcomes.get(test)
        if a is not None and b is not None and a.kind == b.kind:
            continue
        message = (b.message if b else "") or (a.message if a else "")
        diffs.append(TestDiff(test, a.kind if a else "absent", b.kind if b else "absent", message))
    return diffs


def file_diffs(plain: Run, other: Run) -> list[tuple[str, str, str]]:
    """(path, what plain did to it, what the other run did) where the two differ."""
    paths = sorted(plain.files.keys() | other.files.keys())
    pairs = [(p, plain.files.get(p, "-"), other.files.get(p, "-")) for p in paths]
    return [pair for pair in pairs if pair[1] != pair[2]]


def runs_of(result: ProjectResult, mode: str) -> list[Run]:
    return [r for r in result.runs if r.mode == mode]


def pairs(result: ProjectResult, mode: str, base: str = "plain") -> Iterator[tuple[Run, Run]]:
    """(base, other) per repetition; for mode ``plain``, repetition 0 against the others."""
    plains = {r.index: r for r in runs_of(result, base)}
    for run in runs_of(result, mode):
        if mode == base:
            if run.index > 0 and 0 in plains:
                yield plains[0], run
        elif run.index in plains:
            yield plains[run.index], run


def merged_test_diffs(
    result: ProjectResult, mode: str, base: str = "plain"
) -> list[tuple[TestDiff, int]]:
    """Differences over all repetitions, each with the number of repetitions it was seen in."""
    seen: dict[tuple[str, str, str], tuple[TestDiff, int]] = {}
    for plain, other in pairs(result, mode, base):
        for diff in test_diffs(plain, other):
            key = (diff.test, diff.plain, diff.other)
            seen[key] = (seen[key][0], seen[key][1] + 1) if key in seen else (diff, 1)
    return list(seen.values())


def merged_file_diffs(result: ProjectResult, mode: str) -> list[tuple[str, str, str]]:
    found: set[tuple[str, str, str]] = set()
    for plain, other in pairs(result, mode):
        found.update(file_diffs(plain, other))
    return sorted(found)


def failed_runs(result: ProjectResult) -> list[str]:
    """Runs that failed as runs: killed, no junit, or an exit code other than plain's."""
    plains = {r.index: r for r in runs_of(result, "plain")}
    problems = []
    for run in result.runs:
        base = plains.get(run.index)
        if run.problem:
            problems.append(f"{run.mode} #{run.index}: {run.problem}")
        elif base is not None and not base.problem and run.exit_code != base.exit_code:
            code = f"exit {run.exit_code} (plain {base.exit_code})"
            problems.append(f"{run.mode} #{run.index}: {code}")
    return problems


def median_wall(result: ProjectResult, mode: str) -> float | None:
    walls = [r.wall for r in runs_of(result, mode) if not r.problem]
    return statistics.median(walls) if walls else None


def ratio(result: ProjectResult, mode: str) -> float | None:
    base, other = median_wall(result, "plain"), median_wall(result, mode)
    return other / base if base and other is not None else None


# --------------------------------------------------------------------------- the report


def cell(text: object) -> str:
    """Table-safe text: one line, pipes escaped."""
    return str(text).replace("\n", " ").replace("|", "\\|")


def fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def outcome_counts(run: Run) -> str:
    counts: dict[str, int] = {}
    for outcome in run.outcomes.values():
        counts[outcome.kind] = counts.get(outcome.kind, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def first_run(result: ProjectResult, mode: str) -> Run | None:
    runs = runs_of(result, mode)
    return runs[0] if runs else None


def exit_cell(result: ProjectResult, mode: str) -> str:
    runs = runs_of(result, mode)
    if not runs:
        return "-"
    return "/".join("T" if r.exit_code is None else str(r.exit_code) for r in runs)


def leak_cell(run: Run | None) -> str:
    if run is None:
        return "-"
    summary = f" ({run.leaks.summary})" if run.leaks.summary else ""
    return f"{run.leaks.warning_lines}{summary}"


def summary_row(result: ProjectResult, modes: Sequence[str]) -> str:
    others = [m for m in DEFAULT_MODES if m != "plain"]  # fork-noguard: in the differences
    plain = first_run(result, "plain")
    if result.error or plain is None:
        failed = [result.project.name, result.project.version, "set-up failed", *["-"] * 9]
        return "| " + " | ".join(failed) + " |"
    exits = " / ".join(exit_cell(result, m) for m in DEFAULT_MODES)
    tdiffs = " / ".join(
        str(len(merged_test_diffs(result, m))) if m in modes else "-" for m in others
    )
    fdiffs = " / ".join(
        str(len(merged_file_diffs(result, m))) if m in modes else "-" for m in others
    )
    wall = median_wall(result, "plain")
    cells = [
        result.project.name, result.project.version, len(plain.outcomes), outcome_counts(plain),
        exits, tdiffs, fdiffs, "-" if wall is None else f"{wall:.1f}",
        *(fmt_ratio(ratio(result, m)) for m in others), leak_cell(first_run(result, "guard")),
    ]  # fmt: skip
    return "| " + " | ".join(cell(c) for c in cells) + " |"


MAX_LISTED = 60  # differences listed per project and mode in the Markdown

SUMMARY_HEAD = (
    "| project | version | tests (plain) | plain outcomes | exit plain / fork / spawn / guard "
    "| test diffs fork / spawn / guard | file diffs fork / spawn / guard | plain wall (s) "
    "| fork ratio | spawn ratio | guard ratio | leak warnings (guard) |\n"
    "|---|---|--:|---|---|---|---|--:|--:|--:|--:|--:|"
)


def header(meta: dict[str, Any]) -> list[str]:
    return [
        "# Real projects' suites: plain pytest against pytest-isolation",
        "",
        f"- date: {meta['date']}",
        f"- machine: {meta['nproc']} cores, {meta['platform']}",
        f"- python {meta['python']}, pytest {meta['pytest']}",
        f"- plugin: pytest-isolation {meta['plugin']} at {meta['commit']} ({meta['plugin_path']})",
        f"- runs: {meta['runs']} per mode, interleaved; timeout {meta['timeout']:.0f} s per run",
        "- bytecode: written to a prefix outside the trees (PYTHONDONTWRITEBYTECODE unset), "
        "for the plugin as for the suites",
        f"- command: `{meta['command']}`",
        "",
    ]


def leak_section(results: Sequence[ProjectResult]) -> list[str]:
    lines = [
        "## Leak warnings per mode",
        "",
        "LeakedStateWarning lines in the warnings summary (and, in brackets, what the "
        "guard's `isolation: N leaks by ...` section counts: under `filterwarnings = "
        "error` the warnings are errors instead); first repetition.",
        "",
        "| project | plain | fork | spawn | guard | guard's categories |",
        "|---|--:|--:|--:|--:|---|",
    ]
    for result in results:
        guard = first_run(result, "guard")
        cats = ", ".join(f"{k} {n}" for k, n in guard.leaks.categories.items()) if guard else ""
        cells = [leak_cell(first_run(result, m)) for m in DEFAULT_MODES]
        lines.append(f"| {result.project.name} | " + " | ".join(cells) + f" | {cell(cats)} |")
    return [*lines, ""]


def transitions(tests: Sequence[tuple[TestDiff, int]]) -> str:
    counts: dict[str, int] = {}
    for diff, _ in tests:
        key = f"{diff.plain} -> {diff.other}"
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def diff_section(result: ProjectResult, mode: str, runs: int, base: str = "plain") -> list[str]:
    tests = merged_test_diffs(result, mode, base)
    files = merged_file_diffs(result, mode) if base == "plain" else []
    if not tests and not files:
        return []
    label = f"{base}, repeated" if mode == base else mode
    title = label if base == "plain" else f"{label} against {base}"
    lines = [f"### {result.project.name}: {title}", ""]
    if tests:
        lines += [f"{len(tests)} tests differ: {transitions(tests)}.", ""]
        if len(tests) > MAX_LISTED:  # a whole suite missing would drown the rest
            lines += [f"The first {MAX_LISTED} (all of them are in the JSON):", ""]
        lines += [f"| test | {base} | {label} | first line of the message | runs |"]
        lines += ["|---|---|---|---|--:|"]
        for diff, seen in tests[:MAX_LISTED]:
            row = [f"`{diff.test}`", diff.plain, diff.other, diff.message, f"{seen}/{runs}"]
            lines.append("| " + " | ".join(cell(c) for c in row) + " |")
        lines.append("")
    if files:
        lines += [f"{len(files)} files written differently:", "", f"| file | plain | {label} |"]
        lines += ["|---|---|---|"]
        lines += [f"| `{cell(p)}` | {a} | {b} |" for p, a, b in files]
        lines.append("")
    return lines


#: The modes that run the suite in file mode: each is compared with the loop too.
FILE_MODES = tuple(mode for mode, args in MODES.items() if "--isolation-mode=file" in args)


def loop_section(results: Sequence[ProjectResult], modes: Sequence[str], runs: int) -> list[str]:
    """File mode against its oracle, the shell loop, when the loop ran."""
    if "loop" not in modes:
        return []
    compared = [mode for mode in FILE_MODES if mode in modes]
    lines = [
        "## File mode against the loop",
        "",
        "Tests whose junit outcome differs from the loop's (each collected file in a fresh "
        "`pytest -p no:isolation FILE`), or that only one run has. A difference from the "
        "loop is the plugin's unless the loop itself differs from plain there (the first "
        "column: tests that depend on another file of the suite).",
        "",
        "| project | loop vs plain | " + " | ".join(f"{m} vs loop" for m in compared) + " |",
        "|---|--:|" + "--:|" * len(compared),
    ]
    details: list[str] = []
    for result in results:
        if not runs_of(result, "loop"):
            continue
        counts = [str(len(merged_test_diffs(result, "loop")))]
        counts += [str(len(merged_test_diffs(result, m, "loop"))) for m in compared]
        lines.append(f"| {result.project.name} | " + " | ".join(counts) + " |")
        details += [s for m in compared for s in diff_section(result, m, runs, "loop")]
    return [*lines, "", *details]


def report(meta: dict[str, Any], results: Sequence[ProjectResult], modes: Sequence[str]) -> str:
    lines = [*header(meta), "## Summary", "", SUMMARY_HEAD]
    lines += [summary_row(r, modes) for r in results]
    lines += [
        "",
        "Exit codes per repetition (T: killed at the timeout). Ratios: median wall time of "
        "the mode over that of plain. Test diffs: tests whose junit outcome differs from "
        "plain's, or that only one run has. File diffs: files in the project's tree created, "
        "changed or deleted by one run and not (or otherwise) by plain.",
        "",
        *leak_section(results),
    ]
    problems = [(r.project.name, p) for r in results for p in failed_runs(r)]
    problems += [(r.project.name, f"set-up failed: {r.error}") for r in results if r.error]
    lines += loop_section(results, modes, meta["runs"])
    lines += ["## Failed runs", ""]
    lines += [f"- {name}: {cell(p)}" for name, p in problems] or ["None."]
    lines += ["", "## Differences", ""]
    body = [s for r in results for m in MODES for s in diff_section(r, m, meta["runs"])]
    lines += body or ["None.", ""]
    lines += ["## Projects", "", "| project | version | pytest arguments | plugin at | why |"]
    lines += ["|---|---|---|---|---|"]
    for r in results:
        p, at = r.project, r.versions.get("plugin_state", "?")
        row = [p.name, p.version, f"`{' '.join(p.args)}`", at, p.why]
        lines.append("| " + " | ".join(cell(c) for c in row) + " |")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- the command


def plugin_state(plugin: Path) -> str:
    """Short commit, and whether src/ has uncommitted changes (read-only git calls)."""
    git = ["git", "--no-optional-locks", "-C", str(plugin)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run([*git, "status", "--porcelain", "--", "src"], capture_output=True)
    commit = head.stdout.strip() or "unknown"
    return commit + (" + uncommitted changes in src/" if dirty.stdout.strip() else "")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    names = [p.name for p in PROJECTS]
    parser.add_argument("--projects", action="append", choices=names, metavar="NAME")
    parser.add_argument("--modes", action="append", choices=list(MODES), metavar="MODE")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument(
        "--work",
        type=Path,
        default=DEFAULT_WORK,
        help=_machine.work_help(DEFAULT_WORK),
    )
    parser.add_argument("--plugin", type=Path, default=REPO_DIR)
    parser.add_argument(
        "--python",
        default=None,
        help=f"default: python{PYTHON_VERSION} on PATH, else under $PYENV_ROOT/versions",
    )
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--render", type=Path, default=None, metavar="JSON",
        help="run nothing: write the report of an earlier run from its --json data",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return args


def ensure_xdist(py: Path) -> None:
    """pytest-xdist in every venv, for every mode alike (the ``fork-n2`` mode uses it)."""
    if subprocess.run([py, "-c", "import xdist"], capture_output=True).returncode != 0:
        run_checked([py, "-m", "pip", "install", "-q", "pytest-xdist"])


def set_up(args: argparse.Namespace, project: Project, python: str) -> ProjectResult:
    try:
        py = build_venv(args.work, python, project, args.plugin, args.rebuild)
        ensure_xdist(py)
        versions = probe_versions(args.work, py)
    except RuntimeError as exc:
        log(f"{project.name}: set-up failed: {exc}")
        return ProjectResult(project, [], {}, error=first_line(str(exc)))
    if not str(versions["plugin_path"]).startswith(str(args.plugin / "src")):
        error = f"the venv imports the plugin from {versions['plugin_path']}"
        return ProjectResult(project, [], versions, error=error)
    return ProjectResult(project, [], versions)


def run_project(args: argparse.Namespace, result: ProjectResult, modes: list[str]) -> None:
    project = result.project
    # The plugin may change while the harness runs (it is installed editable).
    result.versions["plugin_state"] = plugin_state(args.plugin)
    ctx = Context(args.work, args.timeout, bool(result.versions["randomly"]))
    py = venv_python(args.work, project)
    for index in range(args.runs):
        # Rotate the starting mode: slow drift of the machine is spread over all modes.
        order = modes[index % len(modes) :] + modes[: index % len(modes)]
        for mode in order:
            log(f"{project.name}: {mode} #{index} ...")
            run = run_once(ctx, project, py, mode, index)
            result.runs.append(run)
            status = run.problem or f"exit {run.exit_code}"
            log(f"{project.name}: {mode} #{index}: {status}, {len(run.outcomes)} tests, "
                f"{run.wall:.1f}s, {run.leaks.warning_lines} leak warnings")  # fmt: skip


def metadata(args: argparse.Namespace, results: list[ProjectResult], state: str) -> dict[str, Any]:
    def joined(key: str) -> str:
        return ", ".join(sorted({str(r.versions[key]) for r in results if r.versions})) or "?"

    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "platform": platform.platform(),
        "python": joined("python"),
        "pytest": joined("pytest"),
        "plugin": joined("plugin"),
        "plugin_path": str(args.plugin),
        "commit": state,
        "runs": args.runs,
        "timeout": args.timeout,
        "command": " ".join(["python", "benchmarks/real_suites.py", *sys.argv[1:]]),
    }


def raw_data(meta: dict[str, Any], results: list[ProjectResult]) -> dict[str, Any]:
    projects = []
    for r in results:
        data = dataclasses.asdict(r)
        data["test_diffs"] = {
            m: [{**dataclasses.asdict(d), "runs": n} for d, n in merged_test_diffs(r, m)]
            for m in MODES
        }
        data["file_diffs"] = {m: merged_file_diffs(r, m) for m in MODES}
        data["test_diffs_from_loop"] = {
            m: [{**dataclasses.asdict(d), "runs": n} for d, n in merged_test_diffs(r, m, "loop")]
            for m in FILE_MODES
        }
        data["failed_runs"] = failed_runs(r)
        data["wall_median"] = {m: median_wall(r, m) for m in MODES}
        projects.append(data)
    return {"meta": meta, "projects": projects}


def run_from_raw(data: dict[str, Any]) -> Run:
    fields = {**data, "outcomes": {k: Outcome(**v) for k, v in data["outcomes"].items()}}
    # The stored leaks, not the run's output.txt: a later run in the same work folder
    # overwrites runs/NAME/MODE-N. The categories are counted again from the stored section's
    # lines (the parser may be newer).
    leaks = Leaks(**{"summary": "", "entries": [], **data["leaks"]})
    if leaks.entries:
        leaks = dataclasses.replace(leaks, categories=categories_in(leaks.entries))
    fields["leaks"] = leaks
    return Run(**fields)


def results_from_raw(raw: dict[str, Any]) -> list[ProjectResult]:
    results = []
    for data in raw["projects"]:
        p = data["project"]
        project = Project(**{**p, **{k: tuple(p[k]) for k in ("requirements", "args")}})
        project = dataclasses.replace(project, env=tuple(tuple(e) for e in p["env"]))
        runs = [run_from_raw(r) for r in data["runs"]]
        results.append(ProjectResult(project, runs, data["versions"], data["error"]))
    return results


def render(args: argparse.Namespace) -> int:
    raw = json.loads(args.render.read_text())
    results = results_from_raw(raw)
    modes = sorted({r.mode for p in results for r in p.runs}, key=list(MODES).index)
    text = report(raw["meta"], results, modes)
    sys.stdout.write(text)
    if args.out:
        args.out.write_text(text)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render:
        return render(args)
    args.work, args.plugin = args.work.resolve(), args.plugin.resolve()
    wanted = set(args.projects or [p.name for p in PROJECTS])
    modes = [m for m in MODES if m == "plain" or m in (args.modes or DEFAULT_MODES)]
    python = args.python or default_python()
    state = plugin_state(args.plugin)
    results = [set_up(args, p, python) for p in PROJECTS if p.name in wanted]
    ready = [r for r in results if not r.error]
    if ready:  # the plugin's current code, compiled once into the shared prefix cache
        precompile(args.work, venv_python(args.work, ready[0].project), args.plugin / "src")
    for result in ready:
        run_project(args, result, modes)
    after = plugin_state(args.plugin)
    meta = metadata(args, results, state if after == state else f"{state}, then {after}")
    text = report(meta, results, modes)
    sys.stdout.write(text)
    if args.out:
        args.out.write_text(text)
    if args.json:
        args.json.write_text(json.dumps(raw_data(meta, results), indent=1, default=str))
    failed = any(failed_runs(r) or r.error for r in results)
    differs_any = any(merged_test_diffs(r, m) for r in results for m in MODES)
    return 1 if failed or differs_any else 0


if __name__ == "__main__":
    sys.exit(main())
