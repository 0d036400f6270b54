"""What runs in a file's child process.

:mod:`.plugin` collects and runs one file and streams what the parent
replays; :mod:`.session_end` ends the session as a pytest-xdist worker
does; :mod:`.cov` hands coverage data on; :mod:`.inherited` deals with what
a forked child inherited; :mod:`.depth` keeps the tests as deep in the stack
as in a plain run.

Imports: stdlib, pytest, the core and the shared modules of
:mod:`..filemode` only, so a child starts light.
"""
