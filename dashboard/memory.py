"""Give memory back when a session ends.

Each browser session's tables, workspaces and per-session results live in its
``st.session_state``; Streamlit drops that state when the session is shut
down. A sentinel kept in the state is finalised at that moment, which collects
the garbage and asks glibc to return freed heap pages to the system
(``malloc_trim``), so the server's resident memory falls back after a large
upload instead of staying at its peak.

When a browser closes, Streamlit keeps the disconnected session for a while
so that a reconnecting tab finds its state (an in-memory store with a 2-minute
time to live). Sessions that expire from that store are dropped without being
shut down, which leaves their uploaded files in the upload manager. The
janitor (:func:`start_janitor`, one daemon thread per server) therefore shuts
down every session that has stayed disconnected for ``GRACE`` seconds (90,
inside Streamlit's own window; ``ATLAS_SESSION_GRACE`` sets another), on
Streamlit's event loop as its API requires.
Two Streamlit habits would still keep the last user's data: its send loop
holds the last session it served, and the last script run's module stays
``sys.modules["__main__"]``; the janitor empties a session's state before
shutting it down, and with nobody connected puts a blank ``__main__`` back.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
import types
import weakref

import streamlit as st
from streamlit.logger import get_logger

from core.intake.heap import glibc, release_unused

_KEY = "_memory_sentinel"


def _seconds(name: str, default: float) -> float:
    """A positive number of seconds from the environment (tests shorten the waits), else the default."""
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


# seconds a disconnected session is kept for its tab to reconnect; how often the janitor looks
GRACE = _seconds("ATLAS_SESSION_GRACE", 90.0)
INTERVAL = _seconds("ATLAS_JANITOR_INTERVAL", 10.0)
_janitor_lock = threading.Lock()
_janitor: threading.Thread | None = None
log = get_logger("atlas.memory")


class _Sentinel:
    """An object whose only job is to be collected with its session's state."""


def _fixed_mmap_threshold(size: int = 4 << 20) -> None:
    """Have glibc serve every allocation of ``size`` bytes or more (a table's
    columns, its copies) by its own mapping, returned to the system when freed.
    By default glibc raises that threshold each time such a block is freed, up to
    32 MB, after which large arrays come from the heap and their space stays with
    the server once a session has ended (measured: +30 MB per 1.4 M-row session)."""
    libc = glibc()
    if libc is not None:
        libc.mallopt(-3, size)                          # M_MMAP_THRESHOLD


def release_memory() -> None:
    """Collect garbage and return free heap pages to the operating system: glibc's
    (``malloc_trim``) and Arrow's memory pool (pandas keeps text columns in Arrow
    memory, which its jemalloc/mimalloc pool keeps for reuse unless told);
    :func:`core.intake.heap.release_unused`."""
    release_unused(collect=True)


def track_session() -> None:
    """Call once per script run: this run's parallel work may reuse only this
    session's warm worker pools (:data:`core.optimal.batch.POOL_OWNER`); at session end
    those pools are ended and :func:`release_memory` runs."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    from core.optimal.batch import POOL_OWNER, release_pools

    ctx = get_script_run_ctx()
    sid = ctx.session_id if ctx is not None else None
    POOL_OWNER.set(("session", sid))
    if _KEY not in st.session_state:
        sentinel = _Sentinel()
        weakref.finalize(sentinel, release_pools, ("session", sid))
        weakref.finalize(sentinel, release_memory)
        st.session_state[_KEY] = sentinel


def _sweep(runtime, loop, since: dict[str, float], grace: float) -> int:
    """Shut down sessions disconnected for ``grace`` seconds; the number closed."""
    mgr = runtime._session_mgr                       # Streamlit has no public API for this
    active = {i.session.id for i in mgr.list_active_sessions()}
    sessions = {i.session.id: i.session for i in mgr.list_sessions()}
    stored = set(sessions) - active
    now = time.monotonic()
    for sid in list(since):
        if sid not in stored:
            del since[sid]
    closed = 0
    for sid in stored:
        if now - since.setdefault(sid, now) >= grace:
            log.info("shutting down session %s, disconnected for %.0f s", sid, now - since[sid])
            loop.call_soon_threadsafe(_close, runtime, sessions[sid], sid)
            del since[sid]
            closed += 1
    return closed


def _close(runtime, session, sid: str) -> None:
    """Empty the session's state, then shut it down. Streamlit's send loop keeps
    the last session it served referenced (a loop variable), so a shut-down
    session's state, which holds the user's tables, is emptied first. Its
    ``clear()`` keeps the widgets' metadata, whose (de)serialisers close over the
    page's objects (a select box's ``format_func=ws.outcome_text`` holds the whole
    workspace: 160 MB after a 1.4 M-row session), so that goes too."""
    try:
        state = session.session_state
        state.clear()
        widgets = getattr(state, "_new_widget_state", None)     # Streamlit's SessionState; not a plain dict
        if widgets is not None:
            widgets.widget_metadata.clear()
    except Exception:  # noqa: BLE001 - a Streamlit internal changed: still shut the session down
        log.exception("clearing the state of session %s", sid)
    runtime.close_session(sid)


def _forget_last_script(runtime) -> None:
    """Streamlit runs each script in a fresh module installed as
    ``sys.modules["__main__"]`` and leaves it there, so the last run's page
    globals (its workspace, its tables) outlive the session. With no session
    connected, no script is running: put a blank module in its place."""
    if runtime._session_mgr.list_active_sessions():
        return
    main = sys.modules.get("__main__")
    if main is not None and ("__streamlitmagic__" in vars(main)
                             or str(getattr(main, "__file__", "")).endswith("app.py")):
        sys.modules["__main__"] = types.ModuleType("__main__")


def _freeze_startup_heap() -> None:
    """Leave the objects the server holds once it has started (its libraries' modules,
    classes and tables: about 210,000) out of every later full garbage collection.
    Streamlit collects in full after each script run (``runner.postScriptGC``), and that
    collection walked them all: 90 ms of every click (measured on the libraries alone).
    Called at the server's first script run, before any upload: frozen objects are still
    freed when nothing refers to them; only a cycle among them would be kept, and the
    startup objects are kept for the server's life anyway."""
    gc.collect()
    gc.freeze()


def start_janitor(grace: float = GRACE, interval: float = INTERVAL) -> None:
    """Start (once per server process) the thread that shuts down long-disconnected sessions,
    having first frozen the startup heap (:func:`_freeze_startup_heap`)."""
    global _janitor
    with _janitor_lock:
        if _janitor is not None:
            return
        _fixed_mmap_threshold()
        try:
            from streamlit.runtime import Runtime

            runtime = Runtime.instance()
            loop = runtime._get_async_objs().eventloop
            runtime._session_mgr.list_sessions()    # AppTest's stand-in runtime has no sessions: nothing to sweep
        except Exception:  # noqa: BLE001 - bare mode (tests, scripts): no server sessions to sweep
            return
        _freeze_startup_heap()

        def run() -> None:
            since: dict[str, float] = {}
            while True:
                time.sleep(interval)
                try:
                    if _sweep(runtime, loop, since, grace):
                        time.sleep(1.0)                  # let the event loop shut them down
                        _forget_last_script(runtime)
                        release_memory()
                        log.info("memory released after closing sessions")
                except Exception:  # noqa: BLE001 - never let the janitor take the server down
                    log.exception("session janitor")
                    return

        _janitor = threading.Thread(target=run, name="atlas-session-janitor", daemon=True)
        _janitor.start()
