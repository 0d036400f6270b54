"""Needs the real sqlite3 module."""

import sqlite3


def test_real_database() -> None:
    connection = sqlite3.connect(":memory:")
    connection.execute("create table t (x)")
    connection.execute("insert into t values (42)")
    assert connection.execute("select x from t").fetchone() == (42,)
