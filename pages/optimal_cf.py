"""Optimal counterfactual: the smallest change that flips a decision, proven optimal (OCEAN).

One row's query runs in a thread of its own (:mod:`dashboard.jobs`): while it runs, the
page shows the best valid point's cost, the proven lower bound and the gap as the
solver improves them (redrawn by the run that started it, then by a polling fragment),
with a Stop button that keeps the best point with its gap, on the page and in the export.
"""

from __future__ import annotations

import json
import time
from itertools import count
from typing import Any, Iterator

import numpy as np
import pandas as pd
import streamlit as st

from core.counterfactual import default_target, favourable_default, rows_at, rows_to_move
from core.figures import counterfactual_changes_figure, counterfactual_table
from core.intake.columns import (
    MISSING,
    NONE,
    apply_values,
    column_values,
    recourse_frame,
    result_record,
    values_beside,
)
from core.intake.csvsafe import to_csv
from core.intake.workspace import changes_line
from core.model.guarantee import with_guarantee
from core.optimal import BACKENDS, optimal_counterfactual
from core.optimal.batch import batch_counterfactuals
from core.shown import approx_text, number_text, percent_text
from dashboard import jobs, state
from dashboard.caching import plausibility_model
from dashboard.share import kept, kept_index
from dashboard.ui import download, plain, progress_bar, session_cluster, show_constraints, show_guarantee, user_errors
from dashboard.widgets import actionability_preset, column_picker, row_picker, target_picker


class _Page:
    """What the page reads from the workspace, and a counter for unique element keys."""

    LIVE_EVERY_S = 0.5        # how often the running query's figures are refreshed
    SPARE_S = 30.0            # the run that starts a query waits its time limit and this for its answer

    def __init__(self, ws: Any, ens: Any, schema: Any, names: list[str], X: np.ndarray, pred: np.ndarray) -> None:
        self.ws, self.ens, self.schema, self.names, self.X, self.pred = ws, ens, schema, names, X, pred
        self.shown: Iterator[int] = count()


def _settings(p: _Page, prefix: str):
    """The query settings shared by both tabs; returns a dict of keyword arguments."""
    schema, names = p.schema, p.names
    c1, c2, c3, c4 = st.columns(4)
    norm_name = c1.selectbox("Cost", ["l1", "l0", "l2", "mix"], key=f"{prefix}_norm",
                             index=kept_index(f"{prefix}_norm", ["l1", "l0", "l2", "mix"]),
                             help="l1: sum of scaled changes · l0: number of changed features · "
                                  "l2: squared Euclidean · mix: λ0·l0 + λ1·l1 + λ2·l2")
    # the weights are always in the form: a form sends its widgets only on submit, so weights shown
    # once "mix" is picked would appear after the first query, which ran on the defaults unseen
    with st.expander("Weights of the mix cost (used when Cost is mix)", expanded=norm_name == "mix"):
        m1, m2, m3 = st.columns(3)
        weights = {"l0": m1.number_input("λ0", 0.0, 100.0, kept(f"{prefix}_l0", 0.1), key=f"{prefix}_l0"),
                   "l1": m2.number_input("λ1", 0.0, 100.0, kept(f"{prefix}_l1", 1.0), key=f"{prefix}_l1"),
                   "l2": m3.number_input("λ2", 0.0, 100.0, kept(f"{prefix}_l2", 0.0), key=f"{prefix}_l2")}
    norm: object = weights if norm_name == "mix" else norm_name
    limit = c2.number_input("Time limit (s)", 1.0, 600.0, kept(f"{prefix}_limit", 30.0), key=f"{prefix}_limit")
    backend = c3.selectbox("Solver", BACKENDS, key=f"{prefix}_backend", index=kept_index(f"{prefix}_backend", BACKENDS),
                           help="auto: Gurobi when a full licence is installed, else OR-Tools CP-SAT. boxsearch and "
                                "lpbox: our own branch and bound (lpbox bounds each box by a linear program; "
                                "a sum of costs).")
    plaus = c4.checkbox("Plausible only", value=kept(f"{prefix}_plaus", False), key=f"{prefix}_plaus",
                        help="Require the counterfactual to look like the target class's rows "
                             "(Isolation Forest; 10% of them count as outliers).")
    preset = actionability_preset(schema, names)
    a1, a2, a3 = st.columns(3)
    fixed = column_picker(a1, "Fixed", schema, preset["fixed"], f"{prefix}_fixed", chosen=kept(f"{prefix}_fixed", None))
    inc = column_picker(a2, "Increase only", schema, preset["increase"], f"{prefix}_inc", groups_too=False,
                        chosen=kept(f"{prefix}_inc", None))
    dec = column_picker(a3, "Decrease only", schema, preset["decrease"], f"{prefix}_dec", groups_too=False,
                        chosen=kept(f"{prefix}_dec", None))
    return dict(schema=schema, norm=norm, fixed=fixed, increase_only=inc, decrease_only=dec,
                backend=backend, time_limit=float(limit)), plaus


def _target_widget(p: _Page, prefix: str, row_pred):
    return target_picker(st, p.ens, p.pred, row_pred, prefix)


def _plausibility(p: _Page, target):
    rows = p.X[rows_at(p.ens, target, p.pred)]
    return plausibility_model(p.ws.key, str(target), 0.1, rows)


def _highlight(table: pd.DataFrame):
    return table.style.apply(lambda r: ["background-color: #fde9c9" if r["changed"] else "" for _ in r], axis=1)


def _what_if(p: _Page, row: int) -> np.ndarray:
    """The row in the analyst's columns, editable (a category column is one pick among its
    categories, never two at once); returned in the model's features."""
    ws, X = p.ws, p.X
    cols = ws.columns
    values = column_values(cols, X[row])
    grid = st.columns(4)
    edited = {}
    for k, c in enumerate(cols):
        where, key = grid[k % 4], f"ocf_wi_{row}_{k}"
        if c.categories is not None:
            options = [*c.categories, *([NONE] if values[c.name] == NONE else [])]
            edited[c.name] = where.selectbox(plain(c.name), options, index=options.index(values[c.name]), key=key)
        elif c.missing is not None:      # a number that may be missing: its value, or "missing" ticked
            gone = st.session_state.get(f"{key}_missing", values[c.name] == MISSING)   # the tick below, as set
            number = where.number_input(plain(c.name), value=float(X[row][c.features[0]]), format="%g", key=key,
                                        disabled=gone, help="Untick “missing” below to give this value."
                                        if gone else None)
            gone = where.checkbox(f"{plain(c.name)} missing", value=values[c.name] == MISSING, key=f"{key}_missing")
            edited[c.name] = MISSING if gone else number
        else:
            edited[c.name] = where.number_input(plain(c.name), value=float(values[c.name]), format="%g", key=key)
    try:
        return apply_values(cols, X[row], edited)
    except ValueError as exc:
        st.error(f"The edited row is not used: {plain(exc)}")
        return X[row]


def _batch_table(p: _Page, rows, results) -> pd.DataFrame:
    """The batch table: per row its changes in the analyst's columns and, beside them, the
    counterfactual's value of every column at full precision (cf:<column>; empty where missing)."""
    ws, X = p.ws, p.X
    done = [(int(r), res) for r, res in zip(rows, results) if res is not None]
    points = np.array([res.x if res.found else np.full(X.shape[1], np.nan) for _, res in done]).reshape(-1, X.shape[1])
    values = recourse_frame(ws.columns, X[[r for r, _ in done]].reshape(-1, X.shape[1]), points)
    head = pd.DataFrame([{"row": r, "status": res.status, "cost": res.cost if res.found else np.nan,
                          "gap": (0.0 if res.status == "optimal" else res.gap) if res.found else np.nan,
                          "features changed": values.at[k, "n_changed"],
                          "changes": changes_line(ws.raw_changes(X[r], res.x, row=r)) if res.found else "",
                          "solve time (s)": round(res.elapsed, 3)} for k, (r, res) in enumerate(done)])
    return pd.concat([head, values.drop(columns=["n_changed", "changes"])], axis=1)


def _csv_table(p: _Page, res) -> pd.DataFrame:
    """The CSV export, one shape for every model (a tree ensemble, a pipeline, any other): a line
    per analyst column with the texts the page shows (``column``, ``original``, ``counterfactual``,
    ``changed``), the values at full precision beside them (``original value``, ``counterfactual
    value``) and what the answer guarantees (``guarantee``, ``guarantee_text``)."""
    ws, row = p.ws, _row_of(p, res.x_query)
    if res.found:
        out = values_beside(ws.raw_changes(res.x_query, res.x, row), ws.columns, res.x_query, res.x)
    else:                      # nothing found: the row, and no counterfactual beside it
        out = ws.raw_changes(res.x_query, res.x_query, row).assign(counterfactual="", changed=False)
        out = values_beside(out, ws.columns, res.x_query, None)
    return with_guarantee(out, res.guarantee)


def _row_of(p: _Page, x_query) -> int | None:
    """The shown row, if the query is that row (then its own category values can be shown)."""
    r = st.session_state.get("ocf_row")
    return int(r) if r is not None and x_query is not None and 0 <= r < len(p.X) and np.array_equal(p.X[r], x_query) \
        else None


def _as_text(table: pd.DataFrame) -> pd.DataFrame:
    """The model-feature table as read: the row's values to 6 digits, the counterfactual's in full."""
    out = table.copy()
    out["original"] = [approx_text(float(v), 6) for v in table["original"]]
    out["counterfactual"] = [number_text(float(v)) if ch else o
                             for v, ch, o in zip(table["counterfactual"], table["changed"], out["original"])]
    out["change"] = [approx_text(float(v), 6) for v in table["change"]]
    return out


def _headline(result) -> tuple[str, Any]:
    """What the answer is, in words, and how it is shown (success when proven or checked)."""
    g = result.guarantee
    if result.status == "stopped":
        return "Best valid counterfactual when stopped", st.warning
    what = {"proven_optimal": "Optimal counterfactual", "valid_on_model": "Counterfactual valid on the model"
            }.get(g.kind if g is not None else "", "Best valid counterfactual so far")
    return what, st.success if g is not None and g.kind in ("proven_optimal", "valid_on_model") else st.warning


def _show(p: _Page, result) -> None:
    ws, names = p.ws, p.names
    n = next(p.shown)
    with st.container():
        status = result.status
        raw = ws.raw_changes(result.x_query, result.x, _row_of(p, result.x_query)) if result.found else None
        g = result.guarantee
        if result.found:
            assert raw is not None
            n_changed = int(raw["changed"].sum())
            what, say = _headline(result)
            say(f"{what}: cost {result.cost:.4g}, {n_changed} column{'s' * (n_changed != 1)} changed."
                + (f" {plain(result.message)}" if result.message and say is st.warning else ""))
        elif status == "infeasible":
            st.error(plain(result.message))
        else:
            st.error(plain(result.message or "No counterfactual was found."))
        if g is not None:
            show_guarantee(st, g)
            show_constraints(st, ws.schema)
        if result.params.get("notice"):
            st.info(plain(result.params["notice"]))
        m = st.columns(5)
        m[0].metric("Status", status)
        m[1].metric("Cost", "–" if not result.found else f"{result.cost:.4g}")
        m[2].metric("Lower bound", "–" if not result.found or not np.isfinite(result.lower_bound)
                    else f"{result.lower_bound:.4g}", help=_bound_help(ws.model_kind))
        m[3].metric("Gap", "–" if not result.found else percent_text(result.gap, 2),
                    help="Not known until the solver proves a lower bound." if not np.isfinite(result.gap) else None)
        # each further solution is timed from the query's start too (its line below says when it came)
        m[4].metric("First solution after" if result.alternatives else "Solve time", f"{result.elapsed:.2f} s")
        st.caption(f"Backend: {plain(result.backend)}")      # a name, in full (a metric's box cut it short)
        if not result.found or raw is None:
            return
        table = _as_text(counterfactual_table(result, names))
        if list(raw["column"]) != list(names):      # categories or encoded columns: the analyst's columns first
            st.dataframe(_highlight(raw), hide_index=True)
            with st.expander("In the model's features (one 0/1 column per category)"):
                st.dataframe(_highlight(table), hide_index=True)
        else:
            st.dataframe(_highlight(table), hide_index=True)
        st.plotly_chart(counterfactual_changes_figure(result, names, p.schema.arrays()["span"], p.schema.groups()),
                        key=f"cf_chart_{n}")
        for k, alt in enumerate(result.alternatives, start=1):
            st.markdown(f"**Alternative {k}** · cost {alt.cost:.4g} ({_status_words(alt.status)}) · after "
                        f"{alt.elapsed:.2f} s · "
                        + plain(ws.describe_raw_changes(result.x_query, alt.x, ", ", _row_of(p, result.x_query))))


def _status_words(status: str) -> str:
    """An alternative's status in words: the cheapest left after the earlier solutions' exclusions
    (proven), or the best found when the time ran out."""
    unproven = "best found in the time, not proven cheapest"
    return {"optimal": "the cheapest left, proven", "time_limit": unproven, "time_limit_found": unproven,
            "feasible": "valid, not proven cheapest", "stopped": "stopped, not proven cheapest"}.get(
                status, status.replace("_", " "))


def _bound_help(model_kind: str, when: str = "") -> str:
    """What the lower bound proves: of the model read exactly, or, for a model known by its answers,
    only of the surrogate the search ran on (the point itself is checked on the model)."""
    if model_kind == "black_box":
        return ("A bound of the search on the model's surrogate: nothing cheaper is proven absent from the "
                "model itself, whose answers only check the point found.")
    return f"No cheaper counterfactual exists: proven by the solver{when}."


def _panel(job) -> None:
    """The running query's figures: the best valid point's cost, the proven lower bound, the gap."""
    best = job.progress
    with st.container(border=True):
        if job.stopping:
            st.info("Stopping: keeping the best valid point found so far…")
        elif best is None:
            st.info("Searching for a first valid point…")
        else:
            st.info("Searching: the best valid point so far is shown; the gap closes as the solver proves its "
                    "lower bound.")
        m = st.columns(4)
        m[0].metric("Best cost so far", "–" if best is None else f"{best.cost:.4g}")
        m[1].metric("Lower bound", "–" if best is None else f"{best.lower_bound:.4g}",
                    help=_bound_help(state.get(state.Keys.WORKSPACE).model_kind, " so far"))
        m[2].metric("Gap", "–" if best is None else percent_text(best.gap, 2),
                    help="How far above the proven lower bound the best cost may still be.")
        m[3].metric("Elapsed", f"{job.elapsed:.1f} s")
        if best is not None and best.found:
            st.caption(f"Best point so far ({plain(best.backend)}): "
                       + plain(changes_line(state.get(state.Keys.WORKSPACE).raw_changes(best.x_query, best.x))))


@st.fragment(run_every=_Page.LIVE_EVERY_S)
def _live() -> None:
    """The running query's figures refreshed on their own; once it has ended, the whole page
    reruns to show the answer."""
    job = state.get(state.Keys.OPTIMAL_JOB)
    if job is None or not job.running:
        st.rerun()
    _panel(job)


def _follow(job, hold: float) -> None:
    """While this run waits for the query (up to ``hold`` seconds), its figures are
    redrawn in place; a click anywhere (Stop, too) ends the wait with a new run."""
    slot = st.empty()
    t_end = time.perf_counter() + hold
    while job.running and time.perf_counter() < t_end:
        with slot.container():
            _panel(job)
        job.wait(_Page.LIVE_EVERY_S / 2)
    slot.empty()


def _start(p: _Page, x: np.ndarray, target, kwargs: dict, plaus: bool, k: int) -> None:
    """Start the query in its own thread (a running one is stopped first)."""
    pl = _plausibility(p, target) if plaus else None
    solve_on, extra = p.ws.query_model()
    if p.ws.model_kind != "tree_ensemble":
        kwargs.pop("backend", None)
    X = p.X
    old = state.get(state.Keys.OPTIMAL_JOB)
    if old is not None:
        old.stop()
    state.put(state.Keys.OPTIMAL_JOB, jobs.start(lambda tell, should_stop: optimal_counterfactual(
        solve_on, x, target, plausibility=pl, n_solutions=k, X_ref=X, on_progress=tell, should_stop=should_stop,
        **extra, **kwargs), name="atlas-optimal"))


def _collect() -> None:
    """The query that has ended: its answer kept as the page's result (or its error shown)."""
    job = state.get(state.Keys.OPTIMAL_JOB)
    if job is None or job.running:
        return
    state.forget(state.Keys.OPTIMAL_JOB)
    with user_errors("The counterfactual could not be computed"):
        state.put(state.Keys.OPTIMAL_RESULT, job.outcome())


def _one_row(p: _Page) -> None:
    ws, X, names = p.ws, p.X, p.names
    c1, c2 = st.columns([1, 3])
    row = row_picker(c1, len(X), "ocf_row")
    c2.markdown(f"Prediction for row {row}: **{plain(ws.outcome_text(p.pred[row]))}**"
                + (f" · label in the data: **{plain(ws.outcome_text(ws.y.iloc[row]))}**" if ws.y is not None else ""))
    with st.expander("What-if: edit the row before asking"):
        x = _what_if(p, row)
    x_pred = ws.predict(x[None, :])[0]
    target = _target_widget(p, "ocf", x_pred)
    with st.form("ocf_form"):
        kwargs, plaus = _settings(p, "ocf")
        k = st.number_input("Solutions", 1, 5, kept("ocf_k", 1), key="ocf_k", help="The optimal counterfactual, then diverse "
                            "alternatives up to this many in all: each must keep at least one feature of every "
                            "earlier solution's changes unchanged.")
        go = st.form_submit_button("Find the optimal counterfactual", type="primary")
    if go:
        with user_errors("The counterfactual could not be computed"):
            _start(p, x, target, kwargs, plaus, int(k))
    job = state.get(state.Keys.OPTIMAL_JOB)
    if job is not None and job.running:
        stop = st.empty()
        if ws.model_kind == "tree_ensemble":    # its solvers report their progress and stop
            stop.button("Stop", key="ocf_stop", on_click=job.stop, disabled=job.stopping, type="secondary",
                        help="Stop the search and keep the best valid point found so far, with its gap.")
        if go or job.stopping:         # a short query's answer comes in this run, as before
            _follow(job, jobs.hold_seconds(float(kwargs["time_limit"]) + _Page.SPARE_S))
        if job.running:
            _live()
            return
        stop.empty()
    _collect()
    res = state.get(state.Keys.OPTIMAL_RESULT)
    if res is None:
        return
    if res.x_query is not None and not np.array_equal(res.x_query, x):
        st.caption("This result is for an earlier query; press the button to compute the current one.")
    _show(p, res)
    d1, d2 = st.columns(2)
    download(d1, "Download table (CSV)", to_csv(_csv_table(p, res)), "counterfactual.csv", "text/csv",
             key="ocf_dl_csv")
    download(d2, "Download result (JSON)", json.dumps(result_record(ws.columns, res, names), indent=2),
             "counterfactual.json", "application/json", key="ocf_dl_json")


def _many_rows(p: _Page) -> None:
    ws, ens, X, pred = p.ws, p.ens, p.X, p.pred
    st.markdown("Counterfactuals for many rows at once, e.g. every rejected applicant.")
    choices = list(ens.classes) if ens.is_classifier else []
    if ens.is_classifier:
        b1, b2, b3 = st.columns(3)
        favourable = favourable_default(ens, pred)
        from_cls = b1.selectbox("Rows predicted as", choices,
                                index=kept_index("ocb_from", choices, choices.index(default_target(ens, pred, favourable))),
                                key="ocb_from", format_func=ws.outcome_text)
        to_cls = b2.selectbox("Target outcome", choices, index=kept_index("ocb_to", choices, choices.index(favourable)),
                              key="ocb_to", format_func=ws.outcome_text)
        n_rows = int(b3.number_input("How many rows", 1, 5000, kept("ocb_n", 20), key="ocb_n"))
        rows = rows_at(ens, from_cls, pred, n_rows)
        targets = [to_cls] * len(rows)
    else:
        target_b = _target_widget(p, "ocb", None)
        rows = rows_to_move(ens, target_b, pred, 20)     # the first 20 rows not yet at it
        targets = [target_b] * len(rows)
    with st.form("ocb_form"):
        kwargs_b, plaus_b = _settings(p, "ocb")
        jobs_n = st.number_input("Parallel processes", 1, 8, kept("ocb_jobs", 1), key="ocb_jobs")
        go_b = st.form_submit_button(f"Run on {len(rows)} rows")
    if go_b and len(rows):
        with user_errors("The batch could not be run"):
            bar = st.progress(0.0, text="Starting…")
            pl = _plausibility(p, targets[0]) if plaus_b else None
            kwargs_b["time_limit"] = float(kwargs_b["time_limit"])
            cluster = session_cluster()
            solve_on, extra = ws.query_model()
            if ws.model_kind != "tree_ensemble":
                kwargs_b.pop("backend", None)
            results = batch_counterfactuals(
                solve_on, X[rows], targets, n_jobs=int(jobs_n), plausibility=pl, X_ref=X, scheduler=cluster,
                progress=progress_bar(bar, "rows"), **extra, **kwargs_b)
            state.put(state.Keys.OPTIMAL_BATCH, (_batch_table(p, rows, results), results.guarantee))
    held = state.get(state.Keys.OPTIMAL_BATCH)
    if held is not None:
        table_b, g_b = held
        st.dataframe(table_b, hide_index=True, key="ocb_table")
        show_guarantee(st, g_b, "this batch")
        show_constraints(st, ws.schema)
        precluded = int((table_b["status"] == "infeasible").sum()) if len(table_b) else 0
        if ws.schema.constraints and precluded:
            st.caption(f"{precluded} of the {len(table_b)} rows are precluded: no action satisfying the constraints "
                       "between features gives the target (status infeasible).")
        download(st, "Download batch results (CSV)", to_csv(with_guarantee(table_b, g_b)), "counterfactuals.csv",
                 "text/csv", key="ocb_dl")


def main() -> None:
    p = _Page(*state.page_context(
        "Optimal counterfactual",
        "The cheapest change of a row that gives the outcome you choose: for a tree ensemble found by a "
        "mixed-integer model of the whole ensemble (OCEAN) and proven optimal, for a linear model by a MILP on its "
        "score, for any other model through its surrogate and checked on the model. Distances are measured on each "
        "feature divided by its range, and switching category counts as one change; actionability comes from "
        "the feature settings."))
    tab_one, tab_batch = st.tabs(["One row", "Many rows"])
    with tab_one:
        _one_row(p)
    with tab_batch:
        _many_rows(p)


main()
