"""Each function of attrs' ``src/attr/validators.py`` changed in turn: what the
``recorded`` scope selects (benchmarks/results-recorded.md, stop 44).

Run from a recorded attrs tree (``bench_recorded.py --part accuracy`` leaves one in
``BENCHREC/accuracy/3.12/attrs``) with that tree's Python:

    cd BENCHREC/accuracy/3.12/attrs
    WORK312/venvs/attrs-26.1.0/bin/python REPO/benchmarks/recorded_per_function.py

where ``BENCHREC`` is ``bench_recorded.py``'s ``--work``, ``WORK312`` the work directory of
the Python 3.12 venvs of ``real_suites.py`` (see ``bench_recorded.py``) and ``REPO`` this
repository.

Each change is ``_ = 0`` as the first statement of the function's body (after its
docstring), reverted after the selection.  A function that importing attrs runs selects
every test file (they all import attrs); the union of what the others select is the
files whose tests execute validators' code after the import.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SOURCE = Path("src/attr/validators.py")
SELECT = (
    "-p",
    "isolation",
    "--rootdir=.",
    "--isolation-dry-run",
    "--isolation-max-test-files=1000",
    "--isolation-scope=recorded",
    "--isolation-for",
    str(SOURCE),
)


def functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef]]:
    found: list[tuple[str, ast.FunctionDef]] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            found.append((node.name, node))
        elif isinstance(node, ast.ClassDef):
            found += [
                (f"{node.name}.{f.name}", f) for f in node.body if isinstance(f, ast.FunctionDef)
            ]
    return found


def changed(original: str, function: ast.FunctionDef) -> str:
    """``original`` with ``_ = 0`` first in ``function``'s body (after a docstring)."""
    first = function.body[0]
    documented = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    at = function.body[1] if documented and len(function.body) > 1 else first
    lines = original.splitlines(keepends=True)
    lines.insert(at.lineno - 1, " " * at.col_offset + "_ = 0\n")
    return "".join(lines)


def selected() -> list[str]:
    run = subprocess.run([sys.executable, "-m", "pytest", *SELECT], capture_output=True, text=True)
    return [line for line in run.stdout.splitlines() if line.startswith("tests/")]


def main() -> None:
    original = SOURCE.read_text()
    every: set[str] = set()
    union: set[str] = set()
    results: list[tuple[str, list[str]]] = []
    for name, function in functions(ast.parse(original)):
        SOURCE.write_text(changed(original, function))
        try:
            files = selected()
        finally:
            SOURCE.write_text(original)
        results.append((name, files))
        print(f"{name}: {len(files)}", flush=True)
        every.update(files)
    for _, files in results:
        if len(files) < len(every):
            union.update(files)
    print(f"union of the selections smaller than {len(every)}: {len(union)} {sorted(union)}")


if __name__ == "__main__":
    main()
