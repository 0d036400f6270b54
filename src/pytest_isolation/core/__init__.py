"""The core every part builds on: names, stash keys, node ids, settings and
option parsing, xdist detection, this plugin's own hooks, and the one module
that touches pytest's private details (:mod:`.pytest_private`).

Imports pytest and the standard library only; every other part of the
package may import it, and it imports none of them.
"""
