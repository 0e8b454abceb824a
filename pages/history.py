"""Audit history: past audits listed, re-opened, compared side by side."""

from __future__ import annotations

import streamlit as st

from core.audit.history import HistoryError
from core.intake.csvsafe import to_csv
from dashboard import state
from dashboard.deploy import settings
from dashboard.history import owner, show_gap_comparison, store, use_key
from dashboard.ui import download, plain, user_errors

K = state.Keys


def _history_key() -> None:
    """On a public instance: the key the audits are private to, and using another one."""
    with st.expander("Your history key", expanded=False):
        st.caption("On this public instance your audits are private to this key. Keep it to see them again "
                   "in another session; enter a key you kept to see its audits.")
        st.code(owner(), language=None)
        entered = st.text_input("Use another key", key="hi_key_in", type="password")
        if st.button("Use this key", key="hi_key_use", disabled=not entered.strip()):
            try:
                use_key(entered)
            except HistoryError as exc:
                st.error(f"The key was not changed. {plain(exc)}")
            else:
                st.rerun()


def _open_tab(db, ids, labels) -> None:
    pick = st.selectbox("Audit", ids, format_func=labels.get, key="hi_open_id")
    if st.button("Open in the Fairness audit page", key="hi_open", type="primary"):
        with user_errors("The audit could not be re-opened"):
            state.put(K.AUDIT_RESULT, {"key": None, "audit": db.load(pick, owner=owner()),
                                       "source": f"history #{pick}"})
            st.success(f"Audit #{pick} is open on the Fairness audit page.")
            state.page_link("fairness_audit", "Show it", "⚖️")


def _compare_tab(db, ids, labels) -> None:
    if len(ids) < 2:
        st.info("Two stored audits are needed for a comparison.")
        return
    c1, c2 = st.columns(2)
    before_id = c1.selectbox("Before", ids, index=1, format_func=labels.get, key="hi_before")
    after_id = c2.selectbox("After", ids, index=0, format_func=labels.get, key="hi_after")
    if before_id == after_id:
        st.caption("Choose two different audits.")
        return
    with user_errors("The audits could not be compared"):
        a, b = db.load(before_id, owner=owner()), db.load(after_id, owner=owner())
        same_data = a.meta.get("data", {}).get("sha256") == b.meta.get("data", {}).get("sha256")
        same_model = a.meta.get("model", {}).get("sha256") == b.meta.get("model", {}).get("sha256")
        st.caption(("Same data" if same_data else "Different data") + " · "
                   + ("same model" if same_model else "different models") + ".")
        show_gap_comparison(a, b, key="hi_diff", file_name=f"audit_{before_id}_vs_{after_id}.csv")


def _delete_tab(db, ids, labels) -> None:
    gone = st.selectbox("Audit", ids, format_func=labels.get, key="hi_del_id")
    sure = st.checkbox("Yes, delete it for good", key="hi_del_sure")
    if st.button("Delete", key="hi_del", disabled=not sure):
        db.delete(gone, owner=owner())
        st.rerun()


def main() -> None:
    st.title("Audit history")
    st.caption("Every finished fairness audit is kept here, after the session ends and across server restarts. "
               "Re-open one, or compare two: the same model over time, or two models on the same data.")
    try:
        db = store()
    except HistoryError as exc:
        st.error(plain(exc))
        st.stop()
    if settings().public:
        _history_key()
    past = db.list(owner=owner())
    if past.empty:
        st.info("No audit has been stored yet: run one on the Fairness audit page; it is stored when it finishes.")
        state.page_link("fairness_audit", "Go to Fairness audit", "⚖️")
        st.stop()
    shown = past.rename(columns={"n_rows": "rows", "n_significant": "significant gaps", "summary": "first finding",
                                 "elapsed": "took (s)"})
    st.dataframe(shown[["id", "created", "title", "data_name", "model_source", "target", "protected", "rows",
                        "significant gaps", "took (s)", "first finding"]], hide_index=True, key="hi_table",
                 column_config={"took (s)": st.column_config.NumberColumn(format="%.1f")})
    download(st, "Download this list (CSV)", to_csv(past), "audit_history.csv", "text/csv", key="hi_dl_list")
    labels = {int(r.id): f"#{r.id} · {r.created} · {r.title}" for r in past.itertuples()}
    ids = list(labels)
    open_tab, compare_tab, delete_tab = st.tabs(["Re-open", "Compare two", "Delete"])
    with open_tab:
        _open_tab(db, ids, labels)
    with compare_tab:
        _compare_tab(db, ids, labels)
    with delete_tab:
        _delete_tab(db, ids, labels)


main()
