"""The view in the URL: a link reproduces what its sender saw.

The URL carries, besides the page (its path), ``demo=<key>`` for a built-in
demo or ``ws=<token>`` for data and a model the sender kept on this server
with "Share this view" (the token is unguessable: whoever has the link can
open that data), ``row=<n>`` and ``target=<class>`` or ``target=<lo>,<hi>``.
A new session reads them once (:func:`restore`); every run writes the current
ones back (:func:`publish`). The URL never sets a cluster address or any
other server setting.
"""

from __future__ import annotations

import math

import streamlit as st

from core.demo import DEMOS
from core.errors import AtlasError
from dashboard import state
from dashboard.caching import demo_workspace
from dashboard.history import store
from dashboard.ui import plain
from dashboard.widgets import ROW, SHOWN, TARGET

RESTORED = "_url_restored"
LINK_ERROR = "link_error"    # what was wrong with the link this session was opened from (shown on every page)
CHECK = "_url_check"         # row and target of the link, checked once the data is known
TOKEN = "share_token"        # (workspace key, token) of the last "Share this view"


def _target_from_text(text: str):
    parts = text.split(",")
    if len(parts) == 2:
        try:
            lo, hi = (float(p) for p in parts)
            if not (math.isnan(lo) or math.isnan(hi)):
                return (lo, hi)
        except ValueError:
            pass
    return text                      # a class, matched by its text by the target picker


def restore() -> None:
    """Apply the URL's data, row and target once per session."""
    if st.session_state.get(RESTORED):
        return
    st.session_state[RESTORED] = True
    q = st.query_params
    try:
        if "ws" in q:
            ws = store().load_workspace(q["ws"])
            state.put(state.Keys.WORKSPACE, ws)
            state.put(state.Keys.DEMO, None)
            st.session_state[TOKEN] = (ws.key, q["ws"])
        elif "demo" in q:
            if q["demo"] in DEMOS:
                state.put(state.Keys.WORKSPACE, demo_workspace(q["demo"]))
                state.put(state.Keys.DEMO, q["demo"])
            else:
                _broken(f"The link names a demo {q['demo']!r} this app does not have.")
    except AtlasError as exc:
        _broken(f"The link's data could not be opened: {exc}")
    if "row" in q:
        if q["row"].isdigit():
            st.session_state[ROW] = int(q["row"])
        else:
            _broken(f"The link's row {q['row']!r} is not a row number.")
    if q.get("target"):
        st.session_state[TARGET] = _target_from_text(q["target"])
    st.session_state[CHECK] = True


def _broken(message: str) -> None:
    errors = st.session_state.get(LINK_ERROR) or []
    st.session_state[LINK_ERROR] = [*errors, message]


def check_link(ws) -> None:
    """Once the data is known: a link's row or class that this data does not have is said, not
    silently replaced (the pages then show row 0 or the first other class)."""
    if not st.session_state.pop(CHECK, False) or ws is None:
        return
    row, target = st.session_state.get(ROW), st.session_state.get(TARGET)
    if row is not None and not 0 <= row < len(ws.X):
        _broken(f"The link's row {row} is not in this data (rows 0 to {len(ws.X) - 1}).")
        st.session_state[ROW] = None
    if target is not None and ws.ensemble.is_classifier and not isinstance(target, tuple) \
            and str(target) not in {str(c) for c in ws.ensemble.classes}:
        _broken(f"The link's target {target!r} is not a class of this model "
                f"({', '.join(map(str, ws.ensemble.classes))}).")
        st.session_state[TARGET] = None


def link_notice() -> None:
    """On every page, until dismissed: what the link this session was opened from got wrong."""
    errors = st.session_state.get(LINK_ERROR)
    if not errors:
        return
    shown = "demo" if state.get(state.Keys.DEMO) else "data loaded"
    st.error("This link could not be followed as sent: " + " ".join(plain(e) for e in errors)
             + f" The {shown} is shown instead; ask the sender for a new link.")
    if st.button("Dismiss", key="link_error_dismiss"):
        st.session_state[LINK_ERROR] = None
        st.rerun()


def current_params() -> dict[str, str]:
    """What the URL should carry now."""
    out: dict[str, str] = {}
    ws = state.get(state.Keys.WORKSPACE)
    demo = state.get(state.Keys.DEMO)
    token = st.session_state.get(TOKEN)
    if demo:
        out["demo"] = demo
    elif ws is not None and token and token[0] == ws.key:
        out["ws"] = token[1]
    row = st.session_state.get(ROW)
    if row is not None:
        out["row"] = str(int(row))
    target = st.session_state.get(TARGET)
    if target is None:                     # the default the page showed, so the link opens on the same target
        target = st.session_state.get(SHOWN)
    if isinstance(target, tuple):
        out["target"] = f"{target[0]:.6g},{target[1]:.6g}"
    elif target is not None:
        out["target"] = str(target)
    return out


def publish() -> None:
    """Write the current view into the URL (keys no longer in use are removed)."""
    want = current_params()
    q = st.query_params
    for k in [k for k in q if k in ("demo", "ws", "row", "target") and k not in want]:
        del q[k]
    for k, v in want.items():
        if q.get(k) != v:
            q[k] = v


def share_button() -> None:
    """Sidebar control: keep uploaded data for a link (a demo's link needs nothing kept)."""
    ws = state.get(state.Keys.WORKSPACE)
    if ws is None or state.get(state.Keys.DEMO):
        st.caption("The address in your browser links to this view.")
        return
    token = st.session_state.get(TOKEN)
    if token and token[0] == ws.key:
        st.caption("The address in your browser links to this view (data and model kept on this server).")
        return
    if st.button("Share this view", key="share_view", help="Keeps this data and model on the server so that the "
                 "address in your browser opens this view; anyone with the link can open them."):
        try:
            st.session_state[TOKEN] = (ws.key, store().save_workspace(ws))
            publish()
            st.success("The address in your browser now links to this view.")
        except AtlasError as exc:
            st.error(plain(exc))
