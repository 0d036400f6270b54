"""How long the capped selector takes on a 500-module synthetic project.

Generates ``benchmarks/.work/selector/``: a src layout with 25 packages of 20
modules (each module imports two others, every package ``__init__``
re-exports its modules' names) and 250 test files, then times, in this
process and side by side per round:

- cold: no cache, every file parsed;
- warm: the cache of the previous run, nothing changed;
- one edit: the cache, one module changed (one file reparsed).

Each figure is the time from walking the project to the selected test files
(what the header's ``ms`` counts), the median of ``--runs`` rounds.  A last
section runs ``pytest --isolation-dry-run`` twice (cold, then warm) and
reports the header it prints.

    .venv/bin/python benchmarks/bench_selector.py --runs 11
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from pytest_isolation.selector.graph import ImportGraph
from pytest_isolation.selector.graph import load_facts
from pytest_isolation.selector.project import build
from pytest_isolation.selector.scopes import select

PACKAGES = 25
MODULES = 20  # per package: 500 modules
TESTS = 250


def generate(root: Path) -> None:
    if root.exists():
        shutil.rmtree(root)
    rng = random.Random(7)
    names = [(p, m) for p in range(PACKAGES) for m in range(MODULES)]
    for p in range(PACKAGES):
        package = root / "src" / "proj" / f"pkg{p}"
        package.mkdir(parents=True)
        exports = "\n".join(f"from .mod{m} import func{m}" for m in range(MODULES))
        (package / "__init__.py").write_text(exports + "\n")
    (root / "src" / "proj" / "__init__.py").write_text("")
    for p, m in names:
        imports = []
        for other_p, other_m in rng.sample(names, 2):
            if (other_p, other_m) < (p, m):  # no cycles: only earlier modules
                imports.append(f"from proj.pkg{other_p} import func{other_m}")
        body = "\n".join(imports) + f"\n\ndef func{m}():\n    return {p * MODULES + m}\n"
        (root / "src" / "proj" / f"pkg{p}" / f"mod{m}.py").write_text(body)
    tests = root / "tests"
    tests.mkdir()
    for t in range(TESTS):
        p, m = rng.choice(names)
        (tests / f"test_{t}.py").write_text(
            f"from proj.pkg{p} import func{m}\n\ndef test_it():\n    assert func{m}() >= 0\n"
        )
    (root / "pytest.ini").write_text("[pytest]\ntestpaths = tests\npythonpath = src\n")


def selection_ms(root: Path, cache: object, source: str) -> tuple[float, object, int, int]:
    started = time.perf_counter()
    project = build(root, [".*", "build", "dist"], ["test_*.py"], ["tests"], [root / "src"])
    loaded = load_facts(project, cache, "bench")
    graph = ImportGraph(project, loaded.facts)
    selection = select(project, graph, [source], "impact")
    elapsed = (time.perf_counter() - started) * 1000
    return elapsed, loaded.cache, loaded.reparsed, len(selection.tests)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--workdir", type=Path, default=Path(__file__).parent / ".work")
    parser.add_argument("--json", type=Path)
    options = parser.parse_args()
    root = options.workdir / "selector"
    generate(root)
    source = "src/proj/pkg0/mod2.py"  # early: many modules import it, directly or not
    edited = root / "src" / "proj" / "pkg20" / "mod7.py"
    original = edited.read_text()
    times: dict[str, list[float]] = {"cold": [], "warm": [], "one edit": []}
    facts = (0, 0)
    for round_ in range(options.runs):
        cold, cache, reparsed, selected = selection_ms(root, None, source)
        times["cold"].append(cold)
        facts = (reparsed, selected)
        warm, cache, reparsed_warm, _ = selection_ms(root, cache, source)
        assert reparsed_warm == 0
        times["warm"].append(warm)
        edited.write_text(original + f"\nROUND = {round_}\n")
        edit, _, reparsed_edit, _ = selection_ms(root, cache, source)
        assert reparsed_edit == 1
        times["one edit"].append(edit)
    edited.write_text(original)
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"# Selector: {PACKAGES * MODULES} modules, {TESTS} test files, {options.runs} rounds\n")
    print(
        f"Python {sys.version.split()[0]}; cold parses {facts[0]} files; "
        f"scope=impact selects {facts[1]} test files for {source}.\n"
    )
    print("| case | median ms | min ms | max ms |")
    print("|---|---:|---:|---:|")
    for name, values in times.items():
        print(f"| {name} | {medians[name]:.1f} | {min(values):.1f} | {max(values):.1f} |")
    headers = []
    for _ in ("cold", "warm"):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "isolation",
                "-p",
                "no:randomly",
                "--isolation-for",
                source,
                "--isolation-dry-run",
            ],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        headers.append(done.stdout.splitlines()[0] if done.stdout else done.stderr)
    print("\n`pytest --isolation-dry-run`, first then second run (the header's ms):\n")
    for header in headers:
        print(f"    {header}")
    if options.json:
        options.json.write_text(json.dumps({"times_ms": times, "medians_ms": medians}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
