"""Cached loaders: models and ensembles by file hash, demos by key."""

from __future__ import annotations

from typing import Any

import streamlit as st

from core import demo, io
from core.workspace import Workspace, build_workspace


@st.cache_resource(show_spinner="Building the demo model…")
def demo_workspace(key: str) -> Workspace:
    df, target, model, holdout = demo.build_demo(key)
    spec = demo.DEMOS[key]
    return build_workspace(df, target, model, name=spec.title,
                           model_info={"held-out accuracy": round(holdout, 4), "origin": "built-in demo"})


@st.cache_resource(show_spinner="Reading the model…", max_entries=8)
def load_model_cached(digest: str, _data: bytes, filename: str, allow_pickle: bool) -> Any:
    """``digest`` (SHA-256 of the bytes) is the cache key; ``_data`` is not hashed."""
    return io.load_model(_data, filename, allow_pickle=allow_pickle)


@st.cache_data(show_spinner="Reading the table…", max_entries=8)
def load_table_cached(digest: str, _data: bytes, filename: str):
    """``digest`` (SHA-256 of the bytes) is the cache key; ``_data`` is not hashed."""
    df = io.load_table(_data, filename)
    return df, dict(df.attrs)


@st.cache_resource(show_spinner="Fitting the plausibility model (Isolation Forest)…", max_entries=16)
def plausibility_model(data_key: str, target_label: str, contamination: float, _X_target):
    """Isolation Forest on the rows the model assigns to the target class."""
    from core.optimal import Plausibility

    return Plausibility.fit(_X_target, contamination=contamination, random_state=0)
