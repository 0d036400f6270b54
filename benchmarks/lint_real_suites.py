"""The isolation lint over real projects' test suites: how often each code fires.

For every project in ``real_suites.PROJECTS`` it downloads the sdist (``pip download --no-deps
--no-binary :all: NAME==VERSION``, cached in ``WORK/sdists``), extracts it into ``WORK/NAME``
and runs ``python -m pytest_isolation.lint`` over the project's test paths (the arguments
of its pytest command line that are not options).  It prints every finding and writes a
table of findings per project and code, for a person to read the flagged lines and tell
true from false positives (``benchmarks/results-lint-issue19.md``).

    python benchmarks/lint_real_suites.py [--projects NAME ...] [--work DIR] [--python EXE]
        [--out PATH] [--json PATH]

Standard library only. It downloads from the package index: not part of CI.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _machine  # work directories (a sibling module, found through the line above)
import real_suites  # a sibling script, found through the line above

REPO_DIR = Path(__file__).resolve().parent.parent
DEFAULT_WORK = _machine.work_dir("lintsuites")
DEFAULT_PYTHON = REPO_DIR / ".venv" / "bin" / "python"
#: ``path:line: CODE message``, as ``python -m pytest_isolation.lint`` prints a finding.
FINDING = re.compile(r"^(?P<path>.+?):(?P<line>\d+): (?P<code>ISO\d{3}) (?P<text>.*)$")


def test_paths(project: real_suites.Project) -> list[str]:
    """The non-option arguments of the project's pytest command line."""
    paths: list[str] = []
    skip_next = False
    for arg in project.args:
        if skip_next:
            skip_next = False
        elif arg in ("-m", "-k", "-p", "-o", "-c"):
            skip_next = True
        elif not arg.startswith("-"):
            paths.append(arg)
    return paths


def lint_project(
    work: Path, python: str, project: real_suites.Project
) -> list[dict[str, str | int]]:
    sdist = real_suites.fetch_sdist(work, python, project)
    tree = work / project.name
    if not tree.is_dir():
        real_suites.extract(sdist, tree)
    command = [python, "-m", "pytest_isolation.lint", *test_paths(project)]
    print(f"$ (cd {tree} && {' '.join(command)})", file=sys.stderr)
    done = subprocess.run(command, cwd=tree, capture_output=True, text=True, timeout=600)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{project.name}: the lint failed:\n{done.stderr}")
    findings: list[dict[str, str | int]] = []
    for line in done.stdout.splitlines():
        match = FINDING.match(line)
        if match:
            findings.append(
                {
                    "project": project.name,
                    "path": match["path"],
                    "line": int(match["line"]),
                    "code": match["code"],
                    "text": match["text"],
                    "source": source_line(tree / match["path"], int(match["line"])),
                }
            )
    return findings


def source_line(path: Path, line: int) -> str:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def table(names: list[str], findings: list[dict[str, str | int]]) -> str:
    counts = Counter((str(f["project"]), str(f["code"])) for f in findings)
    codes = sorted({code for _, code in counts})
    rows = ["| project | " + " | ".join(codes) + " | total |"]
    rows.append("| --- " * (len(codes) + 2) + "|")
    for name in names:
        cells = [str(counts[name, code]) for code in codes]
        total = sum(counts[name, code] for code in codes)
        rows.append(f"| {name} | " + " | ".join(cells) + f" | {total} |")
    totals = [str(sum(counts[name, code] for name in names)) for code in codes]
    rows.append("| **all** | " + " | ".join(totals) + f" | {len(findings)} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    names = [project.name for project in real_suites.PROJECTS]
    parser.add_argument("--projects", action="append", choices=names, metavar="NAME")
    parser.add_argument(
        "--work", type=Path, default=DEFAULT_WORK, help=_machine.work_help(DEFAULT_WORK)
    )
    parser.add_argument("--python", default=str(DEFAULT_PYTHON))
    parser.add_argument("--out", type=Path, default=None, help="write the table here")
    parser.add_argument("--json", type=Path, default=None, help="write every finding here")
    args = parser.parse_args(argv)
    chosen = [p for p in real_suites.PROJECTS if not args.projects or p.name in args.projects]
    findings: list[dict[str, str | int]] = []
    for project in chosen:
        found = lint_project(args.work, args.python, project)
        for finding in found:
            print(f"{project.name}/{finding['path']}:{finding['line']}: {finding['code']}")
            print(f"    {finding['source']}")
        findings.extend(found)
    text = table([p.name for p in chosen], findings)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    if args.json is not None:
        args.json.write_text(json.dumps(findings, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
