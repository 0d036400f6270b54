"""Diagnosis: the polluter finder (options and entry hook in :mod:`.plugin`,
the search in :mod:`.finder`, the bisection in :mod:`.bisection`, each probe
recorded by :mod:`.probe`) and failure explanations (:mod:`.patches`)."""
