"""Compare models: a second version of the model on the same data, where the decisions differ,
and whether the recourse promised under the first survives the second."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from core.audit import run_audit
from core.audit.compare import agreement_shown, compare_models, groups_shown, precluded_shown
from core.audit.report import precluded_table
from core.cells.problem import check_same_features
from core.counterfactual import rows_to_move
from core.errors import AuditCancelled, DataError
from core.figures import regions_figure
from core.figures import text as figure_text
from core.intake import io
from core.intake.demo import UPDATES, updated_model
from core.intake.workspace import build_workspace
from core.regions import default_axes, slice_point, slice_regions, slice_view
from core.shown import approx_text, percent_text
from dashboard import state
from dashboard.caching import session_cached, session_model
from dashboard.deploy import settings as deployment
from dashboard.history import owner as history_owner
from dashboard.history import show_gap_comparison
from dashboard.history import store as history_store
from dashboard.share import kept, kept_index
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
from dashboard.widgets import favourable_picker, protected_picker, row_picker

K = state.Keys
CAPTION = ("Model A is the model loaded on the Data & model page; load model B, a later or competing version for the "
           "same data. The page shows where their decisions differ and, for the rows A decides unfavourably, whether "
           "the cheapest recourse under A still works under B (recourse invalidation), per protected group, and what "
           "a recourse valid under both costs extra.")


def _model_b(ws, model, name: str, what: str = "", sha256: str = "") -> dict:
    """Model B read on model A's data: the same columns, read the same way, or a clear error.
    ``sha256``: the uploaded file's (the trees' own fingerprint is in every export anyway)."""
    wb = build_workspace(ws.raw, ws.target, model, name=name, drop_missing=len(ws.X) < len(ws.raw),
                         model_sha256=sha256)
    try:
        check_same_features(ws.ensemble, wb.ensemble, "model B", "model A")
    except ValueError as exc:
        raise DataError(str(exc)) from None
    if wb.X.shape != ws.X.shape or not np.array_equal(wb.X.to_numpy(dtype=float), ws.X.to_numpy(dtype=float)):
        raise DataError("Model B reads this data differently from model A (other rows or other category codes); "
                        "load a model trained on the same columns and categories.")
    return {"key": ws.key, "ws": wb, "what": what}


def _keep_model_b(ws, model, name: str, what: str = "", sha256: str = "") -> None:
    state.put(K.COMPARE_MODEL_B, _model_b(ws, model, name, what, sha256))
    state.forget(K.COMPARE_RESULT)


def _load_model_b(ws) -> None:
    """The choice of model B and its loading: the demo's update, an audited model, or a file."""
    demo = state.get(K.DEMO)
    sources = ((["The demo's updated model"] if demo in UPDATES else []) + ["Upload a model file"]
               + ["A model from an earlier audit"])
    src = st.radio("Model B", sources, horizontal=True, key="cm_source")
    if src == "The demo's updated model":
        title, what = UPDATES[demo]
        st.caption(f"{title}: {what}")
        if st.button("Load model B", key="cm_load_demo", type="primary"):
            with user_errors("Model B could not be loaded"), st.spinner("Training the updated demo model…"):
                model_b, title, what = updated_model(demo)
                _keep_model_b(ws, model_b, title, what)
    elif src == "A model from an earlier audit":
        _model_b_from_history(ws)
    else:
        _model_b_from_file(ws)


def _model_b_from_history(ws) -> None:
    with user_errors("The audit history could not be read"):
        past = history_store().list(owner=history_owner())
        kept = set(history_store().with_models(owner=history_owner()))
        past = past[past["id"].isin(kept)] if len(past) else past
        if not len(past):
            st.info("No audit in the history kept its model yet: audits run from now on keep it.")
        else:
            labels = {int(i): f"#{i} · {c} · {t}" for i, c, t in zip(past["id"], past["created"], past["title"])}
            pick = st.selectbox("Audit", list(labels), format_func=lambda i: labels[i], key="cm_audit_id")
            if st.button("Load model B", key="cm_load_audit", type="primary"):
                with user_errors("Model B could not be loaded"):
                    _keep_model_b(ws, history_store().load_model(pick, owner=history_owner()),
                                  f"the model of audit #{pick}")


def _model_b_from_file(ws) -> None:
    dep = deployment()
    up = st.file_uploader("Model B: XGBoost .json/.ubj, LightGBM .txt, scikit-learn .skops, CatBoost .json/.cbm, "
                          "ONNX .onnx" + (" (or .pkl/.joblib)" if dep.allows_pickle else ""),
                          type=["json", "ubj", "txt", "skops", "cbm", "onnx"] + (["pkl", "pickle", "joblib"]
                                                                         if dep.allows_pickle else []),
                          key="cm_model_file")
    trust = dep.allows_pickle and st.checkbox("I trust this file (allow pickle/joblib)", value=False, key="cm_trust")
    if trust:
        st.warning(io.PICKLE_WARNING)
    if st.button("Load model B", key="cm_load_file", type="primary", disabled=up is None):
        with user_errors("Model B could not be loaded"):
            assert up is not None                    # the button is disabled until a file is chosen
            data = up.getvalue()
            model_b = session_model(data, up.name, trust, slot="model B")
            _keep_model_b(ws, model_b, up.name, sha256=io.sha256(data))


def _what(w) -> str:
    return (f"{plain(w.ensemble.source)} · {w.ensemble.n_trees} trees" if w.model_kind == "tree_ensemble"
            else plain(w.kind_text))


def _sides(w) -> dict:
    """Model A's or B's arguments of the comparison: the model as its kind is analysed."""
    return {"ens": w.linear if w.linear is not None else w.ensemble, "model": w.model, "surrogate": w.surrogate}


def _checked_on(w) -> dict:
    """A surrogate's slice with the model it stands for, each region put to that model (as on the
    Decision regions page); nothing for a tree ensemble, whose regions are its own."""
    if w.surrogate is None:
        return {}
    return {"model": w.linear if w.linear is not None else w.model, "surrogate": w.surrogate}


def _pair(a: dict, b: dict) -> dict:
    """Both sides' arguments of :func:`compare_models`."""
    return dict(model_a=a["model"], model_b=b["model"], surrogate_a=a["surrogate"], surrogate_b=b["surrogate"])


def _agreement(ws, wb, X, pred, schema, target, protected, result_key) -> None:
    """Where the two models' decisions differ: figures, the rules of the differences, the rows."""
    sa, sb = _sides(ws), _sides(wb)
    with user_errors("The decisions could not be compared"):
        quick = session_cached("cm_decisions", result_key, lambda: compare_models(
            sa["ens"], sb["ens"], X, schema=schema, target=target, protected=protected, invalidation=False,
            **_pair(sa, sb)))
        st.subheader("Agreement of decisions")
        overall = quick.agreement.iloc[0]
        m = st.columns(3)
        m[0].metric("Decisions alike", percent_text(overall["agree"]))
        m[1].metric("Rows whose decision flips", f"{int(overall['flips']):,}")
        m[2].metric("Rows", f"{int(overall['rows']):,}")
        st.dataframe(agreement_shown(quick.agreement), hide_index=True, key="cm_agreement")
        if quick.rules:
            st.markdown("**Where the decisions differ** (a shallow tree on the data's columns)")
            for r in quick.rules[:5]:
                st.markdown("- " + plain(r))
        if len(quick.flips):
            with st.expander(f"The {len(quick.flips):,} rows whose decision flips"):
                rows_f = quick.flips["row"].to_numpy()[:500]
                view = ws.analyst_view(X[rows_f], list(rows_f))
                view.insert(0, "row", rows_f)
                view.insert(1, "model A", [ws.outcome_text(v) for v in pred[rows_f]])
                view.insert(2, "model B", [ws.outcome_text(v) for v in wb.predict(X[rows_f])])
                st.dataframe(view, hide_index=True, key="cm_flips")


def _study_settings(ens, pred, target) -> dict:
    """How many rows the invalidation study (and the audits) take, and how they are computed
    (``rows``: how many the study takes, for its button)."""
    unfavourable = rows_to_move(ens, target, pred).size
    s1, s2, s3 = st.columns(3)
    max_rows = int(s1.number_input("At most this many rows", 10, 5000, kept("cm_rows", min(200, max(10, unfavourable))), 10,
                                   key="cm_rows", help=f"{unfavourable:,} rows are decided unfavourably by model A; "
                                   "a seeded random sample of them is studied."))
    limit = s2.number_input("Seconds per recourse", 1.0, 120.0, kept("cm_limit", 10.0), 1.0, key="cm_limit")
    jobs = int(s3.number_input("Local processes", 1, 8, kept("cm_jobs", 2), key="cm_jobs"))
    with st.expander("Compute on a Dask cluster"):
        address = cluster_setting(st)
    return dict(max_rows=max_rows, time_limit=float(limit), n_jobs=jobs, scheduler=address,
                rows=min(max_rows, unfavourable))


def _run_study(ws, wb, X, schema, target, protected, run: dict, result_key) -> None:
    """The study's button, its progress and cancel, and the result kept."""
    if st.button(f"Study {run['rows']:,} rows", type="primary", key="cm_go"):
        cancel = st.empty()
        cancel_button(cancel, "cm_cancel", "Stops the study; the previous result, if any, is kept.")
        bar = st.progress(0.0, text="Starting…")

        def show(stage: str, done: int, total: int) -> None:
            bar.progress(min(1.0, done / max(total, 1)), text=f"{stage}: {done} of {total}")

        sa, sb = _sides(ws), _sides(wb)
        with user_errors("The study could not be run"):
            try:
                c = compare_models(sa["ens"], sb["ens"], X, schema=schema, target=target, protected=protected,
                                   max_rows=run["max_rows"], time_limit=run["time_limit"], n_jobs=run["n_jobs"],
                                   scheduler=run["scheduler"], **_pair(sa, sb), progress=show,
                                   provenance={"data_name": ws.name, "model_a_name": ws.name,
                                               "model_b_name": wb.name, "data_sha256_file": ws.data_sha256,
                                               "model_a_sha256": ws.model_sha256, "model_b_sha256": wb.model_sha256,
                                               "class_names": ws.class_names})
                state.put(K.COMPARE_RESULT, {"key": result_key, "c": c})
                run_kept("cm_cancel")
            except AuditCancelled:
                st.warning("Cancelled: no new result was kept.")
        bar.empty()
        cancel.empty()
    else:
        cancel_outcome("cm_cancel", None)


def _groups_figure(g) -> go.Figure:
    fig = go.Figure()
    for attr in g["attribute"].unique():
        sub = g[g["attribute"] == attr]
        fig.add_bar(x=[figure_text(f"{attr} = {v}") for v in sub["group"]], y=sub["invalidated"],
                    error_y=dict(type="data", symmetric=False, array=sub["ci_high"] - sub["invalidated"],
                                 arrayminus=sub["invalidated"] - sub["ci_low"]), name=figure_text(attr))
    fig.update_layout(title="Recourse under A that B does not honour (95% intervals)", yaxis_tickformat=".0%",
                      yaxis_range=[0, 1.05],                  # a share: never below 0 (all-zero bars drew -100%)
                      height=340, margin=dict(l=10, r=10, t=40, b=10), showlegend=False)
    return fig


def _valid_under_both(c) -> None:
    """What a recourse valid under both models costs extra, how many rows have one, and the
    rows that have none (said, never hidden), with what each recourse guarantees."""
    r = c.rows
    found_a = r["found_a"] == 1
    both = r["found_both"] == 1
    extra = r.loc[found_a & both, "extra_cost"].dropna()
    m = st.columns(4)
    m[0].metric("Rows studied", f"{len(r):,}")
    m[1].metric("Recourse under A", f"{int(found_a.sum()):,}")
    m[2].metric("Valid under both", f"{int(both.sum()):,}",
                help="Rows with a recourse both models accept (checked on each model).")
    m[3].metric("Mean extra cost", approx_text(float(extra.mean()), 3) if len(extra) else "–",
                help="Cost of the cheapest recourse found valid under both, minus that of the recourse under A "
                     "(0 where model B honours A's recourse); each change measured against its feature's range.")
    if len(extra):
        st.caption(plain(f"Extra cost of a recourse valid under both: 0 for {int((extra == 0).sum()):,} rows (model B "
                         f"honours A's recourse), at most {approx_text(float(extra.max()), 3)}; median "
                         f"{approx_text(float(extra.median()), 3)}."))
    none = r[~both]
    if len(none):
        says = none["status_both"].astype(str).value_counts()
        what = {"infeasible": "proven: no point both models accept keeps the features' settings and the constraints",
                "not_found": "no point both models accept was found; nothing is proven either way",
                "time_limit": "the search ran out of time"}
        st.info(plain(f"{len(none):,} studied rows have no recourse valid under both: "
                      + ", ".join(f"{n:,} {s.replace('_', ' ')}" + (f" ({what[s]})" if s in what else "")
                                  for s, n in says.items()) + "."))
    show_guarantee(st, c.recourse_guarantee("a"), "each recourse under model A")
    show_guarantee(st, c.recourse_guarantee("both"), "each recourse valid under both")


def _precluded(c) -> None:
    """The studied rows precluded under A, under B and under both, per group."""
    p = c.precluded
    if not len(p) or not (p[["precluded_a", "precluded_b"]].fillna(0).to_numpy() > 0).any():
        if (c.meta.get("parameters") or {}).get("constraints"):
            st.caption("No studied row is precluded under either model: each has an action under the constraints "
                       "between features that gets the favourable outcome, or none was proven not to.")
        return
    st.subheader("Rows precluded under A and under B")
    st.caption("Precluded: it is proven that no action keeping the constraints between features (and the features' "
               "own settings) gets the row the favourable outcome from that model. \"–\": a model known by its "
               "answers proves nothing.")
    st.dataframe(precluded_shown(c), hide_index=True, key="cm_precluded")


def _study_result(ws, ens, target, c) -> None:
    """The invalidation study's findings, tables and downloads."""
    inv = c.invalidated
    (st.warning if np.isfinite(inv) and inv > 0 else st.success)(
        f"Of {int((c.rows['found_a'] == 1).sum()):,} studied rows with a recourse under model A, "
        f"{inv:.1%} would not get {plain(ws.outcome_text(target)) if ens.is_classifier else 'the outcome'} from "
        "model B by following it." if np.isfinite(inv) else "No studied row has a recourse under model A.")
    _valid_under_both(c)
    if len(c.tests) and c.tests["significant"].any():
        for t in c.tests[c.tests["significant"]].itertuples():
            how = "more" if t.gap > 0 else "less"
            st.warning(plain(f"{t.attribute} = {t.group}: recourse invalidated {abs(t.gap):.1%} {how} often than "
                             f"for {t.attribute} = {t.reference} (permutation p = {t.p_adjusted:.2g}, "
                             "Holm-adjusted)."))
    if len(c.groups):
        g = c.groups
        st.plotly_chart(_groups_figure(g), key="cm_fig")
        st.dataframe(groups_shown(g), hide_index=True, key="cm_groups")
        show_guarantee(st, c.guarantee, "these shares")
    if len(c.tests):
        st.dataframe(c.tests, hide_index=True, key="cm_tests")
    _precluded(c)
    with st.expander("Per-row results"):
        st.dataframe(c.rows, hide_index=True, key="cm_rows_table")
    d1, d2, d3 = st.columns(3)
    download(d1, "Report (HTML)", c.to_html, "model_comparison.html", "text/html", key="cm_dl_html", source=c)
    download(d2, "Per-row results (CSV)", c.rows_csv, "model_comparison_rows.csv", "text/csv", key="cm_dl_csv",
             source=c)
    download(d3, "Comparison (JSON)", c.to_json, "model_comparison.json", "application/json", key="cm_dl_json",
             source=c)


def _audits(ws, wb, X, schema, target, protected, run: dict, result_key) -> None:
    """The fairness audit of each model on the same settings, and the gaps the update changed."""
    st.subheader("Fairness audits of both models")
    st.caption("The recourse audit of each model on the same data and settings, each on a seeded sample of the "
               "rows it turns down (the Fairness audit page's audit, without rules or subgroup scan), and which "
               "gaps between groups the update opened, closed or kept (as Audit history compares two audits), "
               "each group measured against the same reference group: the largest among the rows model A turns down.")
    if st.button("Audit both models", key="cm_audit_go"):
        with user_errors("The audits could not be run"), st.spinner("Auditing model A, then model B…"):
            kw = dict(schema=schema, target=target, protected=protected, max_rows=run["max_rows"],
                      time_limit=run["time_limit"], n_jobs=run["n_jobs"], scheduler=run["scheduler"], tcrex=False,
                      local_rules_per_group=0, scan=False, n_boot=500, n_perm=1000, y=ws.y, data_name=ws.name,
                      class_names=ws.class_names)
            on_a, extra_a = ws.query_model()
            on_b, extra_b = wb.query_model()
            audit_a = run_audit(on_a, X, model_sha256=ws.model_sha256, **extra_a, **kw)
            # B's gaps against A's reference groups: each model turns down other rows, so each
            # audit's largest group can differ, and only gaps between the same groups compare
            audit_b = run_audit(on_b, X, model_sha256=wb.model_sha256, reference=audit_a.references, **extra_b, **kw)
            state.put(K.COMPARE_AUDITS, {"key": result_key, "a": audit_a, "b": audit_b})
    audits = state.get(K.COMPARE_AUDITS)
    if audits is not None and audits["key"] == result_key:
        left, right = st.columns(2)
        for col, label, au in ((left, "Model A", audits["a"]), (right, "Model B", audits["b"])):
            col.markdown(f"**{label}**")
            for line in au.summary:
                col.markdown("- " + plain(line))
            pre = precluded_table(au)
            if len(pre):
                col.caption("Rows precluded per group (proven: no action under the constraints helps)")
                col.dataframe(pre, hide_index=True, key=f"cm_audit_precluded_{label[-1]}")
        show_gap_comparison(audits["a"], audits["b"], key="cm_audit_diff", file_name="audits_a_vs_b.csv")


def _regions(ws, wb, schema, names, X) -> None:
    """Both models' exact decision regions on the same slice through a row."""
    st.subheader("Decision regions of both models")
    ens = ws.ensemble
    top = default_axes(ens)
    r1, r2, r3, r4 = st.columns(4)
    fa = names.index(r1.selectbox("Horizontal feature", names, index=kept_index("cm_fa", names, top[0]), key="cm_fa"))
    fb = names.index(r2.selectbox("Vertical feature", names, index=kept_index("cm_fb", names, top[1]), key="cm_fb"))
    row = row_picker(r3, len(X), "cm_row")
    max_regions = int(r4.number_input("Most regions drawn", 50, 20_000, kept("cm_max", 2000), step=250, key="cm_max",
                                      help="Per model. A slice with more regions is drawn in part."))
    if fa == fb:
        st.error("Choose two different features.")
        st.stop()
    x = X[row]
    view = slice_view(schema, x, (fa, fb))
    x_slice, unknown = slice_point(ens, x, (fa, fb))   # a drawn feature the row lacks: sliced with a value
    if unknown:
        st.caption(f"Row {row} has no value for {plain(' and '.join(names[j] for j in unknown))} (missing): the "
                   "slices show each model's answer for each value it could take; the row's marker sits at the "
                   "column's median.")
    with user_errors("The regions could not be computed"), st.spinner("Computing exact regions…"):
        left, right = st.columns(2)
        for col, w, label in ((left, ws, "Model A"), (right, wb, "Model B")):
            rs = slice_regions(w.ensemble, x_slice, (fa, fb), bounds={fa: view[0], fb: view[1]}, max_regions=max_regions,
                               time_limit=20.0, **_checked_on(w))
            title = (f"{label}: slice through row {row}"
                     + ("" if w.model_kind == "tree_ensemble" else " (its surrogate)"))
            fig = regions_figure(rs.regions, w.ensemble, (fa, fb), view, x=x, title=title)
            col.plotly_chart(fig, key=f"cm_regions_{label}")
            if not rs.complete:
                col.warning(f"Only the first {len(rs.regions):,} regions are drawn (limit or time reached), not "
                            "necessarily those around the row: raise 'Most regions drawn' or narrow the view.")
            show_guarantee(col, rs.guarantee, "this drawing")


def main() -> None:
    ws, ens, schema, names, X, pred = state.page_context("Compare models", CAPTION)
    _load_model_b(ws)
    held = state.get(K.COMPARE_MODEL_B)
    if held is None or held["key"] != ws.key:
        st.info("Load model B above to compare it with model A.")
        st.stop()
    wb = held["ws"]
    st.markdown(f"**Model A** · {plain(ws.name)} · {_what(ws)}  \n**Model B** · {plain(wb.name)} · {_what(wb)}")
    c1, c2 = st.columns(2)
    protected = protected_picker(c1, schema, "cm_protected", "Groups for the per-group figures; held fixed in every "
                                 "recourse.", chosen=kept("cm_protected", None))
    target = favourable_picker(c2, ens, pred, "cm", reference="the median of model A's")
    if not protected:
        st.info("Choose at least one protected attribute.")
        st.stop()
    result_key = (ws.key, wb.key, str(target), tuple(protected))
    _agreement(ws, wb, X, pred, schema, target, protected, result_key)

    st.subheader("Recourse invalidation")
    run = _study_settings(ens, pred, target)
    show_constraints(st, schema)
    _run_study(ws, wb, X, schema, target, protected, run, result_key)
    got = state.get(K.COMPARE_RESULT)
    if got is None or got["key"] != result_key:
        st.info("Run the study to see how much of model A's recourse model B honours.")
        st.stop()
    _study_result(ws, ens, target, got["c"])
    _audits(ws, wb, X, schema, target, protected, run, result_key)
    _regions(ws, wb, schema, names, X)


main()
