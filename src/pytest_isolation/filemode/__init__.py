"""File mode: every test file in a child process of its own, reported like one run.

Three folders, by the process the code runs in: :mod:`.parent` (the
controller and what it uses), :mod:`.server` (the fork servers) and
:mod:`.child` (a file's child).  Beside them, what every side shares:
:mod:`.wire` (the protocol), :mod:`.processes` (how a forked process starts,
and the handles on a child), :mod:`.lifetime` (ending with the parent),
:mod:`.junit` (junit XML data from the child to the parent),
:mod:`.compat` (other plugins' compatibility, read before configure),
:mod:`.forks` (what a forked child must renew), :mod:`.placement` (where
each file runs), :mod:`.shared` (which session fixtures are shared),
:mod:`.cov` (coverage across processes), :mod:`.depth` (a child's tests as
deep in the stack as the run loop's) and :mod:`.loops` (the conftests' own
run loops, found in the parent, run in the child).
"""
