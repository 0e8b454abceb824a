"""Proven-optimal counterfactuals of a linear model: a MILP on its score.

A :class:`core.model.linear.LinearModel` scores ``s(x) = b + W x_num + sum_j T_j[code_j]``,
so "the model gives the target" is a set of linear rows ``g_r(x) >= rhs_r`` on ``x``:

* a binary classifier (one score), towards ``classes[1]``: ``s > 0`` (scikit-learn
  predicts ``classes[1]`` iff its decision is positive), with a probability margin
  ``m`` (sigmoid link) ``s >= logit(m)``; towards ``classes[0]``: ``-s >= 0``
  (``-s >= logit(m)`` with a margin);
* a multiclass classifier towards class ``c``: ``s_c - s_k >= 0`` for every other
  class ``k``, strict for ``k < c`` (``argmax`` keeps the first of equal scores);
* a regressor with the interval ``[lo, hi]``: ``s >= lo`` and ``-s >= -hi``.

Variables (costs as :mod:`core.counterfactual` defines them; ``span_j`` the
feature's range, ``w`` its weights to increase / decrease)
--------------------------------------------------------------------------------------
``u_j, v_j >= 0``
    the increase and decrease of numerical feature ``j`` (``x_j = x̂_j + u_j - v_j``),
    bounded by the schema's range, 0 in a direction its actionability forbids
    (fixed: both 0); cost ``l1 (w⁺ u + w⁻ v) / span + l2 (w⁺ u² + w⁻ v²) / span²``;
``y_j`` integer
    ``x_j`` itself for integer, ordinal, binary and one-hot kinds (binary / one-hot in {0, 1});
``z⁺_j, z⁻_j`` binary (when ``l0 > 0``)
    ``u_j <= U_j z⁺_j``, ``v_j <= V_j z⁻_j``, ``z⁺_j + z⁻_j <= 1``; cost ``l0 (w⁺ z⁺ + w⁻ z⁻)``;
``c_jk`` binary
    category ``k`` of categorical feature ``j``, ``sum_k c_jk = 1`` (only the row's
    own code when the feature is fixed); switching costs one unit, ``w (l0 + l1 + l2)``;
one-hot groups (schema kind "one-hot")
    ``sum_{j in group} y_j = 1`` (``<= 1`` for a row whose group is all 0); each
    column's cost counts half (:func:`core.counterfactual.make_cost_model`).

Constraints: the target rows on ``g_r(x) = const_r + sum_j A_rj x_j + sum_jk T_rjk c_jk``,
closed (``>=``). For one row (binary, or a regressor with one violated side) a
move against the row never helps, so each numerical move is also bounded by
``R0 / |A_j|`` (``R0`` the row's shortfall at ``x̂``): unbounded features then need
no big-M guess, and moves that cannot help are fixed.

Solve, read, check
------------------
l0, l1 and their mix: HiGHS through :func:`scipy.optimize.milp`, with a zero
relative and absolute MIP gap and tightened feasibility tolerances; "proven
optimal" needs its status "optimal" and a reported gap of at most 1e-9. Squared
l2: with continuous moves only and one row, exactly by the KKT conditions (the
moves are ``d_j(λ) = clip((λ |A_j| - c1_j) / (2 c2_j), 0, cap_j)``, and the total gain
is piecewise linear in the one multiplier ``λ``: :func:`_one_row`); with integers,
categories, l0 or several rows, Gurobi's MIQP (``gurobipy``; its pip licence takes
models under 2,000 variables), or a refusal saying so.

The solver's point is read exactly: integers rounded, and for one row the
continuous moves recomputed by :func:`_one_row` given the discrete choices (the
fractional-knapsack greedy for l1), so the cost is the true infimum of the
closed problem (``cost``). A strict row is then met by the smallest step of the
cheapest continuous move that makes the model give the target (doubling from
one unit in the last place), and every moved value is written with the fewest
digits that still give the target, within 1e-4 of the feature's span of its
optimal value (as :mod:`core.cells.result` does for trees). Every point is
checked on the LinearModel and on the original model. When no continuous move
can take a strict row's slack (only integers and categories move), the rows are
solved again as ``g_r >= rhs_r + tau`` with ``tau`` 1e-9 of the row's scale
(raised tenfold while the answer does not hold, at most five times); the
answer is then optimal among points clearing the boundary by ``tau``.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from core.cells.problem import _domains
from core.counterfactual import (
    CostModel,
    CounterfactualResult,
    QueryError,
    Target,
    changes_between,
    make_cost_model,
    make_target,
)
from core.model import Guarantee
from core.model.linear import LinearModel
from core.model.native import native_input
from core.schema import INTEGRAL_KINDS, Schema
from core.shown import round_sig
from core.typing import FeatureKey, ModelLike, Norm, Row, TargetSpec, Weights

__all__ = ["LinearProblem", "build_linear_problem", "solve_linear", "linear_counterfactual", "GurobiNeeded"]

#: how far (as a share of the feature's span) a shown value may sit from its optimal value
SHOWN_TOLERANCE = 1e-4
#: relative MIP gap up to which a solver's answer is reported proven optimal
PROVEN_GAP = 1e-9
#: HiGHS's own options, which scipy's ``milp`` passes on to it verbatim (with a warning, silenced where it
#: is called); scipy documents five options, and scipy-stubs' ``_OptionsMILP`` lists only those
_HIGHS_OPTIONS = {"mip_abs_gap": 0.0, "mip_feasibility_tolerance": 1e-9, "primal_feasibility_tolerance": 1e-9,
                  "dual_feasibility_tolerance": 1e-9}


class GurobiNeeded(QueryError):
    """Squared l2 with integers, categories, l0 or several rows needs gurobipy's MIQP."""


@dataclass
class LinearProblem:
    """One query on a linear model, in arrays (see the module docstring)."""

    lin: LinearModel
    x_hat: np.ndarray                  # (d,) the query (codes view)
    target: Target
    cost_model: CostModel
    kinds: list[str]
    lo: np.ndarray                     # (d,) smallest allowed value (numerical features)
    hi: np.ndarray                     # (d,) largest allowed value
    action: list[str]                  # per feature: free, fixed, increase, decrease
    groups: list[list[int]]            # one-hot groups
    rows: np.ndarray                   # (n_rows, n_outputs): each target row as weights on the scores
    rhs: np.ndarray                    # (n_rows,)
    strict: np.ndarray                 # (n_rows,) bool
    what: list[str] = field(default_factory=list)   # each row in words
    unit: np.ndarray = field(default_factory=lambda: np.zeros(0))   # (d,) cost of a category switch

    @property
    def n_features(self) -> int:
        return self.lin.n_features

    def g(self, X: np.ndarray) -> np.ndarray:
        """Row values ``g_r(x) - rhs_r``, shape (n, n_rows)."""
        return self.lin.scores(np.atleast_2d(X)) @ self.rows.T - self.rhs

    def holds(self, X: np.ndarray) -> np.ndarray:
        """Does the LinearModel give the target (with its margin) on each row of X?"""
        X = np.atleast_2d(X)
        lin, t = self.lin, self.target
        if t.kind == "class":
            ok = lin.predict(X) == t.label
            if t.margin is not None:
                ok &= lin.predict_proba(X)[:, t.class_index] >= t.margin - 1e-12
            return ok
        v = lin.predict(X)
        return (v >= t.lo) & (v <= t.hi)

    def cost(self, x: np.ndarray) -> float:
        """The cost of ``x`` (numerical features by the cost model, a category switch one unit)."""
        x = np.asarray(x, dtype=float)
        num = np.array([c is None for c in self.lin.categories])
        fc = self.cost_model.feature_costs(self.x_hat, x[None, :])[0]
        total = float(fc[num].sum())
        for j in np.flatnonzero(~num):
            if x[j] != self.x_hat[j]:
                total += float(self.unit[j])
        return total


def build_linear_problem(lin: LinearModel, x: Row, target: TargetSpec, *, schema: Schema | None = None,
                         norm: Norm = "l1", weights: Weights = None, fixed: Iterable[FeatureKey] | None = None,
                         increase_only: Iterable[FeatureKey] | None = None, decrease_only: Iterable[FeatureKey] | None = None,
                         margin: float | None = None) -> LinearProblem:
    """The query as a :class:`LinearProblem` (arguments as :func:`core.optimal.optimal_counterfactual`'s)."""
    x_hat = _query_row(lin, x)
    duck: Any = lin                                  # the target and cost helpers read names, task and classes
    tgt = _with_margin(lin, make_target(duck, target, None), margin)
    cm = make_cost_model(duck, norm, weights, schema)
    kinds, lo, hi, action, groups = _domains(duck, schema, x_hat, fixed, increase_only, decrease_only)
    _check_kinds(lin, x_hat, kinds, action)
    rows, rhs, strict, what = _target_rows(lin, tgt)
    unit = np.zeros(lin.n_features)
    for j in lin.categorical_features:
        unit[j] = 0.5 * (cm.w_down[j] + cm.w_up[j]) * (cm.l0 + cm.l1 + cm.l2)
    return LinearProblem(lin, x_hat, tgt, cm, kinds, lo, hi, action, groups, rows, rhs, strict, what, unit)


def _query_row(lin: LinearModel, x: Row) -> np.ndarray:
    """The query as d finite floats (a missing value read as the model's fill), which the model scores."""
    x_hat = np.array(x, dtype=float).ravel()
    if x_hat.shape != (lin.n_features,):
        raise QueryError(f"x has {x_hat.size} values; the model has {lin.n_features} features.")
    fills = lin.meta.get("impute", {})
    for j in np.flatnonzero(np.isnan(x_hat)).tolist():
        if lin.feature_names[j] in fills and lin.categories[j] is None:
            x_hat[j] = float(fills[lin.feature_names[j]])   # the model reads a missing value as its fill
    if not np.all(np.isfinite(x_hat)):
        raise QueryError("x contains NaN or infinite values; give a complete row.")
    try:
        lin.scores(x_hat[None, :])
    except ValueError as exc:
        raise QueryError(str(exc)) from None
    return x_hat


def _with_margin(lin: LinearModel, tgt: Target, margin: float | None) -> Target:
    """The target with its probability margin, which needs a binary logistic model."""
    if margin is None:
        return tgt
    margin = float(margin)
    if not 0 < margin < 1:
        raise QueryError(f"The margin is a probability strictly between 0 and 1; got {margin!r}.")
    if lin.task != "classification":
        raise QueryError("A probability margin is for classifiers; a regressor's target is already an interval.")
    if lin.link != "sigmoid":
        raise QueryError(f"A probability margin needs a binary logistic model (its probability is a sigmoid of "
                         f"one score, so the margin is a bound on the score); this model's link is {lin.link!r}"
                         + (" (no probabilities)." if lin.link == "decision" else
                            " (no exact linear form of a class's probability)."))
    return Target("class", class_index=tgt.class_index, label=tgt.label, margin=margin)


def _check_kinds(lin: LinearModel, x_hat: np.ndarray, kinds: list[str], action: list[str]) -> None:
    """Categorical features marked so (free or fixed only), integer kinds holding integers."""
    for j in lin.categorical_features:
        kinds[j] = "categorical"
        if action[j] in ("increase", "decrease"):
            raise QueryError(f"Feature {lin.feature_names[j]!r} is categorical: it can be free or fixed, not "
                             f"{action[j]}-only (its categories have no order).")
    for j in range(lin.n_features):
        if kinds[j] in INTEGRAL_KINDS and kinds[j] != "categorical" and x_hat[j] != math.floor(x_hat[j]):
            raise QueryError(f"Feature {lin.feature_names[j]!r} takes integer values (kind {kinds[j]}), but the row "
                             f"holds {x_hat[j]!r}; correct the row or the feature's kind.")


def _target_rows(lin: LinearModel, t: Target) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """The target as rows ``rows @ s(x) >= rhs`` (strict where the model's tie rule needs it)."""
    n_out = lin.n_outputs
    if t.kind == "interval":
        found = _interval_rows(t)
    elif n_out == 1:
        found = [_binary_row(t)]
    else:
        found = _class_rows(lin, t)
    if not found:
        found = [([0.0] * n_out, -1.0, False, "any prediction")]
    rows, rhs, strict, what = zip(*found)
    return (np.array(rows, dtype=float).reshape(-1, n_out), np.array(rhs, dtype=float),
            np.array(strict, dtype=bool), list(what))


#: one target row: its weights on the scores, its right-hand side, strict or not, in words
_TargetRow = tuple[list[float] | np.ndarray, float, bool, str]


def _interval_rows(t: Target) -> list[_TargetRow]:
    """A regressor's interval: ``s >= lo`` and ``-s >= -hi``, each side that is finite."""
    return [([sign], sign * bound, False, f"prediction {'>=' if sign > 0 else '<='} {bound:g}")
            for sign, bound in ((1.0, t.lo), (-1.0, t.hi)) if np.isfinite(bound)]


def _binary_row(t: Target) -> _TargetRow:
    """A binary classifier's one score: ``s > 0`` towards ``classes[1]`` (``-s >= 0`` towards
    ``classes[0]``), ``± s >= logit(m)`` with a margin."""
    logit = 0.0 if t.margin is None else math.log(t.margin / (1.0 - t.margin))
    sign = 1.0 if t.class_index == 1 else -1.0
    side = ">" if sign > 0 else "<="
    return ([sign], logit, t.margin is None and sign > 0,
            f"decision score {side} 0" if t.margin is None else f"P({t.label}) >= {t.margin:g}")


def _class_rows(lin: LinearModel, t: Target) -> list[_TargetRow]:
    """A multiclass target ``c``: ``s_c - s_k >= 0`` for every other class, strict for ``k < c``."""
    n_out, c, classes = lin.n_outputs, t.class_index, lin.classes
    if classes is None:
        raise QueryError("A class target needs a classifier; this linear model has no classes.")
    out: list[_TargetRow] = []
    for k in range(n_out):
        if k == c:
            continue
        r = np.zeros(n_out)
        r[c], r[k] = 1.0, -1.0
        out.append((r, 0.0, k < c, f"score of {classes[c]} {'>' if k < c else '>='} score of {classes[k]}"))
    return out


# --------------------------------------------------------------------- the formulation
@dataclass
class _Vars:
    """Column layout of the MILP: which variable is which."""

    n: int = 0
    lb: list[float] = field(default_factory=list)
    ub: list[float] = field(default_factory=list)
    integ: list[int] = field(default_factory=list)
    c: list[float] = field(default_factory=list)
    q: list[float] = field(default_factory=list)     # squared-cost coefficient (l2)
    u: dict[int, int] = field(default_factory=dict)
    v: dict[int, int] = field(default_factory=dict)
    y: dict[int, int] = field(default_factory=dict)
    zu: dict[int, int] = field(default_factory=dict)
    zv: dict[int, int] = field(default_factory=dict)
    cat: dict[int, list[tuple[int, int]]] = field(default_factory=dict)   # feature -> [(code, column)]

    def add(self, lb: float, ub: float, integer: int = 0, c: float = 0.0, q: float = 0.0) -> int:
        self.lb.append(lb)
        self.ub.append(ub)
        self.integ.append(integer)
        self.c.append(c)
        self.q.append(q)
        self.n += 1
        return self.n - 1


@dataclass
class _Model:
    """The MILP in arrays: variables, linear rows ``lo <= A z <= hi``."""

    vars: _Vars
    A: list[dict[int, float]]
    row_lo: list[float]
    row_hi: list[float]
    target_rows: list[int]             # the index in A of each target row
    const: np.ndarray                  # (n_rows,) each target row's constant (at x̂, categories excluded)
    caps: dict[int, tuple[float, float]]   # numerical feature -> (U, V) after the one-row bounds


def _row_coefs(prob: LinearProblem) -> tuple[np.ndarray, np.ndarray, dict[int, np.ndarray]]:
    """Per target row: constant, coefficients on numerical features, category contributions
    (per categorical feature, (n_codes, n_rows))."""
    lin = prob.lin
    const = prob.rows @ lin.intercept - prob.rhs
    A = prob.rows @ lin.coef                                   # (n_rows, d); 0 at categorical features
    tabs = {j: t @ prob.rows.T for j, t in enumerate(lin.category_scores) if t is not None}
    return const, A, tabs


def _formulate(prob: LinearProblem, tau: np.ndarray, with_l2: bool) -> _Model:
    lin, x_hat = prob.lin, prob.x_hat
    coefs = _row_coefs(prob)
    const, A, tabs = coefs
    n_rows = len(prob.rhs)
    V = _Vars()
    # the rows' constant at x̂ (categories at the row's codes) and the one-row bounds on moves
    at_hat = const + A @ np.where([c is None for c in lin.categories], x_hat, 0.0)
    cat_hat = np.zeros(n_rows)
    for j in lin.categorical_features:
        cat_hat += tabs[j][int(x_hat[j])]
    one_row = n_rows == 1
    short = float(max(0.0, tau[0] - (at_hat[0] + cat_hat[0]))) if one_row else np.inf
    caps: dict[int, tuple[float, float]] = {}
    for j in range(lin.n_features):
        if lin.categories[j] is not None:
            continue
        caps[j] = _move_caps(prob, j, float(A[0, j]) if one_row else None, short)
        _add_moves(V, prob, j, caps[j], with_l2)
    _add_categories(V, prob)
    rows = _Rows()
    target_rows = _add_target_rows(rows, prob, V, coefs, tau)
    _add_integer_links(rows, V, x_hat)
    _add_indicator_rows(rows, V, caps)
    for opts in V.cat.values():                 # one category
        rows.add({col: 1.0 for _, col in opts}, 1.0, 1.0)
    _add_group_rows(rows, V, prob)
    return _Model(V, rows.A, rows.lo, rows.hi, target_rows, at_hat + cat_hat, caps)


@dataclass
class _Rows:
    """The MILP's linear rows ``lo <= A z <= hi``, in the order they are written."""

    A: list[dict[int, float]] = field(default_factory=list)
    lo: list[float] = field(default_factory=list)
    hi: list[float] = field(default_factory=list)

    def add(self, coef: dict[int, float], lo: float, hi: float) -> int:
        self.A.append(coef)
        self.lo.append(lo)
        self.hi.append(hi)
        return len(self.A) - 1


def _move_caps(prob: LinearProblem, j: int, a: float | None, short: float) -> tuple[float, float]:
    """The largest increase and decrease ``(U, V)`` of numerical feature ``j``: its range cut
    by its actionability, whole steps for an integer, and with one target row (coefficient
    ``a``, shortfall ``short``) no move against the row nor beyond its shortfall's worth."""
    x = prob.x_hat[j]
    U = 0.0 if prob.action[j] in ("fixed", "decrease") else prob.hi[j] - x
    Vd = 0.0 if prob.action[j] in ("fixed", "increase") else x - prob.lo[j]
    integral = prob.kinds[j] in INTEGRAL_KINDS
    if integral:
        U, Vd = math.floor(x + U) - x if np.isfinite(U) else U, x - math.ceil(x - Vd) if np.isfinite(Vd) else Vd
    if a is not None:
        U, Vd = _row_cap(U, a, short, integral), _row_cap(Vd, -a, short, integral)
    return max(U, 0.0), max(Vd, 0.0)


def _row_cap(cap: float, gain: float, short: float, integral: bool) -> float:
    """One direction's cap against the single row: 0 when it does not raise the row, else
    no further than the row's shortfall needs (a whole step beyond for an integer)."""
    if gain <= 0:
        return 0.0
    if not np.isfinite(short):
        return cap
    return min(cap, math.ceil(short / gain) if integral else short / gain * (1 + 1e-9))


def _add_moves(V: _Vars, prob: LinearProblem, j: int, caps: tuple[float, float], with_l2: bool) -> None:
    """The columns of numerical feature ``j``: its increase and decrease, its integer value,
    and with l0 their indicators."""
    U, Vd = caps
    if U == 0 and Vd == 0:
        return
    cm, x = prob.cost_model, prob.x_hat[j]
    span = cm.span[j]
    if U > 0:
        V.u[j] = V.add(0.0, U, 0, cm.l1 * cm.w_up[j] / span, cm.l2 * cm.w_up[j] / span ** 2 if with_l2 else 0.0)
    if Vd > 0:
        V.v[j] = V.add(0.0, Vd, 0, cm.l1 * cm.w_down[j] / span,
                       cm.l2 * cm.w_down[j] / span ** 2 if with_l2 else 0.0)
    if prob.kinds[j] in INTEGRAL_KINDS:
        V.y[j] = V.add(x - Vd, x + U, 1)
    if cm.l0 > 0:
        _add_indicators(V, prob, j, caps)


def _add_indicators(V: _Vars, prob: LinearProblem, j: int, caps: tuple[float, float]) -> None:
    """The l0 indicator of each direction feature ``j`` may move in (a finite cap needed)."""
    cm = prob.cost_model
    U, Vd = caps
    for side, cap, w, zs in ((V.u, U, cm.w_up[j], V.zu), (V.v, Vd, cm.w_down[j], V.zv)):
        if j not in side:
            continue
        if not np.isfinite(cap):
            raise QueryError(
                f"Feature {prob.lin.feature_names[j]!r} has no finite range, and with an l0 cost on a model "
                "of several target rows a change count needs one: give the features ranges (a schema).")
        zs[j] = V.add(0.0, 1.0, 1, cm.l0 * w)


def _add_categories(V: _Vars, prob: LinearProblem) -> None:
    """One binary column per category a categorical feature may take (its own only when fixed)."""
    lin = prob.lin
    for j in lin.categorical_features:
        own = int(prob.x_hat[j])
        codes = [own] if prob.action[j] == "fixed" else \
            [k for k in range(lin.n_codes(j)) if lin.code_allowed(j, k) and (k < lin.n_codes(j) - 1 or k == own)]
        V.cat[j] = [(k, V.add(0.0, 1.0, 1, 0.0 if k == own else float(prob.unit[j]))) for k in codes]


def _add_target_rows(rows: _Rows, prob: LinearProblem, V: _Vars,
                     coefs: tuple[np.ndarray, np.ndarray, dict[int, np.ndarray]], tau: np.ndarray) -> list[int]:
    """The target rows ``g_r(x̂ moved) >= tau_r``, written on the moves; their indices."""
    const, A, tabs = coefs
    target_rows = []
    for r in range(len(prob.rhs)):
        coef: dict[int, float] = {}
        rest = float(const[r] + A[r] @ np.where([c is None for c in prob.lin.categories], prob.x_hat, 0.0))
        for j, col in V.u.items():
            coef[col] = coef.get(col, 0.0) + A[r, j]
        for j, col in V.v.items():
            coef[col] = coef.get(col, 0.0) - A[r, j]
        for j, opts in V.cat.items():
            for k, col in opts:
                coef[col] = coef.get(col, 0.0) + float(tabs[j][k, r])
        target_rows.append(rows.add(coef, float(tau[r]) - rest, np.inf))
    return target_rows


def _add_integer_links(rows: _Rows, V: _Vars, x_hat: np.ndarray) -> None:
    """``y_j - u_j + v_j = x̂_j`` for every integer feature that moves."""
    for j, col in V.y.items():
        coef = {col: 1.0}
        if j in V.u:
            coef[V.u[j]] = -1.0
        if j in V.v:
            coef[V.v[j]] = 1.0
        rows.add(coef, float(x_hat[j]), float(x_hat[j]))


def _add_indicator_rows(rows: _Rows, V: _Vars, caps: dict[int, tuple[float, float]]) -> None:
    """Moves only with their indicator, one direction at a time."""
    for j in set(V.zu) | set(V.zv):
        U, Vd = caps[j]
        if j in V.zu:
            rows.add({V.u[j]: 1.0, V.zu[j]: -U}, -np.inf, 0.0)
        if j in V.zv:
            rows.add({V.v[j]: 1.0, V.zv[j]: -Vd}, -np.inf, 0.0)
        if j in V.zu and j in V.zv:
            rows.add({V.zu[j]: 1.0, V.zv[j]: 1.0}, -np.inf, 1.0)


def _add_group_rows(rows: _Rows, V: _Vars, prob: LinearProblem) -> None:
    """One-hot groups: one column hot (at most one for a row whose group is all 0)."""
    x_hat = prob.x_hat
    for g in prob.groups:
        coef, fixed_sum = {}, 0.0
        for j in g:
            if j in V.y:
                coef[V.y[j]] = 1.0
            else:
                fixed_sum += x_hat[j]
        if not coef:
            continue
        whole = float(x_hat[g].sum()) == 1.0
        rows.add(coef, 1.0 - fixed_sum if whole else -np.inf, 1.0 - fixed_sum)


def _point(prob: LinearProblem, m: _Model, z: np.ndarray) -> np.ndarray:
    """The point of a solver's solution: integers rounded, categories by their largest indicator."""
    x = prob.x_hat.copy()
    V = m.vars
    for j in range(prob.n_features):
        if j in V.y:
            x[j] = float(np.round(z[V.y[j]]))
        elif j in V.u or j in V.v:
            x[j] = prob.x_hat[j] + (z[V.u[j]] if j in V.u else 0.0) - (z[V.v[j]] if j in V.v else 0.0)
            x[j] = min(max(x[j], prob.lo[j]), prob.hi[j])
    for j, opts in V.cat.items():
        x[j] = float(opts[int(np.argmax([z[col] for _, col in opts]))][0])
    return x


# --------------------------------------------------------------------- one row, exactly
def _one_row(gain: np.ndarray, cap: np.ndarray, c1: np.ndarray, c2: np.ndarray, need: float) -> np.ndarray | None:
    """Moves ``d >= 0`` minimising ``sum c1 d + c2 d^2`` with ``sum gain d >= need`` and
    ``d <= cap`` (``gain > 0``), exactly: the KKT conditions give ``d(λ) = clip((λ gain - c1) /
    (2 c2), 0, cap)`` (for ``c2 = 0``: 0 below ``λ = c1 / gain``, ``cap`` above, anything
    between at it: the fractional knapsack), and ``G(λ) = sum gain d(λ)`` is nondecreasing and
    piecewise linear between the breakpoints. None when even every cap falls short."""
    n = gain.size
    if need <= 0 or n == 0:
        return np.zeros(n) if need <= 0 else None
    if float(np.sum(gain * cap)) < need:
        return None
    quad = c2 > 0
    start = c1 / gain
    with np.errstate(invalid="ignore"):
        end = np.where(quad, (c1 + 2 * c2 * cap) / gain, start)
    points = np.unique(np.concatenate([start, end[np.isfinite(end)]]))

    def moves(lam: float, at_jump: bool) -> np.ndarray:
        out = np.zeros(n)
        with np.errstate(invalid="ignore"):
            out[quad] = np.clip((lam * gain[quad] - c1[quad]) / (2 * c2[quad]), 0.0, cap[quad])
        above = ~quad & ((start < lam) | (at_jump & (start == lam)))   # on the breakpoints themselves: exact
        out[above] = cap[above]
        return out

    def total(d: np.ndarray) -> float:
        with np.errstate(invalid="ignore"):
            return float(np.sum(np.where(d > 0, gain * d, 0.0)))

    prev = -np.inf
    for lam in points:
        below = moves(lam, False)
        if total(below) >= need:             # reached on the piece (prev, lam): only quadratic moves vary there
            return _on_piece(gain, cap, c1, c2, need, prev, lam, moves)
        full = moves(lam, True)
        if total(full) >= need:              # reached by the linear moves that start at lam, filled in turn
            d, left = below, need - total(below)
            at = np.flatnonzero(~quad & (start == lam))
            for i in at[np.argsort(-gain[at], kind="stable")]:
                d[i] = min(cap[i], left / gain[i])
                left -= d[i] * gain[i]
                if left <= 0:
                    break
            return d
        prev = lam
    return _on_piece(gain, cap, c1, c2, need, prev, np.inf, moves)


def _on_piece(gain: np.ndarray, cap: np.ndarray, c1: np.ndarray, c2: np.ndarray, need: float, a: float, b: float,
              moves: Any) -> np.ndarray:
    """Solve ``G(λ) = need`` on a piece ``(a, b)`` where G is linear: the quadratic moves
    strictly between 0 and their cap are ``(λ g - c1) / (2 c2)``, the others constant."""
    mid = 0.5 * (a + b) if np.isfinite(a) and np.isfinite(b) else (a + 1.0 + abs(a) if np.isfinite(a) else b - 1.0)
    d = moves(mid, False)
    free = (c2 > 0) & (d > 0) & (d < cap)
    fixed_part = float(np.sum(gain[~free] * d[~free]))
    slope = float(np.sum(gain[free] ** 2 / (2 * c2[free])))
    lam = (need - fixed_part + float(np.sum(gain[free] * c1[free] / (2 * c2[free])))) / slope if slope > 0 else mid
    d[free] = np.clip((lam * gain[free] - c1[free]) / (2 * c2[free]), 0.0, cap[free])
    return d


def _continuous_polish(prob: LinearProblem, m: _Model, x: np.ndarray, tau: np.ndarray,
                       allowed: set[int] | None = None) -> np.ndarray | None:
    """For one target row: the continuous moves recomputed exactly given the discrete
    choices of ``x`` and, with l0, the features whose change the solver paid for
    (``allowed``), by :func:`_one_row`."""
    _, A, _ = _row_coefs(prob)
    cont = _continuous(prob, m)
    base = x.copy()
    base[cont] = prob.x_hat[cont]
    need = float(tau[0]) - float(prob.g(base[None, :])[0, 0])
    items, sign, gain, cap, c1, c2 = _polish_items(prob, m, A[0], [j for j in cont if allowed is None or j in allowed])
    if need <= 0:
        return base
    d = _one_row(np.array(gain), np.array(cap, dtype=float), np.array(c1), np.array(c2), need)
    if d is None:
        return None
    out = base.copy()
    for j, s, dj in zip(items, sign, d):
        out[j] = prob.x_hat[j] + s * dj if dj > 0 else out[j]
    return out


def _continuous(prob: LinearProblem, m: _Model) -> list[int]:
    """The numerical features that may move and take any value (not integers)."""
    return [j for j in m.caps if prob.kinds[j] not in INTEGRAL_KINDS and prob.lin.categories[j] is None]


def _polish_items(prob: LinearProblem, m: _Model, a: np.ndarray, features: list[int]
                  ) -> tuple[list[int], list[float], list[float], list[float], list[float], list[float]]:
    """Each direction of each feature (the solver chose not to move the others: with l0 its
    count is paid per move) that raises the row ``a``: ``(feature, sign, gain, cap, l1 price,
    l2 price)`` as columns."""
    cm = prob.cost_model
    items: list[int] = []
    gain, cap, c1, c2, sign = [], [], [], [], []
    for j in features:
        U, Vd = m.caps[j]
        for s, capj, w in ((1.0, U, cm.w_up[j]), (-1.0, Vd, cm.w_down[j])):
            if capj > 0 and s * a[j] > 0:
                items.append(j)
                gain.append(abs(a[j]))
                cap.append(capj)
                sign.append(s)
                c1.append(cm.l1 * w / cm.span[j])
                c2.append(cm.l2 * w / cm.span[j] ** 2)
    return items, sign, gain, cap, c1, c2


def _relaxation(prob: LinearProblem, m: _Model, tau: np.ndarray) -> np.ndarray | None:
    """One row and an l1 cost: the LP relaxation solved exactly by :func:`_one_row` (an
    integer feature as a continuous one; a categorical feature as one item, its best
    code, whose gain its other codes cannot beat at the same switch cost; a one-hot
    group makes this step stand aside). When the LP optimum moves every integer by a
    whole number and every categorical item wholly or not at all, it is a point of the
    MILP at the LP's lower bound: proven optimal without the MILP. None otherwise."""
    if any(prob.action[j] != "fixed" for g in prob.groups for j in g):
        return None
    need = float(tau[0]) - float(prob.g(prob.x_hat[None, :])[0, 0])
    items, gain, cap, c1 = _lp_items(prob, m)
    d = _one_row(np.array(gain), np.array(cap, dtype=float), np.array(c1), np.zeros(len(gain)), need)
    if d is None:
        return None
    x = prob.x_hat.copy()
    for (j, s, code), dj, capj in zip(items, d, cap):
        if dj <= 0:
            continue
        if not _whole(prob, j, code, dj, capj):
            return None
        x[j] = code if code is not None else prob.x_hat[j] + s * dj
    return x


def _whole(prob: LinearProblem, j: int, code: Any, dj: float, capj: float) -> bool:
    """Is the LP's move ``dj`` of an item a move of the MILP: a category taken wholly, an integer
    moved by a whole number, any continuous move?"""
    if code is not None:
        return bool(dj == capj)
    return prob.kinds[j] not in INTEGRAL_KINDS or bool(dj == np.floor(dj))


def _lp_items(prob: LinearProblem, m: _Model
              ) -> tuple[list[tuple[int, float, Any]], list[float], list[float], list[float]]:
    """The LP relaxation's items: each direction of a numerical feature that raises the row, and
    each categorical feature's best code (``(feature, sign, code or None)``), with their gains,
    caps and l1 prices."""
    cm = prob.cost_model
    _, A, tabs = _row_coefs(prob)
    items: list[tuple[int, float, Any]] = []
    gain, cap, c1 = [], [], []
    for j, (U, Vd) in m.caps.items():
        a = A[0, j]
        for s, capj, w in ((1.0, U, cm.w_up[j]), (-1.0, Vd, cm.w_down[j])):
            if capj > 0 and s * a > 0:
                items.append((j, s, None))
                gain.append(abs(a))
                cap.append(capj)
                c1.append(cm.l1 * w / cm.span[j])
    for j, opts in m.vars.cat.items():
        own = int(prob.x_hat[j])
        t = tabs[j][:, 0]
        best = max(((float(t[k] - t[own]), k) for k, _ in opts if k != own), default=(0.0, own))
        if best[0] > 0:
            items.append((j, 1.0, best[1]))
            gain.append(best[0])
            cap.append(1.0)
            c1.append(float(prob.unit[j]))
    return items, gain, cap, c1


# --------------------------------------------------------------------- solvers
@dataclass
class _Solved:
    status: str                    # "optimal", "infeasible", "time_limit", "error"
    z: np.ndarray | None
    objective: float
    bound: float
    gap: float
    backend: str
    message: str = ""


def _highs(m: _Model, time_limit: float) -> _Solved:
    from scipy.optimize import Bounds, LinearConstraint, milp

    V = m.vars
    cons = [] if not m.A else [LinearConstraint(_sparse(m), np.array(m.row_lo), np.array(m.row_hi))]
    c = np.array(V.c)
    scale = 1.0 / max(float(np.abs(c).max()) if c.size else 1.0, 1e-300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)      # the options scipy passes on to HiGHS verbatim
        res = milp(c * scale if V.n else np.zeros(0), integrality=np.array(V.integ),
                   bounds=Bounds(np.array(V.lb), np.array(V.ub)), constraints=cons,
                   # presolve costs more than it saves when small; the stubs know no HiGHS option (_HIGHS_OPTIONS)
                   options={"time_limit": max(time_limit, 0.01), "mip_rel_gap": 0.0, "disp": False,  # type: ignore[arg-type]
                            "presolve": V.n > 500, **_HIGHS_OPTIONS})
    return _highs_read(res, scale)


def _highs_read(res: Any, scale: float) -> _Solved:
    """What HiGHS answered (``res``, scipy's), its objective and bound unscaled."""
    if res.status == 2:
        return _Solved("infeasible", None, np.inf, np.inf, np.inf, "highs")
    if res.x is None:
        status = "time_limit" if res.status == 1 else "error"
        return _Solved(status, None, np.inf, -np.inf, np.inf, "highs", str(res.message))
    obj = float(res.fun) / scale
    bound = float(getattr(res, "mip_dual_bound", res.fun) or res.fun) / scale
    gap = float(getattr(res, "mip_gap", 0.0) or 0.0)
    status = "optimal" if res.status == 0 and gap <= PROVEN_GAP else "time_limit"
    return _Solved(status, np.asarray(res.x), obj, bound, gap, "highs")


def _sparse(m: _Model) -> Any:
    """The rows' matrix, its nonzero coefficients in a sparse array."""
    from scipy.sparse import csr_array

    data, ri, ci = [], [], []
    for r, coef in enumerate(m.A):
        for col, val in coef.items():
            if val != 0:
                data.append(val)
                ri.append(r)
                ci.append(col)
    return csr_array((data, (ri, ci)), shape=(len(m.A), m.vars.n))


def _gurobi(m: _Model, time_limit: float, n_workers: int) -> _Solved:
    try:
        import gurobipy as gp
    except ImportError:
        raise GurobiNeeded("Squared l2 with integer, binary or categorical moves, an l0 term or several target rows "
                           "is a mixed-integer quadratic problem, solved exactly by Gurobi (gurobipy), which is not "
                           "installed; use l1, l0 or their mix, or install gurobipy.") from None
    V = m.vars
    env = gp.Env(empty=True)
    env.setParam("OutputFlag", 0)
    env.start()
    try:
        g = gp.Model(env=env)
        vt = [gp.GRB.INTEGER if i else gp.GRB.CONTINUOUS for i in V.integ]
        z = g.addMVar(V.n, lb=np.array(V.lb), ub=np.where(np.isfinite(V.ub), V.ub, gp.GRB.INFINITY),
                      vtype=np.array(vt))
        _gurobi_rows(gp, g, z.tolist(), m)
        q, c = np.array(V.q), np.array(V.c)
        g.setObjective(c @ z + gp.quicksum(q[i] * z[i] * z[i] for i in np.flatnonzero(q).tolist()), gp.GRB.MINIMIZE)
        g.Params.MIPGap = 0.0
        g.Params.MIPGapAbs = 0.0
        g.Params.FeasibilityTol = 1e-9
        g.Params.IntFeasTol = 1e-9
        g.Params.OptimalityTol = 1e-9
        g.Params.TimeLimit = max(time_limit, 0.01)
        g.Params.Threads = n_workers
        try:
            g.optimize()
        except gp.GurobiError as exc:
            raise GurobiNeeded(f"Gurobi could not solve this squared-l2 problem ({exc}); its pip licence takes "
                               "models under 2,000 variables. Use l1, l0 or their mix.") from None
        return _gurobi_read(gp, g, z)
    finally:
        env.dispose()


def _gurobi_rows(gp: Any, g: Any, zs: list[Any], m: _Model) -> None:
    """The rows ``lo <= A z <= hi`` as Gurobi constraints on scalar Vars (a row is a LinExpr:
    0-d MVar terms are far slower), an equation where both sides meet."""
    for r, coef in enumerate(m.A):
        expr = gp.quicksum(val * zs[col] for col, val in coef.items() if val != 0)
        if np.isfinite(m.row_lo[r]) and m.row_lo[r] == m.row_hi[r]:
            g.addConstr(expr == m.row_lo[r])
            continue
        if np.isfinite(m.row_lo[r]):
            g.addConstr(expr >= m.row_lo[r])
        if np.isfinite(m.row_hi[r]):
            g.addConstr(expr <= m.row_hi[r])


def _gurobi_read(gp: Any, g: Any, z: Any) -> _Solved:
    """What Gurobi answered: infeasible, no point in time, or its point with its gap."""
    if g.Status in (gp.GRB.INFEASIBLE, gp.GRB.INF_OR_UNBD):
        return _Solved("infeasible", None, np.inf, np.inf, np.inf, "gurobi")
    if g.SolCount == 0:
        return _Solved("time_limit", None, np.inf, -np.inf, np.inf, "gurobi")
    obj = float(g.ObjVal)
    bound = float(g.ObjBound) if g.IsMIP else obj
    gap = float(g.MIPGap) if g.IsMIP else 0.0
    status = "optimal" if g.Status == gp.GRB.OPTIMAL and gap <= PROVEN_GAP else "time_limit"
    return _Solved(status, np.array(z.X), obj, bound, gap, "gurobi")


# --------------------------------------------------------------------- strict side, short digits
def _valid(prob: LinearProblem, x: np.ndarray, check: Callable[[np.ndarray], bool] | None) -> bool:
    if not bool(prob.holds(x[None, :])[0]):
        return False
    return check is None or bool(check(x))


def _room(prob: LinearProblem, j: int) -> tuple[float, float]:
    """The values numerical feature ``j`` may take: its range, cut by its actionability."""
    a = prob.x_hat[j] if prob.action[j] in ("fixed", "increase") else prob.lo[j]
    b = prob.x_hat[j] if prob.action[j] in ("fixed", "decrease") else prob.hi[j]
    return a, b


def _pushed(prob: LinearProblem, x: np.ndarray) -> np.ndarray | None:
    """``x`` moved by the smallest step of its cheapest continuous move that makes the
    model give the target (None when no continuous move can without a further change)."""
    if _valid(prob, x, None):
        return x
    _, A, _ = _row_coefs(prob)
    tight = np.flatnonzero(prob.g(x[None, :])[0] <= 0)
    best: tuple[float, int, float] | None = None
    for j in range(prob.n_features):
        push = _push_of(prob, x, j, A[tight, j])
        if push is not None and (best is None or push[0] < best[0]):
            best = (push[0], j, push[1])
    if best is None:
        return None
    _, j, s = best
    return _step_until(prob, x, j, s, lambda p: _valid(prob, p, None))


def _push_of(prob: LinearProblem, x: np.ndarray, j: int, a: np.ndarray) -> tuple[float, float] | None:
    """The cheaper direction (marginal cost per unit of the tight rows' least gain, direction)
    in which continuous feature ``j`` raises every tight row (coefficients ``a``), within its
    room, not back towards the query, and (with l0) only if it already moved; None if none."""
    cm = prob.cost_model
    if prob.kinds[j] in INTEGRAL_KINDS or prob.lin.categories[j] is not None:
        return None
    moved = x[j] != prob.x_hat[j]
    if cm.l0 > 0 and not moved:
        return None                              # a new change would cost a whole l0 unit more than the infimum
    best: tuple[float, float] | None = None
    for s, w in ((1.0, cm.w_up[j]), (-1.0, cm.w_down[j])):
        if not _may_push(prob, x, j, s, a):
            continue
        grow = float(np.min(s * a)) if len(a) else 1.0
        marginal = (cm.l1 * w / cm.span[j] + 2 * cm.l2 * w * abs(x[j] - prob.x_hat[j]) / cm.span[j] ** 2) / grow
        if best is None or marginal < best[0]:
            best = (marginal, s)
    return best


def _may_push(prob: LinearProblem, x: np.ndarray, j: int, s: float, a: np.ndarray) -> bool:
    """May feature ``j`` move on in direction ``s``: room left that way, every tight row raised
    (coefficients ``a``), and not back towards the query?"""
    lo, hi = _room(prob, j)
    if (s > 0 and x[j] >= hi) or (s < 0 and x[j] <= lo) or not np.all(s * a > 0):
        return False
    return not (x[j] != prob.x_hat[j] and s * (x[j] - prob.x_hat[j]) < 0)


def _step_until(prob: LinearProblem, x: np.ndarray, j: int, s: float, ok: Any) -> np.ndarray | None:
    """``x`` with feature ``j`` moved in direction ``s`` by the smallest step (doubling from
    one unit in the last place) for which ``ok`` holds, within the feature's room."""
    lo, hi = _room(prob, j)
    step = max(abs(x[j]), 1e-300) * 2.0 ** -52
    for _ in range(1100):
        cand = x.copy()
        cand[j] = x[j] + s * step
        if not lo <= cand[j] <= hi:
            return None
        if ok(cand):
            return cand
        step *= 2.0
    return None


def _short(prob: LinearProblem, x: np.ndarray) -> np.ndarray:
    """Every moved continuous value written with the fewest significant digits that still
    gives the target, within :data:`SHOWN_TOLERANCE` of the span of its value and in range."""
    out = x.copy()
    for j in np.flatnonzero(out != prob.x_hat).tolist():
        if prob.kinds[j] in INTEGRAL_KINDS or prob.lin.categories[j] is not None:
            continue
        out = _shortest(prob, out, j)
    return out


def _shortest(prob: LinearProblem, out: np.ndarray, j: int) -> np.ndarray:
    """``out`` with feature ``j`` written with the fewest significant digits (nearest, then
    rounded away from the query) that still gives the target, within the tolerance and on
    the side of the query it moved to; ``out`` itself when no shorter value does."""
    v, s = out[j], np.sign(out[j] - prob.x_hat[j])
    tol = SHOWN_TOLERANCE * float(prob.cost_model.span[j])
    lo, hi = _room(prob, j)
    lo, hi = (prob.x_hat[j], hi) if s > 0 else (lo, prob.x_hat[j])
    for k in range(1, 17):
        for mode in ("nearest", "up" if s > 0 else "down"):
            c = round_sig(v, k, mode)
            if c == v:
                return out
            if not (lo <= c <= hi) or abs(c - v) > tol or c == prob.x_hat[j]:
                continue
            cand = out.copy()
            cand[j] = c
            if _valid(prob, cand, None):
                return cand
    return out


def _final(prob: LinearProblem, x: np.ndarray, check: Any) -> np.ndarray | None:
    """The point to return: ``x`` pushed and shortened on the LinearModel, then checked
    on the original model (``check``); where the two differ by a rounding at the
    boundary, the pushed point, then a further step on the original model itself."""
    pushed = _pushed(prob, x)
    if pushed is None:
        return None
    short = _short(prob, pushed)
    for cand in (short, pushed):
        if check is None or check(cand):
            return cand
    moved = [j for j in np.flatnonzero(pushed != x) if prob.lin.categories[j] is None]
    if moved:
        j = int(moved[0])
        return _step_until(prob, pushed, j, float(np.sign(pushed[j] - x[j])), lambda p: _valid(prob, p, check))
    return None


# --------------------------------------------------------------------- the query
def _scale(prob: LinearProblem) -> np.ndarray:
    """Each target row's scale (its constant and largest terms at x̂): the unit of tau."""
    const, A, tabs = _row_coefs(prob)
    xs = np.abs(prob.x_hat) + np.where(np.isfinite(prob.hi - prob.lo), np.abs(prob.hi - prob.lo), 0.0)
    size = np.abs(const) + np.abs(A) @ np.where([c is None for c in prob.lin.categories], xs, 0.0)
    for t in tabs.values():
        size = size + np.nanmax(np.abs(t), axis=0)
    return np.maximum(size, 1.0)


#: what :func:`solve_linear` answers: ``(x, cost, status, gap, lower_bound, backend, message)``
_Answer = tuple[np.ndarray | None, float, str, float, float, str, str]


def solve_linear(prob: LinearProblem, *, time_limit: float = 30.0, n_workers: int = 2,
                 check: Callable[[np.ndarray], bool] | None = None
                 ) -> tuple[np.ndarray | None, float, str, float, float, str, str]:
    """Solve the query: ``(x, cost, status, gap, lower_bound, backend, message)``.
    ``check(x) -> bool`` re-checks a point on the original model."""
    t0 = time.perf_counter()
    if _valid(prob, prob.x_hat, check):
        return prob.x_hat.copy(), 0.0, "optimal", 0.0, 0.0, "already", "The row already gets the target."
    needs_miqp = _needs_miqp(prob)
    scale = _scale(prob)
    tau = np.zeros(len(prob.rhs))
    lower = None
    for attempt in range(6):
        left = time_limit - (time.perf_counter() - t0)
        if left <= 0:
            break
        m = _formulate(prob, tau, with_l2=prob.cost_model.l2 > 0)
        x, solved = _solve_once(prob, m, tau, left, n_workers, needs_miqp)
        if x is None:
            stop = _no_point(prob, m, solved, attempt == 0)
            if stop is None:
                break
            return stop
        if lower is None:
            lower = solved.bound
        infimum = prob.cost(x)
        found = _final(prob, x, check)
        if found is None:                               # no continuous slack: clear the boundary by tau
            tau = _raised(tau, prob.strict, scale)
            continue
        return _answer(found, infimum, lower, solved, tau if attempt > 0 else None)
    return None, np.inf, "error", np.inf, lower if lower is not None else 0.0, "highs", (
        "No point of the solver's answer gives the target on the model (a tie at the boundary that rounding could "
        "not break); change the target or the features allowed to move.")


def _needs_miqp(prob: LinearProblem) -> bool:
    """Squared l2 with an l0 term, a discrete move or several rows: only Gurobi's MIQP solves it."""
    cm = prob.cost_model
    discrete_moves = any(prob.kinds[j] in INTEGRAL_KINDS and prob.action[j] != "fixed"
                         for j in range(prob.n_features))
    return cm.l2 > 0 and (cm.l0 > 0 or discrete_moves or len(prob.rhs) > 1)


def _solve_once(prob: LinearProblem, m: _Model, tau: np.ndarray, left: float, n_workers: int,
                needs_miqp: bool) -> tuple[np.ndarray | None, _Solved]:
    """One attempt at the rows cleared by ``tau``: the exact one-row steps where they apply,
    else the MILP / MIQP; the point (None with the solver's status when it has none) and
    how it was solved."""
    exact = _one_row_exactly(prob, m, tau, needs_miqp)
    if exact is not None:
        return exact
    solved = _gurobi(m, left, n_workers) if needs_miqp else _highs(m, left)
    if solved.z is None:
        return None, solved
    x = _point(prob, m, solved.z)
    if len(prob.rhs) == 1:
        paid = None if prob.cost_model.l0 == 0 else {j for zs in (m.vars.zu, m.vars.zv) for j, col in zs.items()
                                                     if solved.z[col] > 0.5}
        polished = _continuous_polish(prob, m, x, tau, paid)
        x = polished if polished is not None else x
    return x, solved


def _one_row_exactly(prob: LinearProblem, m: _Model, tau: np.ndarray,
                     needs_miqp: bool) -> tuple[np.ndarray | None, _Solved] | None:
    """One row solved without a MILP: the LP bound met by a point with every discrete choice
    whole (l1), or continuous l2 moves by KKT; None when neither applies."""
    cm = prob.cost_model
    relaxed = _relaxation(prob, m, tau) if len(prob.rhs) == 1 and cm.l0 == 0 and cm.l2 == 0 else None
    if relaxed is not None:
        return relaxed, _Solved("optimal", None, prob.cost(relaxed), prob.cost(relaxed), 0.0, "lp-bound")
    if not (cm.l2 > 0 and not needs_miqp):
        return None
    kkt = _continuous_polish(prob, m, prob.x_hat.copy(), tau)
    if kkt is None:
        return None, _Solved("infeasible", None, np.inf, np.inf, np.inf, "kkt")
    return kkt, _Solved("optimal", None, prob.cost(kkt), prob.cost(kkt), 0.0, "kkt")


def _no_point(prob: LinearProblem, m: _Model, solved: _Solved, first: bool) -> _Answer | None:
    """The answer when an attempt has no point; None to stop trying (infeasible only once the
    rows were raised by tau: the earlier attempts' points stand refused)."""
    if solved.status == "infeasible":
        if first or solved.backend == "kkt":
            return None, np.inf, "infeasible", np.inf, np.inf, solved.backend, _explain(prob, m)
        return None
    return None, np.inf, solved.status, np.inf, solved.bound, solved.backend, (
        "No counterfactual was found within the time limit; allow more time." if
        solved.status == "time_limit" else f"The solver failed: {solved.message}")


def _raised(tau: np.ndarray, strict: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """The next margin by which the strict rows must clear the boundary: tenfold, from 1e-9 of the scale."""
    tau = np.where(strict | (tau > 0), np.maximum(tau * 10.0, 1e-9 * scale), tau)
    if not np.any(tau > 0):
        tau = 1e-9 * scale
    return tau


def _answer(found: np.ndarray, infimum: float, lower: float, solved: _Solved, tau: np.ndarray | None) -> _Answer:
    """The answer for a point found: its gap to the first bound, and what the message must say
    (``tau``: the margin the point clears the boundary by, when a margin was needed)."""
    gap = max(0.0, (infimum - lower) / max(abs(infimum), 1e-12))
    status = "optimal" if solved.status == "optimal" and gap <= 1e-7 else "time_limit"
    message = "" if status == "optimal" else (
        f"The time limit was reached before optimality was proven (gap {gap:.1%}).")
    if tau is not None:
        message = (message + " " if message else "") + (
            "Only integer or categorical moves reach the target, so the point clears the decision boundary by "
            f"a margin of {float(np.max(tau)):.3g} on the score (optimal among such points).")
    return found, infimum, status, gap, min(lower, infimum), solved.backend, message


def _explain(prob: LinearProblem, m: _Model) -> str:
    """Which constraints block every counterfactual: the features fixed or one-way
    against the rows, and (one row) the best score reachable."""
    const, A, _ = _row_coefs(prob)
    how = _blocked_by(prob, A)
    reach = "" if len(prob.rhs) != 1 else _reach(prob, m, float(const[0]), A[0])
    return (f"No counterfactual reaching {prob.target.describe()} exists{how} within the features' ranges.{reach} "
            "Free some features or widen their ranges.")


def _blocked_by(prob: LinearProblem, A: np.ndarray) -> str:
    """The features held against the rows: fixed ones that count, one-way ones that point the wrong way."""
    lin, names = prob.lin, prob.lin.feature_names
    fixed = _held_against(prob, A, "fixed", lambda a: a != 0)
    fixed += [names[j] for j in lin.categorical_features if prob.action[j] == "fixed"]
    parts = [f"{', '.join(fixed[:5])}{'…' if len(fixed) > 5 else ''} fixed"] if fixed else []
    for role, wrong in (("increase", lambda a: a < 0), ("decrease", lambda a: a > 0)):
        held = _held_against(prob, A, role, wrong)
        if held:
            parts.append(f"{', '.join(held[:5])} {role}-only")
    return f" with {'; '.join(parts)}" if parts else ""


def _held_against(prob: LinearProblem, A: np.ndarray, action: str, wrong: Callable[[np.ndarray], np.ndarray]
                  ) -> list[str]:
    """The features of this actionability whose coefficients on some row are ``wrong``."""
    return [prob.lin.feature_names[j] for j in range(prob.n_features)
            if prob.action[j] == action and np.any(wrong(A[:, j]))]


def _reach(prob: LinearProblem, m: _Model, const: float, a: np.ndarray) -> str:
    """One row: the most the features can reach on it, against what it needs."""
    lin = prob.lin
    best = const
    for j in range(prob.n_features):
        if lin.categories[j] is not None:
            t = lin.category_scores[j] @ prob.rows[0]
            own = int(prob.x_hat[j])
            best += float(np.nanmax(t[:-1])) if prob.action[j] != "fixed" else float(t[own])
            continue
        U, Vd = m.caps.get(j, (0.0, 0.0))
        best += a[j] * prob.x_hat[j] + max(a[j] * U, -a[j] * Vd, 0.0)
    return (f" The most the features can reach is {best + prob.rhs[0]:.4g} on the row \"{prob.what[0]}\" "
            f"(it needs {prob.rhs[0]:.4g}).")


def linear_counterfactual(lin: LinearModel, x: Row, target: TargetSpec, *, schema: Schema | None = None,
                          norm: Norm = "l1", weights: Weights = None, fixed: Iterable[FeatureKey] | None = None,
                          increase_only: Iterable[FeatureKey] | None = None, decrease_only: Iterable[FeatureKey] | None = None,
                          margin: float | None = None, time_limit: float = 30.0, n_workers: int = 2,
                          model: ModelLike = None, params: dict[str, Any] | None = None) -> CounterfactualResult:
    """The optimal counterfactual of ``x`` on a linear model, as a
    :class:`core.counterfactual.CounterfactualResult` with its guarantee (see the module
    docstring); ``model``: the original model, on which every point is re-checked."""
    t0 = time.perf_counter()
    prob = build_linear_problem(lin, x, target, schema=schema, norm=norm, weights=weights, fixed=fixed,
                                increase_only=increase_only, decrease_only=decrease_only, margin=margin)
    build_s = time.perf_counter() - t0
    check = None if model is None else (lambda p: _on_model(model, prob, p))
    ts = time.perf_counter()
    xs, cost, status, gap, lower, backend, message = solve_linear(prob, time_limit=time_limit,
                                                                  n_workers=n_workers, check=check)
    solve_s = time.perf_counter() - ts
    found = xs is not None
    if status == "optimal":
        guarantee = Guarantee("proven_optimal", "linear", gap=0.0, bound=lower)
    elif status == "infeasible":
        guarantee = Guarantee("infeasible", "linear", note=message)
    elif found:
        guarantee = Guarantee("time_limited", "linear", gap=gap, bound=lower)
    else:
        guarantee = Guarantee("not_found", "linear", note=message)
    return CounterfactualResult(
        x=xs, cost=float(cost), status=status if found or status in ("infeasible", "time_limit") else "error",
        gap=float(gap), elapsed=time.perf_counter() - t0,
        changes=changes_between(lin, prob.x_hat, xs) if found else (),   # type: ignore[arg-type]
        backend=backend, params=dict(params or {}, backend=backend), x_query=prob.x_hat.copy(),
        lower_bound=float(lower), valid=found, message=message,
        prediction=lin.predict(xs[None, :])[0] if xs is not None else None,
        timings={"build": build_s, "solve": solve_s}, guarantee=guarantee)


def _on_model(model: Any, prob: LinearProblem, x: np.ndarray) -> bool:
    """Does the original model give the target on ``x`` (its own predict, and its
    probability for a margin)?"""
    Xn = native_input(prob.lin, model, x[None, :])
    t = prob.target
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)     # an unknown category, encoded as the pipeline says
        out = np.ravel(model.predict(Xn))[0]
        if t.kind == "class":
            if not (out == t.label or str(out) == str(t.label)):
                return False
            if t.margin is not None:
                return bool(np.asarray(model.predict_proba(Xn))[0, t.class_index] >= t.margin - 1e-12)
            return True
    return bool(t.lo <= float(out) <= t.hi)
