"""What runs in the parent: the pytest process the user started (or a
pytest-xdist worker in file mode).

:mod:`.controller` drives the run: placeholders in (:mod:`.nodes`,
:mod:`.nodeargs`), children started (:mod:`.starting`), their messages
replayed (:mod:`.relay`, with :mod:`.retry`, :mod:`.crash` and
:mod:`.progress`), and finished children reaped and ended
(:mod:`.ending`).  :mod:`.servers` and :mod:`.plan` decide which fork
servers a run starts and what each preloads; :mod:`.spawn` starts fresh
interpreters; :mod:`.shared` sets up session fixtures once for every child (with
:mod:`.forkable` and :mod:`.django`);
:mod:`.xdist` is file mode under pytest-xdist.

Imports: anything below it (``lint-imports`` keeps the layers).
"""
