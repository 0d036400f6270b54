"""File mode: every test file in a child process of its own, reported like one run.

Parent side: :mod:`.controller` (placeholders in, children started, reports
replayed), :mod:`.nodes` (the collection nodes that import nothing),
:mod:`.relay` with :mod:`.retry` and :mod:`.crash` (replaying a child's
messages), :mod:`.launch` (fork server, spawn, ending process trees),
:mod:`.nodeargs` (``path::name`` arguments), :mod:`.reaping` (children
that have finished), :mod:`.shared` (session
fixtures set up once for every child) and :mod:`.xdist` (under
pytest-xdist).  Child side: :mod:`.child`, :mod:`.childcov` and
:mod:`.inherited`.  Both sides: :mod:`.wire`, the protocol.
"""
