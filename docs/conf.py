"""Sphinx configuration of the pytest-isolation documentation (Markdown pages via MyST)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

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

myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]

html_title = f"pytest-isolation {release}"
html_theme = "furo" if importlib.util.find_spec("furo") else "alabaster"
