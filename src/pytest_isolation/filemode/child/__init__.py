"""What runs in a file's child process.

:mod:`.start` starts a child (forked or spawned); :mod:`.forked` is the one
entry the parent's run loop calls in a forked child; :mod:`.plugin` collects
and runs one file and streams what the parent replays, with
:mod:`.collection` and :mod:`.terminal`; :mod:`.session_end` ends the
session as a pytest-xdist worker does; :mod:`.cov` hands coverage data on;
:mod:`.inherited` deals with what a forked child inherited; :mod:`.depth`
keeps the tests as deep in the stack as in a plain run; :mod:`.loops` runs
the conftests' own run loops.

Imports: stdlib, pytest, the core and the shared modules of
:mod:`..filemode` only, so a child starts light.
"""
