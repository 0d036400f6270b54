"""The project's import graph: who imports which file, name by name.

``from pkg import Name`` links to the module that defines ``Name``, followed
through ``pkg/__init__.py`` re-exports (``from .m import Name``, ``from .m
import *`` with ``__all__``); ``pkg/__init__.py`` itself is linked by a
*file* edge, which only a change of that very file crosses.  So a package
whose ``__init__`` re-exports everything does not make every test depend on
every module.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import posixpath
import sys
import time
from collections import defaultdict
from typing import Any

from pytest_isolation.selector.parse import Facts
from pytest_isolation.selector.parse import Import
from pytest_isolation.selector.parse import parse
from pytest_isolation.selector.project import Project

#: An edge every change crosses, and one only a change of the file itself crosses.
FULL = "full"
FILE = "file"
CACHE_VERSION = 1


@dataclasses.dataclass
class Loaded:
    facts: dict[str, Facts]
    reparsed: int
    cache: dict[str, Any]
    seconds: float


def load_facts(project: Project, cached: object, plugin_version: str) -> Loaded:
    """Every file's facts, reusing the cache where a file's size and mtime, or
    else its content, are unchanged."""
    started = time.perf_counter()
    valid = (
        isinstance(cached, dict)
        and cached.get("version") == CACHE_VERSION
        and cached.get("python") == sys.version
        and cached.get("plugin") == plugin_version
    )
    old: dict[str, Any] = cached["files"] if valid and isinstance(cached, dict) else {}
    files: dict[str, Any] = {}
    facts: dict[str, Facts] = {}
    reparsed = 0
    top = str(project.root)
    for key in sorted(project.files):
        path = os.path.join(top, key)
        try:
            stat = os.stat(path)
        except OSError:
            continue
        entry = old.get(key)
        if entry and entry["size"] == stat.st_size and entry["mtime"] == stat.st_mtime_ns:
            files[key] = entry
            facts[key] = Facts.from_json(entry["facts"])
            continue
        try:
            with open(path, "rb") as file:
                data = file.read()
        except OSError:
            continue
        digest = hashlib.blake2b(data, digest_size=16).hexdigest()
        if entry and entry["digest"] == digest:  # touched, not changed
            found = Facts.from_json(entry["facts"])
        else:
            found = parse(data, key)
            reparsed += 1
        files[key] = {
            "size": stat.st_size,
            "mtime": stat.st_mtime_ns,
            "digest": digest,
            "facts": found.to_json(),
        }
        facts[key] = found
    cache = {
        "version": CACHE_VERSION,
        "python": sys.version,
        "plugin": plugin_version,
        "files": files,
    }
    return Loaded(facts, reparsed, cache, time.perf_counter() - started)


class ImportGraph:
    def __init__(self, project: Project, facts: dict[str, Facts]) -> None:
        self.project = project
        self.facts = facts
        #: target key -> [(importer key, FULL or FILE)]
        self.importers: dict[str, list[tuple[str, str]]] = defaultdict(list)
        #: a file key an unresolved import would have found -> importers (for deleted files)
        self.missing: dict[str, set[str]] = defaultdict(set)
        #: ``file:line: ...`` for imports whose target cannot be known.
        self.warnings: list[str] = []
        self._found: dict[tuple[str, int, str], tuple[str, str] | None] = {}
        self._defining: dict[tuple[str, str], tuple[str, list[str]]] = {}
        for key in sorted(facts):
            self._link(key, facts[key])

    # -- edges -------------------------------------------------------------------

    def _edge(self, importer: str, target: str, kind: str) -> None:
        if target != importer and target.endswith(".py"):
            self.importers[target].append((importer, kind))

    def _bases(self, key: str, imp: Import) -> list[str]:
        if imp.level:
            directory = posixpath.dirname(key)
            for _ in range(imp.level - 1):
                directory = posixpath.dirname(directory)
            return [directory]
        return self.project.roots_for(key)

    def find(self, key: str, imp: Import) -> tuple[str, str] | None:
        """``(base, module key)`` of the module an import names, if in the project."""
        # Absolute imports resolve alike for files with the same local root.
        where = self._bases(key, imp)[0] if imp.level else self.project.local_root(key)
        memo = (where, imp.level, imp.module)
        if memo in self._found:
            return self._found[memo]
        found = None
        for base in self._bases(key, imp):
            module = self.project.locate(base, imp.module)
            if module is not None:
                found = base, module
                break
        self._found[memo] = found
        return found

    def _link(self, key: str, facts: Facts) -> None:
        project = self.project
        for imp in facts.imports:
            found = self.find(key, imp)
            if found is None:
                self._remember_missing(key, imp)
                continue
            base, module = found
            if not imp.level:
                for init in project.parents(base, imp.module):
                    self._edge(key, init, FILE)
            if imp.names is None:
                self._edge(key, module, FULL)
                continue
            for name, _ in imp.names:
                if name == "*":
                    self._edge(key, module, FULL)
                    continue
                dotted = f"{imp.module}.{name}" if imp.module else name
                sub = project.locate(base, dotted)
                if sub is not None:
                    self._edge(key, sub, FULL)
                    continue
                defining, chain = self.defining(module, name)
                self._edge(key, defining, FULL)
                for step in chain:
                    self._edge(key, step, FILE)
                if not module.endswith(".py"):  # a namespace package has no such name
                    self.missing[posixpath.join(module, name + ".py")].add(key)
        for dynamic in facts.dynamic:
            self._link_dynamic(key, dynamic.line, dynamic.prefix)

    def _remember_missing(self, key: str, imp: Import) -> None:
        for base in self._bases(key, imp):
            parts = [p for p in imp.module.split(".") if p]
            stem = posixpath.join(base, *parts) if parts else base
            candidates = [stem + ".py", stem + "/__init__.py"] if parts else []
            for name, _ in imp.names or ():
                candidates.append(posixpath.join(stem, name + ".py"))
            for candidate in candidates:
                self.missing[candidate.lstrip("/")].add(key)

    def _link_dynamic(self, key: str, line: int, prefix: str | None) -> None:
        if prefix is not None:
            for base in self.project.roots_for(key):
                package = self.project.locate(base, prefix)
                if package is None:
                    continue
                directory = posixpath.dirname(package) if package.endswith(".py") else package
                for target in self.project.files:
                    if target.startswith(directory + "/"):
                        self._edge(key, target, FULL)
                return
        what = f"under {prefix!r}, which is not in the project" if prefix else "computed"
        self.warnings.append(
            f"{key}:{line}: dynamic import whose module is {what}; its targets are unknown"
        )

    # -- names through re-exports ----------------------------------------------------

    def defining(self, module: str, name: str) -> tuple[str, list[str]]:
        """The module that defines ``name`` as ``module`` exports it, and the
        modules passed on the way (re-exporting ``__init__`` files)."""
        known = self._defining.get((module, name))
        if known is None:
            known = self._defining[(module, name)] = self._follow(module, name)
        return known[0], list(known[1])

    def _follow(self, module: str, name: str) -> tuple[str, list[str]]:
        chain: list[str] = []
        seen: set[str] = set()
        current = module
        while current not in seen:
            seen.add(current)
            step = self._reexport(current, name)
            if step is None:
                break
            chain.append(current)
            current, name = step
            if not current.endswith(".py") or name == "":
                break
        return current, chain

    def _reexport(self, module: str, name: str) -> tuple[str, str] | None:
        """Where ``module`` gets ``name`` from: (module key, name there), if imported."""
        facts = self.facts.get(module)
        if facts is None or name in facts.defines:
            return None
        for imp in facts.imports:
            if not imp.top:
                continue
            if imp.names is None:
                if imp.alias == name:
                    found = self.find(module, imp)
                    return None if found is None else (found[1], "")
                continue
            for original, bound in imp.names:
                if original == "*" or bound != name:
                    continue
                found = self.find(module, imp)
                if found is None:
                    return None
                base, source = found
                dotted = f"{imp.module}.{original}" if imp.module else original
                sub = self.project.locate(base, dotted)
                return (sub, "") if sub is not None else (source, original)
        for imp in facts.imports:
            if imp.top and imp.names == [("*", "*")]:
                found = self.find(module, imp)
                if found is not None and name in self.exported(found[1]):
                    return found[1], name
        return None

    def exported(self, module: str) -> set[str]:
        facts = self.facts.get(module)
        if facts is None:
            return set()
        if facts.exports is not None:
            return set(facts.exports)
        names = {n for n in facts.defines if not n.startswith("_")}
        for imp in facts.imports:
            if imp.top:
                for _, bound in imp.names or ():
                    if not bound.startswith("_") and bound != "*":
                        names.add(bound)
        return names
