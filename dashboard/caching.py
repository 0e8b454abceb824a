"""Cached loaders: models and ensembles by file hash, demos by key."""

from __future__ import annotations

from typing import Any

import streamlit as st

from core.errors import AtlasError, UnsupportedModelError
from core.intake import demo, io
from core.intake.workspace import Workspace, build_workspace
from core.optimal import Plausibility
from dashboard import loaders


@st.cache_resource(show_spinner="Building the demo model…")
def demo_workspace(key: str) -> Workspace:
    df, target, model, holdout = demo.build_demo(key)
    spec = demo.DEMOS[key]
    ws = build_workspace(df, target, model, name=spec.title, protected=list(spec.protected),
                         model_info={"held-out accuracy": round(holdout, 4), "origin": "built-in demo"})
    return ws.with_class_names(spec.class_names) if spec.class_names else ws


@st.cache_resource(show_spinner="Reading the model…", max_entries=8)
def load_model_cached(digest: str, _data: bytes, filename: str, trust: bool) -> Any:
    """``digest`` (SHA-256 of the bytes) is the cache key; ``_data`` is not hashed.
    The deployment's rules apply (no pickle on a public instance)."""
    return loaders.read_model(_data, filename, trust)


def session_model(data: bytes, filename: str, trust: bool, slot: str = "model") -> Any:
    """A model from an upload: a tree ensemble or a linear model (read, converted and
    checked once per file, shared by sessions: only arrays and the library's object), or
    any other model, run in this session's own sandboxed worker (``slot`` names it: the
    Compare page's second model has its own). A new file in the slot stops the previous
    worker; the session's end releases it (its process is killed when it is collected)."""
    digest = io.sha256(data)
    key = f"_worker_{slot}"
    held = st.session_state.get(key)
    if held is not None and held[0] == (digest, trust):
        return held[1]
    try:
        return load_model_cached(digest, data, filename, trust)
    except UnsupportedModelError as exc:
        first = exc
    old = st.session_state.pop(key, None)
    if old is not None:
        old[2].stop()
    worker = loaders.start_worker(data, filename, trust)
    try:
        with st.spinner("Starting the model in its own sandboxed process…"):
            model = worker.model(identity=digest)
    except AtlasError as exc:
        worker.stop()
        raise loaders.run_failure(first, exc) from None
    st.session_state[key] = ((digest, trust), model, worker)
    return model


def session_table(data: bytes, filename: str):
    """The uploaded table, parsed once per upload and kept in this session only
    (a shared cache would keep every user's tables after they leave, and return
    a copy on every rerun)."""
    digest = io.sha256(data)
    held = st.session_state.get("_table")
    if held is None or held[0] != digest:
        st.session_state.pop("_table", None)       # release the previous table first
        with st.spinner("Reading the table…"):
            st.session_state["_table"] = (digest, loaders.read_table(data, filename))
    return st.session_state["_table"][1]


def session_cached(name: str, key: Any, compute, max_entries: int = 4):
    """``compute()`` once per ``key`` in this session (a small LRU per ``name``):
    results derived from one user's data stay in that user's session and are
    released with it."""
    store = st.session_state.setdefault(f"_cache_{name}", {})
    if key in store:
        store[key] = store.pop(key)              # most recently used last
        return store[key]
    value = compute()
    store[key] = value
    while len(store) > max_entries:
        store.pop(next(iter(store)))
    return value


def plausibility_model(data_key: str, target_label: str, contamination: float, X_target):
    """Isolation Forest on the rows the model assigns to the target class (per session)."""
    return session_cached("plausibility", (data_key, target_label, contamination),
                          lambda: Plausibility.fit(X_target, contamination=contamination, random_state=0))
