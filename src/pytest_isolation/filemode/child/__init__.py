"""What runs in a file's child process.

:mod:`.forked` is the child side's one entry for the processes that fork
children (the parent and the fork servers); :mod:`.start` starts a child
(forked or spawned); :mod:`.plugin` collects and runs one file and streams
what the parent replays, with :mod:`.collection` and :mod:`.terminal`;
:mod:`.session_end` ends the session as a pytest-xdist worker does;
:mod:`.inherited` deals with what a forked child inherited; :mod:`.grouped`
holds a group's files' messages.

Imports: stdlib, pytest, the core and the shared modules of
:mod:`..filemode` only, so a child starts light.
"""
