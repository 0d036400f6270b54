"""Run the leak guard, file mode and the polluter finder on real order-dependent test pairs.

Each case in ``cases.json`` (next to this file) is a (polluter, victim) pair of tests from a
real project, taken from the IDoFT data set (victims) with the polluter found by bisection,
and confirmed: the victim passes alone and fails after the polluter in a plain run. For every
case this script builds a virtualenv (the case's pinned requirements, the project's tree
installed without dependencies, and the plugin installed editable from ``--plugin``), then runs
each of these in a fresh copy of the project's tree:

* ``plain``: ``pytest -p no:isolation -p no:randomly POLLUTER VICTIM`` (the victim must fail);
* ``guard``: ``pytest -p no:randomly POLLUTER VICTIM`` with the plugin loaded;
* ``deep``: the same with ``--isolation-leaks-deep``;
* ``file``: the same with ``--isolation-mode=file``;
* ``finder``: ``pytest -p no:randomly --isolation-find-polluter=VICTIM PATHS`` where
  ``PATHS`` are the polluter's and the victim's files (their node ids if the files' order
  would not run the polluter first);
* the victim alone and the polluter alone, plain and with the guard.

Per case it records whether the guard's report **named** the polluter and the leaked key
(``expected_key_substring``), whether the victim was **restored** (passes with the guard),
whether the guard **broke** anything (a test passing plain that fails with the guard or the
deep tier: the polluter in the pair, the victim alone, the polluter alone), the file-mode
outcome and whether the finder named the polluter. The Markdown report goes to ``--out``.

Project trees come from a local mirror of the repository (``--mirror``, default
``$PYTEST_ISOLATION_BENCH_MIRROR``, else ``pytest-isolation-mirror`` in the work base of
``benchmarks/_machine.py``; laid out as ``MIRROR/OWNER+NAME/repo``, a bare or a normal git
directory, as the ``fetch`` tool of the corpus builders leaves it), or else from ``git clone``
of ``https://github.com/OWNER/NAME``.  ``--work`` defaults to ``pytest-isolation-pollution``
under ``$PYTEST_ISOLATION_BENCH_WORK``, else under the system temp directory.

Usage::

    python benchmarks/pollution/run.py [--cases ID ...] [--work DIR] [--plugin PATH]
        [--out benchmarks/results-pollution.md] [--json PATH] [--rebuild] [--jobs N]

Cases of one project with the same pins share a tree and a venv (built once per run under
``--rebuild``). ``--jobs 2`` runs two cases at a time (each case's own runs stay sequential).

Standard library only.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import datetime
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import _machine  # benchmarks/_machine.py, found through the line above

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CASES = HERE / "cases.json"
DEFAULT_OUT = REPO / "benchmarks" / "results-pollution.md"
DEFAULT_WORK = _machine.work_dir("pollution")
MIRROR_ENV = "PYTEST_ISOLATION_BENCH_MIRROR"
DEFAULT_MIRROR = Path(os.environ.get(MIRROR_ENV) or _machine.work_dir("mirror"))

OUTCOMES = ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS")
#: ``isolation: 4 leaks by 2 tests`` (before issue 49: ``isolation: 2 tests leaked state``).
SUMMARY_HEAD = re.compile(r"^=+ isolation: (\d+ leaks? by .*|.* leaked state) =+$")
#: Who changed a key: ``  by OWNER``, or ``  set during OWNER`` where no line is known.
OWNER_LINE = re.compile(r"^  (?:by|set during) (.*)$")
SECTION_END = re.compile(r"^=+ .* =+$")
#: The routine line, and under ``-v`` one line per key: ``  [cat] WHAT (N tests, first OWNER)``.
ROUTINE_HEAD = re.compile(r"^isolation: routine state of ")
ROUTINE_ENTRY = re.compile(r"^  \[([\w.-]+)\] (.*) \((?:\d+ tests, first )?([^()]+)\)$")


class CaseError(Exception):
    """A case could not be prepared (tree, venv)."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_cmd(
    args: Sequence[str],
    cwd: Path,
    timeout: float,
    env: dict[str, str] | None = None,
) -> tuple[int | None, str]:
    """Run ``args`` in its own process group; ``None`` as the code on a timeout."""
    with subprocess.Popen(
        list(args),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        env=env,
        start_new_session=True,
    ) as proc:
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            return None, out + f"\n[run.py: timed out after {timeout:.0f} s]\n"
        return proc.returncode, out


def find_python(version: str) -> str:
    """An interpreter for ``version`` (``3.11``): this one, or on PATH, or under pyenv."""
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == version:
        return sys.executable
    try:
        return _machine.find_python(version)
    except _machine.PythonNotFound as exc:
        raise CaseError(str(exc)) from None


# --------------------------------------------------------------------------- trees


def git_dir(mirror: Path, repository: str) -> Path | None:
    owner, name = repository.split("/")
    base = mirror / f"{owner}+{name}" / "repo"
    if (base / ".git").is_dir():
        return base / ".git"
    if base.is_dir():
        return base
    return None


def export_tree(repository: str, commit: str, dest: Path, mirror: Path, timeout: float) -> None:
    """Write the tree of ``commit`` into ``dest`` (blobs a partial mirror lacks are left out)."""
    gdir = git_dir(mirror, repository)
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if gdir is None:
        clone = tmp.with_name(tmp.name + ".git")
        shutil.rmtree(clone, ignore_errors=True)
        code, out = run_cmd(
            ["git", "clone", "--bare", "-q", f"https://github.com/{repository}", str(clone)],
            tmp.parent,
            timeout,
        )
        if code != 0:
            raise CaseError(f"no mirror of {repository} in {mirror} and git clone failed: {out}")
        gdir = clone
    archive = subprocess.run(
        ["git", "--git-dir", str(gdir), "archive", "--format=tar", commit],
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    if archive.returncode == 0:
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive.stdout, check=True)
    else:
        export_blob_by_blob(gdir, commit, tmp, timeout)
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)


def export_blob_by_blob(gdir: Path, commit: str, dest: Path, timeout: float) -> None:
    listing = subprocess.run(
        ["git", "--git-dir", str(gdir), "ls-tree", "-r", "-z", commit],
        capture_output=True,
        timeout=timeout,
        check=True,
    ).stdout
    for entry in listing.split(b"\0"):
        if not entry:
            continue
        meta, raw_path = entry.split(b"\t", 1)
        mode, kind, sha = meta.split()
        if kind != b"blob":
            continue
        path = dest / raw_path.decode()
        path.parent.mkdir(parents=True, exist_ok=True)
        blob = subprocess.run(
            ["git", "--git-dir", str(gdir), "cat-file", "blob", sha.decode()],
            capture_output=True,
            timeout=timeout,
            check=False,
        )
        if blob.returncode != 0:
            continue  # absent from a partial mirror (large data files)
        if mode == b"120000":
            os.symlink(blob.stdout.decode(), path)
        else:
            path.write_bytes(blob.stdout)
            if mode == b"100755":
                path.chmod(0o755)


# --------------------------------------------------------------------------- venvs


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def build_case(
    case: dict[str, Any], work: Path, plugin: Path, mirror: Path, rebuild: bool, timeout: float
) -> tuple[Path, Path]:
    """The case's tree and virtualenv (shared by the cases of one install), built unless up to date.

    Under ``--rebuild`` each is rebuilt once per run (``BUILT`` remembers which).
    """
    stamp = build_key(case, plugin)
    name = case["repository"].split("/")[1]
    tree = work / "trees" / f"{name}-{case['commit'][:10]}"
    venv = work / "venvs" / f"{name}-{stamp[:10]}"
    marker = venv / ".pollution-stamp"
    fresh = marker.is_file() and marker.read_text() == stamp and tree.is_dir()
    if fresh and (not rebuild or stamp in BUILT):
        return tree, venv
    log(f"[{case['id']}] building tree and venv")
    export_tree(case["repository"], case["commit"], tree, mirror, timeout)
    shutil.rmtree(venv, ignore_errors=True)
    code, out = run_cmd([find_python(case["python"]), "-m", "venv", str(venv)], work, timeout)
    if code != 0:
        raise CaseError(f"venv failed: {out}")
    py = str(venv_python(venv))
    for command in case["install"]:
        words = shlex.split(command)
        if words[:2] != ["pip", "install"]:
            raise CaseError(f"install commands must start with 'pip install': {command}")
        code, out = run_cmd([py, "-m", *words], tree, timeout)
        if code != 0:
            raise CaseError(f"{command!r} failed:\n{out[-3000:]}")
    code, out = run_cmd([py, "-m", "pip", "install", "--no-deps", "-e", str(plugin)], tree, timeout)
    if code != 0:
        raise CaseError(f"installing the plugin from {plugin} failed:\n{out[-3000:]}")
    marker.write_text(stamp)
    BUILT.add(stamp)
    return tree, venv


BUILT: set[str] = set()


def build_key(case: dict[str, Any], plugin: Path) -> str:
    spec = [case["repository"], case["commit"], case["python"], case["install"], str(plugin)]
    return hashlib.sha256(json.dumps(spec).encode()).hexdigest()


# --------------------------------------------------------------------------- runs


def fresh_copy(tree: Path, work: Path, case_id: str, mode: str) -> Path:
    dest = work / "runs" / case_id / mode
    shutil.rmtree(dest, ignore_errors=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(tree, dest, symlinks=True)
    return dest


def pytest_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "ISOLATION_", "VIRTUAL_ENV", "PYTHONPATH"))
    }
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONHASHSEED"] = "0"
    env["COLUMNS"] = "200"
    return env


def run_pytest(
    case: dict[str, Any],
    tree: Path,
    venv: Path,
    work: Path,
    mode: str,
    args: Sequence[str],
    timeout: float,
) -> dict[str, Any]:
    copy = fresh_copy(tree, work, case["id"], mode)
    cwd = copy / case.get("rootdir", ".")
    cmd = [str(venv_python(venv)), "-m", "pytest", "-rA", "--tb=short", "-p", "no:cacheprovider"]
    cmd += list(case.get("extra_args", []))
    cmd += list(args)
    started = time.monotonic()
    code, out = run_cmd(cmd, cwd, timeout, env=pytest_env())
    seconds = time.monotonic() - started
    (work / "runs" / case["id"] / f"{mode}.log").write_text(
        "$ " + shlex.join(cmd[1:]) + f"\n(exit {code}, {seconds:.1f} s)\n" + out
    )
    shutil.rmtree(copy, ignore_errors=True)
    return {
        "exit": code,
        "seconds": round(seconds, 2),
        "outcomes": parse_outcomes(out),
        "leaks": parse_leaks(out),
        "output": out,
    }


def parse_outcomes(out: str) -> dict[str, str]:
    """Node id -> outcome, from the ``-rA`` short test summary (the first outcome wins)."""
    outcomes: dict[str, str] = {}
    for line in out.splitlines():
        word, _, rest = line.partition(" ")
        if word in OUTCOMES and rest:
            nodeid = rest.split(" - ")[0].strip()
            if word == "ERROR" and nodeid in outcomes and outcomes[nodeid] == "PASSED":
                outcomes[nodeid] = "ERROR"  # an error at teardown of a passed test
            outcomes.setdefault(nodeid, word)
    return outcomes


def parse_leaks(out: str) -> list[dict[str, str]]:
    """The leak summary's entries (``[category] WHAT`` lines with their ``by
    OWNER`` line), and the routine state that ``-v`` lists under the routine
    line (``  [category] WHAT (N tests, first OWNER)``), marked ``routine``:
    the guard names those too (its rule 2), without a warning."""
    leaks: list[dict[str, str]] = []
    section = ""
    current: dict[str, str] | None = None
    for line in out.splitlines():
        if SUMMARY_HEAD.match(line):
            section = "leaks"
            continue
        if ROUTINE_HEAD.match(line):
            section = "routine"
            continue
        if SECTION_END.match(line) or re.match(r"^\d+ (passed|failed|error)", line):
            section = ""
            continue
        if section == "routine":
            match = ROUTINE_ENTRY.match(line)
            if match is None:
                section = ""
                continue
            category, what, owner = match.groups()
            leaks.append({"category": category, "what": what, "by": owner, "routine": "yes"})
            continue
        if section != "leaks":
            continue
        match = re.match(r"^\[([\w.-]+)\] (.*)$", line)
        if match:
            current = {"category": match.group(1), "what": match.group(2), "by": ""}
            leaks.append(current)
        elif (owner := OWNER_LINE.match(line)) and current is not None:
            current["by"] = owner.group(1)
    return leaks


def outcome(result: dict[str, Any], nodeid: str) -> str:
    outcomes: dict[str, str] = result["outcomes"]
    if nodeid in outcomes:
        return outcomes[nodeid]
    if result["exit"] is None:
        return "timeout"
    return "missing"


def named(leaks: list[dict[str, str]], polluter: str, key: str, routine: bool = True) -> bool:
    """Whether a leak (or, with ``routine``, a routine line under ``-v``)
    names the polluter as its owner and contains the expected key."""
    for leak in leaks:
        owner = leak["by"]
        if not routine and leak.get("routine"):
            continue
        if key in leak["what"] and (owner == polluter or owner.startswith(polluter + " ")):
            return True
    return False


def collected_order(
    case: dict[str, Any], tree: Path, venv: Path, work: Path, paths: Sequence[str], timeout: float
) -> list[str]:
    copy = fresh_copy(tree, work, case["id"], "collect")
    cmd = [str(venv_python(venv)), "-m", "pytest", "-p", "no:isolation", "-p", "no:randomly"]
    cmd += ["-p", "no:cacheprovider", "--collect-only", "-q", *case.get("extra_args", []), *paths]
    _, out = run_cmd(cmd, copy / case.get("rootdir", "."), timeout, env=pytest_env())
    shutil.rmtree(copy, ignore_errors=True)
    return [line.strip() for line in out.splitlines() if "::" in line and " " not in line]


def run_case(
    case: dict[str, Any], tree: Path, venv: Path, work: Path, timeout: float
) -> dict[str, Any]:
    pol, vic = case["polluter"], case["victim"]
    key = case["expected_key_substring"]
    plain_opts = ["-p", "no:isolation", "-p", "no:randomly"]
    guard_opts = ["-p", "no:randomly", "-v"]  # -v: the routine state the guard names too
    runs: dict[str, dict[str, Any]] = {}

    def go(mode: str, args: Sequence[str]) -> dict[str, Any]:
        log(f"[{case['id']}] {mode}")
        runs[mode] = run_pytest(case, tree, venv, work, mode, args, timeout)
        return runs[mode]

    plain = go("plain", [*plain_opts, pol, vic])
    guard = go("guard", [*guard_opts, pol, vic])
    deep = go("deep", [*guard_opts, "--isolation-leaks-deep", pol, vic])
    filem = go("file", [*guard_opts, "--isolation-mode=file", pol, vic])
    vic_plain = go("victim-alone-plain", [*plain_opts, vic])
    vic_guard = go("victim-alone-guard", [*guard_opts, vic])
    pol_plain = go("polluter-alone-plain", [*plain_opts, pol])
    pol_guard = go("polluter-alone-guard", [*guard_opts, pol])

    files = list(dict.fromkeys([pol.split("::")[0], vic.split("::")[0]]))
    order = collected_order(case, tree, venv, work, files, timeout)
    if pol in order and vic in order and order.index(pol) < order.index(vic):
        finder_paths = files
    else:
        finder_paths = [pol, vic]
    finder_json = work / "runs" / case["id"] / "finder.json"
    finder_json.unlink(missing_ok=True)
    finder = go(
        "finder",
        [
            *guard_opts,
            f"--isolation-find-polluter={vic}",
            f"--isolation-find-json={finder_json}",
            f"--isolation-find-timeout={timeout:.0f}",
            *finder_paths,
        ],
    )
    finder_result: dict[str, Any] = {}
    if finder_json.is_file():
        try:
            finder_result = json.loads(finder_json.read_text())
        except ValueError:
            finder_result = {}
    culprits = list(finder_result.get("culprits", []))
    for more in finder_result.get("others", []) or []:
        culprits.extend(more if isinstance(more, list) else [more])

    broke: list[str] = []
    pairs = [
        ("guard", guard, plain, pol),
        ("deep", deep, plain, pol),
        ("guard", vic_guard, vic_plain, vic),
        ("guard", pol_guard, pol_plain, pol),
    ]
    for mode, with_guard, without, nodeid in pairs:
        before, after = outcome(without, nodeid), outcome(with_guard, nodeid)
        if before == "PASSED" and after != "PASSED":
            label = f"{mode}: {nodeid} {before} -> {after}"
            if with_guard is vic_guard or with_guard is pol_guard:
                label += " (alone)"
            broke.append(label)
    for node, before in plain["outcomes"].items():  # any other test of the pair's run
        if node in (pol, vic) or before != "PASSED":
            continue
        for mode, res in (("guard", guard), ("deep", deep)):
            after = outcome(res, node)
            if after != "PASSED":
                broke.append(f"{mode}: {node} PASSED -> {after}")

    record = {
        "id": case["id"],
        "state_class": case["state_class"],
        "same_file": case["same_file"],
        "plain_victim": outcome(plain, vic),
        "reproduced": outcome(plain, vic) in ("FAILED", "ERROR")
        and outcome(vic_plain, vic) == "PASSED",
        "named": named(guard["leaks"], pol, key),
        "named_as_leak": named(guard["leaks"], pol, key, routine=False),
        "named_deep": named(deep["leaks"], pol, key),
        "guard_victim": outcome(guard, vic),
        "restored": outcome(guard, vic) == "PASSED",
        "deep_victim": outcome(deep, vic),
        "restored_deep": outcome(deep, vic) == "PASSED",
        "broke": broke,
        "file_victim": outcome(filem, vic),
        # Same-file pairs: file mode runs the file's tests in the file's order in one child, so
        # a pass there says nothing about isolation (the order may simply differ).
        "file_prevents": not case["same_file"] and outcome(filem, vic) == "PASSED",
        "finder_paths": finder_paths,
        "finder_exit": finder["exit"],
        "finder_outcome": finder_result.get("outcome", "no json"),
        "finder_culprits": culprits,
        "finder_named": pol in culprits,
        "guard_leaks": guard["leaks"],
        "deep_leaks": deep["leaks"],
        "seconds": round(sum(r["seconds"] for r in runs.values()), 1),
    }
    return record


# --------------------------------------------------------------------------- report


def yes(flag: bool) -> str:
    return "yes" if flag else "no"


def pct(count: int, total: int) -> str:
    return f"{count}/{total} ({100.0 * count / total:.0f}%)" if total else "-"


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def report(
    records: list[dict[str, Any]],
    failures: dict[str, str],
    cases: dict[str, dict[str, Any]],
    command: str,
    plugin: Path,
) -> str:
    commit = subprocess.run(
        ["git", "-C", str(plugin), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(plugin), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    pythons = sorted({cases[r["id"]]["python"] for r in records})
    lines = [
        "# Pollution corpus: the leak guard on real order-dependent tests",
        "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}",
        f"- plugin commit: {commit or 'unknown'}"
        + (" (with uncommitted changes)" if dirty else ""),
        f"- python: {', '.join(pythons)} (cases' venvs); runner {platform.python_version()}",
        f"- command: `{command}`",
        f"- cases: {len(records)} run"
        + (f", {len(failures)} could not be prepared" if failures else ""),
        "",
        "Columns: **reproduced** the victim passes alone and fails after the polluter, plain; "
        "**named** the guard's summary names the polluter's node id as the owner of a leak whose "
        "text contains the case's expected key; **restored** the victim passes after the polluter "
        "with the guard; **deep** the same two with `--isolation-leaks-deep`; **broke** a test "
        "that passes plain fails with the guard or the deep tier (the pair, the victim alone, the "
        "polluter alone); **file** the victim passes under `--isolation-mode=file` (counted as "
        "prevented only for pairs in different files: a same-file pair runs in one child, in the "
        "file's order); **finder** "
        "`--isolation-find-polluter` named the polluter.",
        "",
        "## Totals",
        "",
    ]
    total = len(records)
    lines += totals_table(records, total)
    lines += ["", "## Per class of state", ""]
    lines += class_header("class")
    for klass in sorted({r["state_class"] for r in records}):
        rs = [r for r in records if r["state_class"] == klass]
        lines.append(class_row(klass, rs))
    lines.append(class_row("**all**", records))
    lines += ["", "## Same file vs different files", ""]
    lines += class_header("pair")
    for same in (True, False):
        rs = [r for r in records if r["same_file"] is same]
        lines.append(class_row("same file" if same else "different files", rs))
    lines += ["", "## Per case", ""]
    lines += [
        "| case | class | same file | reproduced | named | restored | deep named/restored "
        "| broke | file | finder |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in records:
        lines.append(
            "| "
            + " | ".join(
                [
                    r["id"],
                    r["state_class"],
                    yes(r["same_file"]),
                    yes(r["reproduced"]) + ("" if r["reproduced"] else f" ({r['plain_victim']})"),
                    yes(r["named"]),
                    yes(r["restored"]) + ("" if r["restored"] else f" ({r['guard_victim']})"),
                    f"{yes(r['named_deep'])}/{yes(r['restored_deep'])}",
                    cell("; ".join(r["broke"])) or "-",
                    r["file_victim"] + (" (same file)" if r["same_file"] else ""),
                    yes(r["finder_named"])
                    + ("" if r["finder_named"] else f" ({r['finder_outcome']})"),
                ]
            )
            + " |"
        )
    lines += ["", "## What the guard reported, per case", ""]
    for r in records:
        case = cases[r["id"]]
        lines.append(
            f"- **{r['id']}**: expected `{cell(case['expected_key_substring'])}` "
            f"({cell(case['leaked_key'])}), polluter `{case['polluter']}`"
        )
        shown = r["guard_leaks"][:6]
        if not shown:
            lines.append("  - guard: no leak reported")
        for leak in shown:
            what = leak["what"] if len(leak["what"]) <= 220 else leak["what"][:217] + "..."
            lines.append(f"  - `[{leak['category']}] {cell(what)}` by `{cell(leak['by'])}`")
        if len(r["guard_leaks"]) > len(shown):
            lines.append(f"  - and {len(r['guard_leaks']) - len(shown)} more")
    if failures:
        lines += ["", "## Cases not run", ""]
        for case_id, why in failures.items():
            lines.append(f"- {case_id}: {cell(why[:500])}")
    return "\n".join(lines) + "\n"


def totals_table(records: list[dict[str, Any]], total: int) -> list[str]:
    diff = sum(1 for r in records if not r["same_file"])

    def count(key: str) -> int:
        return sum(1 for r in records if r[key])

    return [
        "| figure | value |",
        "| --- | ---: |",
        f"| reproduced (plain) | {pct(count('reproduced'), total)} |",
        f"| named | {pct(count('named'), total)} |",
        f"| restored | {pct(count('restored'), total)} |",
        f"| named as a leak (not only as routine state under -v) "
        f"| {pct(count('named_as_leak'), total)} |",
        f"| named (deep) | {pct(count('named_deep'), total)} |",
        f"| restored (deep) | {pct(count('restored_deep'), total)} |",
        f"| broke (cases with any) | {sum(1 for r in records if r['broke'])} |",
        f"| file mode prevents (different-file pairs) | {pct(count('file_prevents'), diff)} |",
        f"| finder named the polluter | {pct(count('finder_named'), total)} |",
    ]


def class_header(first: str) -> list[str]:
    return [
        f"| {first} | cases | named | restored | named (deep) | restored (deep) | broke "
        "| file prevents | finder |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]


def class_row(label: str, rs: list[dict[str, Any]]) -> str:
    n = len(rs)
    diff = sum(1 for r in rs if not r["same_file"])

    def count(key: str) -> int:
        return sum(1 for r in rs if r[key])

    return (
        f"| {label} | {n} | {pct(count('named'), n)} | {pct(count('restored'), n)} | "
        f"{pct(count('named_deep'), n)} | {pct(count('restored_deep'), n)} | "
        f"{sum(1 for r in rs if r['broke'])} | {pct(count('file_prevents'), diff)} | "
        f"{pct(count('finder_named'), n)} |"
    )


# --------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="*", metavar="ID", help="only these case ids")
    parser.add_argument(
        "--work",
        type=Path,
        default=DEFAULT_WORK,
        help="trees, venvs and logs; " + _machine.work_help(DEFAULT_WORK),
    )
    parser.add_argument(
        "--plugin", type=Path, default=REPO, help="the plugin to install (editable)"
    )
    parser.add_argument(
        "--mirror",
        type=Path,
        default=DEFAULT_MIRROR,
        help=f"git mirrors (default: ${MIRROR_ENV}, else {_machine.work_dir('mirror')})",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the Markdown report")
    parser.add_argument("--json", type=Path, help="also write the records as JSON")
    parser.add_argument("--rebuild", action="store_true", help="rebuild trees and venvs")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per subprocess")
    parser.add_argument("--jobs", type=int, default=1, help="cases built and run at a time")
    parser.add_argument(
        "--from-json", type=Path, help="only write the report from a --json file (no runs)"
    )
    args = parser.parse_args(argv)

    all_cases: list[dict[str, Any]] = json.loads(CASES.read_text())
    if args.from_json:
        saved = json.loads(args.from_json.read_text())
        command = "python " + shlex.join(
            [os.path.relpath(__file__, Path.cwd()), *(argv or sys.argv[1:])]
        )
        cases_by_id = {c["id"]: c for c in all_cases}
        args.out.write_text(
            report(saved["records"], saved["not_run"], cases_by_id, command, args.plugin.resolve())
        )
        log(f"wrote {args.out} from {args.from_json}")
        return 0
    by_id = {c["id"]: c for c in all_cases}
    if args.cases:
        unknown = [c for c in args.cases if c not in by_id]
        if unknown:
            parser.error(f"unknown case ids: {', '.join(unknown)}")
        selected = [by_id[c] for c in args.cases]
    else:
        selected = all_cases
    work: Path = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    plugin: Path = args.plugin.resolve()

    failures: dict[str, str] = {}
    built: dict[str, tuple[Path, Path]] = {}

    def build(key: str, case: dict[str, Any]) -> None:
        try:
            built[key] = build_case(case, work, plugin, args.mirror, args.rebuild, args.timeout)
        except (CaseError, OSError, subprocess.SubprocessError) as exc:
            log(f"[{case['id']}] could not build: {exc}")
            failures[key] = str(exc)

    firsts: dict[str, dict[str, Any]] = {}
    for case in selected:
        firsts.setdefault(build_key(case, plugin), case)
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        list(pool.map(lambda item: build(*item), firsts.items()))

    def one(case: dict[str, Any]) -> dict[str, Any] | None:
        key = build_key(case, plugin)
        if key not in built:
            failures[case["id"]] = failures.get(key, "build failed")
            return None
        tree, venv = built[key]
        try:
            (work / "runs" / case["id"]).mkdir(parents=True, exist_ok=True)
            record = run_case(case, tree, venv, work, args.timeout)
        except (CaseError, OSError, subprocess.SubprocessError) as exc:
            log(f"[{case['id']}] not run: {exc}")
            failures[case["id"]] = str(exc)
            return None
        log(
            f"[{case['id']}] reproduced={yes(record['reproduced'])} named={yes(record['named'])} "
            f"restored={yes(record['restored'])} broke={len(record['broke'])} "
            f"file={record['file_victim']} finder={yes(record['finder_named'])}"
        )
        return record

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(one, selected))
    records = [r for r in results if r is not None]
    failures = {k: v for k, v in failures.items() if k in by_id}
    # Keep the raw records before the report, so a report can be rebuilt (--from-json).
    raw = work / "last-records.json"
    raw.write_text(json.dumps({"records": records, "not_run": failures}, indent=1) + "\n")

    command = "python " + shlex.join(
        [os.path.relpath(__file__, Path.cwd()), *(argv or sys.argv[1:])]
    )
    text = report(records, failures, by_id, command, plugin)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    log(f"wrote {args.out}")
    if args.json:
        args.json.write_text(json.dumps({"records": records, "not_run": failures}, indent=1) + "\n")
        log(f"wrote {args.json}")
    return 0 if records and not failures else 1


if __name__ == "__main__":
    sys.exit(main())
