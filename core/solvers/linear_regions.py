"""Exact decision regions of a linear model on a 2-D slice.

Through a row ``x``, with every feature but two fixed at ``x``, a linear model's
scores are affine in the two plotted features ``(u, v)``:
``s_o(u, v) = c_o + a_o u + b_o v`` (a categorical axis has no slope: each of its
codes is a band ``[k - 0.5, k + 0.5]`` of its own, with that code's score added to
``c``). Each class's region is then an intersection of half-planes, clipped to the
plotted rectangle (Sutherland-Hodgman clipping of a convex polygon, exact up to
float rounding of the vertices):

* a binary classifier: ``s > 0`` (``classes[1]``) and ``s <= 0`` (``classes[0]``),
  the two sides of its line;
* a multiclass classifier: ``s_c >= s_k`` for every other class ``k``, a convex
  polygon per class and band;
* a regressor, given a target interval ``(lo, hi)``: below, inside and above it
  (two parallel lines).

:func:`linear_slice` returns them as :class:`LinearSlice`, polygons with their
vertices, which :func:`linear_slice_figure` draws (plotly, one filled shape per region: a
handful of polygons, where :func:`core.figures.regions_figure` draws a tree ensemble's many
rectangles as one heatmap).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from core.counterfactual import QueryError
from core.model import Guarantee, LinearModel, as_model
from core.model.features import feature_index
from core.model.result import Reader, Result, Writer, older_name, settings
from core.typing import FeatureKey, ModelLike, Row, TargetSpec

__all__ = ["SlicePolygon", "LinearSlice", "linear_slice", "linear_slice_figure"]


@dataclass(frozen=True)
class SlicePolygon:
    """One region of the slice: a convex polygon on which the model's decision is one.

    vertices : ndarray of shape (n_vertices, 2), counter-clockwise, in (feature a, feature b).
    prediction : the class label (classifiers) or "below" / "in target" / "above" (regressors).
    class_index : index of the class in ``classes`` (-1 for a regressor's part).
    band : the codes of the categorical axes this polygon lies in (None for a numerical axis).
    """

    vertices: np.ndarray
    prediction: Any
    class_index: int
    band: tuple[int | None, int | None] = (None, None)

    @property
    def area(self) -> float:
        u, v = self.vertices[:, 0], self.vertices[:, 1]
        return 0.5 * float(np.sum(u * np.roll(v, -1) - np.roll(u, -1) * v))

    def contains(self, P: np.ndarray) -> np.ndarray:
        """Mask of points (n, 2) inside the polygon or on its edges."""
        P = np.atleast_2d(P)
        V = self.vertices
        ok = np.ones(len(P), dtype=bool)
        for i in range(len(V)):
            a, b = V[i], V[(i + 1) % len(V)]
            cross = (b[0] - a[0]) * (P[:, 1] - a[1]) - (b[1] - a[1]) * (P[:, 0] - a[0])
            ok &= cross >= -1e-9 * (1.0 + np.abs(b - a).sum() * (1.0 + np.abs(P).max()))
        return ok


@dataclass(frozen=True, eq=False)
class LinearSlice(Result):
    """The exact regions of a linear model on a 2-D slice (see the module docstring); a
    :class:`core.model.result.Result` (``elapsed``: seconds, ``seconds`` its older name)."""

    kind: ClassVar[str] = "linear_slice"
    what: ClassVar[str] = "slice of a linear model's regions"

    polygons: tuple[SlicePolygon, ...]
    features: tuple[int, int]
    names: tuple[str, str]
    view: tuple[tuple[float, float], tuple[float, float]]
    x: np.ndarray
    elapsed: float
    guarantee: Guarantee
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", settings(self.params))

    seconds = older_name("seconds")

    def _body(self) -> dict[str, Any]:
        polys = [Writer().array("vertices", p.vertices).value("prediction", p.prediction)
                 .value("class_index", p.class_index).value("band", p.band).done() for p in self.polygons]
        return Writer().value("polygons", polys).value("features", self.features).value("names", self.names) \
            .value("view", self.view).array("x", self.x).done()

    @classmethod
    def _from_body(cls, r: Reader) -> "LinearSlice":
        polys = []
        for d in r.get("polygons"):
            p = Reader(d, "polygon")
            band = p.get("band")
            polys.append(SlicePolygon(p.array("vertices").reshape(-1, 2), p.get("prediction"), int(p.get("class_index")),
                                      (band[0], band[1])))
        fa, fb = r.get("features")
        na, nb = r.get("names")
        (a0, a1), (b0, b1) = r.get("view")
        return cls(tuple(polys), (int(fa), int(fb)), (str(na), str(nb)), ((float(a0), float(a1)), (float(b0), float(b1))),
                   r.array("x"), r.number("elapsed"), Guarantee.from_dict(r.get("guarantee")), dict(r.get("params")))


def _clip(poly: np.ndarray, a: float, b: float, c: float) -> np.ndarray:
    """The part of convex polygon ``poly`` (n, 2) where ``a u + b v + c >= 0``."""
    if len(poly) == 0:
        return poly
    val = poly @ np.array([a, b]) + c
    out = []
    n = len(poly)
    for i in range(n):
        p, q = poly[i], poly[(i + 1) % n]
        fp, fq = val[i], val[(i + 1) % n]
        if fp >= 0:
            out.append(p)
        if (fp >= 0) != (fq >= 0):
            t = fp / (fp - fq)
            out.append(p + t * (q - p))
    return np.array(out).reshape(-1, 2)


def _span(axis: list[tuple[float, float, int | None]]) -> tuple[float, float]:
    """The extent of one axis's pieces: (lowest start, highest end)."""
    return float(min(p[0] for p in axis)), float(max(p[1] for p in axis))


def _axis(lin: LinearModel, j: int, x: np.ndarray, bounds: Any) -> list[tuple[float, float, int | None]]:
    """The pieces of one axis: the view (numerical) or one band per allowed code."""
    if lin.categories[j] is not None:
        return [(k - 0.5, k + 0.5, k) for k in range(lin.n_codes(j)) if lin.code_allowed(j, k)
                and k < lin.n_codes(j) - 1]
    if bounds is not None:
        lo, hi = (float(v) for v in bounds)
    else:
        half = max(1.0, abs(float(x[j])))
        lo, hi = float(x[j]) - half, float(x[j]) + half
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise QueryError(f"The view of {lin.feature_names[j]!r} is ({lo}, {hi}); give two finite bounds, lower first.")
    return [(lo, hi, None)]


def linear_slice(model: ModelLike, x: Row, features: tuple[FeatureKey, FeatureKey], *,
                 bounds: dict[Any, tuple[float, float]] | None = None, target: TargetSpec | None = None) -> LinearSlice:
    """The exact regions of a linear model on the slice through ``x`` on two features.

    Parameters
    ----------
    model : LinearModel, or a fitted linear model / pipeline ending in one.
    x : array-like of shape (n_features,), the row (codes view); the other features stay at it.
    features : two feature names or indices.
    bounds : optional ``{feature: (lo, hi)}``, the view of a numerical axis (default
        ``x_j ± max(1, |x_j|)``); a categorical axis shows each of its categories.
    target : for a regressor, the interval ``(lo, hi)`` whose lines cut the slice (required).

    Returns
    -------
    LinearSlice, whose polygons tile the view (guarantee ``exact``).
    """
    t0 = time.perf_counter()
    lin = as_model(model)
    if not isinstance(lin, LinearModel):
        raise QueryError("linear_slice draws a linear model; for a tree ensemble use core.regions.slice_regions.")
    (fa, fb), x = _slice_door(lin, x, features)
    cuts = _target_cuts(lin, target)
    axes = [_axis(lin, j, x, (bounds or {}).get(lin.feature_names[j], (bounds or {}).get(j))) for j in (fa, fb)]
    polys: list[SlicePolygon] = []
    for ua, ub, ka in axes[0]:
        for va, vb, kb in axes[1]:
            rect = np.array([[ua, va], [ub, va], [ub, vb], [ua, vb]], dtype=float)
            polys += _cell_polygons(lin, x, (fa, fb), (ka, kb), rect, cuts)
    view = (_span(axes[0]), _span(axes[1]))
    return LinearSlice(tuple(polys), (fa, fb), (lin.feature_names[fa], lin.feature_names[fb]),
                       view, x.copy(), time.perf_counter() - t0,
                       Guarantee("exact", "linear"), dict(features=[lin.feature_names[fa], lin.feature_names[fb]],
                                                          mode="slice", target=None if target is None else str(target)))


def _slice_door(lin: LinearModel, x: Row, features: tuple[FeatureKey, FeatureKey]
                ) -> tuple[tuple[int, int], np.ndarray]:
    """The slice's two features (different ones) as indices, and the row as d floats."""
    fa, fb = (feature_index(lin.feature_names, f, error=QueryError, what="features") for f in features)
    if fa == fb:
        raise QueryError("Choose two different features.")
    row = np.asarray(x, dtype=float).ravel()
    if row.shape != (lin.n_features,):
        raise QueryError(f"x has {row.size} values; the model has {lin.n_features} features.")
    return (fa, fb), row


def _target_cuts(lin: LinearModel, target: TargetSpec | None) -> tuple[float, float]:
    """A regressor's target interval ``(lo, hi)``, whose lines cut the slice; (0, 0) for a classifier."""
    if lin.task != "regression":
        return 0.0, 0.0
    try:
        if not isinstance(target, Iterable):          # None, or one label
            raise TypeError(f"target {target!r} is no interval")
        lo_t, hi_t = (float(v) for v in target)
    except (TypeError, ValueError):
        raise QueryError("A regressor's slice is cut by a target interval (lo, hi); give target=(lo, hi).") \
            from None
    return lo_t, hi_t


def _cell_polygons(lin: LinearModel, x: np.ndarray, fs: tuple[int, int], codes: tuple[Any, Any], rect: np.ndarray,
                   cuts: tuple[float, float]) -> list[SlicePolygon]:
    """The polygons of one rectangle of the slice: its numerical axes vary over ``rect``, a
    categorical axis is held at its code; the scores are linear in the two axes there."""
    (fa, fb), (ka, kb) = fs, codes
    base = x.copy()
    for j, k in ((fa, ka), (fb, kb)):
        base[j] = 0.0 if k is None else k
    c = lin.scores(base[None, :])[0]                     # (n_out,) at u = v = 0
    a = lin.coef[:, fa] if ka is None else np.zeros(lin.n_outputs)
    b = lin.coef[:, fb] if kb is None else np.zeros(lin.n_outputs)
    return [SlicePolygon(piece, label, k, (ka, kb)) for piece, label, k in _pieces(lin, rect, a, b, c, *cuts)
            if len(piece) >= 3 and abs(SlicePolygon(piece, label, k).area) > 0]


def _pieces(lin: LinearModel, rect: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray, lo: float,
            hi: float) -> list[tuple[np.ndarray, Any, int]]:
    if lin.task == "regression":
        below = _clip(rect, -a[0], -b[0], -(c[0] - lo))
        inside = _clip(_clip(rect, a[0], b[0], c[0] - lo), -a[0], -b[0], hi - c[0])
        above = _clip(rect, a[0], b[0], c[0] - hi)
        return [(below, "below", -1), (inside, "in target", -1), (above, "above", -1)]
    assert lin.classes is not None
    if lin.n_outputs == 1:
        return [(_clip(rect, -a[0], -b[0], -c[0]), lin.classes[0], 0), (_clip(rect, a[0], b[0], c[0]), lin.classes[1], 1)]
    out = []
    for k in range(lin.n_outputs):
        poly = rect
        for o in range(lin.n_outputs):
            if o != k:
                poly = _clip(poly, a[k] - a[o], b[k] - b[o], c[k] - c[o])
        out.append((poly, lin.classes[k], k))
    return out


def linear_slice_figure(sl: LinearSlice, cf: np.ndarray | None = None, title: str = ""):
    """The slice's polygons as filled shapes (a colour per class or part), the row
    and its counterfactual on top; a pure function of the result."""
    import plotly.colors as pc
    import plotly.graph_objects as go

    palette = pc.qualitative.Set2
    fig = go.Figure()
    shown: set[str] = set()
    order = sorted({str(p.prediction) for p in sl.polygons})
    for p in sl.polygons:
        name = str(p.prediction)
        colour = palette[order.index(name) % len(palette)]
        V = np.vstack([p.vertices, p.vertices[:1]])
        fig.add_trace(go.Scatter(x=V[:, 0], y=V[:, 1], fill="toself", mode="lines", fillcolor=colour,
                                 line=dict(width=0.5, color="rgba(255,255,255,0.6)"), name=name,
                                 legendgroup=name, showlegend=name not in shown, hoverinfo="text",
                                 text=f"prediction {name}"))
        shown.add(name)
    fa, fb = sl.features
    fig.add_trace(go.Scatter(x=[sl.x[fa]], y=[sl.x[fb]], mode="markers", name="instance",
                             marker=dict(symbol="x", size=14, color="black")))
    if cf is not None:
        fig.add_trace(go.Scatter(x=[sl.x[fa], cf[fa]], y=[sl.x[fb], cf[fb]], mode="lines+markers",
                                 name="counterfactual", line=dict(dash="dash", color="black")))
    (a0, a1), (b0, b1) = sl.view
    fig.update_layout(title=title, xaxis_title=sl.names[0], yaxis_title=sl.names[1], xaxis_range=[a0, a1],
                      yaxis_range=[b0, b1], height=560, margin=dict(l=10, r=10, t=40, b=10))
    return fig
