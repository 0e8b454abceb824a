"""Figures that put a counterfactual on screen, read back from their data."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from core.figures import counterfactual_changes_figure


def test_a_category_switch_is_one_bar_named_by_its_levels():
    names = ["age", "job=clerk", "job=nurse", "job=pilot", "income"]
    res = SimpleNamespace(x_query=np.array([30.0, 1, 0, 0, 50.0]), x=np.array([35.0, 0, 0, 1, 50.0]))
    span = np.array([50.0, 1, 1, 1, 100.0])
    bar = counterfactual_changes_figure(res, names, span, {"job": [1, 2, 3]}).data[0]
    assert list(bar.y) == ["age", "job: clerk → pilot"]
    np.testing.assert_allclose(bar.x, [0.1, 1.0])
    assert "a category switch" in bar.hovertext[1] and "30 → 35" in bar.hovertext[0]
    plain = counterfactual_changes_figure(res, names, span).data[0]    # without groups: one bar per 0/1 column
    assert set(plain.y) == {"age", "job=clerk", "job=pilot"}


def test_rule_intervals_read_in_the_analysts_columns():
    """The counterfactual rule's chart: a one-hot group is one row named by its column with
    the condition as the rule writes it, the row's own category beside it; numbers as bounds."""
    from core.figures import rule_intervals_figure

    names = ["income", "job=cook", "job=nurse", "job=pilot", "age"]
    X = np.array([[10.0, 1, 0, 0, 20], [90.0, 0, 1, 0, 60], [50.0, 0, 0, 1, 40]])
    inf = np.inf
    rule = SimpleNamespace(lower=np.array([47.25, -inf, -inf, -inf, -inf]),
                           upper=np.array([inf, 0.5, inf, 0.5, inf]))
    fig = rule_intervals_figure(X, rule, [0, 1, 2, 3], names, X[0], (), groups=[[1, 2, 3]])
    bars = fig.data[1]
    assert list(bars.y) == ["income", "job"]
    assert list(bars.text) == ["income > 47.25", "not in {cook, pilot}"]
    marker = fig.data[2]
    assert list(marker.text) == ["10", "cook"]
    assert not any("inf" in str(t) or "0.5]" in str(t) for t in bars.text)


def _forest_slice():
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier

    from core.model import as_ensemble
    from core.regions import slice_regions

    X, y = make_classification(600, 4, random_state=0)
    ens = as_ensemble(RandomForestClassifier(15, max_depth=5, random_state=0).fit(X, y))
    return ens, X, slice_regions(ens, X[0], (0, 1))


def test_a_slice_is_one_heatmap_whose_every_point_reads_its_own_region():
    """A slice's regions tile the view: they are drawn as one heatmap on the grid of their bounds (a
    browser draws 2,000 rectangles, one trace each, in seconds on every rerun). Each point of the
    view shows the colour and the hover of the one region holding it, and one line trace outlines
    every region in the view; regions outside the view are left out."""
    import plotly.graph_objects as go

    from core.figures import region_colour_values, regions_figure

    ens, X, rs = _forest_slice()
    view = ((-1.0, 1.0), (-2.0, 2.0))
    fig = regions_figure(rs.regions, ens, (0, 1), view, x=X[0], title="t")
    vals, _, kind = region_colour_values(rs.regions, ens)
    assert kind == "diverging"
    inside = [(r, v) for r, v in zip(rs.regions, vals)
              if min(r.upper[0], 1.0) > max(r.lower[0], -1.0) and min(r.upper[1], 2.0) > max(r.lower[1], -2.0)]
    assert 10 < len(inside) < len(rs.regions)
    heat, outline = fig.data[0], fig.data[1]
    assert heat.type == "heatmap" and not [t for t in fig.data if getattr(t, "fill", None) == "toself"]
    assert (heat.colorscale, heat.zmin, heat.zmax) == (go.Heatmap(colorscale="RdBu").colorscale, 0.0, 1.0)
    xs, ys, z, said = np.asarray(heat.x), np.asarray(heat.y), np.asarray(heat.z, dtype=float), np.asarray(heat.text)
    assert (xs[0], xs[-1], ys[0], ys[-1]) == (-1.0, 1.0, -2.0, 2.0)
    rng = np.random.default_rng(0)
    for p in rng.uniform([-1.0, -2.0], [1.0, 2.0], size=(3000, 2)):
        holding = [(r, v) for r, v in inside if (r.lower[:2] < p).all() and (p <= r.upper[:2]).all()]
        assert len(holding) == 1, p
        (r, v), = holding
        i, j = np.searchsorted(xs, p[0]) - 1, np.searchsorted(ys, p[1]) - 1
        assert z[j, i] == float(v)
        assert f"({r.lower[0]:.4g}, {r.upper[0]:.4g}]" in said[j, i] and f"({r.lower[1]:.4g}, {r.upper[1]:.4g}]" in said[j, i]
    corners = {(a, b) for a, b in zip(outline.x, outline.y) if a is not None}
    for r, _ in inside:
        a0, a1 = max(r.lower[0], -1.0), min(r.upper[0], 1.0)
        b0, b1 = max(r.lower[1], -2.0), min(r.upper[1], 2.0)
        assert {(a0, b0), (a1, b0), (a1, b1), (a0, b1)} <= corners
    assert len(outline.x) == 6 * len(inside) and outline.hoverinfo == "skip"


def test_overlapping_regions_are_drawn_one_rectangle_each_in_its_own_colour_with_its_own_hover():
    """Regions that overlap (a projection, drawn see-through) cannot share a grid: each is one
    filled rectangle, coloured by the scale at its own value, with its bounds in its hover."""
    import dataclasses

    import plotly.colors as pc

    from core.figures import region_colour_values, regions_figure

    ens, X, rs = _forest_slice()
    a, b = [r for r in rs.regions if (r.point[:2] > (-1.0, -2.0)).all() and (r.point[:2] < (1.0, 2.0)).all()][:2]
    grown = dataclasses.replace(a, lower=np.minimum(a.lower, b.lower), upper=np.maximum(a.upper, b.upper))
    regions = [grown if r is a else r for r in rs.regions]          # a now covers b too
    view = ((-1.0, 1.0), (-2.0, 2.0))
    fig = regions_figure(regions, ens, (0, 1), view, x=X[0], opacity=0.35, title="t")
    vals, _, _ = region_colour_values(regions, ens)
    inside = [(r, v) for r, v in zip(regions, vals)
              if min(r.upper[0], 1.0) > max(r.lower[0], -1.0) and min(r.upper[1], 2.0) > max(r.lower[1], -2.0)]
    boxes = [t for t in fig.data if getattr(t, "fill", None) == "toself"]
    assert 10 < len(inside) == len(boxes) and not [t for t in fig.data if t.type == "heatmap"]
    for (r, v), t in zip(inside, boxes):
        assert t.fillcolor == pc.sample_colorscale("RdBu", [min(max(float(v), 0.0), 1.0)])[0]
        assert t.opacity == 0.35
        assert tuple(t.x) == (max(r.lower[0], -1.0), min(r.upper[0], 1.0), min(r.upper[0], 1.0),
                              max(r.lower[0], -1.0), max(r.lower[0], -1.0))
        assert f"({r.lower[0]:.4g}, {r.upper[0]:.4g}]" in t.text


def test_a_slice_of_classes_is_drawn_in_the_classes_colours():
    """Three classes: each cell takes its region's class, drawn in that class's colour of the palette."""
    import plotly.colors as pc
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier

    from core.figures import region_colour_values, regions_figure
    from core.model import as_ensemble
    from core.regions import slice_regions

    X, y = make_classification(600, 4, n_informative=3, n_redundant=0, n_classes=3, random_state=1)
    ens = as_ensemble(RandomForestClassifier(10, max_depth=4, random_state=0).fit(X, y))
    rs = slice_regions(ens, X[0], (0, 1))
    view = ((-2.0, 2.0), (-2.0, 2.0))
    heat = regions_figure(rs.regions, ens, (0, 1), view).data[0]
    vals, _, kind = region_colour_values(rs.regions, ens)
    assert kind == "categorical" and heat.type == "heatmap" and heat.showscale is False
    z = np.asarray(heat.z, dtype=float)
    drawn = set(np.unique(z[~np.isnan(z)]))
    assert drawn == set(np.unique(vals)) and len(drawn) >= 2 and (heat.zmin, heat.zmax) == (-0.5, 2.5)
    steps = [tuple(s) for s in heat.colorscale]
    for k in range(3):          # the class k, at z = k on [-0.5, 2.5], is drawn in the palette's k-th colour
        at = (k + 0.5) / 3
        colour = [c for (lo, c), (hi, _) in zip(steps, steps[1:]) if lo <= at <= hi]
        assert colour[0] == pc.qualitative.Set2[k], (k, steps)


def test_a_rule_and_its_alternatives_are_readable_on_the_same_bars():
    """The alternatives' bars overlay the rule's: only the rule's conditions are written on them
    (three texts at one place read as none), the alternatives' in their hover."""
    from core.figures import rule_intervals_figure

    names = ["income", "job=cook", "job=nurse", "job=pilot"]
    X = np.array([[10.0, 1, 0, 0], [90.0, 0, 1, 0], [50.0, 0, 0, 1]])
    inf = np.inf
    rule = SimpleNamespace(lower=np.array([61.55, 0.5, -inf, -inf]), upper=np.array([inf, inf, 0.5, 0.5]))
    alt = SimpleNamespace(lower=np.array([62.7, -inf, -inf, 0.5]), upper=np.array([inf, 0.5, 0.5, inf]))
    fig = rule_intervals_figure(X, rule, [0, 1, 2, 3], names, X[0], (alt,), groups=[[1, 2, 3]])
    drawn, other = fig.data[1], fig.data[2]
    assert drawn.textposition == "inside" and list(drawn.text) == ["income > 61.55", "= cook"]
    assert other.textposition == "none" and list(other.hovertext) == ["income > 62.7", "= pilot"]


def test_the_keep_or_change_legend_sits_below_the_tick_labels_of_a_one_bar_chart():
    """Placed on the plot's own height (-0.25 of it), the legend of a one-feature chart fell on its
    x tick labels; it sits in the figure's bottom margin."""
    import pandas as pd

    from core.figures import change_keep_figure

    fig = change_keep_figure(pd.DataFrame({"feature": ["income"], "change": [150], "keep": [20]}))
    legend = fig.layout.legend
    assert legend.yref == "container" and legend.yanchor == "bottom" and legend.y == 0
    assert fig.layout.margin.b >= 40
