"""The capped selector: from changed files to a bounded set of test files.

:mod:`.project` finds the files and import roots, :mod:`.parse` reads each
file's imports, :mod:`.graph` links them, :mod:`.scopes` selects, and
:mod:`.decision` caps, refuses and explains.  The hooks are in
:mod:`.plugin`, its options in :mod:`.options`, the run in :mod:`.run`.
"""
