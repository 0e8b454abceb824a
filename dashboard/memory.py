"""Give memory back when a session ends.

Each browser session's tables, workspaces and per-session results live in its
``st.session_state``; Streamlit drops that state when the session closes. A
sentinel kept in the state is finalised at that moment, which collects the
garbage and asks glibc to return freed heap pages to the system
(``malloc_trim``), so the server's resident memory falls back after a large
upload instead of staying at its peak.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import weakref

import streamlit as st

_KEY = "_memory_sentinel"


class _Sentinel:
    """An object whose only job is to be collected with its session's state."""


def release_memory() -> None:
    """Collect garbage and return free heap pages to the operating system."""
    gc.collect()
    name = ctypes.util.find_library("c")
    if name:
        try:
            ctypes.CDLL(name).malloc_trim(0)
        except (OSError, AttributeError):  # not glibc: nothing to trim
            pass


def track_session() -> None:
    """Call once per script run: arranges :func:`release_memory` at session end."""
    if _KEY not in st.session_state:
        sentinel = _Sentinel()
        weakref.finalize(sentinel, release_memory)
        st.session_state[_KEY] = sentinel
