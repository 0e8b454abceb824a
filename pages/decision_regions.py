"""Decision regions: where the model decides what, on two features (exact pure regions of a tree
ensemble, a linear model's own boundary, or a surrogate's regions labelled as such)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from core.figures import regions_figure, regions_table
from core.intake.csvsafe import to_csv
from core.model.guarantee import with_guarantee
from core.regions import (
    default_axes,
    exact_counterfactual,
    projection_reach,
    projection_regions,
    slice_point,
    slice_regions,
    slice_view,
)
from core.solvers.linear_regions import linear_slice, linear_slice_figure
from dashboard import state
from dashboard.share import kept, kept_index
from dashboard.ui import download, plain, show_constraints, show_guarantee, user_errors
from dashboard.widgets import row_picker, target_picker

CAPTION = ("The model's output is constant on boxes (pure regions). The slice shows them on two features "
           "with the others fixed at the row's values; the projection shows every region giving the target "
           "within a distance of the row (the exact counterfactual is the nearest one).")


@st.cache_data(show_spinner=False, max_entries=32)
def _cf(key, x, target, norm, _ws):
    """The row's exact counterfactual on the model as the workspace solves it (a tree ensemble's
    nearest region, a linear model's MILP, or a surrogate's point checked and repaired on the model)."""
    solve_on, extra = _ws.query_model()
    return exact_counterfactual(solve_on, x, target, norm=norm, schema=_ws.schema, X_ref=_ws.X.to_numpy(dtype=float),
                                time_limit=10.0, **extra)


def _checked_on(ws) -> dict:
    """A surrogate's regions with the model they are put to (the linear model itself, which reads the
    same columns, or the model in its worker); nothing for a tree ensemble, whose regions are its own."""
    if ws.surrogate is None:
        return {}
    return {"model": ws.linear if ws.linear is not None else ws.model, "surrogate": ws.surrogate}


def _choices(ens, names, X, pred) -> dict:
    """The two features, the view, the row, its target and the drawing's settings."""
    top = default_axes(ens)
    c1, c2, c3, c4 = st.columns(4)
    fa = names.index(c1.selectbox("Horizontal feature", names, index=kept_index("dr_fa", names, top[0]), key="dr_fa"))
    fb = names.index(c2.selectbox("Vertical feature", names, index=kept_index("dr_fb", names, top[1]), key="dr_fb"))
    mode = c3.radio("View", ["slice", "projection"], index=kept_index("dr_mode", ["slice", "projection"]), horizontal=True,
                    key="dr_mode")
    row = row_picker(c4, len(X), "dr_row")
    target = target_picker(st, ens, pred, pred[row], "dr", label="Target outcome (for the counterfactual)")
    d1, d2, d3 = st.columns(3)
    norm = d1.selectbox("Distance", ["l2", "l1"], index=kept_index("dr_norm", ["l2", "l1"]), key="dr_norm",
                        help="squared Euclidean or L1, on range-scaled features")
    max_regions = int(d2.number_input("Most regions drawn", 50, 20_000, kept("dr_max", 2000), step=250, key="dr_max"))
    radius_k = d3.slider("Projection radius (× counterfactual distance)", 1.0, 3.0, kept("dr_radius", 1.2), 0.1,
                        key="dr_radius",
                         disabled=mode != "projection")
    return dict(fa=fa, fb=fb, mode=mode, row=row, target=target, norm=norm, max_regions=max_regions,
                radius_k=radius_k)


def _linear_slice(ws, x, q: dict, view) -> None:
    """A linear model's slice, cut by its own exact boundary, with its exact counterfactual."""
    fa, fb, target, norm, row = q["fa"], q["fb"], q["target"], q["norm"], q["row"]
    with user_errors("The regions could not be computed"), st.spinner("Cutting the slice by the model's boundary…"):
        cf = _cf(ws.key, x, target, norm, ws)
        sl = linear_slice(ws.linear, x, (fa, fb), bounds={fa: view[0], fb: view[1]},
                          target=None if ws.linear.is_classifier else target)
        m = st.columns(3)
        m[0].metric("Regions drawn", f"{len(sl.polygons):,}")
        m[1].metric("Counterfactual distance", f"{cf.cost:.4g}" if cf.found else "–")
        m[2].metric("Counterfactual", cf.status)
        st.plotly_chart(linear_slice_figure(sl, cf=cf.x if cf.found else None, title=f"Slice through row {row}"),
                        key="dr_linear_chart")
        show_guarantee(st, sl.guarantee, "this drawing")
        _counterfactual_line(ws, cf, row)


def _counterfactual_line(ws, cf, row) -> None:
    """The counterfactual's changes, named for what it is, and what it guarantees."""
    if cf.found:
        own = row if np.array_equal(ws.X.iloc[row].to_numpy(dtype=float), cf.x_query) else None
        name = "Exact counterfactual" if cf.guarantee is not None and cf.guarantee.proven else "Counterfactual"
        st.markdown(f"**{name}**: " + plain(ws.describe_raw_changes(cf.x_query, cf.x, ", ", own)))
    show_guarantee(st, cf.guarantee, "this counterfactual")
    show_constraints(st, ws.schema)


def _regions(ws, ens, schema, X, q: dict, view, x_slice):
    """The exact counterfactual and the regions drawn (slice or projection), with their figures."""
    fa, fb, target, norm, row, mode = q["fa"], q["fb"], q["target"], q["norm"], q["row"], q["mode"]
    x = X[row]
    cf = _cf(ws.key, x, target, norm, ws)
    if mode == "slice":
        rs = slice_regions(ens, x_slice, (fa, fb), bounds={fa: view[0], fb: view[1]}, max_regions=q["max_regions"],
                           time_limit=20.0, **_checked_on(ws))
        title = f"Slice through row {row}"
        opacity = 1.0
    else:
        reach = projection_reach(cf, ens, x, target, norm=norm, schema=schema, time_limit=10.0)
        if not np.isfinite(reach):
            st.warning("No counterfactual was found, so there is no radius for the projection.")
            st.stop()
        rs = projection_regions(ens, x, target, (fa, fb), radius=reach * q["radius_k"], norm=norm, schema=schema,
                                max_regions=q["max_regions"], time_limit=20.0, **_checked_on(ws))
        title = f"Regions giving {ws.outcome_text(target)} within {q['radius_k']:.1f}× the counterfactual distance"
        opacity = 0.35
    m = st.columns(4)
    m[0].metric("Regions drawn", f"{len(rs.regions):,}")
    m[1].metric("Search time", f"{rs.elapsed:.2f} s")
    m[2].metric("Counterfactual distance", f"{cf.cost:.4g}" if cf.found else "–")
    m[3].metric("Counterfactual", cf.status)
    if not rs.complete:
        st.warning(f"Only the first {len(rs.regions):,} regions are drawn (limit or time reached), not "
                   "necessarily those around the row: raise 'Most regions drawn' or narrow the view.")
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
    _counterfactual_line(ws, cf, row)
    if cf.found:
        given = np.flatnonzero(x_slice != X[row])       # the "is missing" columns the slice gave a value
        drawn = {names[fa], names[fb], *(names[k] for k in given)}
        if mode == "slice" and any(c.feature not in drawn for c in cf.changes):
            st.caption("The counterfactual also changes features outside this slice; its marker shows only "
                       "its position on the two features drawn.")
    show_guarantee(st, rs.guarantee, "this drawing")
    table = with_guarantee(regions_table(rs.regions, ens, (fa, fb), ws.schema), rs.guarantee)
    d1, d2 = st.columns(2)
    download(d1, "Download regions (CSV)", to_csv(table), "regions.csv", "text/csv", key="dr_dl",
             help="Bounds rounded for reading (whole numbers for a column of whole numbers); the JSON keeps them "
                  "exact.")
    big = len(rs.regions) * ens.n_features > 20_000      # a file of megabytes: built on a click only
    download(d2, "Download regions (JSON, exact)", rs.to_json, "regions.json", "application/json", key="dr_dl_json",
             source=rs, prepare=big)


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
        _linear_slice(ws, x, q, view)
        st.stop()
    with user_errors("The regions could not be computed"), st.spinner("Computing exact regions…"):
        cf, rs = _regions(ws, ens, schema, X, q, view, x_slice)
        _notes(ws, ens, names, X, pred, q, x_slice, unknown, cf, rs)


main()
