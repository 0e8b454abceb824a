"""One place for session-state keys and their defaults."""

from __future__ import annotations

from typing import Any

import streamlit as st


class Keys:
    WORKSPACE = "workspace"            # core.intake.workspace.Workspace in use
    DEMO = "demo_key"                  # key of core.intake.demo.DEMOS loaded, or None
    STAGED_DATA = "staged_data"        # (filename, bytes) of an uploaded table
    LAST_ERROR = "last_error"          # message of the last failed load
    LAST_NOTICE = "last_notice"        # message of the last successful load
    CLUSTER = "dask_scheduler"         # optional Dask scheduler address
    PENDING_MAPPING = "pending_mapping"  # a positional column mapping waiting for the user's confirmation
    CLASS_NAMES_OF = "dm_class_of"     # Data & model: the workspace fingerprint the class-name inputs belong to
    # Data & model: the app's proposal of protected columns for the uploaded workspace,
    # {"fingerprint": its data and model, "reasons": column -> reason}, or None
    PROPOSED_PROTECTED = "dm_proposed_protected"
    # each page's last result, kept while the analyst moves between pages
    OPTIMAL_RESULT = "ocf_result"      # Optimal counterfactual: the last query's CounterfactualResult
    OPTIMAL_BATCH = "ocb_results"      # Optimal counterfactual: the last batch's table and its guarantee
    OPTIMAL_JOB = "ocf_job"            # Optimal counterfactual: the query running now (dashboard.jobs.Job)
    RULES_RESULT = "cr_result"         # Counterfactual rules: (row, target, ..., rule, samples) of the last local rule
    RULES_REGIONAL = "cr_regional"     # Counterfactual rules: the last regional rules' table
    STORY_RESULT = "cs_result"         # Case story: (row, target text, CaseStory)
    AUDIT_RESULT = "fa_result"         # Fairness audit: {key, audit, source} of the audit shown
    FCCA_RUN = "fcca_run"              # FCCA: {key, result, trees} of the last run
    COMPARE_MODEL_B = "cm_b"           # Compare models: model B as loaded, and where it came from
    COMPARE_RESULT = "cm_result"       # Compare models: {key, c} of the last comparison
    COMPARE_AUDITS = "cm_audits"       # Compare models: {key, a, b} of the two audits


DEFAULTS: dict[str, Any] = {
    Keys.WORKSPACE: None,
    Keys.DEMO: None,
    Keys.STAGED_DATA: None,
    Keys.LAST_ERROR: None,
    Keys.LAST_NOTICE: None,
    Keys.CLUSTER: "",
    Keys.PENDING_MAPPING: None,
}


def init_state() -> None:
    for k, v in DEFAULTS.items():
        st.session_state.setdefault(k, v)


def get(key: str) -> Any:
    return st.session_state.get(key, DEFAULTS.get(key))


#: the pages' results that belong to one table and model without saying which (the others carry
#: their workspace's key): dropped when another table, target or model is loaded, so a page never
#: draws a result of the previous one against the new columns, or tells its story under the new model
RESULTS_OF_ONE_WORKSPACE = (Keys.OPTIMAL_RESULT, Keys.OPTIMAL_BATCH, Keys.OPTIMAL_JOB, Keys.RULES_RESULT,
                            Keys.RULES_REGIONAL, Keys.STORY_RESULT)


def _identity(ws: Any) -> tuple[Any, ...] | None:
    """What makes a workspace another table and model (class names and feature settings do not)."""
    if ws is None:
        return None
    return (ws.name, ws.target, ws.data_sha256, ws.model_sha256, ws.model_kind, tuple(ws.X.columns), len(ws.X))


def put(key: str, value: Any) -> None:
    if key == Keys.WORKSPACE and _identity(value) != _identity(get(Keys.WORKSPACE)):
        job = st.session_state.get(Keys.OPTIMAL_JOB)
        if job is not None:
            job.stop()                     # the previous model's query ends at its solver's next look
        for k in RESULTS_OF_ONE_WORKSPACE:
            st.session_state.pop(k, None)
    st.session_state[key] = value


def forget(key: str) -> None:
    """Drop a stored value (a result made stale by a new input)."""
    st.session_state.pop(key, None)


def forget_widgets(prefix: str) -> None:
    """Drop what the widgets ``{prefix}0``, ``{prefix}1``, ... hold (inputs that belonged
    to another workspace), so that they start again from their defaults."""
    for k in [k for k in st.session_state if str(k).startswith(prefix) and str(k)[len(prefix):].isdigit()]:
        del st.session_state[k]


def audit_of(ws: Any) -> Any:
    """The fairness audit run on the workspace ``ws`` in this session (not one opened from
    a file or the history, nor one of other data), or None."""
    held = get(Keys.AUDIT_RESULT)
    return held["audit"] if held and held.get("source") == "run" and held.get("key") == ws.key else None


_PAGES: dict[str, Any] = {}


def register_pages(pages: dict[str, Any]) -> None:
    """Remember this run's ``st.Page`` objects (by url path) for links."""
    _PAGES.clear()
    _PAGES.update(pages)


def page_link(url_path: str, label: str, icon: str | None = None) -> None:
    page = _PAGES.get(url_path)
    if page is not None:
        st.page_link(page, label=label, icon=icon)


def require_workspace():
    """The current workspace, or stop the page with a link to the data page."""
    ws = get(Keys.WORKSPACE)
    if ws is None:
        st.warning("No dataset and model are loaded yet: load them on the Data & model page.")
        page_link("data_model", "Go to Data & model", "📂")
        st.stop()
    return ws


def page_context(title: str, caption: str):
    """Title and caption of an analysis page, and what it reads from the workspace:
    ``(ws, ensemble, schema, feature names, X as float array, model predictions)``."""
    st.title(title)
    ws = require_workspace()
    st.caption(caption)
    if ws.model_kind != "tree_ensemble":       # every page says what kind of model it reasons about
        st.info(f"Model: {ws.kind_text}. Answers that need a tree ensemble are computed on its surrogate and say so "
                "beside them.", icon=":material/info:")
    return ws, ws.ensemble, ws.schema, list(ws.ensemble.feature_names), ws.X.to_numpy(dtype=float), ws.predictions
