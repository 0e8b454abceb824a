"""Counterfactual rules: ranges of values that change a decision with a stated probability."""

from __future__ import annotations

import json
from functools import partial

import numpy as np
import pandas as pd
import streamlit as st

from core.counterfactual import most_common_outcome, output_mask
from core.figures import rule_intervals_figure
from core.intake.columns import box_record, columns_of
from core.intake.csvsafe import to_csv
from core.model.guarantee import with_guarantee
from core.rules import CounterfactualRules, region_from_filter, rule_text
from core.rules.onmodel import on_model
from core.rules.results import rules_guarantee
from core.shown import below_text
from dashboard import state
from dashboard.caching import session_cached
from dashboard.share import kept
from dashboard.ui import big_table_gate, download, plain, show_constraints, show_guarantee, user_errors
from dashboard.widgets import column_picker, row_picker, target_picker

K = state.Keys
CAPTION = ("Instead of one point, a rule: ranges for a few features such that, the other features kept, the "
           "outcome becomes the target with probability at least π_C. The features to change are the smallest "
           "set whose free variation reaches the target with probability π (CDP); both probabilities are "
           "estimated by a random forest fitted on the model's outputs (Amoukou & Brunel).")


def _fit(ws, X, pred, n_estimators, max_depth, max_rows, groups, names):
    solve_on, extra = ws.query_model()           # every rule found is applied at its edge and checked on the model
    return lambda: CounterfactualRules(n_estimators=n_estimators, max_depth=max_depth, groups=groups,
                                       random_state=0, max_rows=max_rows).fit(
        X, pred, feature_names=names, model=on_model(solve_on, **extra), schema=ws.schema)


def _levels() -> tuple[float, float, int, dict]:
    """The levels π and π_C, the features searched, and the surrogate's settings."""
    c1, c2, c3, c4 = st.columns(4)
    pi = c1.select_slider("CDP level π", [0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95], value=kept("cr_pi", 0.9), key="cr_pi",
                          help="A set of features qualifies when letting them vary reaches the target with this "
                               "probability.")
    pi_c = c2.select_slider("Rule level π_C", [0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.99], value=kept("cr_pic", 0.9),
                                key="cr_pic",
                            help="A rule must give the target with at least this probability.")
    top_k = int(c3.number_input("Features searched (top k)", 1, 15, kept("cr_topk", 10), key="cr_topk",
                                help="The search for the features to change runs over the k features the "
                                     "surrogate uses most (2^k subsets)."))
    with c4.popover("Surrogate"):
        n_est = int(st.number_input("Trees", 5, 200, kept("cr_trees", 20), key="cr_trees"))
        depth = int(st.number_input("Max depth", 2, 30, kept("cr_depth", 10), key="cr_depth"))
        max_rows = int(st.number_input("Rows for the probabilities", 1000, 1_000_000, kept("cr_rows", 8000), step=1000,
                                       key="cr_rows", help="CDP and CRP are estimated on at most this many rows (a "
                                       "fixed sample); more is slower and steadier."))
    return pi, pi_c, top_k, dict(n_est=n_est, depth=depth, max_rows=max_rows)


def _actionable(schema) -> dict:
    """Fixed, increase-only and decrease-only features, preset from the schema's actionability."""
    preset = schema.by_actionability()       # the schema's actionability, as optimal_cf
    a1, a2, a3 = st.columns(3)
    fixed = column_picker(a1, "Fixed features (never part of a rule)", schema, preset["fixed"], "cr_fixed",
                          chosen=kept("cr_fixed", None))
    increase = column_picker(a2, "Increase only", schema, preset["increase"], "cr_inc", groups_too=False,
                             chosen=kept("cr_inc", None))
    decrease = column_picker(a3, "Decrease only", schema, preset["decrease"], "cr_dec", groups_too=False,
                             chosen=kept("cr_dec", None))
    return dict(fixed=fixed, increase_only=increase, decrease_only=decrease)     # names: the rules take them


def _surrogate(ws, ens, X, pred, names, groups, fit: dict):
    """The fitted surrogate forest (shared by every query), or the page stops."""
    cr = None
    if not big_table_gate(len(X), "Fit the surrogate forest", f"cr_go_{ws.key}"):
        st.stop()
    with user_errors("The surrogate could not be fitted"), st.spinner("Fitting the surrogate forest…"):
        cr = session_cached("cr_surrogate", (ws.key, fit["n_est"], fit["depth"], fit["max_rows"]),
                            _fit(ws, X, pred, fit["n_est"], fit["depth"], fit["max_rows"], groups, names))
    return cr


def _local_tab(ws, ens, X, pred, names, groups, cr, pi, pi_c, top_k, actionable, levels) -> None:
    r1, r2 = st.columns([1, 3])
    row = row_picker(r1, len(X), "cr_row")
    r2.markdown(f"Prediction for row {row}: **{plain(ws.outcome_text(pred[row]))}**")
    target = target_picker(st, ens, pred, pred[row], "cr")
    if st.button("Find the counterfactual rule", type="primary", key="cr_go"):
        with user_errors("No counterfactual rule"):
            rule = cr.local_rule(X[row], target, **actionable, **levels)
            samples = cr.sample_counterfactuals(X[row], rule, n=5)
            state.put(K.RULES_RESULT, (row, target, pi, pi_c, actionable, rule, samples))
    got = state.get(K.RULES_RESULT)
    if got is not None:
        g_row, g_target, g_pi, g_pic, g_act, rule, samples = got
        if (g_row, g_target, g_pi, g_pic, g_act) != (row, target, pi, pi_c, actionable):
            st.caption("This result is for an earlier query; press the button to compute the current one.")
        _local_rule(ws, X, names, groups, cr, top_k, got)


def _local_rule(ws, X, names, groups, cr, top_k, got) -> None:
    """A local rule found: its figures, warnings, text, alternatives and samples."""
    g_row, g_target, g_pi, g_pic, g_act, rule, samples = got
    m = st.columns(4)
    cols = ws.columns
    to_change = columns_of(cols, rule.constrained or rule.features)
    m[0].metric("Columns to change", len(to_change), help=plain(", ".join(to_change)))
    m[1].metric("CDP of the set", f"{rule.cdp:.2f}")
    m[2].metric("Rule probability (CRP)", f"{rule.crp:.2f}")
    m[3].metric("Time", f"{rule.elapsed * 1000:.0f} ms")
    if not rule.divergent:
        searched = len(cr.candidate_units(fixed=g_act["fixed"], top_k=top_k))
        st.warning(f"No set of the {searched} feature{'s' * (searched != 1)} that could be searched (the top "
                   f"{top_k} the surrogate uses, less the fixed ones and those it never splits on) reaches "
                   f"CDP {g_pi}; the rule below uses the set the search found over every changeable feature "
                   f"(its CDP {below_text(rule.cdp, g_pi)}).")
    if rule.below_pi_c:
        st.warning(f"Below pi_C: no region reaches the rule probability {g_pic}; this is the best rule found "
                   f"(CRP {below_text(rule.crp, g_pic)}), so its counterfactuals reach {plain(ws.outcome_text(g_target))} "
                   "less surely. Lower pi_C or "
                   "allow more features to change for a surer rule.")
        st.caption(plain(rule.note))
    (st.info if rule.below_pi_c else st.success)(
        f"**If** {plain(rule.to_text(names, groups))}, the other features kept, **then** the outcome is "
        f"{plain(ws.outcome_text(g_target))} with probability {rule.crp:.2f}.")
    show_guarantee(st, rule.guarantee, "this rule")
    show_constraints(st, ws.schema)
    if rule.unreachable_cells:
        st.caption(f"{rule.unreachable_cells} region{'s' * (rule.unreachable_cells != 1)} this row cannot reach under "
                   "the constraints between features (the other features kept) dropped as unreachable; the rule and "
                   "its alternatives can all be reached.")
    if len(rule.divergent_sets) > 1:
        st.caption("Other minimal sets: " + plain("; ".join(
            f"{{{', '.join(columns_of(cols, s))}}} (CDP {c:.2f})" for s, c in rule.divergent_sets[1:6])))
    feats = list(rule.constrained) or list(rule.features)
    st.plotly_chart(rule_intervals_figure(X, rule, feats, names, X[g_row], rule.alternatives[:3], groups),
                    key="cr_fig")
    for k, alt in enumerate(rule.alternatives, start=1):
        text = rule_text(rule.features, alt.lower, alt.upper, names, groups)
        st.markdown(f"**Alternative {k}** (CRP {alt.crp:.2f}): {plain(text)}")
    _samples(ws, X, names, groups, cr, got, to_change)


def _samples(ws, X, names, groups, cr, got, to_change) -> None:
    """The counterfactual samples inside a local rule, fed back to the model, and the downloads."""
    g_row, g_target, _, _, _, rule, samples = got
    cols = ws.columns
    st.markdown("**Counterfactual samples** inside the rule (the most plausible found; each fed back to the model)")
    out = ws.predict(samples)
    table = ws.analyst_view(samples, [g_row] * len(samples))   # the analyst's columns, raw units
    before = ws.analyst_view(X[g_row][None, :], [g_row]).iloc[0]
    changed = [c for c in table.columns if any(str(v) != str(before[c]) for v in table[c])]
    table.insert(0, "model output", [ws.outcome_text(v) for v in out])
    table.insert(1, "reaches target", output_mask(np.asarray(out), g_target))
    table.insert(2, "inlier", cr.inlier(samples))
    st.dataframe(table[["model output", "reaches target", "inlier", *changed]], hide_index=True, key="cr_samples")
    d1, d2 = st.columns(2)
    saved = {"row": g_row, "outcome": ws.outcome_text(g_target), "columns_to_change": to_change,
             "rule_text": rule.to_text(names, groups)} | rule.to_dict(names, partial(box_record, cols)) | {
             "guarantee": rule.guarantee.to_dict()}
    download(d1, "Download the rule (JSON)", json.dumps(saved, indent=2),
             "counterfactual_rule.json", "application/json", key="cr_dl_json")
    download(d2, "Download the samples (CSV)", to_csv(with_guarantee(table, rule.guarantee)),
             "counterfactual_samples.csv", "text/csv", key="cr_dl_csv")


def _regional_tab(ws, ens, pred, names, groups, cr, actionable, levels) -> None:
    st.markdown("A rule for a whole sub-population: ranges that move its rows to the target, their other "
                "features staying within the sub-population's bounds.")
    source = st.radio("Sub-populations", ["Leaves of a shallow tree", "A filter I write"], horizontal=True,
                      key="cr_source")
    reg_target = target_picker(st, ens, pred, most_common_outcome(ens, pred), "crr")
    if source == "Leaves of a shallow tree":
        tree_depth = st.slider("Tree depth", 1, 5, kept("cr_tree_depth", 3), key="cr_tree_depth")
        text = None
    else:
        text = st.text_input("Filter", placeholder=f"{names[0]} > 0 and {names[-1]} <= 1", key="cr_filter",
                             help="Clauses `feature op number` joined by `and`; op is <, <=, >, >=, ==. "
                                  "Quote names with spaces in backticks.")
    if st.button("Find regional rules", key="cr_reg_go"):
        with user_errors("No regional rules"):
            if text is None:
                regions = cr.propose_regions(reg_target, max_depth=int(tree_depth))
                if not regions:
                    raise ValueError("Every leaf of the shallow tree already has the target outcome; pick "
                                     "another target or a deeper tree.")
            else:
                if not text.strip():
                    raise ValueError("Write a filter first, e.g. `Age >= 30 and Income < 50000`.")
                regions = [region_from_filter(text, names)]
            rules = cr.regional_rules(regions, reg_target, **actionable, **levels)
            state.put(K.RULES_REGIONAL, (pd.DataFrame([{
                "sub-population": r.region_text(names, groups), "rows": r.n_rows, "coverage": round(r.coverage, 4),
                "rule": r.to_text(names, groups) if r.found else "—", "CDP": round(r.cdp, 3),
                "CRP": round(r.crp, 3) if r.found else None, "rows moved to its edge": r.edge_rows,
                "accepted by the model at its edge": round(r.edge_accepted, 3) if r.edge_rows else None,
                **({"rules dropped as unreachable": len(r.unreachable)} if r.params.get("constraints") else {}),
                "note": r.note} for r in rules]), rules_guarantee(rules)))
    got = state.get(K.RULES_REGIONAL)
    if got is not None:
        reg, g = got
        st.dataframe(reg, hide_index=True, key="cr_reg_table")
        for _, r in reg.iterrows():          # why, beside the table (its note column is far right)
            where, none = r["sub-population"], r["rule"] == "—"
            if none or r["note"]:
                st.caption(plain((f"No rule for {where}" if none else f"The rule for {where}")
                                 + (f": {r['note']}" if r["note"] else ".")))
        show_guarantee(st, g, "this set of regional rules")
        show_constraints(st, ws.schema)
        if "rules dropped as unreachable" in reg:
            k = int(reg["rules dropped as unreachable"].sum())
            st.caption(f"{k} rule{'s' * (k != 1)} found dropped as unreachable: none of their sub-population's rows "
                       "can reach them under the constraints between features (the other features kept).")
        download(st, "Download regional rules (CSV)", to_csv(with_guarantee(reg, g)), "regional_rules.csv",
                 "text/csv", key="cr_reg_dl")


def main() -> None:
    ws, ens, schema, names, X, pred = state.page_context("Counterfactual rules", CAPTION)
    pi, pi_c, top_k, fit = _levels()
    actionable = _actionable(schema)
    groups = list(schema.groups().values())
    cr = _surrogate(ws, ens, X, pred, names, groups, fit)
    levels = dict(pi=float(pi), pi_c=float(pi_c), top_k=top_k)      # per query: the fitted forest is shared
    if cr is None:
        st.stop()
    n_est, depth = fit["n_est"], fit["depth"]
    st.caption(f"Surrogate: {n_est} trees of depth ≤ {depth}, fitted in {cr.elapsed_:.2f} s; it reproduces the "
               f"model on {cr.fidelity_:.1%} of the rows" if ens.is_classifier else
               f"Surrogate: {n_est} trees of depth ≤ {depth}, R² {cr.fidelity_:.3f} against the model.")
    tab_local, tab_regional = st.tabs(["One row", "Sub-populations"])
    with tab_local:
        _local_tab(ws, ens, X, pred, names, groups, cr, pi, pi_c, top_k, actionable, levels)
    with tab_regional:
        _regional_tab(ws, ens, pred, names, groups, cr, actionable, levels)


main()
