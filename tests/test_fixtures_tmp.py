"""isolated_tmp, isolated_tmp_path and pytest_isolation.tmp(): options and safe removal."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import TIMEOUT
from pytest_isolation.fixtures.tmp import UnsafeRemoval
from pytest_isolation.fixtures.tmp import check_removable
from pytest_isolation.fixtures.tmp import remove_tree
from pytest_isolation.fixtures.tmp import tmp
from pytest_isolation.fixtures.tmp import to_toml

OPTIONS = """
    import json, os, pathlib, subprocess, sys
    import pytest

    if sys.version_info >= (3, 11):
        import tomllib
    else:
        tomllib = None

    SEEN = {}

    def test_tmp_path(isolated_tmp_path):
        assert isolated_tmp_path.is_dir()
        assert isolated_tmp_path == isolated_tmp_path.resolve()
        SEEN["path"] = isolated_tmp_path

    def test_each_test_gets_a_fresh_one_and_the_last_is_gone(isolated_tmp_path):
        assert isolated_tmp_path != SEEN["path"] and not SEEN["path"].exists()

    def test_options(isolated_tmp):
        start = os.getcwd()
        disposed = []
        t = isolated_tmp(
            git=True,
            files={"src/a.txt": "hi", "c.json": {"x": [1]}, "p.toml": {"tool": {"n": 1, "s": "x"}}},
            init=lambda path: (path / "src" / "a.txt").read_text(),
            dispose=disposed.append,
            chdir=True,
            prefix="mine-",
        )
        assert t.extra == "hi" and t.path.name.startswith("mine-")
        assert pathlib.Path.cwd() == t.path != pathlib.Path(start)
        assert json.loads((t.path / "c.json").read_text()) == {"x": [1]}
        if tomllib:
            assert tomllib.loads((t.path / "p.toml").read_text()) == {"tool": {"n": 1, "s": "x"}}
        log = subprocess.run(
            ["git", "log", "--format=%s"], cwd=t.path, capture_output=True, text=True, check=True
        )
        assert log.stdout.strip() == "root commit"
        tracked = subprocess.run(
            ["git", "ls-files"], cwd=t.path, capture_output=True, text=True, check=True
        )
        assert "src/a.txt" in tracked.stdout.split()
        SEEN["options"] = (t.path, start, disposed)

    def test_chdir_restored_dispose_run_and_removed():
        path, start, disposed = SEEN["options"]
        assert os.getcwd() == start and disposed == [path] and not path.exists()

    def test_bad_file_name(isolated_tmp):
        with pytest.raises(ValueError, match="files: NUL byte in"):
            isolated_tmp(files={"a\\0b": "x"})
        with pytest.raises(ValueError, match="not a relative path inside"):
            isolated_tmp(files={"../escape.txt": "x"})
"""


def test_fixture_options(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_options=OPTIONS)
    result = pytester.runpytest_subprocess("-p", "isolation", "-p", "no:randomly", timeout=TIMEOUT)
    result.assert_outcomes(passed=5)


def test_git_works_without_a_global_identity(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(
        test_git="import subprocess\n"
        "def test_git(isolated_tmp):\n"
        "    t = isolated_tmp(git=True)\n"
        "    subprocess.run(['git', 'rev-parse', 'HEAD'], cwd=t.path, check=True)\n"
    )
    home = pytester.mkdir("empty-home")  # no ~/.gitconfig, so no user.name/user.email
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    for name in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "EMAIL"):
        monkeypatch.delenv(name, raising=False)
    result = pytester.runpytest_subprocess("-p", "isolation", timeout=TIMEOUT)
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize(("policy", "kept"), [("never", 0), ("failed", 1), ("always", 2)])
def test_keep_tmp(pytester: pytest.Pytester, policy: str, kept: int) -> None:
    pytester.makepyfile(
        test_keep="def test_ok(isolated_tmp_path): pass\n"
        "def test_fails(isolated_tmp_path): assert False\n"
    )
    result = pytester.runpytest_subprocess(
        "-p", "isolation", "-p", "no:randomly", f"--isolation-keep-tmp={policy}", timeout=TIMEOUT
    )
    result.assert_outcomes(passed=1, failed=1)
    isolated = [p for p in pytester.path.rglob("isolated-*") if p.is_dir()]
    assert len(isolated) == kept
    if kept:
        noun = "directory" if kept == 1 else "directories"
        result.stdout.fnmatch_lines(
            [f"*= isolation: kept {kept} temporary {noun} =*", "test_keep.py::test_fails: /*"]
        )
    else:
        result.stdout.no_fnmatch_line("*kept*")


def test_keep_tmp_in_file_mode_is_summarized_by_the_parent(
    pytester: pytest.Pytester, start: str
) -> None:
    pytester.makepyfile(test_keep="def test_fails(isolated_tmp_path): assert False\n")
    result = pytester.runpytest_subprocess(
        "-p",
        "isolation",
        "--isolation-mode=file",
        f"--isolation-start={start}",
        "--isolation-keep-tmp=failed",
        timeout=TIMEOUT,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*= isolation: kept 1 temporary directory =*", "test_keep.py::test_fails: /*"]
    )


def test_bad_keep_tmp_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("-p", "isolation", "--isolation-keep-tmp=soon")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --isolation-keep-tmp: invalid value 'soon'; choose from*"])


def test_context_manager_outside_pytest(tmp_path: Path) -> None:
    with tmp(files={"x.txt": "1"}, root=tmp_path, init=lambda p: "ready") as made:
        assert (made.path / "x.txt").read_text() == "1"
        assert made.extra == "ready"
        assert made.path.parent == tmp_path.resolve()
    assert not made.path.exists()


def test_setup_failure_removes_the_directory(tmp_path: Path) -> None:
    def boom(path: Path) -> None:
        raise RuntimeError("init failed")

    with pytest.raises(RuntimeError, match="init failed"), tmp(root=tmp_path, init=boom):
        pass
    assert list(tmp_path.iterdir()) == []


def test_prefix_must_be_a_name(tmp_path: Path) -> None:
    with (
        pytest.raises(ValueError, match="prefix: 'a/b' must be a name"),
        tmp(root=tmp_path, prefix="a/b"),
    ):
        pass


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("", "empty path"),
        ("relative/dir", "not an absolute path"),
        ("/", "a file system root"),
        ("~", "the home directory"),
        ("<root>", "the temp root itself"),
        ("<outside>", "not inside the temp root"),
        ("a\0b", "NUL byte"),
    ],
)
def test_refuses_unsafe_removal(tmp_path: Path, path: str, reason: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    target = {
        "~": Path.home(),
        "<root>": root,
        "<outside>": root / ".." / "outside",
    }.get(path, Path(path))
    with pytest.raises((UnsafeRemoval, ValueError), match=reason):
        remove_tree(target, root)
    assert root.exists()
    assert outside.exists()


def test_a_symlink_out_of_the_tree_is_unlinked_not_followed(tmp_path: Path) -> None:
    root = tmp_path / "root"
    tree = root / "tree"
    tree.mkdir(parents=True)
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep.txt").write_text("keep")
    (tree / "link").symlink_to(precious, target_is_directory=True)
    (tree / "file-link").symlink_to(precious / "keep.txt")
    remove_tree(tree, root)
    assert not tree.exists()
    assert (precious / "keep.txt").read_text() == "keep"


def test_a_symlinked_tree_resolving_outside_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "escape").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafeRemoval, match=r"resolves to .*not inside the temp root"):
        check_removable(root / "escape", root)
    assert outside.exists()


def test_toml_writer_round_trips() -> None:
    tomllib = pytest.importorskip("tomllib")
    table = {
        "name": "x",
        "n": 1,
        "f": 1.5,
        "on": True,
        "xs": [1, 2],
        "sub": {"k": "v", "deep": {"a": 1}},
    }
    assert tomllib.loads(to_toml(table)) == table
