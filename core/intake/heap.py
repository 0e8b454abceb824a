"""Giving freed memory back to the operating system.

Freeing a large table returns its memory to the allocators, not to the system:
glibc keeps freed heap pages for reuse, and so does Arrow's memory pool
(mimalloc or jemalloc), which holds pandas' text columns and every Parquet
read. :func:`release_unused` asks both to return what they no longer use, so a
process's resident memory falls back after a large table (or a refused one)
is gone. Nothing here is required for correctness; it is cheap (milliseconds)
and harmless where an allocator lacks the call.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import sys

__all__ = ["glibc", "release_unused"]


@functools.lru_cache(maxsize=1)
def glibc() -> ctypes.CDLL | None:
    """The C library if it is glibc (it has ``malloc_trim`` and ``mallopt``), else None;
    looked up once (``find_library`` runs ``ldconfig``)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        return libc if libc is not None and libc.malloc_trim and libc.mallopt else None
    except (OSError, AttributeError):   # not glibc
        return None


def release_unused(collect: bool = False) -> None:
    """Return free memory to the system: Arrow's pool (``release_unused``) and
    glibc's heap (``malloc_trim``); with ``collect``, run the garbage collector first."""
    if collect:
        gc.collect()
    arrow = sys.modules.get("pyarrow")
    if arrow is not None:
        try:
            arrow.default_memory_pool().release_unused()
        except Exception:  # noqa: BLE001 - an Arrow without it: nothing more to give back
            pass
    libc = glibc()
    if libc is not None:
        libc.malloc_trim(0)
