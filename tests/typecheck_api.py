"""Type-checked, never run (``tox -e type``): the exported names work in annotations."""

from __future__ import annotations

from pathlib import Path

import pytest_isolation
from pytest_isolation import IsolatedEnv
from pytest_isolation import IsolatedTmp
from pytest_isolation import ModuleMocker
from pytest_isolation import TmpDir
from pytest_isolation import check_module_stub
from pytest_isolation import tmp


def uses_the_api(
    isolated_tmp: IsolatedTmp, isolated_env: IsolatedEnv, mock_module: ModuleMocker
) -> list[object]:
    made: TmpDir[None] = isolated_tmp()
    with_extra: TmpDir[int] = isolated_tmp(init=lambda path: 1)
    home: Path = isolated_env.home
    missing: list[str] = check_module_stub(object(), "json")
    with tmp() as plain:
        path: Path = plain.path
    with pytest_isolation.tmp(init=lambda path: "x") as typed:
        extra: str | None = typed.extra
    return [made, with_extra, home, missing, path, extra, mock_module("json")]
