"""The session janitor lets go of a closed session's data (dashboard.memory).

Two Streamlit habits keep the last user's data after their session is shut
down: the send loop holds the last session it served, and the last script
run's module stays ``sys.modules["__main__"]``. The janitor empties the
session's state before shutting it down, and with nobody connected puts a
blank ``__main__`` back (bench/server_memory.py measures the effect).
"""

from __future__ import annotations

import subprocess
import sys
import types

import pytest
from conftest import ROOT

from dashboard import memory


class _State(dict):
    pass


class _Session:
    def __init__(self, sid: str) -> None:
        self.id = sid
        self.session_state = _State(workspace="a big table")


class _Info:
    def __init__(self, session: _Session) -> None:
        self.session = session


class _Manager:
    def __init__(self, active: list[_Session], stored: list[_Session]) -> None:
        self.active, self.stored = active, stored

    def list_active_sessions(self):
        return [_Info(s) for s in self.active]

    def list_sessions(self):
        return [_Info(s) for s in self.active + self.stored]


class _Runtime:
    def __init__(self, mgr: _Manager) -> None:
        self._session_mgr = mgr
        self.closed: list[str] = []

    def close_session(self, sid: str) -> None:
        self.closed.append(sid)


class _Loop:
    def call_soon_threadsafe(self, fn, *args) -> None:
        fn(*args)


def test_a_long_disconnected_session_is_emptied_then_shut_down():
    gone, here = _Session("gone"), _Session("here")
    rt = _Runtime(_Manager([here], [gone]))
    since = {"gone": -1e9}                       # disconnected long ago
    assert memory._sweep(rt, _Loop(), since, grace=90.0) == 1
    assert rt.closed == ["gone"]
    assert gone.session_state == {} and here.session_state == {"workspace": "a big table"}


def test_a_widget_that_formats_with_the_workspace_does_not_keep_it():
    """Streamlit's SessionState.clear() keeps the widgets' metadata; a select box with
    ``format_func=ws.outcome_text`` (the Optimal counterfactual page's) thereby kept the last
    session's whole workspace after it closed: 1.7x the idle memory after a 1.4 M-row session."""
    import gc
    import weakref

    from streamlit.runtime.state.common import WidgetMetadata
    from streamlit.runtime.state.session_state import SessionState

    class Workspace:
        def outcome_text(self, value) -> str:
            return str(value)

    ws = Workspace()
    state = SessionState()
    state._new_session_state["workspace"] = ws
    state._new_widget_state.set_widget_metadata(WidgetMetadata(
        "$$ID-ocb_from", deserializer=lambda v: v, serializer=ws.outcome_text, value_type="int_value"))
    session = _Session("gone")
    session.session_state = state
    rt = _Runtime(_Manager([], [session]))
    alive = weakref.ref(ws)
    del ws
    assert memory._sweep(rt, _Loop(), {"gone": -1e9}, grace=90.0) == 1 and rt.closed == ["gone"]
    gc.collect()
    assert alive() is None                       # the session object itself is still referenced


def test_the_last_script_module_is_forgotten_only_when_nobody_is_connected():
    script = types.ModuleType("__main__")
    script.__dict__["__streamlitmagic__"] = object()
    script.ws = "the last user's workspace"
    sys.modules["__main__"] = script             # conftest puts pytest's __main__ back afterwards
    memory._forget_last_script(_Runtime(_Manager([_Session("someone")], [])))
    assert sys.modules["__main__"] is script     # a script may be running: left alone
    memory._forget_last_script(_Runtime(_Manager([], [])))
    assert sys.modules["__main__"] is not script and not hasattr(sys.modules["__main__"], "ws")


@pytest.mark.browser
@pytest.mark.slow
def test_the_server_gives_memory_back_after_repeated_sessions(tmp_path):
    """The real server, two browser sessions one after another that each upload a
    400k-row table with a model and close: after each, the server's memory comes back
    to within 1.2x its idle size (after a first small upload, whose libraries stay
    loaded), and at least half of what the session took is returned.
    bench/server_memory.py does the same with the issue's 1.4 M rows and 5 cycles.

    400k rows: a session takes ~75 MB over an idle ~300 MB, so a session kept whole
    (after ~375 MB) breaks the 1.2x bound as well as the half-returned one; with fewer
    rows only the second would see it. Two cycles, not three: the figures after each
    were the same to 1 MB over three cycles, and memory that builds up from one session
    to the next already shows after the second. Idle is read once the janitor has
    shut the small session down and the memory has stopped falling (not after a
    fixed 15 s); each session is a new tab in one Chromium, closed at its end."""
    import importlib.util
    import os
    from pathlib import Path

    from browser_util import browser_page, running_app, shared_chromium

    spec = importlib.util.spec_from_file_location("server_memory", ROOT / "bench" / "server_memory.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    csv, model = bench.make_files(tmp_path, 400_000)
    with running_app(env={"ATLAS_SESSION_GRACE": "4", "ATLAS_JANITOR_INTERVAL": "1"}) as url, shared_chromium():
        port = url.rsplit(":", 1)[1]
        pid = int(subprocess.check_output(["pgrep", "-f", f"server.port {port}"]).split()[0])
        log = Path(os.environ.get("TMPDIR", "/tmp")) / f"atlas-app-{port}.log"       # browser_util's
        released = bench._releases(log)
        bench._session(page_factory=browser_page, url=url, csv=tmp_path / "small.csv", model=model,
                       name="small.csv")
        idle = bench._settle_released(pid, log, 60, stable=4, every=0.5)
        assert bench._releases(log) > released, "the janitor never shut the small session down"
        for cycle in range(2):
            peak = bench._session(page_factory=browser_page, url=url, csv=csv, model=model, name="big.csv",
                                  rss=lambda: bench.rss_mb(pid))
            after = bench._settle(pid, 60, lambda r: r <= min(1.2 * idle, idle + 0.5 * (peak - idle)), every=0.5)
            print(f"cycle {cycle}: idle {idle:.0f} MB, peak {peak:.0f} MB, after {after:.0f} MB")
            assert after <= 1.2 * idle, (cycle, idle, peak, after)
            assert after - idle <= 0.5 * (peak - idle), (cycle, idle, peak, after)
