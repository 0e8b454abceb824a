"""Decision regions: where the ensemble decides what, on two features (exact pure regions)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from core.figures import regions_figure, regions_table
from core.intake.csvsafe import to_csv
from core.optimal import optimal_counterfactual
from core.regions import (
    default_axes,
    exact_counterfactual,
    projection_regions,
    slice_point,
    slice_regions,
    slice_view,
)
from core.solvers.linear_regions import linear_slice, linear_slice_figure
from dashboard import state
from dashboard.ui import download, plain, user_errors
from dashboard.widgets import row_picker, target_picker

CAPTION = ("The model's output is constant on boxes (pure regions). The slice shows them on two features "
           "with the others fixed at the row's values; the projection shows every region giving the target "
           "within a distance of the row (the exact counterfactual is the nearest one).")


@st.cache_data(show_spinner=False, max_entries=32)
def _cf(key, _ens, x, target, norm, _schema, _X):
    return exact_counterfactual(_ens, x, target, norm=norm, schema=_schema, X_ref=_X, time_limit=10.0)


def _choices(ens, names, X, pred) -> dict:
    """The two features, the view, the row, its target and the drawing's settings."""
    top = default_axes(ens)
    c1, c2, c3, c4 = st.columns(4)
    fa = names.index(c1.selectbox("Horizontal feature", names, index=top[0], key="dr_fa"))
    fb = names.index(c2.selectbox("Vertical feature", names, index=top[1], key="dr_fb"))
    mode = c3.radio("View", ["slice", "projection"], horizontal=True, key="dr_mode")
    row = row_picker(c4, len(X), "dr_row")
    target = target_picker(st, ens, pred, pred[row], "dr", label="Target outcome (for the counterfactual)")
    d1, d2, d3 = st.columns(3)
    norm = d1.selectbox("Distance", ["l2", "l1"], key="dr_norm",
                        help="squared Euclidean or L1, on range-scaled features")
    max_regions = int(d2.number_input("Most regions drawn", 50, 20_000, 2000, step=250, key="dr_max"))
    radius_k = d3.slider("Projection radius (× counterfactual distance)", 1.0, 3.0, 1.2, 0.1, key="dr_radius",
                         disabled=mode != "projection")
    return dict(fa=fa, fb=fb, mode=mode, row=row, target=target, norm=norm, max_regions=max_regions,
                radius_k=radius_k)


def _linear_slice(ws, schema, x, q: dict, view) -> None:
    """A linear model's slice, cut by its own exact boundary."""
    fa, fb, target, norm, row = q["fa"], q["fb"], q["target"], q["norm"], q["row"]
    with user_errors("The regions could not be computed"), st.spinner("Cutting the slice by the model's boundary…"):
        cf = optimal_counterfactual(ws.linear, x, target, norm=norm, schema=schema, model=ws.model, time_limit=10.0)
        sl = linear_slice(ws.linear, x, (fa, fb), bounds={fa: view[0], fb: view[1]},
                          target=None if ws.linear.is_classifier else target)
        m = st.columns(3)
        m[0].metric("Regions drawn", f"{len(sl.polygons):,}")
        m[1].metric("Counterfactual distance", f"{cf.cost:.4g}" if cf.found else "–")
        m[2].metric("Counterfactual", cf.status)
        st.plotly_chart(linear_slice_figure(sl, cf=cf.x[[fa, fb]] if cf.found else None,
                                            title=f"Slice through row {row}"), key="dr_linear_chart")
        st.caption("The regions are cut by the linear model's own boundary: exact. "
                   + (f"What the counterfactual guarantees: {plain(cf.guarantee.text())}" if cf.found else ""))
        if cf.found:
            st.markdown("**Optimal counterfactual**: " + plain(ws.describe_raw_changes(cf.x_query, cf.x, ", ", row)))


def _regions(ws, ens, schema, X, q: dict, view, x_slice):
    """The exact counterfactual and the regions drawn (slice or projection), with their figures."""
    fa, fb, target, norm, row, mode = q["fa"], q["fb"], q["target"], q["norm"], q["row"], q["mode"]
    x = X[row]
    cf = _cf(ws.key, ens, x, target, norm, schema, X)
    if mode == "slice":
        rs = slice_regions(ens, x_slice, (fa, fb), bounds={fa: view[0], fb: view[1]}, max_regions=q["max_regions"],
                           time_limit=20.0)
        title = f"Slice through row {row}"
        opacity = 1.0
    else:
        if not cf.found:
            st.warning("No counterfactual was found, so there is no radius for the projection.")
            st.stop()
        rs = projection_regions(ens, x, target, (fa, fb), radius=cf.cost * q["radius_k"], norm=norm, schema=schema,
                                max_regions=q["max_regions"], time_limit=20.0)
        title = f"Regions giving {ws.outcome_text(target)} within {q['radius_k']:.1f}× the counterfactual distance"
        opacity = 0.35
    m = st.columns(4)
    m[0].metric("Regions drawn", f"{len(rs.regions):,}")
    m[1].metric("Search time", f"{rs.elapsed:.2f} s")
    m[2].metric("Counterfactual distance", f"{cf.cost:.4g}" if cf.found else "–")
    m[3].metric("Counterfactual", cf.status)
    if not rs.complete:
        st.warning(f"Only the first {len(rs.regions):,} regions are drawn (limit or time reached); "
                   "raise 'Most regions drawn' or narrow the view.")
    fig = regions_figure(rs.regions, ens, (fa, fb), view, x=x, cf=cf.x if cf.found else None,
                         opacity=opacity, title=title)
    st.plotly_chart(fig, key="dr_chart")
    return cf, rs


def _notes(ws, ens, names, X, pred, q: dict, x_slice, unknown, cf, rs) -> None:
    """What the drawing leaves out (a missing value, changes off the slice), and the download."""
    fa, fb, row, mode = q["fa"], q["fb"], q["row"], q["mode"]
    if mode == "slice" and unknown:
        gone = " and ".join(names[j] for j in unknown)
        st.caption(f"Row {row} has no value for {plain(gone)} (missing): the slice shows the model's answer for "
                   f"each value {'it' if len(unknown) == 1 else 'they'} could take, and the row's marker sits at "
                   "the column's median, where a change that gives a value starts from. With the value missing, the "
                   f"model decides {plain(ws.outcome_text(pred[row]))} for this row.")
    if cf.found:
        own = row if np.array_equal(X[row], cf.x_query) else None
        st.markdown("**Exact counterfactual**: " + plain(ws.describe_raw_changes(cf.x_query, cf.x, ", ", own)))
        given = np.flatnonzero(x_slice != X[row])       # the "is missing" columns the slice gave a value
        drawn = {names[fa], names[fb], *(names[k] for k in given)}
        if mode == "slice" and any(c.feature not in drawn for c in cf.changes):
            st.caption("The counterfactual also changes features outside this slice; its marker shows only "
                       "its position on the two features drawn.")
    table = regions_table(rs.regions, ens, (fa, fb))
    download(st, "Download regions (CSV)", to_csv(table), "regions.csv", "text/csv", key="dr_dl")


def main() -> None:
    ws, ens, schema, names, X, pred = state.page_context("Decision regions", CAPTION)
    q = _choices(ens, names, X, pred)
    fa, fb, x = q["fa"], q["fb"], X[q["row"]]
    if fa == fb:
        st.error("Choose two different features.")
        st.stop()
    view = slice_view(schema, x, (fa, fb))
    x_slice, unknown = slice_point(ens, x, (fa, fb))      # a drawn feature the row lacks: given a value
    if ws.model_kind == "linear" and q["mode"] == "slice":     # the exact boundary of the linear model itself
        _linear_slice(ws, schema, x, q, view)
        st.stop()
    if ws.model_kind != "tree_ensemble":
        st.caption("These regions are those of the model's tree-ensemble surrogate (agreement "
                   f"{100 * ws.surrogate.fidelity:.1f}% with the model on held-out rows): exact for the surrogate, "
                   "not for the model itself." + (" The linear model's own exact slice is drawn in the slice view."
                                                  if ws.model_kind == "linear" else ""))
    with user_errors("The regions could not be computed"), st.spinner("Computing exact regions…"):
        cf, rs = _regions(ws, ens, schema, X, q, view, x_slice)
        _notes(ws, ens, names, X, pred, q, x_slice, unknown, cf, rs)


main()
