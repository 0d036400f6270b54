"""A test file that fakes things at import time, as real suites do.

Each line below leaks into every later file of a plain run.
"""

import os
import sys
import time
from unittest import mock

sys.modules["sqlite3"] = mock.MagicMock(name="fake sqlite3")
mock.patch.object(time, "time", return_value=0.0).start()
os.environ["APP_MODE"] = "fake"


def test_uses_the_fakes() -> None:
    import sqlite3

    assert isinstance(sqlite3, mock.MagicMock)
    assert time.time() == 0.0
