"""The session janitor lets go of a closed session's data (dashboard.memory).

Two Streamlit habits keep the last user's data after their session is shut
down: the send loop holds the last session it served, and the last script
run's module stays ``sys.modules["__main__"]``. The janitor empties the
session's state before shutting it down, and with nobody connected puts a
blank ``__main__`` back (bench/server_memory.py measures the effect).
"""

from __future__ import annotations

import sys
import types

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


def test_the_last_script_module_is_forgotten_only_when_nobody_is_connected():
    script = types.ModuleType("__main__")
    script.__dict__["__streamlitmagic__"] = object()
    script.ws = "the last user's workspace"
    sys.modules["__main__"] = script             # conftest puts pytest's __main__ back afterwards
    memory._forget_last_script(_Runtime(_Manager([_Session("someone")], [])))
    assert sys.modules["__main__"] is script     # a script may be running: left alone
    memory._forget_last_script(_Runtime(_Manager([], [])))
    assert sys.modules["__main__"] is not script and not hasattr(sys.modules["__main__"], "ws")
