"""What runs in a fork server, and the parent's handles on one.

:mod:`.origin` is the pristine copy of the parent that forks the servers of
the ``fork`` start method; :mod:`.forkserver` is the serving loop (and the
fresh-interpreter server of ``forkserver``, whose start-up is
:mod:`.zygote`); :mod:`.preload` imports what a server preloads, watched by
:mod:`.purity`.

Imports: the child side, the shared modules of :mod:`..filemode` and the
core, never the parent side.
"""
