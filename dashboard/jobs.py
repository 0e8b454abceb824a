"""A long query in a thread of its own, so its page can show its progress and stop it.

A solver deep in compiled code cannot be interrupted by a rerun, so the query runs
in a daemon thread (:func:`start`) and the page reads its :class:`Job`: the run that
starts it waits for it while redrawing its latest progress (a click, Stop too, ends
that wait with a new run: Streamlit stops a script at its next element when another
run is asked for), so a short query's answer comes in that run as before; a later
run hands over to a fragment that polls every fraction of a second. The job is kept
in the session's state only, so nothing of it is seen by another session; when that
state is dropped (the session ends or is shut down by the janitor,
:mod:`dashboard.memory`) the job's handle is collected and its stop is set, so the
thread ends at the solver's next look instead of running to its time limit. The
thread never touches Streamlit: it sees only its own :class:`_Shared` record, never
the handle that lives in the state."""

from __future__ import annotations

import os
import threading
import time
import weakref
from typing import Any, Callable

__all__ = ["Job", "start", "hold_seconds"]


class _Shared:
    """What the thread and the page share (all set by the thread but ``stop``)."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.progress: Any = None
        self.result: Any = None
        self.error: BaseException | None = None
        self.t0 = time.perf_counter()
        self.t_end: float | None = None

    def tell(self, progress: Any) -> None:
        with self.lock:
            self.progress = progress


class Job:
    """The page's handle on one running query (kept in the session's state)."""

    def __init__(self, shared: _Shared, thread: threading.Thread) -> None:
        self._s = shared
        self.thread = thread
        weakref.finalize(self, shared.stop.set)      # the session is gone: end the search

    @property
    def running(self) -> bool:
        return not self._s.done.is_set()

    @property
    def stopping(self) -> bool:
        return self._s.stop.is_set()

    @property
    def progress(self) -> Any:
        """The latest progress the query reported, or None."""
        with self._s.lock:
            return self._s.progress

    @property
    def elapsed(self) -> float:
        end = self._s.t_end
        return (end if end is not None else time.perf_counter()) - self._s.t0

    def stop(self) -> None:
        """Ask the query to stop (it ends with what it has)."""
        self._s.stop.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the query has ended; True when it has."""
        return self._s.done.wait(timeout)

    def outcome(self) -> Any:
        """The query's answer once it has ended (its exception raised again)."""
        if self.running:
            raise RuntimeError("The query is still running.")
        if self._s.error is not None:
            raise self._s.error
        return self._s.result


def hold_seconds(default: float) -> float:
    """How long the run that starts a query waits for its answer, redrawing its progress,
    before it hands over to a polling fragment: ``default`` (the query's own time), or
    ``ATLAS_LIVE_HOLD`` seconds when set (tests shorten it to reach the polling display)."""
    try:
        value = float(os.environ.get("ATLAS_LIVE_HOLD", ""))
    except ValueError:
        return default
    return value if value >= 0 else default


def start(run: Callable[[Callable[[Any], None], Callable[[], bool]], Any], name: str = "atlas-query") -> Job:
    """Run ``run(tell, should_stop)`` in a daemon thread: ``tell(progress)`` keeps the
    latest progress for the page, ``should_stop()`` says whether Stop was pressed."""
    shared = _Shared()

    def work() -> None:
        try:
            shared.result = run(shared.tell, shared.stop.is_set)
        except BaseException as exc:  # noqa: BLE001 - handed to the page, which shows it
            shared.error = exc
        finally:
            shared.t_end = time.perf_counter()
            shared.done.set()

    thread = threading.Thread(target=work, name=name, daemon=True)
    thread.start()
    return Job(shared, thread)
