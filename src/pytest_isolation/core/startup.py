"""What the interpreter set up before pytest changed it, read when this
package is first imported: pytest loads its plugins (this one among them)
before the first conftest, and the first conftest's folder is inserted in
front of ``sys.path`` (``--import-mode=prepend``).  A spawned child, or the
fork server, takes these over, not what ``sys.path`` holds when it starts."""

from __future__ import annotations

import sys

#: ``sys.path[0]`` as the interpreter set it: the working directory under
#: ``python -m pytest``, the script's folder under the ``pytest`` script.
PATH0: str = sys.path[0] if sys.path else ""
