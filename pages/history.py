"""Audit history: past audits listed, re-opened, compared side by side, shared with the
team, their trail filtered and exported; feature settings kept on the server."""

from __future__ import annotations

import streamlit as st

from core.audit.history import HistoryError
from core.intake.csvsafe import to_csv
from dashboard import auth, state
from dashboard.deploy import settings
from dashboard.history import follow_link, owner, show_gap_comparison, store, store_unsaved, unsaved, use_key
from dashboard.ui import download, plain, user_errors

K = state.Keys
TRAIL_SHOWN = ["id", "created", "author", "title", "model", "data", "target", "protected", "n_rows",
               "package_version", "git_commit", "guarantee"]


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


def _open_store():
    """The store, or (the database cannot be reached) the reason on the page and the page stops;
    the session's audits not stored yet are stored once it answers."""
    waiting = len(unsaved())
    try:
        db = store()
        if waiting:
            done = store_unsaved()
            st.success(f"{done} audit{'s' * (done != 1)} of this session that could not be stored before "
                       f"{'are' if done != 1 else 'is'} now in the history.")
        return db
    except HistoryError as exc:
        st.error(f"The audit history is unavailable: {plain(exc)} The rest of the app works as usual.",
                 icon=":material/cloud_off:")
        if waiting:
            st.info(f"{waiting} audit{'s' * (waiting != 1)} of this session wait to be stored: they are kept "
                    "in the session and stored as soon as the database answers (open this page again).")
        st.stop()


def _open_tab(db, ids, labels) -> None:
    pick = st.selectbox("Audit", ids, format_func=labels.get, key="hi_open_id")
    if st.button("Open in the Fairness audit page", key="hi_open", type="primary"):
        with user_errors("The audit could not be re-opened"):
            state.put(K.AUDIT_RESULT, {"key": None, "audit": db.load(pick, owner=owner()),
                                       "source": f"history #{pick}"})
            st.success(f"Audit #{pick} is open on the Fairness audit page.")
            state.page_link("fairness_audit", "Show it", "⚖️")
    st.caption("A link to this audit (it opens for whoever may see it):")
    st.code(f"{_app_address()}/history?audit={pick}", language=None)


def _app_address() -> str:
    """The app's address as the browser reached it (its origin and the server's base path)."""
    from streamlit import config

    origin = str(st.context.headers.get("Origin") or "").rstrip("/")
    path = str(config.get_option("server.baseUrlPath") or "").strip("/")
    return origin + (f"/{path}" if path else "")


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


def _trail_tab(db) -> None:
    """Who ran which audit, on which model and data, with which settings and code: filtered,
    and exported as CSV (every column, the guarantee in words)."""
    with user_errors("The audit trail could not be read"):
        every = db.trail(owner=owner())
        c1, c2, c3 = st.columns(3)
        authors = c1.multiselect("Author", sorted(set(every["author"])), key="hi_tr_author")
        models = c2.multiselect("Model", sorted(set(every["model"])), key="hi_tr_model")
        data = c3.multiselect("Data", sorted(set(every["data"])), key="hi_tr_data")
        trail = db.trail(owner=owner(), authors=authors, models=models, data=data)
        st.dataframe(trail[TRAIL_SHOWN], hide_index=True, key="hi_trail")
        st.caption(f"{len(trail)} of {len(every)} audits. The CSV also holds each audit's settings (its parameters "
                   "and constraints, JSON), the author's issuer and subject, both fingerprints in full and the "
                   "guarantee in words.")
        download(st, "Download the audit trail (CSV)", to_csv(trail), "audit_trail.csv", "text/csv",
                 key="hi_dl_trail")


def _share_tab(db, past, labels) -> None:
    mine = [int(i) for i in past.loc[past["mine"], "id"]]
    if not mine:
        st.info("None of these audits is yours: only its author shares an audit or makes it private again.")
        return
    pick = st.selectbox("Your audit", mine, format_func=labels.get, key="hi_share_id")
    shared = bool(past.loc[past["id"] == pick, "shared"].iloc[0])
    st.caption("Shared with the team: every signed-in colleague sees it, read-only." if shared
               else "Private: only you see it.")
    if st.button("Make it private again" if shared else "Share with the team", key="hi_share",
                 type="secondary" if shared else "primary"):
        with user_errors("What is shared could not be changed"):
            db.share(pick, owner=owner(), shared=not shared)
            st.rerun()


def _delete_tab(db, past, labels) -> None:
    mine = [int(i) for i in past.loc[past["mine"], "id"]]
    if not mine:
        st.info("None of these audits is yours: only its author can delete an audit.")
        return
    gone = st.selectbox("Audit", mine, format_func=labels.get, key="hi_del_id")
    sure = st.checkbox("Yes, delete it for good", key="hi_del_sure")
    if st.button("Delete", key="hi_del", disabled=not sure):
        with user_errors("The audit could not be deleted"):
            db.delete(gone, owner=owner())
            st.rerun()


def _settings_section(db, team: bool) -> None:
    """Feature settings files (kinds, actionability, weights, protected columns, constraints)
    kept on the server: the current data's kept under a name, one applied to the data loaded."""
    with st.expander("Feature settings kept on the server", expanded=False):
        ws = state.get(K.WORKSPACE)
        if ws is not None:
            c1, c2 = st.columns([3, 1])
            name = c1.text_input("Name", value=f"{ws.name} settings", key="hi_set_name", max_chars=300)
            if c2.button("Keep the current settings", key="hi_set_keep"):
                with user_errors("The settings were not kept"):
                    db.save_settings(ws.schema, name=name, owner=owner())
        with user_errors("The kept settings could not be read"):
            kept = db.list_settings(owner=owner())
            if kept.empty:
                st.caption("No feature settings are kept yet" + (" (yours stay private until you share them)."
                                                                  if team else "."))
                return
            st.dataframe(kept.drop(columns="mine" if team else ["mine", "author", "shared"]), hide_index=True,
                         key="hi_set_table")
            _settings_actions(db, kept, ws, team)


def _settings_actions(db, kept, ws, team: bool) -> None:
    names = {int(r.id): f"#{r.id} · {r.name} · {r.author}" for r in kept.itertuples()}
    pick = st.selectbox("Settings", list(names), format_func=lambda i: names[i], key="hi_set_id")
    row = kept[kept["id"] == pick].iloc[0]
    c1, c2, c3 = st.columns(3)
    if c1.button("Apply to the data loaded", key="hi_set_apply", disabled=ws is None):
        with user_errors("The settings were not applied"):
            state.put(K.WORKSPACE, ws.with_schema(db.load_settings(pick, owner=owner())))
            st.success("Feature settings applied: every page uses them now.")
    if team and row["mine"] and c2.button("Make private" if row["shared"] else "Share with the team",
                                          key="hi_set_share"):
        with user_errors("What is shared could not be changed"):
            db.share_settings(pick, owner=owner(), shared=not row["shared"])
            st.rerun()
    if row["mine"] and c3.button("Delete", key="hi_set_del"):
        with user_errors("The settings were not deleted"):
            db.delete_settings(pick, owner=owner())
            st.rerun()


def main() -> None:
    st.title("Audit history")
    st.caption("Every finished fairness audit is kept here, after the session ends and across server restarts. "
               "Re-open one, or compare two: the same model over time, or two models on the same data.")
    db = _open_store()
    author = auth.current()
    team = author is not None
    if author is not None:
        st.caption(f"Signed in as {plain(author.name)}: your audits are private until you share them "
                   "with the team; the ones colleagues shared are listed too, read-only.")
    elif settings().public:
        _history_key()
    refused = follow_link(db, "hi_open_id")
    if refused:
        st.error(plain(refused), icon=":material/lock:")
    try:
        past = db.list(owner=owner())
    except HistoryError as exc:
        st.error(f"The audit history is unavailable: {plain(exc)}", icon=":material/cloud_off:")
        st.stop()
    if past.empty:
        st.info("No audit has been stored yet: run one on the Fairness audit page; it is stored when it finishes.")
        state.page_link("fairness_audit", "Go to Fairness audit", "⚖️")
    else:
        _audits(db, past, team)
    _settings_section(db, team)


def _audits(db, past, team: bool) -> None:
    shown = past.rename(columns={"n_rows": "rows", "n_significant": "significant gaps", "summary": "first finding",
                                 "elapsed": "took (s)"})
    cols = (["id", "created"] + (["author", "shared"] if team else []) +
            ["title", "data_name", "model_source", "target", "protected", "rows", "significant gaps", "took (s)",
             "first finding"])
    st.dataframe(shown[cols], hide_index=True, key="hi_table",
                 column_config={"took (s)": st.column_config.NumberColumn(format="%.1f")})
    download(st, "Download this list (CSV)", to_csv(past.drop(columns="mine")), "audit_history.csv", "text/csv",
             key="hi_dl_list")
    labels = {int(r.id): f"#{r.id} · {r.created} · {r.title}" + (f" · {r.author}" if team else "")
              for r in past.itertuples()}
    ids = list(labels)
    names = ["Re-open", "Audit trail", "Compare two"] + (["Share"] if team else []) + ["Delete"]
    tabs = dict(zip(names, st.tabs(names)))
    with tabs["Re-open"]:
        _open_tab(db, ids, labels)
    with tabs["Audit trail"]:
        _trail_tab(db)
    with tabs["Compare two"]:
        _compare_tab(db, ids, labels)
    if team:
        with tabs["Share"]:
            _share_tab(db, past, labels)
    with tabs["Delete"]:
        _delete_tab(db, past, labels)


main()
