"""FCCA thresholds: where the model decides, from many optimal counterfactuals, and a small faithful tree."""

from __future__ import annotations

import json

import numpy as np
import streamlit as st

from core.compression import explain_flat_curves, fcca, gosdt_available
from core.figures import fcca_curves_figure, fcca_heatmap_figure
from core.intake.csvsafe import to_csv
from core.model.guarantee import with_guarantee
from core.rules.onmodel import on_model
from dashboard import state
from dashboard.share import kept, kept_index
from dashboard.ui import (
    cancel_button,
    cancel_outcome,
    download,
    graph_downloads,
    plain,
    progress_bar,
    run_kept,
    session_cluster,
    show_constraints,
    show_guarantee,
    user_errors,
)

K = state.Keys
#: the run's default time limit (seconds), stated on the page beside the button
RUN_LIMIT = 120.0
CAPTION = ("Each correctly classified row gets its optimal counterfactual (cost λ0·changes + λ1·L1 on range-scaled "
           "features); the splits they cross are the thresholds where the model really decides. Keeping only the "
           "most frequent ones (quantile Q) compresses the data into a few binary features, on which a depth-3 "
           "tree can be read (FCCA, Piccialli et al. 2023).")


def _form(ws, X) -> tuple[dict, str, bool]:
    """The run's settings (FCCA's arguments), where the labels come from, and whether to run."""
    have_labels = ws.y is not None
    with st.form("fcca_form"):
        c1, c2, c3, c4 = st.columns(4)
        p0 = c1.number_input("p0 (min. probability)", 0.0, 1.0, kept("fcca_p0", 0.5), 0.05, key="fcca_p0")
        p1 = c2.number_input("p1 (max. probability)", 0.0, 1.0, kept("fcca_p1", 1.0), 0.05, key="fcca_p1",
                             help="The paper uses 1, or 0.7 on large data to skip the rows far from the boundary.")
        lam0 = c3.number_input("λ0 (per feature changed)", 0.0, 10.0, kept("fcca_l0", 0.1), 0.05, key="fcca_l0")
        lam1 = c4.number_input("λ1 (L1, range-scaled)", 0.0, 10.0, kept("fcca_l1", 1.0), 0.1, key="fcca_l1")
        d1, d2, d3, d4, d5 = st.columns(5)
        lam2 = d1.number_input("λ2 (squared L2)", 0.0, 10.0, kept("fcca_l2", 0.0), 0.1, key="fcca_l2")
        max_points = int(d2.number_input("At most this many rows", 10, 20000, kept("fcca_max", min(1000, len(X))), 10,
                                         key="fcca_max",
                                         help="An even spread of the eligible rows; every one costs a solve."))
        limit = d3.number_input("Seconds per counterfactual", 1.0, 120.0, kept("fcca_limit", 10.0), 1.0, key="fcca_limit")
        run_limit = d4.number_input("Seconds for the run", 5.0, 3600.0, kept("fcca_run_limit", RUN_LIMIT), 5.0, key="fcca_run_limit",
                                    help="The run stops at this time: no counterfactual starts after it, and the "
                                         "rows not reached (an even spread of the rest) are left out and counted.")
        jobs = int(d5.number_input("Parallel processes", 1, 8, kept("fcca_jobs", 2), key="fcca_jobs"))
        sources = ["labels in the data", "the model's predictions"] if have_labels else ["the model's predictions"]
        label_src = st.radio("Labels", sources, index=kept_index("fcca_labels", sources), horizontal=True,
                             key="fcca_labels",
                             help="M keeps the rows the model classifies correctly (the paper uses the true "
                                  "labels).")
        go = st.form_submit_button("Compute counterfactuals and thresholds", type="primary")
    return (dict(p0=p0, p1=p1, lambda0=lam0, lambda1=lam1, lambda2=lam2, max_points=max_points, n_jobs=jobs,
                 time_limit=float(limit), run_time_limit=float(run_limit)), label_src, go)


def _run(ws, ens, schema, X, pred) -> None:
    """The settings, the run (once per press) and the result kept."""
    kw, label_src, go = _form(ws, X)
    y_used = ws.y.to_numpy() if label_src == "labels in the data" else pred
    cluster = session_cluster()
    on = {}
    if ws.model_kind != "tree_ensemble":
        st.caption("FCCA's thresholds are the splits its counterfactuals cross, so they are computed on the "
                   f"model's tree-ensemble surrogate (agreement {100 * ws.surrogate.fidelity:.1f}% on held-out "
                   "rows): they are the surrogate's thresholds, not read off the model; every counterfactual is "
                   "checked on the model itself, and each threshold says how many of its pairs the model accepts.")
        solve_on, extra = ws.query_model()
        on = {"model": on_model(solve_on, **extra), "surrogate": ws.surrogate}
    st.caption(f"The run stops after {kw['run_time_limit']:.0f} s (Seconds for the run); the rows not reached by "
               "then are left out and counted below.")
    if cluster:
        st.caption(f"Counterfactuals run on the Dask cluster at {cluster} (set on the Fairness audit page; clear "
                   "it there to run on this machine).")
    if go:
        cancel = st.empty()
        cancel_button(cancel, "fcca_cancel", "Stops the run; the previous result, if any, is kept.")
        bar = st.progress(0.0, text="Selecting rows…")
        with user_errors("FCCA could not be run"):
            res = fcca(ens, X, y_used, **kw, **on, schema=schema, scheduler=cluster or None,
                       progress=progress_bar(bar, "counterfactuals"))
            state.put(K.FCCA_RUN, {"key": ws.key, "result": res, "trees": {}})
            run_kept("fcca_cancel")
        bar.empty()
        cancel.empty()
    else:
        cancel_outcome("fcca_cancel", "the previous result" if state.get(K.FCCA_RUN) else None)


def _counts(ws, res) -> None:
    m = st.columns(5)
    m[0].metric("Eligible rows (M)", f"{res.n_candidates:,}")
    m[1].metric("Counterfactuals", f"{len(res.rows):,}")
    m[2].metric("Thresholds", len(res.thresholds))
    m[3].metric("Features with thresholds", res.thresholds.index.nunique())
    m[4].metric("Time", f"{res.elapsed:.1f} s")
    not_found = {k: v for k, v in res.statuses.items() if k not in ("optimal", "feasible")}
    if not_found:
        st.caption(f"Rows without a counterfactual (left out): {not_found}.")
    show_guarantee(st, res.guarantee, "this set of thresholds")
    show_constraints(st, ws.schema)


def _tree_settings() -> tuple[float, str, int]:
    t1, t2, t3 = st.columns([2, 1, 1])
    Q = t1.slider("Quantile Q (keep thresholds used by at least the Q-quantile of counterfactuals)", 0.0, 1.0,
                  kept("fcca_q", 0.0), 0.05, key="fcca_q")
    methods = ["GOSDT (optimal)", "CART"] if gosdt_available() else ["CART"]
    method_label = t2.radio("Tree", methods, index=kept_index("fcca_method", methods), horizontal=True,
                            key="fcca_method")
    depth = int(t3.select_slider("Depth", [1, 2, 3, 4], value=kept("fcca_depth", 3), key="fcca_depth"))
    return Q, "gosdt" if method_label.startswith("GOSDT") else "cart", depth


def _views(res, Q, depth, tree, tree_at) -> None:
    """The rates, the heatmap, the curves over Q and the tree."""
    k = st.columns(5)
    k[0].metric("Thresholds kept", int(res.kept(Q).sum()))
    k[1].metric("Compression rate", f"{res.compression_rate(Q):.3f}")
    k[2].metric("Inconsistency rate", f"{res.inconsistency_rate(Q):.3f}")
    if tree is not None:
        k[3].metric("Tree accuracy (held out)", f"{tree.accuracy:.3f}")
        k[4].metric("Fidelity to the model", f"{tree.fidelity:.3f}")
    levels, text = res.heatmap()
    st.plotly_chart(fcca_heatmap_figure(levels, text, Q), key="fcca_heatmap")
    left, right = st.columns([3, 2])
    with left:
        curves = res.curves(np.round(np.linspace(0, 1, 11), 2))
        with user_errors("The tree curve could not be computed"):
            fits = [tree_at(q) for q in curves["Q"]]
            curves["tree accuracy"] = [f.accuracy for f in fits]
            curves["tree fidelity"] = [f.fidelity for f in fits]
        st.plotly_chart(fcca_curves_figure(curves, Q), key="fcca_curves")
        flat = explain_flat_curves(res, curves)
        if flat:
            st.caption(plain(flat))
    with right:
        if tree is not None:
            grown = tree.depth      # the tree's own depth: a split that would not help is not made
            st.markdown(f"**Depth-{grown} tree at Q = {Q:.2f}** ({tree.method.upper()}, {tree.n_leaves} leaves"
                        + (f", depth {depth} allowed" if grown < depth else "")
                        + f", trained on {tree.n_train} rows, measured on {tree.n_test})")
            st.graphviz_chart(tree.to_graphviz())
            graph_downloads(tree.to_graphviz(), "fcca_tree", "fc_fig")
            if tree.note:
                st.caption(plain(tree.note))


def _downloads(res, Q, method, depth, tree) -> None:
    all_t = res.thresholds.reset_index().assign(**{"kept up to Q": res.max_q().to_numpy()})
    st.dataframe(all_t[res.kept(Q)], hide_index=True, key="fcca_table")

    g = res.guarantee

    def discretised_csv() -> str:   # built when downloaded, not on every move of the slider
        disc = res.discretize(None, Q)
        disc.insert(0, "label", res.y)
        return to_csv(with_guarantee(disc, g))

    e1, e2, e3, e4 = st.columns(4)
    download(e1, "Thresholds (CSV)", to_csv(with_guarantee(all_t, g)), "fcca_thresholds.csv", "text/csv",
             key="fcca_dl_t")
    download(e2, f"Discretised data at Q={Q:.2f} (CSV)", discretised_csv, "fcca_discretised.csv",
             "text/csv", key="fcca_dl_d", source=res, token=round(float(Q), 6))
    download(e3, "Counterfactual pairs (CSV)", lambda: to_csv(with_guarantee(res.pairs_frame(), g)), "fcca_pairs.csv",
             "text/csv", key="fcca_dl_p", source=res)
    if tree is not None:
        fitted = tree

        def tree_json() -> str:    # built once per tree (Q, method, depth), kept with the result
            return json.dumps({
                "Q": Q, "method": fitted.method, "depth": depth, "accuracy": fitted.accuracy,
                "fidelity": fitted.fidelity, "text": fitted.to_text(), "graphviz": fitted.to_graphviz(),
                "fcca": {**res.params, **res.summary()}, "guarantee": g.to_dict()}, indent=2, default=str)

        download(e4, "Tree (JSON)", tree_json, "fcca_tree.json", "application/json", key="fcca_dl_tree", source=res,
                 token=(round(float(Q), 4), method, depth))


def main() -> None:
    ws, ens, schema, names, X, pred = state.page_context("FCCA thresholds", CAPTION)
    if not ens.is_classifier:
        st.info("FCCA explains a classifier's decisions; this model is a regressor. Load a classifier on the "
                "Data & model page.")
        st.stop()
    _run(ws, ens, schema, X, pred)
    run = state.get(K.FCCA_RUN)
    if run is None or run["key"] != ws.key:
        st.info("Press the button to compute the counterfactuals (once); Q, the tree and the views then update "
                "instantly from them.")
        st.stop()
    res = run["result"]
    _counts(ws, res)
    if len(res.thresholds) == 0:
        st.warning("No counterfactual crossed a split: there are no thresholds to show.")
        st.stop()
    Q, method, depth = _tree_settings()

    def tree_at(q: float):
        key = (round(q, 4), method, depth)
        if key not in run["trees"]:
            run["trees"][key] = res.fit_tree(q, depth, method)
        return run["trees"][key]

    tree = None
    with user_errors("The tree could not be fitted"):
        tree = tree_at(Q)
    _views(res, Q, depth, tree, tree_at)
    _downloads(res, Q, method, depth, tree)


main()
