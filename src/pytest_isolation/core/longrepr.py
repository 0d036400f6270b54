"""A report's text that pytest's short summary line shows on every version."""

from __future__ import annotations

from typing import Any


class _Message:
    """What pytest's short summary line reads: ``reprcrash.message``."""

    def __init__(self, message: str) -> None:
        self.message = message


class LeadingText(str):
    """A report's text (a file-mode crash, a lint error), with its first
    line (the cause) where pytest before 8.4 looks for a failure's message
    for the short summary line: it shows none for a plain string; later
    versions take the string's."""

    reprcrash: _Message

    @classmethod
    def of(cls, text: str) -> LeadingText:
        made = cls(text)
        made.reprcrash = _Message(text.split("\n", 1)[0])
        return made

    def toterminal(self, out: Any) -> None:  # _pytest's TerminalWriter: not public
        """Written as pytest writes a string; with this method pytest-xdist
        sends ``str(self)``, a plain string, where it would send the object."""
        for line in self.split("\n"):
            out.line(line)
