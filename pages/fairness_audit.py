"""Fairness audit: is recourse equally available and equally costly across protected groups?"""

from __future__ import annotations

from types import SimpleNamespace

import streamlit as st

from core.audit import Audit, run_audit
from core.audit.constrained import recorded
from core.audit.figures import cost_figure, metric_figure
from core.audit.report import (
    fairness_tables,
    group_table,
    precluded_note,
    precluded_table,
    precluded_words,
    subgroup_table,
    tests_table,
    time_limit_text,
)
from core.counterfactual import rows_to_move
from core.intake.csvsafe import to_csv
from core.model.guarantee import with_guarantee
from dashboard import state
from dashboard.history import remember
from dashboard.share import kept
from dashboard.ui import (
    cancel_button,
    cancel_outcome,
    cluster_setting,
    download,
    plain,
    run_kept,
    show_constraints,
    show_guarantee,
    user_errors,
)
from dashboard.widgets import favourable_picker, protected_picker, share_row

K = state.Keys
CAPTION = ("For the rows with an unfavourable decision: the optimal recourse of each (protected attributes held "
           "fixed), the rules T-CREx prescribes and local counterfactual rules, compared across the groups of the "
           "protected attributes with intervals (Wilson's for a share of rows, else the bootstrap's) and permutation "
           "tests (Holm-adjusted). The report is a "
           "single HTML file anyone can open, with the fingerprints and settings needed to reproduce it.")
#: where each stage of an audit sits on its progress bar
STAGES = {"recourse": (0.0, 0.85), "T-CREx rules": (0.85, 0.9), "local rules": (0.9, 0.98),
          "statistics": (0.98, 1.0)}


def _settings(ens, schema, pred) -> tuple[dict, int]:
    """The audit's settings (protected attributes, favourable outcome, rows, statistics, compute) as
    :func:`run_audit`'s arguments, and how many rows it will take."""
    protected = protected_picker(st, schema, "fa_protected", "Preset from the feature settings (Data & model "
                                 "page). A one-hot group is one attribute; a numerical one is cut into quartiles.",
                                 chosen=kept("fa_protected", None))
    c1, c2, c3 = st.columns(3)
    target = favourable_picker(c1, ens, pred, "fa")
    unfavourable = rows_to_move(ens, target, pred).size
    max_rows = int(c2.number_input("At most this many rows", 10, 20000, kept("fa_rows", min(300, max(10, unfavourable))), 10,
                                   key="fa_rows", help=f"{unfavourable:,} rows have an unfavourable decision; "
                                   "a seeded random sample of them is audited."))
    limit = c3.number_input("Seconds per recourse", 1.0, 120.0, kept("fa_limit", 10.0), 1.0, key="fa_limit")
    with st.expander("Statistics and rules"):
        s1, s2, s3, s4 = st.columns(4)
        n_perm = int(s1.number_input("Permutations", 200, 20000, kept("fa_perm", 2000), 100, key="fa_perm"))
        n_boot = int(s2.number_input("Bootstrap resamples", 100, 10000, kept("fa_boot", 1000), 100, key="fa_boot"))
        alpha = s3.select_slider("α (family-wise)", [0.01, 0.05, 0.1], value=kept("fa_alpha", 0.05), key="fa_alpha")
        local = int(s4.number_input("Local rules per group", 0, 100, kept("fa_local", 10), key="fa_local"))
        use_tcrex = st.checkbox("T-CREx rules per group", value=kept("fa_tcrex", True), key="fa_tcrex")
    with st.expander("Compute: local processes or a Dask cluster"):
        k1, k2 = st.columns([3, 1])
        address = cluster_setting(k1)
        jobs = int(k2.number_input("Local processes", 1, 8, kept("fa_jobs", 2), key="fa_jobs"))
    return dict(schema=schema, target=target, protected=protected, max_rows=max_rows, time_limit=float(limit),
                n_jobs=jobs, scheduler=address, n_boot=n_boot, n_perm=n_perm, alpha=alpha, tcrex=use_tcrex,
                local_rules_per_group=local), min(max_rows, unfavourable)


def _run_tab(ws, ens, schema, X, pred) -> None:
    kw, n_rows = _settings(ens, schema, pred)
    show_constraints(st, schema)
    protected = kw["protected"]
    go = st.button(f"Audit {n_rows:,} rows", type="primary", key="fa_go", disabled=not protected)
    if not protected:
        st.caption("Choose at least one protected attribute.")
    if go:
        cancel = st.empty()
        cancel_button(cancel, "fa_cancel", "Stops the audit; the previous result, if any, is kept.")
        bar = st.progress(0.0, text="Starting…")

        def show(stage: str, done: int, total: int) -> None:
            a, b = STAGES.get(stage, (0.0, 1.0))
            bar.progress(min(1.0, a + (b - a) * done / max(total, 1)), text=f"{stage}: {done} of {total}")

        with user_errors("The audit could not be run"):
            solve_on, extra = ws.query_model()
            audit = run_audit(solve_on, X, **kw, **extra, data_sha256=ws.data_sha256,
                              model_sha256=ws.model_sha256, data_name=ws.name, progress=show, y=ws.y,
                              class_names=ws.class_names)
            state.put(K.AUDIT_RESULT, {"key": ws.key, "audit": audit, "source": "run"})
            run_kept("fa_cancel")
            exact = ws.model_kind == "tree_ensemble"     # any other model's ensemble is its surrogate: not kept as it
            if (stored := remember(audit, title=f"{ws.name} · {audit.meta['model']['source']}",
                                   ensemble=ens if exact else None)) is not None:
                st.toast(f"Stored in the audit history as #{stored}.")
        bar.empty()
        cancel.empty()
    else:
        cancel_outcome("fa_cancel", "the previous audit" if state.get(K.AUDIT_RESULT) else None)


def _open_tab() -> None:
    up = st.file_uploader("A saved audit: its HTML report or JSON", type=["html", "htm", "json"], key="fa_upload")
    if up is not None and st.button("Open", key="fa_open"):
        with user_errors("The audit could not be opened"):
            state.put(K.AUDIT_RESULT, {"key": None, "audit": Audit.from_file(up.getvalue()), "source": up.name})
            st.success(f"Opened {plain(up.name)}.")


def _summary(held: dict) -> None:
    """Where the audit shown comes from, its findings and its figures per group."""
    audit: Audit = held["audit"]
    meta = audit.meta
    if held["source"] != "run":
        st.caption(f"Saved audit {plain(held['source'])} · created {plain(meta.get('created', '?'))} · data "
                   f"{plain(meta.get('data', {}).get('name', ''))} "
                   f"(SHA-256 {plain(str(meta.get('data', {}).get('sha256', ''))[:16])}…)")
    st.subheader("Summary")
    significant = bool(len(audit.tests)) and bool(audit.tests["significant"].any())
    for line in audit.summary:            # no test at all: nothing to reassure with
        (st.warning if significant or not len(audit.tests) else st.success)(plain(line))
    m = st.columns(4)
    m[0].metric("Rows audited", f"{len(audit.rows):,}")
    m[1].metric("With a recourse", f"{audit.rows['feasible'].mean():.1%}")
    m[2].metric("Tests", len(audit.tests))
    m[3].metric("Time", f"{audit.elapsed:.1f} s")
    show_guarantee(st, audit.recourse_guarantee, "each row's recourse")
    show_guarantee(st, audit.guarantee, "each group's figures")
    show_constraints(st, SimpleNamespace(constraints=[t for _, t in recorded(meta)]))   # the audit's own
    for note in meta.get("notes", []):
        st.caption(plain(note))
    if time_limit_text(audit.rows):
        st.info(plain(time_limit_text(audit.rows)))
    st.subheader("Per group")
    st.dataframe(group_table(audit), hide_index=True, key="fa_groups")
    _precluded(held)
    st.subheader("Gaps to the reference group")
    st.dataframe(tests_table(audit), hide_index=True, key="fa_tests")
    attrs = list(meta.get("parameters", {}).get("protected", {}))
    for a in attrs:
        left, right = st.columns(2)
        left.plotly_chart(cost_figure(audit, a), key=f"fa_cost_{a}")
        fig = metric_figure(audit, a, "feasible")
        if fig is not None:
            right.plotly_chart(fig, key=f"fa_feas_{a}")


def _precluded(held: dict) -> None:
    """The rows proven precluded per group, and a precluded case to open on the Case story page."""
    audit: Audit = held["audit"]
    table = precluded_table(audit)
    if not len(table):
        return
    st.subheader("Rows precluded per group")
    st.markdown(plain(precluded_words(audit)))
    st.caption(plain(precluded_note(audit)))
    st.dataframe(table, hide_index=True, key="fa_precluded")
    rows = audit.rows.loc[audit.rows["precluded"] == 1, "row"].astype(int).tolist() if "precluded" in audit.rows \
        else []
    if not rows or held["source"] != "run":        # a saved audit's rows may be of other data
        return
    c1, c2 = st.columns([2, 3], vertical_alignment="bottom")
    pick = c1.selectbox("A precluded case", rows, index=None, placeholder="Choose a case to tell its story",
                        key="fa_precluded_row")
    if pick is not None:
        share_row(int(pick))                        # the row every page explains
        with c2:
            state.page_link("case_story", f"Open the story of case {int(pick)}", ":material/menu_book:")


def _details(audit: Audit) -> None:
    """Group fairness, the subgroup scan, the rules, the rows and the downloads."""
    disp, by_group = fairness_tables(audit)
    if len(by_group):
        st.subheader("Group fairness of the decisions")
        st.caption("On every row of the data, with fairlearn's metrics: demographic parity and equalised odds "
                   "between the groups of each protected attribute and of each intersection, with 95% bootstrap "
                   "intervals.")
        if len(disp):
            st.dataframe(disp, hide_index=True, key="fa_disparities")
        st.dataframe(by_group, hide_index=True, key="fa_fairness")
        if audit.fairness is not None:             # an audit saved before group fairness has none
            download(st, "Group fairness (CSV)", to_csv(with_guarantee(audit.fairness, audit.guarantee)),
                     "group_fairness.csv", "text/csv", key="fa_dl_fairness")
    sub_t = subgroup_table(audit)
    if len(sub_t):
        st.subheader("Subgroups where recourse differs most")
        st.caption("Subgroups of up to two conditions, each against the rest of the audited rows; p-values "
                   "adjusted over the whole scan (Westfall-Young max-T), so a significant row is unlikely to be "
                   "chance.")
        st.dataframe(sub_t, hide_index=True, key="fa_subgroups")
        if audit.subgroups is not None:            # an audit saved before the scan has none
            download(st, "Subgroup scan (CSV)", to_csv(with_guarantee(audit.subgroups, audit.guarantee)),
                     "subgroup_scan.csv", "text/csv", key="fa_dl_subgroups")
    if len(audit.rules):
        st.subheader("Rules most often prescribed (T-CREx)")
        st.dataframe(audit.rules, hide_index=True, key="fa_rules")
    with st.expander("Per-row results"):
        st.dataframe(audit.rows, hide_index=True, key="fa_rows_table")
    d1, d2, d3 = st.columns(3)
    download(d1, "Report (HTML)", audit.to_html, "recourse_audit.html", "text/html", key="fa_dl_html",
             source=audit,
             help="Self-contained: figures, tables, fingerprints and settings; re-opens in this page.")
    download(d2, "Per-row results (CSV)", audit.rows_csv(), "recourse_audit_rows.csv", "text/csv",
             key="fa_dl_csv")
    download(d3, "Audit (JSON)", audit.to_json, "recourse_audit.json", "application/json", key="fa_dl_json",
             source=audit)


def main() -> None:
    ws, ens, schema, names, X, pred = state.page_context("Fairness audit", CAPTION)
    tab_run, tab_open = st.tabs(["Run an audit", "Open a saved audit"])
    with tab_run:
        _run_tab(ws, ens, schema, X, pred)
    with tab_open:
        _open_tab()
    held = state.get(K.AUDIT_RESULT)
    if held is None or (held["source"] == "run" and held["key"] != ws.key):
        st.info("Run an audit above, or open a saved one.")
        st.stop()
    _summary(held)
    _details(held["audit"])


main()
