"""``python -m pytest_isolation.merge``: merge the run reports of a suite's
shards (the work is :mod:`pytest_isolation.ci.merge`'s)."""

from __future__ import annotations

from pytest_isolation.ci.merge import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
