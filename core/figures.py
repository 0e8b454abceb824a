"""Figures: pure functions from results to Plotly figures, in one place.

The pages draw them with Streamlit and the audit report (:mod:`core.audit.report`)
inlines them in its HTML; nothing here imports Streamlit, so every figure is
testable from a script.
"""

from __future__ import annotations

import html as _html
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pandas as pd
import plotly.colors as pc
import plotly.graph_objects as go

from core.model.missing import SUFFIX
from core.ruletext import conditions
from core.schema import INTEGRAL_KINDS
from core.shown import approx_text, number_text, round_sig
from core.typing import ArrayLike

if TYPE_CHECKING:
    from core.counterfactual import CounterfactualResult
    from core.model import TreeEnsemble
    from core.model.box import Box
    from core.regions import Region
    from core.schema import Schema
    from core.tcrex import TCREx

_ROOM = dict(margin=dict(l=80, r=20, t=70, b=70), xaxis=dict(automargin=True), yaxis=dict(automargin=True))


def text(value: object) -> str:
    """``value`` (a name, category, class or title from a file) for any text Plotly
    draws: titles, axis titles and ticks, legends, bar labels and hovers read HTML
    tags (<b>, <a href>, <br>) and entities; with "&" and "<" escaped, it is drawn as
    written (a ">" alone is text: "income > 47.25" stays as it is)."""
    return str(value).replace("&", "&amp;").replace("<", "&lt;")


def _lines(hover: str) -> str:
    """A hover text joined with <br> by the library (:meth:`FCCAResult.heatmap`):
    each line's text escaped, the line breaks kept."""
    return "<br>".join(text(line) for line in str(hover).split("<br>"))



def counterfactual_table(result: CounterfactualResult, feature_names: list[str]) -> pd.DataFrame:
    """Original vs counterfactual, one row per feature, with the change."""
    x0 = result.x_query
    x1 = result.x if result.x is not None else np.full_like(x0, np.nan)
    df = pd.DataFrame({"feature": feature_names, "original": x0, "counterfactual": x1})
    df["change"] = df["counterfactual"] - df["original"]
    df["changed"] = df["change"].abs() > 0
    return df


def _share_format(values: Any) -> str:
    """A percent tick format with as many decimals as the data's range needs (about five ticks)."""
    v = np.asarray(values, dtype=float)
    span = float(np.ptp(np.append(v, 0.0))) if v.size else 1.0
    step = max(span / 5, 1e-12) * 100                          # percent per tick
    return f".{int(np.clip(np.ceil(-np.log10(step)), 0, 6))}%"


def counterfactual_changes_figure(result: CounterfactualResult, feature_names: list[str], span: np.ndarray | None = None,
                                  groups: dict[str, list[int]] | None = None):
    """Horizontal bars: the change of each changed feature, as a share of its range.
    A one-hot group (``groups``: name -> column indices) that switches category is
    one bar, ``group: old → new`` at 100% (a switch costs its weight once, as a
    move across a whole range does), not one bar per 0/1 column."""
    df = counterfactual_table(result, feature_names)
    x0, x1 = df["original"].to_numpy(), df["counterfactual"].to_numpy()      # the query, the point (NaN: none)
    df = df[df["changed"]].copy()
    sp = np.ones(len(feature_names)) if span is None else np.asarray(span)
    df["scaled"] = df["change"] / sp[df.index]
    for g, idx in (groups or {}).items():
        df = _one_bar_per_switch(df, g, idx, x0, x1, feature_names)
    df = _one_bar_per_missing_state(df, x1, feature_names)
    df = df.reindex(df["scaled"].abs().sort_values().index)
    switch = df["change"].isna()
    hover = [f"{text(f)}<br>{'a missing value given one' if ': missing → ' in f else 'a category switch'}" if sw
             else f"{text(f)}: {number_text(a)} → {number_text(b)}<br>{v:.1%} of the range"
             for f, a, b, v, sw in zip(df["feature"], df["original"], df["counterfactual"], df["scaled"], switch)]
    fig = go.Figure(go.Bar(
        x=df["scaled"], y=[text(f) for f in df["feature"]], orientation="h",
        marker_color=np.where(switch, "#8c8c8c", np.where(df["scaled"] > 0, "#2f6fb0", "#c0504d")),
        hovertext=hover, hovertemplate="%{hovertext}<extra></extra>"))
    fig.update_layout(title="Changes (share of each feature's range)" if span is not None else "Changes",
                      # enough digits that neighbouring ticks never read the same ("1% 1% 2%")
                      xaxis_tickformat=_share_format(df["scaled"]) if span is not None else None,
                      height=120 + 28 * max(1, len(df)),
                      margin=dict(l=10, r=10, t=40, b=10))
    return fig


def _whole_bar(label: str) -> dict[str, Any]:
    """A row of the changes' table drawn as a whole bar (a switch of category or of missing state)."""
    return {"feature": label, "original": np.nan, "counterfactual": np.nan, "change": np.nan, "changed": True,
            "scaled": 1.0}


def _one_bar_per_switch(df: pd.DataFrame, g: str, idx: list[int], x0: np.ndarray, x1: np.ndarray,
                        feature_names: list[str]) -> pd.DataFrame:
    """The changed 0/1 columns of one-hot group ``g`` replaced by one bar ``g: old → new``."""
    moved = [j for j in idx if j in df.index]
    if not moved:
        return df
    level = {int(j): str(feature_names[j]).split("=", 1)[-1] for j in idx}
    old = next((level[j] for j in idx if x0[j] > 0.5), "(missing or unseen)")
    new = next((level[j] for j in idx if x1[j] > 0.5), "(missing or unseen)")
    df = df.drop(index=moved)
    df.loc[min(moved)] = _whole_bar(f"{g}: {old} → {new}")
    return df


def _one_bar_per_missing_state(df: pd.DataFrame, x1: np.ndarray, feature_names: list[str]) -> pd.DataFrame:
    """Each changed missing-state column written as a state, not a number: a value given to a
    missing one is one bar with that value (``income: missing → 1,200``), not a move from the fill."""
    names = list(map(str, feature_names))
    for j in [j for j in df.index if str(feature_names[j]).endswith(SUFFIX)]:
        base = str(feature_names[j])[:-len(SUFFIX)]
        given = x1[j] < 0.5
        k = names.index(base) if base in names else None
        if given and k is not None:
            df = df.drop(index=[k], errors="ignore")
            label = f"{base}: missing → {number_text(x1[k])}"
        else:
            label = f"{base}: {'missing → a value' if given else 'kept missing'}"
        df.loc[j] = _whole_bar(label)
    return df


def region_colour_values(regions: Sequence[Region], ens: TreeEnsemble) -> tuple[np.ndarray, str, str]:
    """Per region: the value to colour by, its label, and the kind of scale."""
    raws = np.array([r.raw for r in regions]) if len(regions) else np.zeros((0, ens.n_outputs))
    if ens.task == "regression":
        return raws[:, 0], "prediction", "sequential"
    proba = ens.proba_from_raw(raws) if len(regions) else np.zeros((0, ens.n_classes))
    if ens.n_classes == 2 and ens.classes is not None:      # a classifier always has its classes
        return proba[:, 1], f"P({text(ens.classes[1])})", "diverging"
    return proba.argmax(axis=1).astype(float), "class", "categorical"


_Shown = tuple[Any, Any, Any, Any, Any, Any]     # a region, its colour value, and its rectangle in the view


def regions_figure(regions: Sequence[Region], ens: TreeEnsemble, features: tuple[int, int], view: tuple[tuple[float, float], ...],
                   x: np.ndarray | None = None, cf: np.ndarray | None = None, opacity: float = 1.0,
                   title: str = "") -> go.Figure:
    """The regions on two features, coloured by class probability (a diverging scale centred on
    0.5), class, or predicted value; the instance, its counterfactual and the path between them
    on top.

    Regions that tile the view (a slice) are drawn as one heatmap on the grid of their bounds:
    each cell of the grid lies in one region, and takes its colour and its hover; one line trace
    outlines the regions. Regions that overlap (a projection, drawn see-through) are drawn one
    filled rectangle each. A browser draws a trace in a few milliseconds of script, so 2,000
    rectangles took seconds to draw on every rerun, where the heatmap takes one trace's time."""
    fa, fb = features
    (xa0, xa1), (xb0, xb1) = view
    vals, label, kind = region_colour_values(regions, ens)
    scale, lo, hi = _colour_scale(kind, vals, ens)
    shown = _regions_in_view(regions, vals, features, view)     # the regions inside the view, with their rectangles
    hovers = [_region_hover(r, v, ens, features, label) for r, v, *_ in shown]
    grid = _RegionGrid.of(shown)
    if grid is not None:
        fig = go.Figure(data=[grid.heatmap(hovers, kind, scale, lo, hi, ens, label, opacity), grid.outlines(opacity)])
    else:
        fig = go.Figure(data=_rectangles(shown, hovers, _region_colours(shown, kind, scale, lo, hi), opacity))
        if kind != "categorical" and len(vals):
            fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", showlegend=False, hoverinfo="skip",
                                     marker=dict(colorscale=scale, cmin=lo, cmax=hi, color=[lo], showscale=True,
                                                 colorbar=dict(title=label))))
    _add_instance(fig, features, x, cf)
    fig.update_layout(title=text(title), xaxis_title=text(ens.feature_names[fa]),
                      yaxis_title=text(ens.feature_names[fb]),
                      xaxis_range=[xa0, xa1], yaxis_range=[xb0, xb1], height=560,
                      margin=dict(l=10, r=10, t=40, b=10), legend=dict(orientation="h"))
    return fig


def _region_hover(r: Region, v: float, ens: TreeEnsemble, features: tuple[int, int], label: str) -> str:
    """A region's hover: its bounds on the two features drawn, its colour value and its prediction."""
    fa, fb = features
    return (f"{text(ens.feature_names[fa])} ∈ ({r.lower[fa]:.4g}, {r.upper[fa]:.4g}]<br>"
            f"{text(ens.feature_names[fb])} ∈ ({r.lower[fb]:.4g}, {r.upper[fb]:.4g}]<br>"
            f"{label}: {v:.4g} · prediction {text(r.prediction)}")


_OUTLINE = dict(width=0.5, color="rgba(255,255,255,0.6)")      # the thin line between two regions


def _rectangles(shown: list[_Shown], hovers: list[str], colours: list[str], opacity: float) -> list[dict[str, Any]]:
    """One filled rectangle per region, as plain dicts (one figure built once: 2,000 add_trace calls
    took seconds)."""
    return [dict(type="scatter", x=[a0, a1, a1, a0, a0], y=[b0, b0, b1, b1, b0], fill="toself", mode="lines",
                 line=_OUTLINE, fillcolor=colour, opacity=opacity, hoveron="fills", hoverinfo="text", text=hover,
                 showlegend=False)
            for (_, _, a0, a1, b0, b1), hover, colour in zip(shown, hovers, colours)]


#: the most cells a heatmap of regions may have for each region drawn: a slice's regions are close to
#: its grid's cells (1.0-1.13 cells a region on the demos); beyond this the rectangles are drawn
GRID_CELLS_PER_REGION = 4


@dataclass(frozen=True)
class _RegionGrid:
    """The grid of the shown regions' bounds, where each cell is in one region (``owner``, -1: none)."""

    xs: np.ndarray
    ys: np.ndarray
    owner: np.ndarray               # (len(ys) - 1, len(xs) - 1): the index in ``shown`` of each cell's region
    shown: list[_Shown]

    @classmethod
    def of(cls, shown: list[_Shown]) -> _RegionGrid | None:
        """The grid, or None when two regions overlap or the grid has too many cells for the regions."""
        if not shown:
            return None
        box = np.array([s[2:] for s in shown], dtype=float)          # a0, a1, b0, b1
        xs, ys = np.unique(box[:, :2]), np.unique(box[:, 2:])
        if (len(xs) - 1) * (len(ys) - 1) > GRID_CELLS_PER_REGION * len(shown) + 100:
            return None
        i0, i1 = np.searchsorted(xs, box[:, 0]), np.searchsorted(xs, box[:, 1])
        j0, j1 = np.searchsorted(ys, box[:, 2]), np.searchsorted(ys, box[:, 3])
        owner = np.full((len(ys) - 1, len(xs) - 1), -1, dtype=np.int64)
        for k in range(len(shown)):
            cells = owner[j0[k]:j1[k], i0[k]:i1[k]]
            if (cells != -1).any():
                return None                                         # overlapping regions: no grid
            cells[...] = k
        return cls(xs, ys, owner, shown)

    def heatmap(self, hovers: list[str], kind: str, scale: str | None, lo: float, hi: float, ens: TreeEnsemble,
                label: str, opacity: float) -> go.Heatmap:
        """The cells, each with its region's colour value and hover; a cell in no region is left blank."""
        inside = self.owner >= 0
        vals = np.array([s[1] for s in self.shown], dtype=float)
        z = np.where(inside, vals[np.maximum(self.owner, 0)], np.nan)
        said = np.array(hovers, dtype=object)[np.maximum(self.owner, 0)]
        said[~inside] = ""
        colour: dict[str, Any]
        if kind == "categorical":
            colour = dict(colorscale=_class_steps(ens.n_classes), zmin=-0.5, zmax=ens.n_classes - 0.5,
                          showscale=False)
        else:
            colour = dict(colorscale=scale, zmin=lo, zmax=hi, colorbar=dict(title=label))
        return go.Heatmap(x=self.xs, y=self.ys, z=z, text=said, hovertemplate="%{text}<extra></extra>",
                          hoverongaps=False, opacity=opacity, **colour)

    def outlines(self, opacity: float) -> go.Scatter:
        """Every region's outline in one line trace (its rectangles apart, joined by gaps)."""
        xs: list[float | None] = []
        ys: list[float | None] = []
        for _, _, a0, a1, b0, b1 in self.shown:
            xs += [a0, a1, a1, a0, a0, None]
            ys += [b0, b0, b1, b1, b0, None]
        return go.Scatter(x=xs, y=ys, mode="lines", line=_OUTLINE, opacity=opacity, hoverinfo="skip",
                          showlegend=False)


def _class_colour(k: int) -> str:
    """The colour of class index ``k`` in the classes' palette (the heatmap's and the rectangles')."""
    palette = pc.qualitative.Set2
    return str(palette[k % len(palette)])


def _class_steps(n_classes: int) -> list[list[Any]]:
    """A colour scale of steps, one per class (its index on ``[-0.5, n - 0.5]``), in the classes' palette."""
    n = max(n_classes, 1)
    return [[edge / n, _class_colour(k)] for k in range(n) for edge in (k, k + 1)]


def _colour_scale(kind: str, vals: np.ndarray, ens: TreeEnsemble) -> tuple[str | None, float, float]:
    """The colour scale of the regions and its ends: a diverging one on [0, 1], the classes, or the values' range."""
    if kind == "diverging":
        return "RdBu", 0.0, 1.0
    if kind == "categorical":
        return None, 0.0, max(1.0, float(ens.n_classes - 1))
    return "Viridis", float(vals.min()) if len(vals) else 0.0, float(vals.max()) if len(vals) else 1.0


def _regions_in_view(regions: Sequence[Region], vals: np.ndarray, features: tuple[int, int],
                     view: tuple[tuple[float, float], ...]) -> list[_Shown]:
    """The regions with some area inside the view, each with its value and its rectangle clipped to the view."""
    fa, fb = features
    (xa0, xa1), (xb0, xb1) = view
    shown = []
    for r, v in zip(regions, vals):
        a0, a1 = max(r.lower[fa], xa0), min(r.upper[fa], xa1)
        b0, b1 = max(r.lower[fb], xb0), min(r.upper[fb], xb1)
        if a1 > a0 and b1 > b0:
            shown.append((r, v, a0, a1, b0, b1))
    return shown


def _region_colours(shown: list[_Shown], kind: str, scale: str | None, lo: float, hi: float) -> list[str]:
    """Each shown region's colour: its class's in a qualitative palette, else its value's on the scale."""
    if kind == "categorical":
        return [_class_colour(int(v)) for _, v, *_ in shown]
    # one call for all regions (one per region took seconds)
    ts = [min(max(0.5 if hi == lo else (v - lo) / (hi - lo), 0.0), 1.0) for _, v, *_ in shown]
    return pc.sample_colorscale(scale, ts) if ts else []


def _add_instance(fig: go.Figure, features: tuple[int, int], x: np.ndarray | None, cf: np.ndarray | None) -> None:
    """The instance, and its counterfactual with the path to it, on top of the regions."""
    if x is None:
        return
    fa, fb = features
    fig.add_trace(go.Scatter(x=[x[fa]], y=[x[fb]], mode="markers", name="instance",
                             marker=dict(symbol="x", size=14, color="black")))
    if cf is not None:
        fig.add_trace(go.Scatter(x=[x[fa], cf[fa]], y=[x[fb], cf[fb]], mode="lines+markers", name="counterfactual",
                                 line=dict(dash="dash", color="black"),
                                 marker=dict(symbol=["x", "star"], size=[1, 16], color="gold",
                                             line=dict(width=1, color="black"))))


#: significant digits (of the feature's span) a region's bound is written with in a table for people
REGION_BOUND_DIGITS = 6


def _people_bound(t: float, integral: bool, span: float | None) -> float | int:
    """One bound of a region, as a person reads it, on the same side of every number a
    reader would test as the exact bound: a feature of whole numbers as a whole number
    (``x > 4.0034`` and ``x > 4`` hold for the same whole numbers); any other number
    rounded down to :data:`REGION_BOUND_DIGITS` significant digits of the feature's span
    (``1.0000000180025095e-35`` on a span of 99,999 reads 0; without a span, of the
    value itself), so, as :func:`core.shown.bound_text` does, the shown number itself lies
    on the side of the exact split it lies on."""
    if not np.isfinite(t):
        return float(t)
    if integral:
        return int(np.floor(t))
    if span is None or not np.isfinite(span) or span <= 0 or t == 0:
        return round_sig(float(t), REGION_BOUND_DIGITS, "down")
    digits = int(np.floor(np.log10(abs(t))) - np.floor(np.log10(span))) + REGION_BOUND_DIGITS
    if digits < 1:                  # below the span's last digit: 0, or one step down from it
        step = 10.0 ** (np.floor(np.log10(span)) - REGION_BOUND_DIGITS + 1)
        return 0.0 if t > 0 else -round_sig(step, 1)
    return round_sig(float(t), digits, "down")


def regions_table(regions: Sequence[Region], ens: TreeEnsemble, features: tuple[int, int],
                  schema: Schema | None = None) -> pd.DataFrame:
    """The regions drawn, one row each, for people: each region's bounds on the two
    features (``feature >`` and ``feature <=``; :func:`_people_bound`: whole numbers for
    a column of whole numbers, as ``schema`` says, other numbers rounded on the feature's
    span; a categorical feature's allowed categories, ``feature in``), the colour value,
    the prediction, the distance from the row (4 significant digits) and, for a
    surrogate's regions, whether the model itself agrees at the region's nearest point.
    The exact bounds are the :class:`core.regions.RegionSet`'s own (its JSON)."""
    vals, label, _ = region_colour_values(regions, ens)
    out: dict[str, Any] = {}
    kinds = [f.kind for f in schema.features] if schema is not None else [None] * ens.n_features
    spans = schema.arrays()["span"] if schema is not None else [None] * ens.n_features
    for j in features:
        if ens.categories[j] is not None:
            out[f"{ens.feature_names[j]} in"] = _allowed_categories(regions, ens, j)
        else:
            out.update(_bound_columns(regions, ens.feature_names[j], j, kinds[j] in INTEGRAL_KINDS, spans[j]))
    out.update(_outcome_columns(regions, vals, label))
    return pd.DataFrame(out)


def _outcome_columns(regions: Sequence[Region], vals: np.ndarray, label: str) -> dict[str, list[Any]]:
    """The regions' colour value, prediction, distance (4 significant digits) and, for a
    surrogate's regions, whether the model agrees (a regressor's ``prediction`` is both the first and the second)."""
    out: dict[str, list[Any]] = {label: [round_sig(float(v), 4) for v in vals]}
    out["prediction"] = [r.prediction for r in regions]
    out["distance"] = [round_sig(float(r.distance), 4) for r in regions]
    if any(r.on_model is not None for r in regions):
        out["model agrees"] = [r.on_model for r in regions]
    return out


def _allowed_categories(regions: Sequence[Region], ens: TreeEnsemble, j: int) -> list[str]:
    """Each region's categories of categorical feature ``j``, joined with `` | ``."""
    return [" | ".join(ens.category_label(j, k) for k in range(ens.n_codes(j)) if r.lower[j] < k <= r.upper[j])
            for r in regions]


def _bound_columns(regions: Sequence[Region], name: str, j: int, integral: bool,
                   span: float | None) -> dict[str, pd.Series]:
    """The columns ``name >`` and ``name <=`` of numerical feature ``j``, bounds as people read them
    (whole numbers stay ints beside an infinite bound)."""
    return {key: pd.Series([_people_bound(getattr(r, side)[j], integral, span) for r in regions],
                           dtype=object if integral else float)
            for side, key in (("lower", f"{name} >"), ("upper", f"{name} <="))}


def change_keep_counts(tc: TCREx, X: np.ndarray) -> pd.DataFrame:
    """Per feature: how many rows must change it, and how many must keep it in
    range, to satisfy their T-CREx rule (the paper's Fig. 8b); a row prescribed no rule asks nothing."""
    rules = tc.explain(X)
    X = X[rules >= 0]
    rules = rules[rules >= 0]
    rows = []
    for j, name in enumerate(tc.feature_names_):
        lo = np.array([tc.rules_[r].lower[j] for r in rules])
        hi = np.array([tc.rules_[r].upper[j] for r in rules])
        bounded = np.isfinite(lo) | np.isfinite(hi)
        inside = (X[:, j] > lo) & (X[:, j] <= hi)
        rows.append({"feature": name, "change": int(np.sum(bounded & ~inside)), "keep": int(np.sum(bounded & inside))})
    df = pd.DataFrame(rows)
    return df[(df["change"] + df["keep"]) > 0]


def change_keep_figure(counts: pd.DataFrame):
    names = [text(f) for f in counts["feature"]]
    fig = go.Figure([go.Bar(y=names, x=counts["change"], name="change", orientation="h",
                            marker_color="#c0504d"),
                     go.Bar(y=names, x=counts["keep"], name="keep within range", orientation="h",
                            marker_color="#2f6fb0")])
    fig.update_layout(barmode="stack", title="What the prescribed rules ask of these rows", height=140 + 26 *
                      max(1, len(counts)), margin=dict(l=10, r=10, t=40, b=60),
                      legend=dict(orientation="h", yref="container", yanchor="bottom", y=0, x=0))   # below the x ticks
    # (in the bottom margin: placed on the plot's own height, -0.25 of a one-bar chart fell on its tick labels)
    return fig


def rule_box_figure(X: np.ndarray, y: np.ndarray, rule: Box, features: tuple[int, int], names: list[str],
                    highlight: np.ndarray | None = None):
    """Data on the rule's two features, the rule's box and highlighted rows (Fig. 8c)."""
    fa, fb = features
    fig = go.Figure()
    for cls in np.unique(y):
        sel = y == cls
        fig.add_trace(go.Scattergl(x=X[sel, fa], y=X[sel, fb], mode="markers", name=f"model output {text(cls)}",
                                   marker=dict(size=4, opacity=0.45)))
    lo_a = rule.lower[fa] if np.isfinite(rule.lower[fa]) else X[:, fa].min()
    hi_a = rule.upper[fa] if np.isfinite(rule.upper[fa]) else X[:, fa].max()
    lo_b = rule.lower[fb] if np.isfinite(rule.lower[fb]) else X[:, fb].min()
    hi_b = rule.upper[fb] if np.isfinite(rule.upper[fb]) else X[:, fb].max()
    fig.add_shape(type="rect", x0=lo_a, x1=hi_a, y0=lo_b, y1=hi_b, line=dict(color="#2ca02c", width=3),
                  fillcolor="rgba(44,160,44,0.12)")
    if highlight is not None and len(highlight):
        fig.add_trace(go.Scatter(x=X[highlight, fa], y=X[highlight, fb], mode="markers", name="chosen rows",
                                 marker=dict(size=13, color="black", symbol="diamond")))
    fig.update_layout(xaxis_title=text(names[fa]), yaxis_title=text(names[fb]), height=480, margin=dict(l=10, r=10, t=30, b=10),
                      legend=dict(orientation="h"))
    return fig


def rule_intervals_figure(X: np.ndarray, rule: Box, features: list[int], names: list[str],
                          x: np.ndarray | None = None, alternatives: Sequence[Box] = (),
                          groups: Sequence[Sequence[int]] = ()):
    """A counterfactual rule as intervals on each feature's observed range
    (scaled to [0, 1]), with the row's current value marked. A one-hot group
    (``groups``: lists of feature indices) is one row named by its column, the
    condition written on the bar (``= employed``, ``not in {student}``) and the
    row's own category beside the marker; bounds read as :func:`core.ruletext.conditions`
    writes them."""
    chart = _RuleRows.of(X, features, names, groups)
    labels = [text(label) for label, _ in chart.rows]
    fig = go.Figure()
    fig.add_trace(go.Bar(y=labels, x=[1.0] * len(chart.rows), base=[0.0] * len(chart.rows), orientation="h",
                         marker=dict(color="rgba(180,180,180,0.25)"), name="observed range", hoverinfo="skip"))
    for k, box in enumerate((rule, *alternatives)):
        starts, ends, said = chart.bars(box)
        # only the rule's conditions are written on its bars: the alternatives' bars overlay them (barmode overlay),
        # and their texts, drawn at the same place, made all of them unreadable; theirs are in their hover
        fig.add_trace(go.Bar(y=labels, x=np.maximum(ends - starts, 0.01), base=starts, orientation="h", text=said,
                             textposition="inside" if k == 0 else "none", hovertext=said,
                             hovertemplate="%{y}: %{hovertext}<extra>%{fullData.name}</extra>",
                             name="rule" if k == 0 else f"alternative {k}",
                             marker=dict(color="rgba(44,160,44,0.65)" if k == 0 else "rgba(31,119,180,0.45)"),
                             width=0.5 if k == 0 else 0.3))
    if x is not None:
        pos, shown = chart.current(x)
        fig.add_trace(go.Scatter(y=labels, x=pos, mode="markers", name="current value", text=shown,
                                 hovertemplate="%{y}: %{text}<extra></extra>",
                                 marker=dict(color="black", size=12, symbol="line-ns", line=dict(width=3))))
    fig.update_layout(barmode="overlay", height=170 + 45 * len(chart.rows), margin=dict(l=10, r=10, t=70, b=10),
                      xaxis=dict(title="position in the feature's observed range (0 = min, 1 = max)",
                                 range=[-0.02, 1.02]),
                      legend=dict(orientation="h", y=1.02, yanchor="bottom"), title="Counterfactual rule")
    return fig


def _groups_in(features: list[int], groups: Sequence[Sequence[int]]) -> list[list[int]]:
    """Each group's columns among ``features``, the groups with none left out."""
    fset = set(features)
    in_rule = [[j for j in g if j in fset] for g in groups]
    return [g for g in in_rule if g]


@dataclass(frozen=True)
class _RuleRows:
    """The rows of a rule's chart: a feature each, a one-hot group of the rule one row
    (by its lowest column), on the features' observed ranges."""

    rows: list[tuple[str, list[int]]]
    names: list[str]
    features: list[int]
    in_rule: list[list[int]]            # the groups with a column among the rule's features
    grouped: set[int]                   # their columns
    lo_all: np.ndarray
    hi_all: np.ndarray
    span: np.ndarray

    @classmethod
    def of(cls, X: np.ndarray, features: list[int], names: list[str],
           groups: Sequence[Sequence[int]]) -> "_RuleRows":
        lo_all, hi_all = X.min(axis=0), X.max(axis=0)
        span = np.where(hi_all > lo_all, hi_all - lo_all, 1.0)
        in_rule = _groups_in(features, groups)
        grouped = {j for g in in_rule for j in g}
        rows: list[tuple[str, list[int]]] = [(names[j], [j]) for j in features if j not in grouped]
        rows += [(str(names[g[0]]).split("=")[0], g) for g in in_rule]
        rows.sort(key=lambda r: min(r[1]))
        return cls(rows, names, features, in_rule, grouped, lo_all, hi_all, span)

    def is_category(self, cols: list[int]) -> bool:
        return len(cols) > 1 or cols[0] in self.grouped

    def bars(self, box: Box) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """Where ``box``'s bar starts and ends on each row, and its condition there."""
        conds = {tuple(cols): t for cols, t in
                 conditions(box.lower, box.upper, self.names, self.in_rule, self.features)[0]}
        a, b, said = [], [], []
        for label, cols in self.rows:
            if self.is_category(cols):        # a category: no order, the whole bar
                a.append(0.0)
                b.append(1.0)
                said.append(text(conds.get(tuple(cols), "any").replace(label + " ", "", 1)))
                continue
            j = cols[0]
            lo = box.lower[j] if np.isfinite(box.lower[j]) else self.lo_all[j]
            hi = box.upper[j] if np.isfinite(box.upper[j]) else self.hi_all[j]
            a.append(float(np.clip((lo - self.lo_all[j]) / self.span[j], 0, 1)))
            b.append(float(np.clip((hi - self.lo_all[j]) / self.span[j], 0, 1)))
            said.append(text(conds.get((j,), "any value")))
        return np.array(a), np.array(b), said

    def current(self, x: np.ndarray) -> tuple[list[float], list[str]]:
        """The row's place on each row of the chart, and its value there."""
        pos, shown = [], []
        for _label, cols in self.rows:
            if self.is_category(cols):        # the row's own category, at the bar's start
                hot = [j for j in cols if x[j] > 0.5]
                pos.append(0.0)
                shown.append(text(str(self.names[hot[0]]).split("=", 1)[-1]) if hot else "another category")
            else:
                j = cols[0]
                pos.append(float((x[j] - self.lo_all[j]) / self.span[j]))
                shown.append(number_text(x[j]))
        return pos, shown


def fcca_heatmap_figure(levels: pd.DataFrame, hover_text: pd.DataFrame, Q: float):
    """FCCA's threshold heatmap (paper figs. 7-14): features x value intervals,
    coloured by the highest Q at which a threshold there is kept; intervals
    whose thresholds are dropped at the current Q are shown pale."""
    z = levels.to_numpy(dtype=float)
    kept = np.where(z >= Q - 1e-12, z, np.nan)
    dropped = np.where(np.isfinite(z) & ~(z >= Q - 1e-12), 1.0, np.nan)
    x, y = [text(c) for c in levels.columns], [text(r) for r in levels.index]
    hover = np.vectorize(_lines, otypes=[object])(hover_text.to_numpy()) if hover_text.size else hover_text.to_numpy()
    fig = go.Figure()
    fig.add_trace(go.Heatmap(z=dropped, x=x, y=y, colorscale=[[0, "#e6e6e6"], [1, "#e6e6e6"]], showscale=False,
                             text=hover, hovertemplate="%{y}, %{x} of its range<br>%{text}"
                             "<br>(dropped at this Q)<extra></extra>", xgap=1, ygap=1))
    fig.add_trace(go.Heatmap(z=kept, x=x, y=y, zmin=0, zmax=1, colorscale="Viridis",
                             colorbar=dict(title="kept up to Q"), text=hover,
                             hovertemplate="%{y}, %{x} of its range<br>%{text}<extra></extra>", xgap=1, ygap=1))
    fig.update_layout(title=f"Thresholds by feature and value interval (Q = {Q:.2f})",
                      xaxis_title="interval of the feature's observed range", yaxis_autorange="reversed",
                      height=160 + 26 * max(1, len(y)), margin=dict(l=10, r=10, t=50, b=10))
    return fig


def fcca_curves_figure(curves: pd.DataFrame, Q: float):
    """Compression, inconsistency and held-out tree accuracy over Q."""
    fig = go.Figure()
    for col, name, colour in (("compression", "compression rate", "#2f6fb0"),
                              ("inconsistency", "inconsistency rate", "#c0504d"),
                              ("tree accuracy", "tree accuracy (held out)", "#3a923a"),
                              ("tree fidelity", "tree fidelity to the model (held out)", "#8e6bb8")):
        if col in curves:
            fig.add_trace(go.Scatter(x=curves["Q"], y=curves[col], mode="lines+markers", name=name,
                                     line=dict(color=colour)))
    fig.add_vline(x=Q, line_dash="dot", line_color="#555")
    fig.update_layout(title="Compression, inconsistency and tree accuracy over Q", xaxis_title="Q",
                      yaxis_range=[0, 1.02], height=360, margin=dict(l=10, r=10, t=50, b=10),
                      legend=dict(orientation="h", y=-0.25))
    return fig


def _nice_step(span: float, ticks: int = 4) -> float:
    """A round tick step (1, 2 or 5 times a power of ten) giving about ``ticks`` ticks over ``span``."""
    raw = max(span, 1e-12) / ticks
    power = 10.0 ** np.floor(np.log10(raw))
    return float(next(m * power for m in (1, 2, 5, 10) if m * power >= raw))


def interval_chart_svg(labels: Sequence[str], values: ArrayLike, lo: ArrayLike, hi: ArrayLike, *, title: str, axis: str,
                       share: bool = False, highlight: Sequence[bool] | None = None, width: int = 660) -> str:
    """A dot-and-interval chart as inline SVG, for reports that must open and print
    anywhere (no script, no font, no network): one line per label, its value as a dot,
    its interval as a bar, the value and interval written at the right.

    labels : the lines, top to bottom (escaped here); values, lo, hi : arrays of the
    same length (NaN: no value, the line shows "–"); share : values are shares, read in
    percent; highlight : lines drawn in the accent colour (e.g. the case's own group).
    The axis spans 0 and every value and interval (differences may be negative; 0 is
    drawn darker). Returns ``<figure>`` markup with the SVG and its title as caption;
    the SVG has a ``<title>`` and ``role="img"`` for screen readers."""
    v, a, b = (np.asarray(t, dtype=float).reshape(-1) for t in (values, lo, hi))
    n = len(labels)
    marks = np.array([False] * n if highlight is None else list(highlight), dtype=bool)
    low, top, step = _chart_axis(np.concatenate([v, a, b, [0.0]]), share)
    label_w = int(min(max((len(str(s)) for s in labels), default=4) * 6.6 + 16, width * 0.42))
    text_w = 170
    chart = _Chart(low, top, step, share, label_w, width - text_w)
    height = chart.head + chart.row_h * max(n, 1) + chart.foot
    out = [f'<svg role="img" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="Helvetica,Arial,sans-serif" font-size="12">',
           f"<title>{_html.escape(title)}</title>"]
    out += chart.grid(n)
    out.append(f'<text x="{(chart.x0 + chart.x1) / 2:.1f}" y="{height - 6}" text-anchor="middle" fill="#333">'
               f"{_html.escape(axis)}</text>")
    for i, name in enumerate(labels):
        out += chart.line(i, str(name), v[i], a[i], b[i], bool(marks[i]))
    out.append("</svg>")
    return f'<figure class="chart">{"".join(out)}<figcaption>{_html.escape(title)}</figcaption></figure>'


def _chart_axis(seen: np.ndarray, share: bool) -> tuple[float, float, float]:
    """The axis of an interval chart: its ends, on round ticks, over every finite value and 0
    (shares: over [0, 1] too when no value is negative), and the tick step."""
    seen = seen[np.isfinite(seen)]
    low, top = float(seen.min()), float(seen.max())
    if share:
        low, top = min(low, 0.0), max(top, 1.0 if low >= 0 else top)
    step = _nice_step(top - low if top > low else 1.0)
    low = step * np.floor(low / step + 1e-9)
    top = step * np.ceil(top / step - 1e-9) if top > low else low + step
    return low, top, step


@dataclass(frozen=True)
class _Chart:
    """The geometry of an interval chart (:func:`interval_chart_svg`): its axis and where it is drawn."""

    low: float
    top: float
    step: float
    share: bool
    x0: float                       # the axis' left end (after the labels)
    x1: float                       # its right end (before the values written)
    row_h: int = 30
    head: int = 14
    foot: int = 40

    def x(self, t: float) -> float:
        return self.x0 + (self.x1 - self.x0) * min(max((t - self.low) / (self.top - self.low), 0.0), 1.0)

    def tick(self, t: float) -> str:
        return f"{t:.0%}" if self.share else number_text(round_sig(t, 6))

    def shown(self, t: float) -> str:
        return (f"{t:.1%}" if self.share else approx_text(t, 3)) if np.isfinite(t) else "–"

    def grid(self, n: int) -> list[str]:
        """The ticks' vertical lines (0 darker) and their labels under ``n`` lines."""
        out = []
        head, row_h, step = self.head, self.row_h, self.step
        for t in np.arange(self.low, self.top + step / 2, step):
            gx, zero = self.x(t), abs(t) < step * 1e-6
            out.append(f'<line x1="{gx:.1f}" y1="{head - 4}" x2="{gx:.1f}" y2="{head + row_h * n}" '
                       f'stroke="{"#888" if zero else "#e3e3e3"}"/>')
            out.append(f'<text x="{gx:.1f}" y="{head + row_h * n + 14}" text-anchor="middle" fill="#555">'
                       f"{_html.escape(self.tick(0.0 if zero else t))}</text>")
        return out

    def line(self, i: int, name: str, v: float, a: float, b: float, mark: bool) -> list[str]:
        """Line ``i``: its label, its interval ``[a, b]`` as a bar, its value as a dot, both written at the right."""
        cy = self.head + self.row_h * i + self.row_h / 2
        colour = "#c0504d" if mark else "#2f6fb0"
        weight = ' font-weight="bold"' if mark else ""
        both = bool(np.isfinite(a) and np.isfinite(b))
        out = [f'<text x="{self.x0 - 8}" y="{cy + 4:.1f}" text-anchor="end" fill="#222"{weight}>'
               f"{_html.escape(name)}</text>"]
        if both:
            out.append(f'<line x1="{self.x(a):.1f}" y1="{cy:.1f}" x2="{self.x(b):.1f}" y2="{cy:.1f}" '
                       f'stroke="{colour}" stroke-width="3" stroke-linecap="round" opacity="0.55"/>')
        if np.isfinite(v):
            out.append(f'<circle cx="{self.x(v):.1f}" cy="{cy:.1f}" r="5.5" fill="{colour}"/>')
        span = f" [{self.shown(a)}, {self.shown(b)}]" if both else ""
        out.append(f'<text x="{self.x1 + 10}" y="{cy + 4:.1f}" fill="#222"{weight}>'
                   f"{_html.escape(self.shown(v) + span)}</text>")
        return out
