"""Prescriptions checked on the model itself: a rule applied at its edge.

T-CREx's rules and the counterfactual rules are boxes ``lower < x <= upper``
learnt from the model's outputs on data rows (T-CREx's surrogate tree, the
counterfactual rules' random forest): their accuracy and CRP are shares of rows,
estimates. What a person would do with a rule is the least move into it: every
feature outside the rule's bounds brought to the rule's nearest edge, the others
kept. Whether the model gives the target *there* is not what the rule's
accuracy measures (a rule holding 90% target rows can have its edge, where the
moved rows land, on the wrong side of the model's boundary), so it is checked on
the model: :func:`edge_points` makes the moved rows and :class:`OnModel`
answers them, one batched call for all the rows checked (a model that runs in
its worker is never called once per row).

The edge is the one the exact solvers step to (:mod:`core.cells.problem`): an
integral feature (integer, ordinal, binary) takes the first whole number inside
(``floor(lower) + 1``, ``floor(upper)``); another number the upper bound itself
(intervals are closed above) or the lower bound plus :data:`NUDGE` of its span
(open below). A one-hot group that breaks the rule becomes the category the rule
asks for (its hot column), or, when the rule only excludes categories, the
allowed category most frequent in the data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from core.cells.problem import NUDGE
from core.counterfactual import output_mask
from core.model.guarantee import ModelKind
from core.model.native import model_input
from core.schema import INTEGRAL_KINDS
from core.typing import ModelLike, TargetSpec

if TYPE_CHECKING:
    from core.model import LinearModel, TreeEnsemble
    from core.schema import Schema
    from core.surrogate import Surrogate

__all__ = ["OnModel", "on_model", "edge_points", "EdgeSettings"]


@dataclass(frozen=True)
class OnModel:
    """The model an analysis checks its prescriptions on.

    predict : the model's own answers on rows of the analysis's view (never a surrogate's).
    kind : ``"tree_ensemble"``, ``"linear"`` or ``"black_box"`` (the result's ``model_kind``).
    """

    predict: Callable[[np.ndarray], np.ndarray]
    kind: ModelKind

    def accepts(self, Z: np.ndarray, target: TargetSpec) -> np.ndarray:
        """Does the model give ``target`` on each row of ``Z``? One call for all of them."""
        Z = np.atleast_2d(np.asarray(Z, dtype=float))
        if len(Z) == 0:
            return np.zeros(0, dtype=bool)
        return output_mask(np.asarray(self.predict(Z)), target)


def on_model(solve_on: TreeEnsemble | LinearModel, *, model: ModelLike = None,
             surrogate: Surrogate | None = None) -> OnModel:
    """The model to check on, from what ``Workspace.query_model()`` returns
    (``solve_on, extra = ws.query_model(); on_model(solve_on, **extra)``): a tree
    ensemble or a linear model answers itself, exactly; with a ``surrogate``,
    ``solve_on`` is the surrogate's view and ``model`` (e.g. a BlackBoxModel in its
    worker) answers, its rows given through :func:`core.model.native.model_input`."""
    if surrogate is not None:
        if model is None:
            raise ValueError("A surrogate is given without the model it stands for: pass model= as well.")
        return OnModel(lambda Z: np.asarray(model.predict(model_input(solve_on, Z))), "black_box")
    kind = getattr(solve_on, "kind", "tree_ensemble")
    return OnModel(solve_on.predict, "linear" if kind == "linear" else "tree_ensemble")


@dataclass(frozen=True)
class EdgeSettings:
    """What :func:`edge_points` needs of the features: which are integral, their spans,
    the one-hot groups, and each column's count of ones in the data (a group's default)."""

    integral: np.ndarray
    span: np.ndarray
    groups: tuple[tuple[int, ...], ...]
    ones: np.ndarray

    @classmethod
    def of(cls, X: np.ndarray, schema: Schema | None = None, groups: Sequence[Sequence[int]] = ()
           ) -> "EdgeSettings":
        """From the schema's kinds and spans, or, without one, from the data (a column of whole
        numbers is integral; its span is its observed range)."""
        X = np.asarray(X, dtype=float)
        d = X.shape[1]
        with np.errstate(invalid="ignore"):
            finite = np.where(np.isfinite(X), X, np.nan)
            lo, hi = np.nanmin(finite, axis=0) if len(X) else np.zeros(d), \
                np.nanmax(finite, axis=0) if len(X) else np.ones(d)
        if schema is not None:
            integral = np.array([f.kind in INTEGRAL_KINDS for f in schema.features])
            span = schema.arrays()["span"]
        else:
            integral = np.array([bool(np.all(np.isnan(c) | (c == np.round(c)))) for c in finite.T])
            span = np.nan_to_num(hi - lo)
        span = np.where(np.isfinite(span) & (span > 0), span, 1.0)
        ones = np.nansum(finite > 0.5, axis=0)
        return cls(integral, span.astype(float), tuple(tuple(int(j) for j in g) for g in groups if len(g) >= 2),
                   ones.astype(float))


def _lower_edge(lo: float, hi: float, integral: bool, span: float) -> float:
    """The least value of ``(lo, hi]`` a row moves up to."""
    if integral:
        return float(np.floor(lo) + 1)
    v = lo + NUDGE * span
    return v if v <= hi else float(np.nextafter(lo, np.inf))


def _upper_edge(hi: float, integral: bool) -> float:
    return float(np.floor(hi)) if integral else float(hi)


def _group_column(g: tuple[int, ...], lower: np.ndarray, upper: np.ndarray, ones: np.ndarray) -> int:
    """The column of one-hot group ``g`` that a row breaking the rule becomes: the one the
    rule asks hot, else the allowed column most frequent in the data."""
    hot = [j for j in g if lower[j] >= 0]
    if hot:
        return hot[0]
    allowed = [j for j in g if upper[j] >= 1] or list(g)
    return max(allowed, key=lambda j: (ones[j], -j))


def edge_points(X: np.ndarray, lower: np.ndarray, upper: np.ndarray, s: EdgeSettings) -> np.ndarray:
    """Rows ``X`` moved into the box at its nearest edge (see the module docstring): a
    feature already inside its bounds keeps its value; a missing value (NaN) on a
    bounded feature is outside. Vectorised over rows."""
    Z = np.array(X, dtype=float, copy=True)
    in_group = {j for g in s.groups for j in g}
    for j in np.flatnonzero(np.isfinite(lower) | np.isfinite(upper)):
        if j in in_group:
            continue
        col = Z[:, j]
        low = ~(col > lower[j]) & np.isfinite(lower[j])               # at or below the open lower end, or NaN
        high = ~low & ~(col <= upper[j])
        if low.any():
            col[low] = _lower_edge(lower[j], upper[j], bool(s.integral[j]), s.span[j])
        if high.any():
            col[high] = _upper_edge(upper[j], bool(s.integral[j]))
    for g in s.groups:
        cols = np.asarray(g, dtype=np.int64)
        if not (np.isfinite(lower[cols]).any() or np.isfinite(upper[cols]).any()):
            continue
        broken = ~np.all((Z[:, cols] > lower[cols]) & (Z[:, cols] <= upper[cols]), axis=1)
        if broken.any():
            k = _group_column(g, lower, upper, s.ones)
            Z[np.ix_(np.flatnonzero(broken), cols)] = 0.0
            Z[broken, k] = 1.0
    return Z
