"""Whether a module's or class's namespace changed, in one read.

CPython 3.10 to 3.13 give every dict a version tag (PEP 509,
``ma_version_tag``): a number from an interpreter-wide counter, set anew on
every change of that dict.  The tag is unchanged if and only if nothing was
stored or removed since it was read, so after each test the guard reads one
number per namespace or dict instead of comparing thousands of values.

The tag is not in the Python API, so this module is the one place that reads
it (a private detail of CPython, fenced here; ``tests/test_guard_fences.py``
fails loudly if a supported CPython changes it).  It is read through a
``ctypes`` view of the dict's header, and only where a self-test at import
shows it works: CPython, the standard object header, the tag where it is
expected, and every kind of write (item, attribute, global, class
attribute) changing it.  Anywhere else (PyPy, a debug or free-threaded
build, 3.14, which dropped the tag) :func:`tag_of` returns ``None`` and the
guard compares values, as before.

Read this way: modules' and classes' namespaces and the dicts the guard
watches as containers.  Not an object's attributes: since 3.13 they may be
stored beside its dict without touching the tag.
"""

from __future__ import annotations

import ctypes
import gc
import operator
import sys
import sysconfig
import types
from collections.abc import Callable
from itertools import compress
from typing import Any

#: Where the fields are in a ``PyDictObject``: after the object header
#: (reference count, type) come ``ma_used`` and ``ma_version_tag``.
_USED_AT = 2 * ctypes.sizeof(ctypes.c_void_p)
_TAG_AT = _USED_AT + ctypes.sizeof(ctypes.c_ssize_t)

#: A live view of one dict's tag: ``view[0]`` reads it now.
View = ctypes.Array[ctypes.c_uint64]
#: Reads views (in C, for ``map``).
read: Callable[[View], int] = operator.itemgetter(0)


def _view(namespace: dict[Any, Any]) -> View:  # a dict's header, read in place
    # The view does not keep the dict alive: whoever holds the view holds it.
    return (ctypes.c_uint64 * 1).from_address(id(namespace) + _TAG_AT)


def namespace(owner: object) -> dict[str, object] | None:
    """The dict behind a module's or class's attributes (a class's
    ``__dict__`` is a read-only proxy of it); ``None`` for anything else."""
    found: object
    if isinstance(owner, types.ModuleType):
        found = vars(owner)
    elif isinstance(owner, type):
        referents = gc.get_referents(vars(owner))
        found = referents[0] if len(referents) == 1 else None
    else:
        return None
    return found if type(found) is dict else None


def _changes(namespace: dict[str, object], write: object) -> bool:
    assert callable(write)
    view = _view(namespace)
    before = view[0]
    write()
    return bool(view[0] != before)


def _works() -> bool:
    """The self-test: the layout is the one expected, and each kind of write changes the tag."""
    if (
        sys.implementation.name != "cpython"
        or sys.version_info >= (3, 14)
        or hasattr(sys, "getobjects")  # a Py_TRACE_REFS build: a longer header
        or sysconfig.get_config_var("Py_GIL_DISABLED")
    ):
        return False
    sized = [{}, {"a": 1}, {str(n): n for n in range(20)}]
    if any(ctypes.c_ssize_t.from_address(id(d) + _USED_AT).value != len(d) for d in sized):
        return False
    module = types.ModuleType("_pytest_isolation_probe")
    setattr(module, "value", 0)  # noqa: B010 (a write, as a test would make)
    probe = type("Probe", (), {"value": 0})
    module_dict, class_dict = vars(module), namespace(probe)
    if class_dict is None:
        return False
    code = compile("def hot():\n global value\n for n in range(200):\n  value = n\n", "", "exec")
    exec(code, module_dict)
    plain: dict[str, object] = {"a": 1}
    writes = [
        (plain, lambda: plain.__setitem__("a", 2)),
        (plain, lambda: plain.__setitem__("b", 1)),
        (plain, lambda: plain.pop("b")),
        (plain, plain.clear),
        (module_dict, lambda: setattr(module, "value", 1)),
        (module_dict, lambda: delattr(module, "value")),
        (module_dict, module_dict["hot"]),  # specialised global stores
        (class_dict, lambda: setattr(probe, "value", 1)),
        (class_dict, lambda: setattr(probe, "other", 1)),
    ]
    return all(_changes(d, write) for d, write in writes)


WORKS = _works()


def tag_of_dict(container: dict[Any, Any]) -> tuple[View, int] | None:
    """For a dict where tags work: a live view of its tag, and the tag now
    (the caller holds the dict as long as the view)."""
    if not WORKS:
        return None
    view = _view(container)
    return view, view[0]


def tag_of(owner: object) -> tuple[View, int] | None:
    """:func:`tag_of_dict` of a module's or class's namespace (which the
    owner, and its ``vars()``, hold)."""
    found = namespace(owner) if WORKS else None
    return tag_of_dict(found) if found is not None else None


class Tags:
    """Dicts' tags, read in one pass.  A dict whose tag moved is asked
    ``back(index)`` (its content is as saved: the guard put it back); if so,
    its tag is taken anew and it counts as unchanged."""

    __slots__ = ("back", "tags", "views")

    def __init__(self, back: Callable[[int], bool]) -> None:
        self.views: list[View] = []
        self.tags: list[int] = []
        self.back = back

    def add(self, view: View, tag: int) -> None:
        self.views.append(view)
        self.tags.append(tag)

    def moved(self) -> list[int]:
        """The indices of the dicts changed since their tags were taken."""
        now = list(map(read, self.views))
        if now == self.tags:
            return []
        moved = []
        for index in compress(range(len(now)), map(operator.ne, now, self.tags)):
            if self.back(index):
                self.tags[index] = now[index]
            else:
                moved.append(index)
        return moved
