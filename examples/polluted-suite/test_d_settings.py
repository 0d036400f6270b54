"""Needs a clean environment."""

import os


def test_default_mode() -> None:
    assert os.environ.get("APP_MODE", "production") == "production"
