"""ISO201: a hard-coded temporary path that a test reads or writes.

Only a path that reaches the file system is flagged: passed to ``open``, an
``os``/``shutil`` function or a ``Path`` method that touches the disk,
directly or through a name bound in the same function or at module level.
A ``"/tmp/x"`` that is only data (an expected string, a fake path handed to
the code under test) is left alone: on real suites those were every hit of
a rule that flagged the string alone.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from pytest_isolation.lint.findings import Hit
from pytest_isolation.lint.source import Source

_TEMP_PATH = re.compile(
    r"^(?:(?:/private)?/(?:var/|usr/)?tmp|/dev/shm)(?:/|$)"
    r"|^[a-z]:[\\/]+(?:windows[\\/]+)?te?mp(?:[\\/]|$)"
    r"|^(?:%te?mp%|\$\{?tmp(?:dir)?\}?|\$\{?temp\}?)(?:[\\/]|$)",
    re.IGNORECASE,
)

#: Functions that read or write the path they are given (first arguments, or these keywords).
_FS_CALLS = frozenset(
    {
        "open",
        "io.open",
        "codecs.open",
        "os.open",
        "os.makedirs",
        "os.mkdir",
        "os.remove",
        "os.unlink",
        "os.rmdir",
        "os.removedirs",
        "os.rename",
        "os.replace",
        "os.symlink",
        "os.link",
        "os.listdir",
        "os.scandir",
        "os.chmod",
        "os.stat",
        "os.path.exists",
        "os.path.isfile",
        "os.path.isdir",
        "shutil.rmtree",
        "shutil.copy",
        "shutil.copy2",
        "shutil.copyfile",
        "shutil.copytree",
        "shutil.move",
        "sqlite3.connect",
        "logging.FileHandler",
        "zipfile.ZipFile",
        "tarfile.open",
    }
)
_FS_KEYWORDS = frozenset({"file", "path", "filename", "src", "dst", "database"})
#: ``Path`` methods that touch the file system.
_FS_METHODS = frozenset(
    {
        "write_text",
        "write_bytes",
        "read_text",
        "read_bytes",
        "mkdir",
        "touch",
        "unlink",
        "rmdir",
        "open",
        "rename",
        "replace",
        "symlink_to",
        "exists",
        "is_file",
        "is_dir",
        "iterdir",
        "glob",
        "rglob",
        "chmod",
        "stat",
    }
)
_JOINS = frozenset({"os.path.join", "posixpath.join", "ntpath.join", "str", "os.fspath"})
_PATHS = ("Path", "PurePath", "PosixPath", "WindowsPath")

FIX = (
    "use the tmp_path fixture (or isolated_tmp): a directory of the test's own that nothing "
    "else writes to and that pytest cleans up"
)


def temp_path(src: Source, node: ast.AST) -> Iterator[Hit]:
    if not isinstance(node, ast.Call):
        return
    used = next((arg for arg in _path_arguments(src, node) if _temp(src, arg, node)), None)
    if used is None:
        return
    text = " ".join(ast.unparse(used).split())[:60]
    yield Hit.at(
        node,
        "ISO201",
        f"hard-coded temporary path {text} read or written here: runs at the same time "
        "(xdist, CI jobs on one machine) share it, and what an earlier run left there changes "
        "the result",
        FIX,
    )


def _path_arguments(src: Source, call: ast.Call) -> list[ast.AST]:
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in _FS_METHODS:
        return [func.value]
    if src.qual(func) not in _FS_CALLS:
        return []
    named = [keyword.value for keyword in call.keywords if keyword.arg in _FS_KEYWORDS]
    return [*call.args[:2], *named]


def _temp(src: Source, node: ast.AST, where: ast.AST, depth: int = 0) -> bool:
    """``node`` is a temporary path built by hand (through names, a few levels)."""
    if depth > 4:
        return False
    match node:
        case ast.Constant(value=str(text)):
            return bool(_TEMP_PATH.match(text))
        case ast.JoinedStr(values=[first, *_]):
            return _temp(src, first, where, depth + 1) or _gettempdir(src, first)
        case ast.BinOp(left=left, op=ast.Div() | ast.Add()):
            return _temp(src, left, where, depth + 1) or _temp_dir(src, left)
        case ast.Call(func=func, args=[first, *rest]) if _builds_path(src, func):
            joined = bool(rest) and _temp_dir(src, first)
            return joined or _temp(src, first, where, depth + 1)
        case ast.Name(id=name):
            bound = src.bound(name, where)
            return bound is not None and _temp(src, bound, where, depth + 1)
    return False


def _builds_path(src: Source, func: ast.AST) -> bool:
    dotted = src.qual(func)
    return dotted in _JOINS or dotted.endswith(_PATHS)


def _temp_dir(src: Source, node: ast.AST) -> bool:
    """``tempfile.gettempdir()`` or ``Path(tempfile.gettempdir())``: joined to, a fixed name."""
    if isinstance(node, ast.Call) and node.args and _builds_path(src, node.func):
        return _gettempdir(src, node.args[0])
    return _gettempdir(src, node)


def _gettempdir(src: Source, node: ast.AST) -> bool:
    if isinstance(node, ast.FormattedValue):
        node = node.value
    return isinstance(node, ast.Call) and src.qual(node.func) == "tempfile.gettempdir"
