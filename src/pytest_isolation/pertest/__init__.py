"""A test in a process of its own (``--isolation-mode=test``, the
``isolation_process`` marker, ``isolation_paths``' ``test``).

The process that runs the test suite (the run's, an xdist worker's, or a
file's process in file mode) sets up the test's collectors and its fixtures
above function scope, then forks; the test's own process runs pytest's
protocol for the test (its function-scoped fixtures, the call and their
teardown) and streams its reports back (:mod:`.testchild`).  The forking
process replays them into its own hooks, tears down what the next test does
not share as pytest would, and turns a process that crashed or went over a
limit into a failed report that leads with the cause (:mod:`.ending`).

Layers: above file mode (it reads file mode's placements and reuses its
wire protocol and process helpers), below the diagnoses; file mode never
imports it.
"""
