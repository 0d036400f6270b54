"""Sphinx configuration of the pytest-isolation documentation (Markdown pages via MyST)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent


def _version() -> str:
    # Read, not imported: the docs build needs neither pytest nor the plugin installed.
    text = (_ROOT / "src" / "pytest_isolation" / "__init__.py").read_text(encoding="utf-8")
    found = re.search(r'^__version__ = "([^"]+)"', text, re.MULTILINE)
    return found.group(1) if found else "unknown"


project = "pytest-isolation"
author = "pytest-isolation contributors"
copyright = "pytest-isolation contributors"
release = _version()
version = release

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# Every heading gets GitHub's anchor, so that a link `page.md#anchor` works on
# GitHub and here alike (the pages use no MyST-only syntax: GitHub shows them).
myst_heading_anchors = 6

html_title = f"pytest-isolation {release}"
html_theme = "furo" if importlib.util.find_spec("furo") else "alabaster"


#: A section of the index that lists pages: its heading, then one link per line.
_INDEX_SECTION = re.compile(r"^## (.+)\n\n((?:- \[[^\]]+\]\([^)#]+\.md\)\n)+)", re.MULTILINE)


def _toctrees(index: str) -> str:
    """The index's lists of pages as hidden toctrees, one per section, for
    Sphinx's navigation (on GitHub the lists themselves are the navigation)."""
    trees = []
    for caption, items in _INDEX_SECTION.findall(index):
        pages = re.findall(r"\]\(([^)]+)\.md\)", items)
        trees.append(
            "```{toctree}\n:hidden:\n:caption: " + caption + "\n\n" + "\n".join(pages) + "\n```\n"
        )
    return "\n" + "\n".join(trees)


def _source_read(app: Any, docname: str, source: list[str]) -> None:
    # Directives GitHub would show as code are added here, where only Sphinx sees them.
    if docname == "index":
        source[0] += _toctrees(source[0])
    elif docname == "changelog":
        source[0] = "```{include} ../CHANGELOG.md\n:relative-docs: docs/\n:relative-images:\n```\n"


def setup(app: Any) -> dict[str, bool]:
    app.connect("source-read", _source_read)
    return {"parallel_read_safe": True}
