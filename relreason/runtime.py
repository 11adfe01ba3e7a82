"""Process-level helpers shared by training, evaluation and the CLI: allocator settings, progress bars."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys


def keep_freed_memory() -> bool:
    """Asks glibc to keep freed memory for reuse instead of returning it to the OS.

    The training step allocates and frees many (B, N, N, H) buffers (4 MB at batch 32, n 16, H 128);
    by default glibc unmaps them and every new buffer page-faults again, which costs about as much
    as the arithmetic on it. Process-wide and glibc-only: returns False where unavailable."""
    name = ctypes.util.find_library("c")
    if not name or not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(name)
    m_trim_threshold, m_mmap_threshold = -1, -3  # mallopt parameter ids (malloc.h)
    return bool(libc.mallopt(m_mmap_threshold, 1 << 30)) and bool(libc.mallopt(m_trim_threshold, 1 << 31))


def progress(total: int, desc: str, unit: str = "it", disable: bool = False, **kwargs):
    """A tqdm progress bar on stderr (RELREASON_PROGRESS=0 silences every bar)."""
    from tqdm import tqdm

    disable = disable or os.environ.get("RELREASON_PROGRESS") == "0"
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=disable, dynamic_ncols=True,
                leave=False, **kwargs)
