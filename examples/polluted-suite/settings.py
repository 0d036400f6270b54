"""Project state that tests change: a module global, as real projects have."""

DEBUG = False
