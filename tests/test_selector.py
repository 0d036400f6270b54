"""The capped selector end to end: every outcome, exit code and message, the
full-suite gate, --isolation-since with git, and that a plain run is
unaffected."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import TIMEOUT
from conftest import run_file_mode
from conftest import run_guard

PROJECT = {
    "src/shop/__init__.py": "from .cart import Cart\n",
    "src/shop/cart.py": "class Cart:\n    size = 0\n",
    "src/shop/prices.py": "from shop.cart import Cart\ndef total(): return Cart.size\n",
    "src/shop/_tax.py": "RATE = 2\n",
    "src/shop/broken.py": "def f(:\n",
    "tests/test_cart.py": "from shop import Cart\ndef test_cart(): assert Cart.size == 0\n",
    "tests/test_prices.py": "from shop.prices import total\n"
    "def test_total(): assert total() == 0\n",
    "tests/test_tax.py": "from shop._tax import RATE\ndef test_rate(): assert RATE == 2\n",
    "tests/test_other.py": "def test_other(): pass\n",
    "tests/checkout/test_flow.py": "from shop.prices import total\nimport pytest\n"
    "@pytest.mark.parametrize('n', range(3))\ndef test_flow(n): assert total() == 0\n",
    "docs/index.md": "# docs\n",
}
INI = "[pytest]\ntestpaths = tests\npythonpath = src\nnorecursedirs = docs .*\n"
GATE = "PYTEST_ISOLATION_ALLOW_ALL"


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for key, text in PROJECT.items():
        path = pytester.path / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    pytester.makeini(INI)
    monkeypatch.delenv(GATE, raising=False)
    return pytester


def select(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return run_guard(pytester, "-p", "no:randomly", *args)


def refusal(result: pytest.RunResult, outcome: str, code: int) -> str:
    assert result.ret == code, result.stderr.str()
    first = result.stderr.lines[0]
    assert first.startswith(f"isolation: {outcome}: "), first
    assert GATE not in result.stderr.str() + result.stdout.str()
    assert "passed" not in result.stdout.str()
    return result.stderr.str()


def test_a_plain_run_is_unaffected(project: pytest.Pytester) -> None:
    result = select(project)
    result.assert_outcomes(passed=7, errors=0)
    result.stdout.no_fnmatch_line("*scope=*")


def test_selected_test_files_run_and_the_header_says_how(project: pytest.Pytester) -> None:
    result = select(project, "--isolation-for", "src/shop/prices.py", "-v")
    assert result.ret == 0
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "isolation: scope=impact sources=1 test_files=2/50 via convention:1 import:1 "
            "(graph: 10 files, * reparsed, * ms)",
        ]
    )
    result.stdout.fnmatch_lines(["tests/checkout/test_flow.py::test_flow[[]0] PASSED*"])
    result.stdout.no_fnmatch_line("*test_cart.py*")


def test_scopes(project: pytest.Pytester) -> None:
    def files(scope: str) -> list[str]:
        result = select(
            project,
            "--isolation-for",
            "src/shop/cart.py",
            f"--isolation-scope={scope}",
            "--isolation-dry-run",
        )
        assert result.ret == 0
        return [line for line in result.stdout.lines if line.startswith("tests/")]

    assert files("convention") == ["tests/test_cart.py"]
    assert files("graph") == ["tests/test_cart.py"]
    assert files("impact") == [
        "tests/checkout/test_flow.py",
        "tests/test_cart.py",
        "tests/test_prices.py",
    ]


def test_dry_run_and_explain(project: pytest.Pytester) -> None:
    result = select(
        project, "--isolation-for", "src/shop/cart.py", "--isolation-dry-run", "--isolation-explain"
    )
    assert result.ret == 0
    assert result.stdout.lines == [
        result.stdout.lines[0],
        # the scope auto picked, and why: no recorded run yet
        "isolation: scope=auto: no record of what each test file executed in pytest's cache "
        "(a file-mode run records one); scope impact selects instead",
        "isolation: tests/checkout/test_flow.py: imports it (depth 2): "
        "tests/checkout/test_flow.py -> src/shop/prices.py -> src/shop/cart.py",
        "isolation: tests/test_cart.py: named after src/shop/cart.py",
        "isolation: tests/test_prices.py: imports it (depth 2): "
        "tests/test_prices.py -> src/shop/prices.py -> src/shop/cart.py",
        "tests/checkout/test_flow.py",
        "tests/test_cart.py",
        "tests/test_prices.py",
    ]
    assert not (project.path / ".pytest_cache" / "v" / "cache" / "lastfailed").exists()


def test_for_files_stdin_and_directories(project: pytest.Pytester) -> None:
    (project.path / "changed.txt").write_text("# from the agent\nsrc/shop/_tax.py\n\n")
    result = project.run(
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "isolation",
        "--isolation-for=@changed.txt",
        "--isolation-for",
        "-",
        "--isolation-dry-run",
        stdin=b"./tests/test_other.py\n",
        timeout=TIMEOUT,
    )
    assert result.ret == 0, result.stderr.str()
    assert [line for line in result.stdout.lines if line.startswith("tests/")] == [
        "tests/test_other.py",
        "tests/test_tax.py",
    ]
    result = select(project, "--isolation-for", "tests/checkout", "--isolation-dry-run")
    assert result.stdout.lines[-1] == "tests/checkout/test_flow.py"


def test_scope_exceeded(project: pytest.Pytester) -> None:
    result = select(
        project,
        "--isolation-for",
        "src/shop/cart.py",
        "--isolation-for",
        "src/shop/_tax.py",
        "--isolation-max-test-files=2",
    )
    text = refusal(result, "scope_exceeded", 4)
    assert result.stderr.lines[0] == (
        "isolation: scope_exceeded: 4 test files for 2 sources, over the cap of 2 "
        "(scope=impact); nothing was run"
    )
    assert "  src/shop/cart.py: 3 test files (depth 0: 1, depth 2: 2)" in text
    assert "  --isolation-max-depth=1: 2 test files" in text
    assert "  --isolation-scope=convention: 2 test files" in text
    assert "  run the sources in 2 batches:" in text
    assert "    3 test files, over 2: alone: --isolation-for src/shop/cart.py" in text


def test_too_many_sources(project: pytest.Pytester) -> None:
    result = select(
        project,
        "--isolation-for",
        "src/shop/cart.py",
        "--isolation-for",
        "src/shop/_tax.py",
        "--isolation-max-sources=1",
    )
    refusal(result, "scope_exceeded", 4)
    assert result.stderr.lines[0] == (
        "isolation: scope_exceeded: 2 sources, over the cap of 1 (scope=impact); nothing was run"
    )


@pytest.mark.parametrize("trigger", ["pyproject.toml", "requirements.txt", "setup.cfg"])
def test_global_triggers_need_the_gate(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, trigger: str
) -> None:
    (project.path / trigger).write_text("")
    result = select(project, "--isolation-for", trigger)
    text = refusal(result, "all_not_allowed", 4)
    assert f"{trigger} changed, which can change what every test does" in text
    monkeypatch.setenv(GATE, "yes")
    result = select(project, "--isolation-for", trigger)
    result.assert_outcomes(passed=7)
    result.stdout.fnmatch_lines(["isolation: scope=all: the whole suite*"])


@pytest.mark.parametrize("value", ["0", "false", "", "no", " 1", "1 ", "on"])
def test_the_gate_stays_shut(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(GATE, value)
    result = select(project, "--isolation-for", "src/shop/cart.py", "--isolation-scope=all")
    refusal(result, "all_not_allowed", 4)


@pytest.mark.parametrize("value", ["1", "TRUE", "Yes"])
def test_the_gate_opens(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(GATE, value)
    result = select(project, "--isolation-for", "src/shop/cart.py", "--isolation-scope=all")
    result.assert_outcomes(passed=7)


def test_the_dry_run_with_the_gate_open_lists_what_the_run_runs(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(GATE, "yes")
    args = ("--isolation-for", "src/shop/cart.py", "--isolation-scope=all")
    dry = select(project, *args, "--isolation-dry-run", "--isolation-json=decision.json")
    assert dry.ret == 0, dry.stderr.str()
    listed = [line for line in dry.stdout.lines if line.startswith("tests/")]
    run = select(project, *args, "-v")
    ran = sorted(
        {line.split("::")[0] for line in run.stdout.lines if "::" in line and "PASSED" in line}
    )
    assert len(ran) > 1
    assert listed == ran
    header = f"isolation: scope=all: the whole suite, {len(ran)} test files"
    dry.stdout.fnmatch_lines([f"{header} (the full-suite gate is open)"])
    record = json.loads((project.path / "decision.json").read_text())
    assert record["test_files"] == ran
    assert record["via"] == {"all": len(ran)}


def test_empty(project: pytest.Pytester) -> None:
    (project.path / "src/shop/unused.py").write_text("X = 1\n")
    result = select(project, "--isolation-for", "src/shop/unused.py")
    text = refusal(result, "empty", 5)
    assert (
        "  src/shop/unused.py: no test named test_unused.py or unused_test.py, nor under a "
        "unused/ directory, and no test file imports it" in text
    )
    result = select(project, "--isolation-for", "src/shop/unused.py", "--isolation-allow-empty")
    assert result.ret == 0
    assert result.stderr.lines[0].startswith("isolation: empty: ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--isolation-for", "../elsewhere.py"], "../elsewhere.py: outside the rootdir *"),
        (["--isolation-for", "nope.txt"], "nope.txt: no such file or directory"),
        (["--isolation-for", "docs/index.md"], "docs/index.md: not a Python file, *"),
        (["--isolation-for", "src/shop/broken.py"], "src/shop/broken.py:1: syntax error: *"),
        (["--isolation-for", "src/shop/cart.py", "tests"], "test paths (tests) cannot be *"),
        (
            ["--isolation-for", "src/shop/cart.py", "--isolation-scope=wide"],
            "--isolation-scope: invalid value 'wide'; choose from *",
        ),
        (
            ["--isolation-for", "src/shop/cart.py", "--isolation-max-test-files=many"],
            "--isolation-max-test-files: invalid value 'many'; expected a whole number",
        ),
        (["--isolation-for=@missing.txt"], "--isolation-for @missing.txt: cannot read *"),
    ],
)
def test_invalid_input(project: pytest.Pytester, args: list[str], message: str) -> None:
    result = select(project, *args)
    refusal(result, "invalid_input", 4)
    result.stderr.fnmatch_lines([f"isolation: invalid_input: {message}"])


def test_unmapped_files_can_be_skipped(project: pytest.Pytester) -> None:
    result = select(
        project,
        "--isolation-for",
        "docs/index.md",
        "--isolation-for",
        "src/shop/_tax.py",
        "--isolation-unmapped=warn",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["isolation: warning: docs/index.md: not a Python file; skipped"])


def test_json_record_on_success_and_refusal(project: pytest.Pytester) -> None:
    select(project, "--isolation-for", "src/shop/_tax.py", "--isolation-json", "out/sel.json")
    record = json.loads((project.path / "out/sel.json").read_text())
    assert record["version"] == 1
    assert record["outcome"] == "selected"
    assert record["phase"] == "select"
    assert record["scope"] == "impact"
    assert record["sources"] == ["src/shop/_tax.py"]
    assert record["test_files"] == ["tests/test_tax.py"]
    assert record["per_source"] == {"src/shop/_tax.py": {"test_files": 1, "by_depth": {"0": 1}}}
    assert record["via"] == {"convention": 1}
    assert record["caps"] == {
        "max_sources": 50,
        "max_test_files": 50,
        "max_items": None,
        "max_depth": None,
    }
    assert set(record) >= {"suggested_batches", "warnings", "graph"}
    assert record["graph"]["files"] == 10
    select(
        project,
        "--isolation-for",
        "src/shop/cart.py",
        "--isolation-for",
        "src/shop/_tax.py",
        "--isolation-max-test-files=2",
        "--isolation-json",
        "out/sel.json",
    )
    record = json.loads((project.path / "out/sel.json").read_text())
    assert record["outcome"] == "scope_exceeded"
    assert record["suggested_batches"] == [["src/shop/cart.py"], ["src/shop/_tax.py"]]
    assert record["per_source"]["src/shop/cart.py"]["by_depth"] == {"0": 1, "2": 2}


@pytest.mark.parametrize("mode", ["plain", "file"])
def test_max_items_counts_after_collection_and_k(project: pytest.Pytester, mode: str) -> None:
    args = ["--isolation-for", "src/shop/prices.py", "--isolation-json", "sel.json"]
    run = (
        (lambda *a: run_file_mode(project, "fork", *a))
        if mode == "file"
        else (lambda *a: select(project, *a))
    )
    result = run(*args, "--isolation-max-items=3")
    assert result.ret == 4
    assert result.stderr.lines[0] == (
        "isolation: scope_exceeded: 4 tests in 2 test files after collection, -k and -m, over "
        "--isolation-max-items=3; nothing was run. Narrow with -k or -m, a narrower "
        "--isolation-scope or --isolation-max-depth, or fewer --isolation-for paths."
    )
    assert "passed" not in result.stdout.str()
    record = json.loads((project.path / "sel.json").read_text())
    assert (record["outcome"], record["phase"]) == ("scope_exceeded", "collect")
    result = run(*args, "--isolation-max-items=3", "-k", "not flow")
    result.assert_outcomes(passed=1)


def test_file_mode_runs_the_selection(project: pytest.Pytester) -> None:
    result = run_file_mode(project, "spawn", "--isolation-for", "src/shop/prices.py")
    result.assert_outcomes(passed=4)


def test_the_import_graph_is_cached(project: pytest.Pytester) -> None:
    args = ("--isolation-for", "src/shop/_tax.py", "--isolation-dry-run")
    assert "(graph: 10 files, 10 reparsed," in select(project, *args).stdout.lines[0]
    assert "(graph: 10 files, 0 reparsed," in select(project, *args).stdout.lines[0]
    (project.path / "src/shop/cart.py").write_text("class Cart:\n    size = 1 - 1\n")
    assert "(graph: 10 files, 1 reparsed," in select(project, *args).stdout.lines[0]
    cleared = select(project, *args, "--cache-clear")
    assert "(graph: 10 files, 10 reparsed," in cleared.stdout.lines[0]
    uncached = select(project, *args, "-p", "no:cacheprovider")
    assert "(graph: 10 files, 10 reparsed," in uncached.stdout.lines[0]


def test_cache_for_config_is_still_there(project: pytest.Pytester) -> None:
    """The selector reads pytest's cache before configure (private API, fenced in
    ``selector.run._cache``); this fails loudly if pytest changes it."""
    config = project.parseconfig()
    cache = pytest.Cache.for_config(config, _ispytest=True)
    cache.set("isolation/probe", [1])
    assert cache.get("isolation/probe", None) == [1]


# -- --isolation-since ---------------------------------------------------------------


def git(project: pytest.Pytester, *args: str) -> None:
    subprocess.run(["git", *args], cwd=project.path, check=True, capture_output=True)


@pytest.fixture
def repo(project: pytest.Pytester) -> pytest.Pytester:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    (project.path / ".gitignore").write_text("stdout\nstderr\n.pytest_cache/\n")
    git(project, "init", "-q", "-b", "main")
    git(project, "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    git(project, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base")
    return project


def since(repo: pytest.Pytester, ref: str = "HEAD") -> list[str]:
    result = select(repo, f"--isolation-since={ref}", "--isolation-dry-run")
    assert result.ret == 0, result.stderr.str()
    return [line for line in result.stdout.lines if line.startswith("tests/")]


def test_since_sees_staged_unstaged_untracked_and_renamed(repo: pytest.Pytester) -> None:
    (repo.path / "src/shop/_tax.py").write_text("RATE = 2  # unstaged\n")
    assert since(repo) == ["tests/test_tax.py"]
    git(repo, "add", "src/shop/_tax.py")
    assert since(repo) == ["tests/test_tax.py"]
    (repo.path / "tests/test_new.py").write_text("def test_new(): pass\n")
    assert since(repo) == ["tests/test_new.py", "tests/test_tax.py"]
    git(repo, "mv", "tests/test_other.py", "tests/test_renamed.py")
    assert "tests/test_renamed.py" in since(repo)
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-am", "more")
    assert since(repo, "HEAD~1") == [
        "tests/test_new.py",
        "tests/test_renamed.py",
        "tests/test_tax.py",
    ]


def test_since_a_deleted_module_selects_its_former_importers(repo: pytest.Pytester) -> None:
    os.remove(repo.path / "src/shop/_tax.py")
    assert since(repo) == ["tests/test_tax.py"]


def test_for_a_deleted_module_that_git_knows_selects_its_former_importers(
    repo: pytest.Pytester,
) -> None:
    os.remove(repo.path / "src/shop/_tax.py")
    result = select(repo, "--isolation-for=src/shop/_tax.py", "--isolation-dry-run")
    assert result.ret == 0, result.stderr.str()
    assert [line for line in result.stdout.lines if line.startswith("tests/")] == [
        "tests/test_tax.py"
    ]


def test_for_a_missing_file_git_never_knew_is_invalid_input(repo: pytest.Pytester) -> None:
    result = select(repo, "--isolation-for=src/shop/_taxx.py")
    refusal(result, "invalid_input", 4)
    assert result.stderr.lines[0] == (
        "isolation: invalid_input: src/shop/_taxx.py: no such file, and not one that git "
        "knows was deleted"
    )


def test_for_a_listing_that_is_not_text_is_invalid_input(project: pytest.Pytester) -> None:
    (project.path / "changed.bin").write_bytes(b"\xff\xfe\x00binary")
    result = select(project, "--isolation-for=@changed.bin")
    refusal(result, "invalid_input", 4)
    result.stderr.fnmatch_lines(
        [
            "isolation: invalid_input: --isolation-for @changed.bin: cannot read '*changed.bin': "
            "not UTF-8 text (byte 0)"
        ]
    )
    assert "Traceback" not in result.stderr.str()


def test_since_errors(project: pytest.Pytester, repo: pytest.Pytester) -> None:
    result = select(repo, "--isolation-since=nope")
    refusal(result, "invalid_input", 4)
    assert result.stderr.lines[0] == (
        "isolation: invalid_input: --isolation-since nope: unknown git ref 'nope'"
    )
    shutil.rmtree(repo.path / ".git")
    result = select(repo, "--isolation-since=HEAD")
    refusal(result, "invalid_input", 4)
    result.stderr.fnmatch_lines(["*--isolation-since HEAD: '*' is not in a git repository"])


def test_xdist_workers_run_the_selection(project: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    result = select(project, "-p", "xdist", "-n", "2", "--isolation-for", "src/shop/prices.py")
    result.assert_outcomes(passed=4)


def test_a_dry_run_without_changed_files_is_refused_not_a_full_run(
    project: pytest.Pytester,
) -> None:
    result = project.runpytest_subprocess("-p", "isolation", "--isolation-dry-run", timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --isolation-dry-run shows what the selector would run: it needs "
            "--isolation-for or --isolation-since"
        ]
    )
    result.stdout.no_fnmatch_line("*passed*")
