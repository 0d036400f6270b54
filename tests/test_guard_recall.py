"""Recall: the order-dependent patterns real projects have (from the
International Dataset of Flaky Tests), each a polluter and its victim in
another file.  Without the guard every victim fails after its polluter; the
default tier names each polluter and restores each victim whose state is safe
to put back, in a plain run; file mode restores every one (issue 45: what a
test created, a counter advanced or a registry filled, is kept in a process)."""

from __future__ import annotations

import textwrap

import pytest

from conftest import TIMEOUT
from conftest import warned

MODELS = """
    import logging

    class Base:
        pass

    class Model(Base):
        @classmethod
        def configure(cls):
            Base.strict = True          # did not exist before, on a base class

        def __init__(self):
            type(self).created = True   # did not exist before, on the class

    class Config:
        instance = None
        @classmethod
        def get(cls, level=1):
            if cls.instance is None:
                cls.instance = Config()
                cls.instance.level = level
            return cls.instance

    REGISTRY = {"a": 1}
    HOOKS = []

    def reset_and_register(name):
        REGISTRY.clear()
        REGISTRY[name] = 2

    class Factory:
        auto_assign_id = False
        def __init__(self):
            self.auto_assign_id = False

    factory = Factory()

    class Rule:
        def __init__(self):
            self.count = 0
        def hit(self):
            self.count += 1

    RULES = [Rule(), Rule()]

    class UserFactory:
        _seq = 0
        @classmethod
        def create(cls):
            cls._seq += 1
            return f"user{cls._seq}"

    class AppLogger(logging.Logger):
        verbose = False

    log = logging.getLogger("proj")
    log.addHandler(logging.StreamHandler())
"""

POLLUTERS = """
    import logging
    from unittest import mock
    from proj import models
    from proj.models import factory

    PAYLOAD = {"keep": 1, "drop": 2}

    def minimise(d):
        d.pop("drop")

    def test_base_attr(): models.Model.configure()
    def test_class_attr(): models.Model()
    def test_singleton(): models.Config.get(level=5)
    def test_registry(): models.reset_and_register("b")
    def test_append(): models.HOOKS.append(print)
    def test_module_object(): factory.auto_assign_id = True
    def test_rule_counter(): models.RULES[0].hit()
    def test_third_party_class(): mock.MagicMock.content = mock.PropertyMock(return_value=1)
    def test_formatter(): models.log.handlers[0].setFormatter(logging.Formatter("%(message)s!"))
    def test_logger_subclass(): models.AppLogger.verbose = True
    def test_test_constant(): minimise(PAYLOAD)
    def test_factory(): models.UserFactory.create()
"""

VICTIMS = """
    import logging
    from unittest import mock
    from proj import models
    import test_polluters

    def test_v_base(): assert not hasattr(models.Base, "strict")
    def test_v_class(): assert "created" not in vars(models.Model)
    def test_v_singleton(): assert models.Config.get().level == 1
    def test_v_registry(): assert models.REGISTRY == {"a": 1}
    def test_v_append(): assert models.HOOKS == []
    def test_v_module_object(): assert models.factory.auto_assign_id is False
    def test_v_rule(): assert models.RULES[0].count == 0
    def test_v_third_party(): assert "content" not in vars(mock.MagicMock)
    def test_v_formatter(): assert models.log.handlers[0].formatter is None
    def test_v_logger_subclass(): assert models.AppLogger.verbose is False
    def test_v_constant(): assert test_polluters.PAYLOAD == {"keep": 1, "drop": 2}
    def test_v_factory(): assert models.UserFactory.create() == "user1"
"""


def _write(pytester: pytest.Pytester) -> None:
    pytester.mkpydir("proj")
    pytester.path.joinpath("proj", "models.py").write_text(textwrap.dedent(MODELS))
    pytester.makepyfile(test_polluters=POLLUTERS, test_victims=VICTIMS)


def test_every_victim_fails_without_the_guard(pytester: pytest.Pytester) -> None:
    _write(pytester)
    result = pytester.runpytest_subprocess(
        "-p", "no:isolation", "-p", "no:randomly", timeout=TIMEOUT
    )
    result.assert_outcomes(passed=12, failed=12)


#: Victims whose state the guard keeps in one process: a counter advanced (the
#: store it numbers may stay), a container that only grew (whatever filled it may
#: remember that it did), what project code created lazily (it may have registered
#: it anywhere); a plain run fails them too.
KEPT_IN_PROCESS = (
    "test_v_base",
    "test_v_class",
    "test_v_singleton",
    "test_v_append",
    "test_v_rule",
    "test_v_factory",
)


def test_the_default_tier_restores_every_pattern(
    pytester: pytest.Pytester, mode: tuple[str, ...]
) -> None:
    _write(pytester)
    result = pytester.runpytest_subprocess(*mode, "-p", "no:randomly", "-v", timeout=TIMEOUT)
    # In file mode the victims, in a process of their own, create the singleton again.
    owners, singleton = "8 tests", "2 tests, first "
    if "--isolation-mode=file" in mode:
        result.assert_outcomes(passed=24)
    else:
        owners, singleton = "7 tests", ""
        result.assert_outcomes(passed=18, failed=6)
        result.stdout.fnmatch_lines(
            [f"*test_victims.py::{name} FAILED*" for name in KEPT_IN_PROCESS]
        )
    assert warned(result) == 6
    # Leaks are named with the test that made them ...
    result.stdout.fnmatch_lines(
        [
            "[[]attribute] proj.models.AppLogger.verbose (was False, now True), "
            "at test_polluters.py:20",
            "  by test_polluters.py::test_logger_subclass",
            "[[]attribute] proj.models.factory.auto_assign_id (was False, now True), "
            "at test_polluters.py:16",
            "  by test_polluters.py::test_module_object",
            "[[]attribute] unittest.mock.MagicMock.content (was unset, now <PropertyMock *>), "
            "at test_polluters.py:18",
            "  by test_polluters.py::test_third_party_class",
            "[[]container] proj.models.REGISTRY (mutated in place) (added 'b'; removed 'a')",
            "  set during test_polluters.py::test_registry",
            "[[]container] test_polluters.PAYLOAD (mutated in place) (removed 'drop')",
            "  set during test_polluters.py::test_test_constant",  # in a helper
            "[[]logger] the handlers/filters of logger 'proj' (was handlers [[]<StreamHandler *>],"
            " 0 filter(s), now handlers [[]<StreamHandler *> formatted by <logging.Formatter *>],"
            " 0 filter(s))",
            "  set during test_polluters.py::test_formatter",
        ]
    )
    # ... and routine state (counters, lazily created, lazily filled) too, without a warning.
    result.stdout.fnmatch_lines(
        [
            f"isolation: routine state of {owners} kept"
            " (2 counters advanced, 3 created lazily, 1 filled lazily; not leaks)",
            "  [[]attribute] proj.models.Base.strict, created lazily (now True)"
            " (test_polluters.py::test_base_attr)",
            "  [[]attribute] proj.models.Config.instance, created lazily"
            f" (now <proj.models.Config *>) ({singleton}test_polluters.py::test_singleton)",
            "  [[]attribute] proj.models.Model.created, created lazily (now True)"
            " (test_polluters.py::test_class_attr)",
            "  [[]attribute] proj.models.RULES[[]0].count, a counter (was 0, now 1)"
            " (test_polluters.py::test_rule_counter)",
            "  [[]attribute] proj.models.UserFactory._seq, a counter (was 0, now 1)"
            " (2 tests, first test_polluters.py::test_factory)",
            "  [[]container] proj.models.HOOKS (mutated in place), filled lazily (added <*>)"
            " (test_polluters.py::test_append)",
        ]
    )


def test_a_module_first_imported_inside_the_polluter(
    pytester: pytest.Pytester, mode: tuple[str, ...]
) -> None:
    """No snapshot of it existed before the test: one is taken as its import
    completes, and the polluter finder names what it leaked."""
    pytester.mkpydir("proj")
    pytester.path.joinpath("proj", "cfg.py").write_text("LEVEL = 10\nclass K:\n    flag = False\n")
    pytester.makepyfile(
        test_a="""
        def test_polluter():
            import proj.cfg
            proj.cfg.LEVEL = 99
            proj.cfg.K.flag = True
        def test_other():
            pass
        """,
        test_z="""
        def test_victim():
            import proj.cfg
            assert proj.cfg.LEVEL == 10 and proj.cfg.K.flag is False
        """,
    )
    result = pytester.runpytest_subprocess(*mode, "-p", "no:randomly", timeout=TIMEOUT)
    result.assert_outcomes(passed=3)
    assert warned(result) == 2
    result.stdout.fnmatch_lines(
        [
            "*test_polluter leaked proj.cfg.K.flag (was False, now True)*",
            "*test_polluter leaked proj.cfg.LEVEL (was 10, now 99)*",
        ]
    )
    if "--isolation-mode=file" in mode:
        return
    finder = pytester.runpytest_subprocess(
        "-p",
        "isolation",
        "-p",
        "no:randomly",
        "--isolation-find-polluter=test_z.py::test_victim",
        timeout=TIMEOUT,
    )
    finder.stdout.fnmatch_lines(
        [
            "isolation: polluter: test_a.py::test_polluter (*)",
            "isolation: what it leaked:",
            "isolation:   [[]attribute] proj.cfg.K.flag (was False, now True)*",
            "isolation:   [[]attribute] proj.cfg.LEVEL (was 10, now 99)*",
        ]
    )
