"""junit XML data that tests record outside their reports.

``record_property`` travels in each report's ``user_properties``, but
``record_testsuite_property`` and ``record_xml_attribute`` write straight to
the process's junit XML writer, which only the parent has (pytest-xdist
drops them).  A child gets a stand-in writer that sends what tests record to
the parent, which records it in the real one.

The writer is reachable only under a private stash key
(:func:`pytest_isolation.core.pytest_private.junit_xml_key`), and the two
fixtures call its ``add_global_property`` and
``node_reporter(nodeid).add_attribute``.

Imports: stdlib, pytest and the core only (the child side stays light).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

# As ``_xml_key``: the name tests/test_child.py's fence calls it by.
from pytest_isolation.core.pytest_private import junit_xml_key as _xml_key

#: (what, nodeid, name, value): ``property`` (nodeid empty) or ``attribute``.
Record = Callable[[str, str, str, str], None]


class ChildWriter:
    """Stands for junit's writer in a child; forwards what tests record."""

    def __init__(self, send: Record, family: str) -> None:
        self.send = send
        #: The fixtures warn when the junit family cannot hold what they record.
        self.family = family

    def add_global_property(self, name: str, value: object) -> None:
        __tracebackhide__ = True
        if not isinstance(name, str):  # as the real writer, in the test that called it
            raise TypeError(f"name parameter needs to be a string, but {type(name).__name__} given")
        self.send("property", "", name, str(value))

    def node_reporter(self, nodeid: object) -> _Attributes:
        return _Attributes(self.send, str(nodeid))


class _Attributes:
    def __init__(self, send: Record, nodeid: str) -> None:
        self.send = send
        self.nodeid = nodeid

    def add_attribute(self, name: str, value: object) -> None:
        self.send("attribute", self.nodeid, str(name), str(value))


def install_in_child(config: pytest.Config, send: Record) -> None:
    """Replace the child's junit writer (if the run writes junit XML) by a stand-in.

    The real one leaves the child's hooks: the parent writes the XML file.
    """
    key = _xml_key()
    writer = config.stash.get(key, None)
    if writer is None:
        return
    if config.pluginmanager.is_registered(writer):
        config.pluginmanager.unregister(writer)
    config.stash[key] = ChildWriter(send, writer.family)


def record_in_parent(config: pytest.Config, what: str, nodeid: str, name: str, value: str) -> None:
    """Record what a child's test recorded in the parent's junit writer."""
    xml = config.stash.get(_xml_key(), None)
    if xml is None:
        return
    if what == "property":
        xml.add_global_property(name, value)
    else:
        xml.node_reporter(nodeid).add_attribute(name, value)
