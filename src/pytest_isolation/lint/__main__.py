"""``python -m pytest_isolation.lint PATH...``: the isolation lint without a
pytest run (pre-commit, a quick look at a suite).

Lints the given files, and under each given directory the test files
(``test_*.py``, ``*_test.py``) and ``conftest.py`` files; prints one
``path:line: CODE message; fix`` line per finding and exits 1 if there is
any, 0 if none, 2 on bad arguments.  Suppression comments apply; the ini
allow-list does not (it needs pytest's configuration).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from collections.abc import Iterator
from collections.abc import Sequence
from pathlib import Path

from pytest_isolation.core.words import counted
from pytest_isolation.lint.rules import CODES
from pytest_isolation.lint.rules import check
from pytest_isolation.lint.rules import decode_source

#: Directories never searched for test files.
_SKIPPED = frozenset({"__pycache__", "node_modules", "site-packages", "build", "dist"})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_isolation.lint",
        description="Lint test files and conftests for what breaks isolated tests.",
    )
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    parser.add_argument(
        "--select",
        action="append",
        default=None,
        metavar="CODE",
        help="report only these codes (repeat the option)",
    )
    args = parser.parse_args(argv)
    missing = [str(path) for path in args.paths if not path.exists()]
    if missing:
        parser.error(f"no such file or directory: {', '.join(missing)}")
    unknown = sorted(set(args.select or ()) - set(CODES))
    if unknown:
        parser.error(f"--select: unknown code {unknown[0]!r}; choose from {', '.join(CODES)}")
    counts = lint(sorted(set(files(args.paths))), args.select)
    total = sum(counts.values())
    per_code = ", ".join(f"{code} {count}" for code, count in sorted(counts.items()))
    print(counted(total, "finding") + (f" ({per_code})" if total else ""))
    return 1 if total else 0


def lint(paths: list[Path], select: list[str] | None) -> Counter[str]:
    counts: Counter[str] = Counter()
    for path in paths:
        try:
            source = decode_source(path.read_bytes())  # a PEP 263 coding line, else UTF-8
        except OSError as error:
            print(f"{path}: not read ({error})", file=sys.stderr)
            continue
        for finding in check(source, str(path)):
            if select is None or finding.code in select:
                counts[finding.code] += 1
                print(f"{path}:{finding.line}: {finding.text()}")
    return counts


def files(paths: list[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_file():
            yield path
            continue
        for folder, directories, names in os.walk(path):
            directories[:] = sorted(
                name for name in directories if name not in _SKIPPED and not name.startswith(".")
            )
            for name in sorted(names):
                if _test_file(name):
                    yield Path(folder) / name


def _test_file(name: str) -> bool:
    if not name.endswith(".py"):
        return False
    return name == "conftest.py" or name.startswith("test_") or name.endswith("_test.py")


if __name__ == "__main__":
    sys.exit(main())
