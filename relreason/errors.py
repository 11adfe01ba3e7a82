"""Errors a user can cause and fix. The CLI prints them as one line plus a hint, no traceback."""

from __future__ import annotations

import errno
import os
import re


class RelreasonError(Exception):
    """A known, user-facing error: what was wrong (message) and what would be right (hint)."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} ({self.hint})"


def write_error(path, e: Exception) -> RelreasonError:
    """The one-line error of a file that could not be written: the path, the cause in the OS's words
    (also where a library wraps them: safetensors' "I/O error: ... (os error 28)", numpy's "256000
    requested and 224224 written"), and what would help."""
    number = getattr(e, "errno", None)
    cause = getattr(e, "strerror", None) or str(e)
    code = re.search(r"(?:code: |os error )(\d+)", cause)
    if number is None and code:
        number = int(code.group(1))
        cause = os.strerror(number)
    elif number is None and re.search(r"\d+ requested and \d+ written", cause):  # a short write
        number, cause = errno.ENOSPC, f"{cause} (a short write: the disk is full, most likely)"
    hint = {errno.ENOSPC: "the disk is full: free some space, then run the command again",
            errno.EDQUOT: "the disk quota is exhausted: free some space, then run the command again",
            errno.EROFS: "the file system is read-only: write somewhere else (e.g. --out DIR)"}.get(
        number, "check the free disk space and the permissions of the directory")
    return RelreasonError(f"cannot write {path}: {cause[:1].lower()}{cause[1:]}", hint)
