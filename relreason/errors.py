"""Errors a user can cause and fix. The CLI prints them as one line plus a hint, no traceback."""

from __future__ import annotations


class RelreasonError(Exception):
    """A known, user-facing error: what was wrong (message) and what would be right (hint)."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} ({self.hint})"
