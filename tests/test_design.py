"""The design rules that a reader relies on (issues 32 and 47), checked on
the source so that they cannot drift.

* File mode's code sits in the folder of the process it runs in:
  ``filemode/parent``, ``filemode/server``, ``filemode/child``, beside the
  few modules every side shares (``lint-imports`` checks the direction of
  their imports).
* No class in the package keeps more than 12 attributes unless a comment in
  its body, starting ``# Attributes:``, says why.
* No module in the package runs over 500 lines unless a comment near its
  top, starting ``# Length:``, says why.
* Each feature declares its options in a plugin module of its own; the
  entry plugin declares none.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pytest_isolation.filemode

PACKAGE = Path(pytest_isolation.__file__).parent
FILEMODE = Path(pytest_isolation.filemode.__file__).parent
SHARED = {
    "__init__.py",
    "plugin.py",
    "wire.py",
    "processes.py",
    "lifetime.py",
    "junit.py",
    "compat.py",
    "forks.py",
    "placement.py",
    "shared.py",
    "cov.py",
    "depth.py",
    "loops.py",
    "logs.py",
}
MOST_ATTRIBUTES = 12
MOST_LINES = 500
#: Where a module's reason for its length must start: within its first lines.
LENGTH_REASON_WITHIN = 60


def attributes(node: ast.ClassDef) -> set[str]:
    """The names a class's methods assign on ``self``, and the fields its
    body declares (a dataclass's, a named tuple's; not a ``ClassVar``)."""
    found = {
        statement.target.id
        for statement in node.body
        if isinstance(statement, ast.AnnAssign)
        and isinstance(statement.target, ast.Name)
        and "ClassVar" not in ast.unparse(statement.annotation)
    }
    for inner in ast.walk(node):
        if (
            isinstance(inner, ast.Attribute)
            and isinstance(inner.ctx, ast.Store)
            and isinstance(inner.value, ast.Name)
            and inner.value.id == "self"
        ):
            found.add(inner.attr)
    return found


def classes() -> list[tuple[Path, ast.ClassDef, str]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef):
                body = "\n".join(source.splitlines()[node.lineno - 1 : node.end_lineno])
                found.append((path, node, body))
    return found


def test_every_module_sits_with_the_process_it_runs_in() -> None:
    loose = {path.name for path in FILEMODE.glob("*.py")} - SHARED
    assert not loose, f"move these into parent/, server/ or child/: {sorted(loose)}"
    for folder in ("parent", "server", "child"):
        assert (FILEMODE / folder / "__init__.py").is_file()


@pytest.mark.parametrize(
    ("path", "node", "body"),
    classes(),
    ids=lambda value: value.name if isinstance(value, ast.ClassDef) else "",
)
def test_no_class_keeps_more_than_twelve_attributes_without_a_reason(
    path: Path, node: ast.ClassDef, body: str
) -> None:
    names = attributes(node)
    if len(names) > MOST_ATTRIBUTES:
        where = f"{path.relative_to(PACKAGE)}: {node.name}"
        assert "# Attributes:" in body, f"{where} keeps {len(names)}: {sorted(names)}"


def test_the_controller_hands_its_stages_to_objects_of_their_own() -> None:
    """The controller of issue 32 kept 25 attributes; its stages are objects now."""
    from pytest_isolation.filemode.parent.controller import FileModeController

    found = next(node for path, node, _ in classes() if node.name == FileModeController.__name__)
    assert {"collection", "starter", "relayer", "fixtures"} <= attributes(found)
    assert len(attributes(found)) <= MOST_ATTRIBUTES


@pytest.mark.parametrize(
    "path", sorted(PACKAGE.rglob("*.py")), ids=lambda path: str(path.relative_to(PACKAGE))
)
def test_no_module_runs_over_five_hundred_lines_without_a_reason(path: Path) -> None:
    lines = path.read_text().splitlines()
    if len(lines) > MOST_LINES:
        top = lines[:LENGTH_REASON_WITHIN]
        reason = any(line.startswith("# Length:") for line in top)
        assert reason, f"{path.relative_to(PACKAGE)} runs to {len(lines)} lines"


def test_the_entry_plugin_declares_no_option() -> None:
    """Options live beside their feature (issue 47): the entry only lists the plugins."""
    import pytest_isolation.plugin as entry

    source = Path(entry.__file__).read_text()
    assert ".addoption(" not in source
    assert ".addini(" not in source
    assert all(name.endswith((".plugin", ".fixtures")) for name in entry.pytest_plugins)


HOW_IT_WORKS = PACKAGE.parents[1] / "docs" / "explanation" / "how-it-works.md"


def test_how_it_works_names_only_modules_that_exist() -> None:
    """The map and the paths through it (issue 47) stay true as modules move."""
    import re

    text = HOW_IT_WORKS.read_text()
    named = set(re.findall(r"`((?:[a-z_]+/)+[a-z_]+\.py)`", text))
    # A path is the package's, file mode's (``child/plugin.py``) or the repository's.
    roots = (PACKAGE, FILEMODE, PACKAGE.parents[1])
    missing = sorted(path for path in named if not any((root / path).is_file() for root in roots))
    assert len(named) > 40
    assert not missing, f"how-it-works.md names modules that do not exist: {missing}"


def test_how_it_works_maps_every_package() -> None:
    text = HOW_IT_WORKS.read_text()
    block = text[text.index("## Architecture") : text.index("### The path of one file")]
    packages = sorted(path.parent.name for path in PACKAGE.glob("*/__init__.py"))
    assert not [name for name in packages if f"{name}/" not in block]


def test_a_class_over_the_limit_is_found() -> None:
    """The check can fail: a class with 13 attributes and no reason is caught."""
    source = "class Big:\n    def __init__(self):\n" + "".join(
        f"        self.a{i} = {i}\n" for i in range(13)
    )
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.ClassDef)
    assert len(attributes(node)) == 13


def test_a_dataclass_over_the_limit_is_found() -> None:
    """Fields count as attributes: a dataclass of 13 fields is caught."""
    source = "@dataclasses.dataclass\nclass Big:\n" + "".join(
        f"    a{i}: int = {i}\n" for i in range(13)
    )
    source += "    limit: ClassVar[int] = 1\n"
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.ClassDef)
    assert len(attributes(node)) == 13
