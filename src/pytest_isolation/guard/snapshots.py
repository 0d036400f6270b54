"""The kinds of state the guard watches and their snapshots: one category
object per kind (snapshot, compare, put back, describe), checked together in
two tiers.  Adding a kind of state is adding a category here."""

from __future__ import annotations

from pytest_isolation.guard.attributes import Attributes
from pytest_isolation.guard.deep import Containers
from pytest_isolation.guard.deep import LoggerConfig
from pytest_isolation.guard.interpreter import IMPORT_SYSTEM
from pytest_isolation.guard.interpreter import INTERPRETER
from pytest_isolation.guard.interpreter import SysModules
from pytest_isolation.guard.loggers import ROOT_LOGGER
from pytest_isolation.guard.loggers import Loggers
from pytest_isolation.guard.mocks import FakeFilesystem
from pytest_isolation.guard.mocks import MockPatches
from pytest_isolation.guard.namespaces import Space
from pytest_isolation.guard.process import PROCESS
from pytest_isolation.guard.process import Environ
from pytest_isolation.guard.process import WorkingDirectory
from pytest_isolation.guard.sites import Sites
from pytest_isolation.guard.state import Category
from pytest_isolation.guard.watchlist import Watchlist
from pytest_isolation.guard.windows import Tier


class Snapshots:
    """The per-test tier (every category, compared after each test) and the
    per-file tier (every module's functions and classes, compared when a
    test file ends: too many to compare after each test)."""

    def __init__(self, sites: Sites, watch: Watchlist, deep: bool) -> None:
        self.watch = watch
        #: Class-level containers only in the deep tier: a project's classes
        #: can hold too many (a lexer's token tables) to compare after every test.
        self.deep = deep
        self.attributes = Attributes(sites)
        self.containers = Containers(nest_everywhere=deep)
        self.sys_modules = SysModules(watch.project_module)
        categories: list[Category] = [
            MockPatches(),
            FakeFilesystem(),
            Environ(),
            WorkingDirectory(),
            self.sys_modules,
            IMPORT_SYSTEM,
            INTERPRETER,
            ROOT_LOGGER,
            Loggers(watch.library_logger),
            LoggerConfig(watch.library_logger),
            PROCESS,
            self.attributes,
            self.containers,
        ]
        self.tier = Tier(categories)
        self.library_attributes = Attributes(sites, replaced_only=True)
        self.file_tier = Tier([self.library_attributes])

    def refresh(self) -> None:
        """Watch the modules imported since the last test."""
        watch = self.watch
        if watch.refresh():
            self.attributes.spaces = watch.per_test()
            classes = watch.classes if self.deep else []
            self.containers.spaces = [*watch.project.values(), *classes]
            self.containers.objects = list(watch.objects)
            self.containers.constants = list(watch.test_modules.values())
            self.tier.renew(self.attributes)  # reuses what is still current
            self.tier.renew(self.containers)  # reuses the contents still current

    def adopt(self, spaces: list[Space]) -> None:
        """A project module imported inside a test: its state as its import
        left it is the test's starting point."""
        self.attributes.adopt(self.tier.saved.get(self.attributes), spaces)
        self.containers.adopt(self.tier.saved.get(self.containers), spaces)

    def tiers(self, file_open: bool) -> list[Tier]:
        return [self.tier, self.file_tier] if file_open else [self.tier]
