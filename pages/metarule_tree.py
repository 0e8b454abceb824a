"""Metarule tree (T-CREx): global rules of recourse and for whom each is the best option."""

from __future__ import annotations

import json
from functools import partial

import numpy as np
import streamlit as st

from core.counterfactual import rows_to_move
from core.figures import change_keep_counts, change_keep_figure, rule_box_figure
from core.intake.columns import box_record
from core.rules.onmodel import on_model
from core.tcrex import TCREx
from dashboard import state
from dashboard.caching import session_cached
from dashboard.share import kept
from dashboard.ui import big_table_gate, download, graph_downloads, plain, show_constraints, show_guarantee, user_errors
from dashboard.widgets import actionability_preset, favourable_picker, row_picker

CAPTION = ("Counterfactual rules: regions where the model gives the target outcome for at least τ of the data "
           "they hold (and that hold at least ρ of the data). The metarule tree says, for every input, which "
           "rule is its best option: the fewest features to change, then the most populated rule (T-CREx).")


def _rules(ws, ens, schema, names, X, pred):
    """The settings, the fitted rules and metarules (or the page stops), and the target."""
    c1, c2, c3, c4 = st.columns(4)
    target = favourable_picker(c1, ens, pred, "mt", label="Target outcome", sides=True)
    tau = c2.select_slider("Accuracy τ", [0.8, 0.85, 0.9, 0.95, 0.99], value=kept("mt_tau", 0.9), key="mt_tau")
    rho = c3.select_slider("Feasibility ρ", [0.005, 0.01, 0.02, 0.05, 0.1], value=kept("mt_rho", 0.02), key="mt_rho")
    n_trees = int(c4.number_input("Surrogate trees", 1, 10, kept("mt_trees", 1), key="mt_trees"))
    groups = list(schema.groups().values())
    tc = None
    if not big_table_gate(len(X), "Learn the rules and metarules", f"mt_go_{ws.key}"):
        st.stop()
    # the feature settings' fixed, increase-only and decrease-only columns: a row is prescribed
    # only a rule it can reach keeping them (a protected column is fixed)
    roles = actionability_preset(schema, names)
    acts = dict(fixed=roles["fixed"], increase_only=roles["increase"], decrease_only=roles["decrease"])
    with user_errors("The rules could not be learned"), st.spinner("Learning rules and metarules…"):
        solve_on, extra = ws.query_model()        # every rule is applied at its edge and checked on the model
        tc = session_cached("tcrex", (ws.key, str(target), tau, rho, n_trees, str(sorted(acts.items()))),
                            lambda: TCREx(rho=rho, tau=tau, n_trees=n_trees, groups=groups, random_state=0).fit(
                                X, pred, target, feature_names=names, model=on_model(solve_on, **extra),
                                schema=schema, **acts))
    if any(acts.values()):
        st.caption(plain("Each row is prescribed only a rule it can reach as the feature settings allow: "
                         + "; ".join(f"{what} {', '.join(cols)}" for what, cols in
                                     (("fixed", acts["fixed"]), ("only up", acts["increase_only"]),
                                      ("only down", acts["decrease_only"])) if cols) + "."))
    if tc is None:
        st.stop()
    return tc, target


def _unreachable(tc) -> None:
    """Under constraints between features: the rules a row cannot reach, dropped for it."""
    if getattr(tc, "reach_", None) is None:
        return
    lost = sum(r.unreachable_rows for r in tc.rules_)
    dropped = tc.result_.params.get("unreachable_rules", [])
    if not lost:
        st.caption("Every row lacking the target can reach the rule its metarule gives it under these constraints.")
        return
    per_rule = sum(r.unreachable_rows > 0 for r in tc.rules_)
    st.caption(plain((f"Dropped as unreachable for every row lacking the target their metarule gives them to: "
                      f"{', '.join(dropped)}. " if dropped else "")
                     + f"{per_rule} rule{'s' * (per_rule != 1)} dropped as unreachable for some rows: {lost:,} "
                     f"row{'s' * (lost != 1)} lacking the target cannot reach the rule their metarule gives them "
                     "under these constraints and are prescribed the cheapest rule they can reach, or none (the rule "
                     "table counts them per rule)."))


def _explain_row(ws, tc, X, pred, to_move) -> None:
    """The metarule tree with one row's path, and what it prescribes for the row."""
    row = row_picker(st, len(X), "mt_row", label="Explain row", default=int(next(iter(to_move), 0)))
    st.info(f"Row {row} (prediction {plain(ws.outcome_text(pred[row]))}): {plain(tc.recourse_text(X[row], pred[row]))}")
    tree_dot = tc.to_graphviz(highlight=tc.decision_path(X[row]))
    st.graphviz_chart(tree_dot)
    graph_downloads(tree_dot, "metarule_tree", "mt_fig")


def _what_rules_ask(tc, names, X, pred, to_move) -> None:
    """What the rules ask of the rows not yet at the target, and one rule drawn."""
    assigned = tc.explain(X)
    left, right = st.columns(2)
    with left:
        st.markdown("**What the rules ask** (rows not yet at the target, up to 500)")
        rows = to_move[:500]
        counts = change_keep_counts(tc, X[rows]) if len(rows) else None
        if counts is not None and len(counts):
            st.plotly_chart(change_keep_figure(counts), key="mt_counts")
    with right:
        two = [i for i, r in enumerate(tc.rules_) if len(r.bounded) == 2]
        k = st.selectbox("Rule to draw", range(len(tc.rules_)), index=two[0] if two else 0,
                         format_func=lambda i: f"R{i}", key="mt_rule")
        r = tc.rules_[k]
        feats = list(r.bounded)
        if len(feats) == 2:
            chosen = np.flatnonzero(assigned == k)[:12]
            st.plotly_chart(rule_box_figure(X, pred, r, (feats[0], feats[1]), names, chosen), key="mt_box")
        else:
            st.caption(f"R{k} bounds {len(feats)} feature(s); the 2-D view (Fig. 8c) is drawn for rules on two "
                       "features.")


def main() -> None:
    ws, ens, schema, names, X, pred = state.page_context("Metarule tree", CAPTION)
    tc, target = _rules(ws, ens, schema, names, X, pred)
    to_move = rows_to_move(ens, target, pred)        # the rows the rules are for
    m = st.columns(4)
    m[0].metric("Rules", len(tc.rules_))
    m[1].metric("Metarules", len(tc.metarules_))
    m[2].metric("Grid cells", f"{tc.n_cells_:,}")
    m[3].metric("Fit time", f"{tc.result_.elapsed * 1000:.0f} ms")
    show_guarantee(st, tc.result_.guarantee, "this set of rules")
    show_constraints(st, ws.schema)
    _unreachable(tc)
    _explain_row(ws, tc, X, pred, to_move)
    st.dataframe(tc.rule_table(X), hide_index=True)
    _what_rules_ask(tc, names, X, pred, to_move)
    d1, d2 = st.columns(2)
    outcome = ws.outcome_text(target) if ens.is_classifier else None
    download(d1, "Download rules and metarules (text)", tc.to_text(outcome), "tcrex_rules.txt", "text/plain",
             key="mt_dl_txt")
    download(d2, "Download rules and metarules (JSON)",
             json.dumps(tc.to_dict(partial(box_record, ws.columns), outcome), indent=2), "tcrex_rules.json",
             "application/json", key="mt_dl_json")


main()
