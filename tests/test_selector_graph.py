"""The selector's building blocks on small synthetic projects: normalisation,
classification, convention, import resolution and the scopes."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_isolation.selector import inputs
from pytest_isolation.selector.decision import batches
from pytest_isolation.selector.graph import FILE
from pytest_isolation.selector.graph import FULL
from pytest_isolation.selector.graph import ImportGraph
from pytest_isolation.selector.graph import load_facts
from pytest_isolation.selector.parse import parse
from pytest_isolation.selector.project import Project
from pytest_isolation.selector.project import build
from pytest_isolation.selector.project import is_global_trigger
from pytest_isolation.selector.scopes import by_convention
from pytest_isolation.selector.scopes import select
from pytest_isolation.selector.scopes import stem_of

PACKAGE = {
    "src/pkg/__init__.py": """
        from .core import Core
        from .util import *
        from . import sub
        __all__ = ["Core", "helper"]
    """,
    "src/pkg/core.py": "class Core: pass\n",
    "src/pkg/util.py": "__all__ = ['helper']\ndef helper(): return 1\ndef _private(): pass\n",
    "src/pkg/other.py": "def other(): pass\n",
    "src/pkg/_auth.py": "from pkg.core import Core\ndef login(): return Core()\n",
    "src/pkg/sub/__init__.py": "",
    "src/pkg/sub/alpha.py": "X = 1\n",
    "src/pkg/sub/loader.py": """
        import importlib
        def load(name):
            return importlib.import_module(f"pkg.sub.{name}")
        def anything(name):
            return importlib.import_module(name)
    """,
    "tests/test_core.py": "from pkg import Core\n",
    "tests/test_util.py": "from pkg import helper\n",
    "tests/unit/test_auth.py": "",
    "tests/auth/test_flow.py": "",
    "tests/test_auth.py": "",
    "tests/helpers.py": "from pkg._auth import login\n",
    "tests/test_login.py": "import helpers\n",
    "tests/test_loader.py": "from pkg.sub import loader\n",
    "tests/api/conftest.py": "import pkg.other\n",
    "tests/api/test_routes.py": "",
    "tests/test_typing.py": """
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from pkg.other import other
        else:
            import json
    """,
    "tests/test_lazy.py": """
        def test_it():
            try:
                from pkg.sub.alpha import X
            except ImportError:
                pass
    """,
    "tests/test_plugins.py": "pytest_plugins = ['pkg.util']\n",
}


def make(tmp_path: Path, files: dict[str, str], testpaths: tuple[str, ...] = ("tests",)) -> Project:
    for key, text in files.items():
        path = tmp_path / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return build(tmp_path, [".*", "build", "dist"], ["test_*.py", "*_test.py"], testpaths, [])


def graph_of(project: Project) -> ImportGraph:
    return ImportGraph(project, load_facts(project, None, "test").facts)


def selected(project: Project, source: str, scope: str = "impact") -> dict[str, int]:
    selection = select(project, graph_of(project), [source], scope)
    return {test: found.depth for test, found in selection.tests.items()}


@pytest.fixture
def package(tmp_path: Path) -> Project:
    return make(tmp_path, PACKAGE)


def test_project_roots_and_test_files(package: Project) -> None:
    assert package.roots[:2] == ("src", "")
    assert "tests/test_core.py" in package.tests
    assert "tests/helpers.py" not in package.tests
    assert "tests/api/conftest.py" not in package.tests
    assert package.is_test_side("tests/helpers.py")
    assert not package.is_test_side("src/pkg/core.py")
    assert package.locate("src", "pkg") == "src/pkg/__init__.py"
    assert package.locate("src", "pkg.core") == "src/pkg/core.py"
    assert package.locate("src", "pkg.nope") is None
    assert package.module_names("src/pkg/core.py") == ["pkg.core", "src.pkg.core"]


def test_skipped_directories(tmp_path: Path) -> None:
    project = make(
        tmp_path,
        {
            "a.py": "",
            ".git/hooks/x.py": "",
            "build/lib/a.py": "",
            "__pycache__/a.py": "",
            "env/lib/site.py": "",
            "env/pyvenv.cfg": "",
            "node_modules/x.py": "",
            "pkg.egg-info/x.py": "",
        },
    )
    assert project.files == frozenset({"a.py"})


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("pyproject.toml", True),
        ("sub/setup.cfg", True),
        ("tox.ini", True),
        ("pytest.ini", True),
        ("requirements.txt", True),
        ("requirements-dev.txt", True),
        ("requirements/test.in", True),
        ("poetry.lock", True),
        ("uv.lock", True),
        ("docs/index.md", False),
        ("src/pkg/core.py", False),
        ("data/requirements.json", False),
    ],
)
def test_global_triggers(key: str, expected: bool) -> None:
    assert is_global_trigger(key) is expected


def test_normalisation_makes_one_key(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a b[1](x).py").write_text("")
    (tmp_path / "link.py").symlink_to(tmp_path / "pkg" / "a b[1](x).py")
    keys = {
        inputs.normalise(raw, tmp_path, tmp_path)[0]
        for raw in ("pkg/a b[1](x).py", "./pkg/a b[1](x).py", str(tmp_path / "pkg/a b[1](x).py"))
    }
    assert keys == {"pkg/a b[1](x).py"}
    assert inputs.normalise("link.py", tmp_path, tmp_path)[0] == "pkg/a b[1](x).py"
    assert inputs.normalise("../x", tmp_path / "pkg", tmp_path)[0] == "x"
    with pytest.raises(inputs.InvalidInput, match=r"\.\./outside\.py: outside the rootdir"):
        inputs.normalise("../outside.py", tmp_path, tmp_path)


def test_for_values_read_files_and_stdin(tmp_path: Path) -> None:
    (tmp_path / "changed.txt").write_text("a.py\n\n# comment\n  b.py  \n")
    paths = inputs.read_for_values(["x.py", "@changed.txt", "-"], tmp_path, lambda: "c.py\n")
    assert paths == ["x.py", "a.py", "b.py", "c.py"]
    with pytest.raises(inputs.InvalidInput, match=r"--isolation-for @nope\.txt: cannot read"):
        inputs.read_for_values(["@nope.txt"], tmp_path, lambda: "")


def test_expand_classifies(package: Project, tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("")
    keys = [
        ("src/pkg/sub", tmp_path / "src/pkg/sub", "src/pkg/sub"),
        ("pyproject.toml", tmp_path / "pyproject.toml", "pyproject.toml"),
        ("src/pkg/gone.py", tmp_path / "src/pkg/gone.py", "src/pkg/gone.py"),
    ]
    with pytest.raises(inputs.InvalidInput, match="not one that git knows was deleted"):
        inputs.expand(keys, package, "error")  # no repository here: a typo
    sources, triggers, warnings = inputs.expand(keys, package, "error", ["src/pkg/gone.py"])
    assert sources == [
        "src/pkg/sub/__init__.py",
        "src/pkg/sub/alpha.py",
        "src/pkg/sub/loader.py",
        "src/pkg/gone.py",
    ]
    assert triggers == ["pyproject.toml"]
    assert warnings == []
    readme = [("README.md", tmp_path / "README.md", "README.md")]
    with pytest.raises(inputs.InvalidInput, match=r"README\.md: not a Python file"):
        inputs.expand(readme, package, "error")
    assert inputs.expand(readme, package, "warn")[2] == ["README.md: not a Python file; skipped"]
    assert inputs.expand(readme, package, "ignore") == ([], [], [])


@pytest.mark.parametrize(
    ("source", "stem"),
    [("src/pkg/_auth.py", "auth"), ("src/pkg/__init__.py", "pkg"), ("a/__main__.py", "__main__")],
)
def test_stem(source: str, stem: str) -> None:
    assert stem_of(source) == stem


def test_convention(package: Project) -> None:
    assert by_convention(package, "src/pkg/_auth.py") == [
        "tests/auth/test_flow.py",
        "tests/test_auth.py",
        "tests/unit/test_auth.py",
    ]
    assert by_convention(package, "src/pkg/other.py") == []


def test_parse_facts() -> None:
    facts = parse(
        textwrap.dedent(
            """
            import a.b as c
            from ..x import y as z, w
            import importlib
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                import hidden
            def f():
                import inner
                importlib.import_module("lit.eral")
                importlib.import_module(".rel", "base.pkg")
                importlib.import_module(name, "dyn.pkg")
                importlib.import_module("dyn.pre." + name)
                __import__(name)
            X = 1
            __all__ = ["X", "f"]
            """
        ).encode(),
        "m.py",
    )
    modules = [(i.module, i.level, i.top) for i in facts.imports]
    assert ("a.b", 0, True) in modules
    assert ("x", 2, True) in modules
    assert ("inner", 0, False) in modules
    assert ("lit.eral", 0, False) in modules
    assert ("base.pkg.rel", 0, False) in modules
    assert "hidden" not in [m for m, _, _ in modules]
    assert facts.imports[0].alias == "c"
    assert [(d.prefix) for d in facts.dynamic] == ["dyn.pkg", "dyn.pre", None]
    assert facts.exports == ["X", "f"]
    assert {"f", "X"} <= set(facts.defines)
    broken = parse(b"def f(:\n", "bad.py")
    assert broken.error is not None
    assert broken.error[0] == 1


def test_reexports_resolve_to_the_defining_module(package: Project) -> None:
    graph = graph_of(package)
    assert graph.defining("src/pkg/__init__.py", "Core") == (
        "src/pkg/core.py",
        ["src/pkg/__init__.py"],
    )
    assert graph.defining("src/pkg/__init__.py", "helper")[0] == "src/pkg/util.py"
    assert graph.defining("src/pkg/__init__.py", "sub")[0] == "src/pkg/sub/__init__.py"
    kinds = dict(graph.importers["src/pkg/__init__.py"])
    assert kinds["tests/test_core.py"] == FILE
    assert ("tests/test_core.py", FULL) in graph.importers["src/pkg/core.py"]


def test_an_init_that_reexports_everything_does_not_link_everything(package: Project) -> None:
    """test_core imports Core through pkg/__init__, which also imports util and sub."""
    assert "tests/test_core.py" not in selected(package, "src/pkg/util.py")
    assert "tests/test_util.py" not in selected(package, "src/pkg/core.py")
    # ... but a change of the __init__ itself selects its importers.
    assert {"tests/test_core.py", "tests/test_util.py"} <= set(
        selected(package, "src/pkg/__init__.py")
    )


def test_scopes_are_supersets(package: Project) -> None:
    convention = selected(package, "src/pkg/core.py", "convention")
    graph = selected(package, "src/pkg/core.py", "graph")
    impact = selected(package, "src/pkg/core.py", "impact")
    assert convention == {"tests/test_core.py": 0}
    assert graph == {"tests/test_core.py": 0}
    # impact: core <- _auth <- tests/helpers.py <- test_login
    assert impact == {"tests/test_core.py": 0, "tests/test_login.py": 3}
    assert set(convention) <= set(graph) <= set(impact)


def test_a_name_imported_through_another_module_links_its_definition(tmp_path: Path) -> None:
    """helpers gets Core from _auth, which only imports it: Core is core's."""
    project = make(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/core.py": "class Core: pass\n",
            "pkg/auth.py": "from pkg.core import Core\n",
            "tests/helpers.py": "from pkg.auth import Core\n",
            "tests/test_h.py": "import helpers\n",
        },
    )
    assert selected(project, "pkg/core.py", "graph") == {"tests/test_h.py": 2}
    assert selected(project, "pkg/auth.py", "graph") == {"tests/test_h.py": 2}


def test_graph_scope_follows_test_helpers(package: Project) -> None:
    assert selected(package, "src/pkg/_auth.py", "graph") == {
        "tests/auth/test_flow.py": 0,
        "tests/test_auth.py": 0,
        "tests/unit/test_auth.py": 0,
        "tests/test_login.py": 2,
    }


def test_conftest_imports_select_its_subtree(package: Project) -> None:
    assert selected(package, "src/pkg/other.py", "graph") == {"tests/api/test_routes.py": 1}


def test_a_changed_conftest_selects_its_subtree(package: Project) -> None:
    assert selected(package, "tests/api/conftest.py", "convention") == {
        "tests/api/test_routes.py": 0
    }


def test_type_checking_imports_are_ignored_and_lazy_imports_count(package: Project) -> None:
    assert "tests/test_typing.py" not in selected(package, "src/pkg/other.py")
    assert selected(package, "src/pkg/sub/alpha.py", "graph") == {
        "tests/test_lazy.py": 1,
    }


def test_pytest_plugins_count_as_imports(package: Project) -> None:
    assert selected(package, "src/pkg/util.py", "graph") == {
        "tests/test_util.py": 0,
        "tests/test_plugins.py": 1,
    }


def test_dynamic_prefix_links_the_whole_package(package: Project) -> None:
    graph = graph_of(package)
    assert ("src/pkg/sub/loader.py", FULL) in graph.importers["src/pkg/sub/alpha.py"]
    assert graph.warnings == [
        "src/pkg/sub/loader.py:6: dynamic import whose module is computed; its targets are unknown"
    ]
    assert selected(package, "src/pkg/sub/alpha.py")["tests/test_loader.py"] == 2


def test_relative_and_submodule_imports(tmp_path: Path) -> None:
    project = make(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/a.py": "from . import b\nfrom .c import thing\n",
            "app/b.py": "",
            "app/c.py": "thing = 1\n",
            "app/deep/__init__.py": "",
            "app/deep/d.py": "from ..b import *\n",
            "tests/test_a.py": "import app.a\n",
            "tests/test_d.py": "from app.deep import d\n",
        },
    )
    assert selected(project, "app/b.py") == {"tests/test_a.py": 2, "tests/test_d.py": 2}
    assert selected(project, "app/c.py") == {"tests/test_a.py": 2}
    assert selected(project, "app/b.py", "graph") == {}
    # Importing app.a also runs app/__init__.py: a change of that file selects the test.
    assert selected(project, "app/__init__.py") == {"tests/test_a.py": 1, "tests/test_d.py": 1}


def test_namespace_packages_and_deleted_modules(tmp_path: Path) -> None:
    project = make(
        tmp_path,
        {
            "ns/part/mod.py": "X = 1\n",
            "tests/test_ns.py": "from ns.part.mod import X\nimport ns.part.gone\n",
            "tests/test_from.py": "from ns.part import gone\n",
        },
    )
    assert selected(project, "ns/part/mod.py") == {"tests/test_ns.py": 1}
    assert selected(project, "ns/part/gone.py") == {"tests/test_ns.py": 1, "tests/test_from.py": 1}


def test_src_layout_and_local_test_roots(tmp_path: Path) -> None:
    project = make(
        tmp_path,
        {
            "src/lib/__init__.py": "",
            "src/lib/x.py": "",
            "tests/conftest.py": "",
            "tests/util_helpers.py": "from lib import x\n",
            "tests/test_uses.py": "from util_helpers import *\n",
        },
    )
    assert selected(project, "src/lib/x.py") == {"tests/test_uses.py": 2}


def test_max_depth(package: Project) -> None:
    selection = select(package, graph_of(package), ["src/pkg/core.py"], "impact", max_depth=2)
    assert set(selection.tests) == {"tests/test_core.py"}


def test_batches_pack_largest_first_and_deterministically() -> None:
    per_source = {
        "a.py": {"t1", "t2", "t3"},
        "b.py": {"t3", "t4"},
        "c.py": {"t5"},
        "d.py": {"t6", "t7", "t8", "t9"},
    }
    assert batches(per_source, 4, 50) == [["d.py"], ["a.py", "b.py"], ["c.py"]]
    assert batches(per_source, 4, 1) == [["d.py"], ["a.py"], ["b.py"], ["c.py"]]


def test_the_cache_reparses_only_changed_files(package: Project, tmp_path: Path) -> None:
    first = load_facts(package, None, "1")
    assert first.reparsed == len(package.files)
    warm = load_facts(package, first.cache, "1")
    assert warm.reparsed == 0
    (tmp_path / "src/pkg/core.py").write_text("class Core:\n    pass\n")
    touched = tmp_path / "src/pkg/other.py"
    touched.write_text(touched.read_text())  # new mtime, same content
    changed = load_facts(package, warm.cache, "1")
    assert changed.reparsed == 1
    assert load_facts(package, changed.cache, "2").reparsed == len(package.files)
