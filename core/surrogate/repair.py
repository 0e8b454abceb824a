"""A counterfactual for any model: optimal on its surrogate, checked and repaired on the model.

:func:`checked_counterfactual` answers the optimal-counterfactual question for a
model known only by its answers (:class:`core.model.blackbox.BlackBoxModel`):

1. *solve* the question exactly on the surrogate
   (the exact solver, :func:`core.optimal.optimal_counterfactual`, on :attr:`Surrogate.ensemble`: the
   cheapest point *for the surrogate*, under every constraint of the query);
2. *check* the point on the model itself (one call);
3. *repair* a point the model refuses. A solution of the surrogate lies on its
   decision boundary, where it is least faithful, so first the segment from the
   query through the point is followed a little further on the model (one
   batched call); when the model still refuses, the counterexample, points on
   that segment and a few points around it, labelled by the model, are added to
   the surrogate's data with a larger weight, the surrogate is refitted
   (:meth:`Surrogate.refit`) and the query solved again, ``rounds`` times at most;
4. *search on the model* when no round gave a valid point: from each point found so
   far and from the cheapest reference rows the model gives the target (moved onto
   the query's constraints), the segment from the query is followed on the model;
5. *polish* each valid point on the model: changes that are not needed are undone
   (a minimal recourse: no single change, or one-hot group, can be dropped with the
   target kept), then each moved number is brought back towards the query as far as
   the model allows (two grid passes per feature, each one batched call). Moving
   back towards the query keeps every constraint the solver respected (fixed
   features do not move, increase-only features stay above their value, ranges and
   kinds hold), so the cost only goes down. The cheapest polished point is returned,
   each moved number written with the fewest digits the model still accepts
   (:func:`shorten_on_model`, within 0.1% of the feature's span).

Rows are in the view the surrogate's ``ensemble`` reads (the workspace's one-hot and
missing-state columns, or the codes view itself); the model is given them through
:func:`core.model.native.model_input`, as every check of a tree ensemble's original
model is. What is returned is always valid on the model (its last word), labelled
``valid_on_model`` with the surrogate's fidelity; it is never called optimal for
the model. A row with no valid counterfactual says so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable

import numpy as np

from core.cells.problem import feature_actions
from core.counterfactual import (
    CostModel,
    CounterfactualResult,
    QueryError,
    at_target,
    changes_between,
    check_time_limit,
    make_cost_model,
)
from core.model import Guarantee, ModelShape, TreeEnsemble
from core.model.guarantee import GuaranteeKind
from core.model.native import model_input
from core.schema import INTEGRAL_KINDS, Schema
from core.surrogate.distill import Surrogate
from core.typing import FeatureKey, ModelLike, Norm, Row, Rows, TargetSpec, Weights

if TYPE_CHECKING:
    from core.constraints import Constraints

__all__ = ["checked_counterfactual", "polish_on_model", "shorten_on_model", "ModelOnView"]

SHRINK_GRID = 12            # values tried at once per feature and pass of the polish
EXTEND = (1.05, 1.15, 1.3, 1.6, 2.0, 3.0)   # how far past a refused point the segment is followed


class ModelOnView:
    """The model's answers on rows of the surrogate's view (one batched call each).

    A model known by its answers takes the codes view (:func:`core.model.native.model_input`
    of the view's rows); a model the analyses read exactly over the view's own columns (a
    workspace's :class:`LinearModel`, a :class:`TreeEnsemble`) takes the rows as they are."""

    def __init__(self, model: ModelLike, ens: TreeEnsemble, target: TargetSpec,
                 accept: Callable[[np.ndarray], np.ndarray] | None = None):
        self.model, self.ens, self.target, self.accept = model, ens, target, accept
        self.calls = 0
        self.same_view = isinstance(model, ModelShape) and model.exact \
            and tuple(model.feature_names) == tuple(ens.feature_names)

    def native(self, X: np.ndarray) -> np.ndarray:
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))
        return X.copy() if self.same_view else np.asarray(model_input(self.ens, X), dtype=np.float64)

    def valid(self, X: np.ndarray) -> np.ndarray:
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))
        if len(X) == 0:
            return np.zeros(0, dtype=bool)
        ok = np.ones(len(X), dtype=bool) if self.accept is None else np.asarray(self.accept(X), dtype=bool)
        if not ok.any():                  # no row keeps the constraints: nothing to ask the model
            return ok
        self.calls += 1
        return ok & at_target(self.ens, self.target, self.model.predict(self.native(X)))

    def predict(self, x: np.ndarray) -> Any:
        self.calls += 1
        return self.model.predict(self.native(x))[0]


def _kinds(schema: Schema | None, d: int) -> list[str]:
    return [f.kind for f in schema.features] if schema is not None else ["numerical"] * d


def _groups(schema: Schema | None, d: int) -> list[list[int]]:
    """Features that move together when a change is undone (one-hot groups), else one each."""
    seen: set[int] = set()
    out: list[list[int]] = []
    for cols in (schema.groups().values() if schema is not None else ()):
        cols = [int(c) for c in cols]
        out.append(cols)
        seen.update(cols)
    out += [[j] for j in range(d) if j not in seen]
    return out


def polish_on_model(oracle: ModelOnView, x_hat: np.ndarray, z: np.ndarray,
                    cost_fn: Callable[[np.ndarray], np.ndarray], *, kinds: list[str], groups: list[list[int]],
                    categorical: np.ndarray) -> np.ndarray:
    """``z`` (valid on the model) made minimal and cheaper, moving only towards ``x_hat``
    (see the module docstring, step 5). Returns a point valid on the model."""
    z = _undo_changes(oracle, x_hat, np.array(z, dtype=float), cost_fn, groups)
    for j in np.argsort(-np.nan_to_num(np.abs(z - x_hat))):   # 2. numbers back towards the query
        if z[j] == x_hat[j] or categorical[j] or kinds[j] in ("binary", "categorical", "one-hot") \
                or np.isnan(z[j]) or np.isnan(x_hat[j]):
            continue
        _shrink_towards(oracle, x_hat, z, int(j), kinds[j] in INTEGRAL_KINDS)
    return z


def _undo_changes(oracle: ModelOnView, x_hat: np.ndarray, z: np.ndarray,
                  cost_fn: Callable[[np.ndarray], np.ndarray], groups: list[list[int]]) -> np.ndarray:
    """Polish step 1: whole changes (a feature, a one-hot group) undone while the model keeps
    the target, the cheapest of the accepted undoings each time (the dearest change first)."""
    while True:
        moved = [g for g in groups if not np.array_equal(z[g], x_hat[g], equal_nan=True)]
        if not moved:
            return z
        C = np.repeat(z[None, :], len(moved), axis=0)
        for i, g in enumerate(moved):
            C[i, g] = x_hat[g]
        ok = oracle.valid(C)
        if not ok.any():
            return z
        z = C[np.flatnonzero(ok)[np.argmin(cost_fn(C)[ok])]]


def _shrink_towards(oracle: ModelOnView, x_hat: np.ndarray, z: np.ndarray, j: int, integral: bool) -> None:
    """Polish step 2 for one number: ``z[j]`` (in place) brought towards the query as far as the
    model allows, two grid passes between the refused side and the accepted value."""
    lo, hi = float(x_hat[j]), float(z[j])      # lo: the query's side (refused), hi: accepted
    for _ in range(2):
        vals = lo + np.linspace(0.0, 1.0, SHRINK_GRID + 1)[1:-1] * (hi - lo)
        if integral:
            vals = np.unique(np.where(hi > lo, np.ceil(vals), np.floor(vals)))
            vals = vals[(vals != x_hat[j]) & (vals != hi)]
        if not len(vals):
            return
        C = np.repeat(z[None, :], len(vals), axis=0)
        C[:, j] = vals
        ok = oracle.valid(C)
        if not ok.any():
            return
        dist = np.abs(vals - x_hat[j])
        best = float(vals[np.flatnonzero(ok)[np.argmin(dist[ok])]])
        closer_refused = ~ok & (dist < abs(best - x_hat[j]))
        lo = float(vals[np.flatnonzero(closer_refused)[np.argmax(dist[closer_refused])]]) \
            if closer_refused.any() else lo
        z[j] = hi = best


#: how far (as a share of the feature's span) a shown value may move from the polished one
SHOWN_TOLERANCE = 1e-3


def shorten_on_model(oracle: ModelOnView, x_hat: np.ndarray, z: np.ndarray, *, kinds: list[str],
                     categorical: np.ndarray, span: np.ndarray, lower: np.ndarray | None = None,
                     upper: np.ndarray | None = None) -> np.ndarray:
    """``z`` with each moved number written with the fewest significant digits that the model
    still accepts, rounded away from the query (so the change does not shrink) and within
    :data:`SHOWN_TOLERANCE` of its span: the number shown is the number checked."""
    z = np.array(z, dtype=float)
    for j in np.flatnonzero(z != x_hat):
        if not _free_number(int(j), z, x_hat, kinds, categorical):
            continue
        v = float(z[j])
        cands = _shorter_values(v, float(x_hat[j]), SHOWN_TOLERANCE * span[j],
                                -np.inf if lower is None else lower[j], np.inf if upper is None else upper[j])
        if not cands or cands[0] == v:
            continue
        C = np.repeat(z[None, :], len(cands), axis=0)
        C[:, j] = cands
        ok = oracle.valid(C)
        if ok.any():
            z[j] = cands[int(np.flatnonzero(ok)[0])]
    return z


def _free_number(j: int, z: np.ndarray, x_hat: np.ndarray, kinds: list[str], categorical: np.ndarray) -> bool:
    """Whether feature ``j`` is a real number, finite at the point and at the query (one whose digits can be cut)."""
    return not (categorical[j] or kinds[j] in INTEGRAL_KINDS or not np.isfinite(z[j]) or not np.isfinite(x_hat[j]))


def _shorter_values(v: float, query: float, tolerance: float, low: float, high: float) -> list[float]:
    """``v`` written with 1 to 12 significant digits, rounded away from ``query``: those within
    ``tolerance`` of ``v``, still on its side of the query and within ``[low, high]``, fewest digits first."""
    up = v > query
    cands: list[float] = []
    for digits in range(1, 13):
        mag = 10.0 ** (np.floor(np.log10(abs(v))) - digits + 1) if v != 0 else 10.0 ** -digits
        r = (np.ceil(v / mag) if up else np.floor(v / mag)) * mag
        r = float(f"{r:.{digits + 2}g}")
        if abs(r - v) <= tolerance and (r > query if up else r < query) and low <= r <= high and r not in cands:
            cands.append(r)
    return cands


def _project(P: np.ndarray, x_hat: np.ndarray, schema: Schema | None, kinds: list[str],
             actions: np.ndarray) -> np.ndarray:
    """Points kept within the query's constraints: fixed features at the query's value,
    increase / decrease-only features on their side of it, the schema's ranges, integral
    kinds rounded away from the query."""
    P = np.array(P, dtype=float)
    fixed = actions == "fixed"
    P[:, fixed] = x_hat[fixed]
    up, down = actions == "increase", actions == "decrease"
    P[:, up] = np.maximum(P[:, up], x_hat[up])
    P[:, down] = np.minimum(P[:, down], x_hat[down])
    if schema is not None:
        arr = schema.arrays()
        P = np.where(np.isnan(P), P, np.clip(P, arr["lower"], arr["upper"]))
    for j, k in enumerate(kinds):
        if k in INTEGRAL_KINDS:
            P[:, j] = np.where(P[:, j] >= x_hat[j], np.ceil(P[:, j]), np.floor(P[:, j]))
    return P


def _beyond(oracle: ModelOnView, x_hat: np.ndarray, z: np.ndarray, discrete: np.ndarray, project: Callable[
        [np.ndarray], np.ndarray]) -> np.ndarray | None:
    """The first point past ``z`` on the segment from the query that the model accepts."""
    ts = np.array((1.0,) + EXTEND)
    P = x_hat + ts[:, None] * (z - x_hat)
    P[:, discrete] = z[discrete]
    P = project(P)
    ok = oracle.valid(P)
    return P[int(np.flatnonzero(ok)[0])] if ok.any() else None


def _around(x_hat: np.ndarray, z: np.ndarray, span: np.ndarray, rng: np.random.Generator, discrete: np.ndarray,
            n: int = 12) -> np.ndarray:
    """The counterexample, the segment from the query through it, and a small cloud around it."""
    ts = np.array([0.8, 0.9, 1.0, 1.1, 1.25, 1.5])
    seg = x_hat + ts[:, None] * (z - x_hat)
    seg[:, discrete] = z[discrete]
    cloud = z + rng.normal(size=(n, len(z))) * 0.01 * span
    cloud[:, discrete] = z[discrete]
    return np.concatenate([seg, cloud])


def checked_counterfactual(model: ModelLike, x: Row, target: TargetSpec, *, surrogate: Surrogate,
                           solve: Callable[..., CounterfactualResult], schema: Schema | None = None,
                           norm: Norm = "l1", weights: Weights = None,
                           fixed: Iterable[FeatureKey] | None = None, increase_only: Iterable[FeatureKey] | None = None,
                           decrease_only: Iterable[FeatureKey] | None = None, time_limit: float = 30.0,
                           rounds: int = 2, X_ref: Rows | None = None, n_workers: int = 2, random_state: int = 0,
                           on_progress: Callable[[CounterfactualResult], None] | None = None,
                           constraints: Constraints | None = None) -> CounterfactualResult:
    """The cheapest change of ``x`` found through the surrogate that the model itself
    accepts (see the module docstring). The result's ``guarantee`` is ``valid_on_model``
    with the surrogate's fidelity, or ``not_found``.

    Parameters
    ----------
    model : BlackBoxModel (any model whose ``predict`` takes the codes view).
    x : array-like of shape (n_features,), the query in the surrogate's view.
    target : a class label, or an interval ``(lo, hi)`` of a regressor's output.
    surrogate : the :class:`Surrogate` distilled from ``model``.
    solve : the exact solver of a tree ensemble's query, called as
        ``solve(ensemble, x, target, time_limit=..., X_ref=..., **settings)``
        (:func:`core.optimal.optimal_counterfactual`, which calls this function for a
        model given with its surrogate).
    schema, norm, weights, fixed, increase_only, decrease_only : as
        :func:`core.optimal.optimal_counterfactual` (the same costs and constraints).
    time_limit : seconds for the whole query (solves, repairs, the search).
    rounds : refits of the surrogate at most, before the search on the model.
    X_ref : reference rows in the same view (usually the data): warm starts, and the
        rows the search on the model may start from.
    on_progress : called with the first valid point while the rest runs.
    constraints : the analyst's constraints between features (:mod:`core.constraints`,
        parsed against the view's schema), or None: the surrogate's query is solved under
        them, and every point the model is asked about must keep them too, so the repairs
        and the polish never step outside them.
    """
    t0 = time.perf_counter()
    time_limit = check_time_limit(time_limit)
    if not isinstance(surrogate, Surrogate):
        raise QueryError("A model that is not read exactly needs its surrogate (core.surrogate.distill); "
                         f"got {type(surrogate).__name__}.")
    ens = surrogate.ensemble
    x_hat = np.asarray(x, dtype=np.float64).ravel()
    if x_hat.shape != (ens.n_features,):
        raise QueryError(f"x has {x_hat.size} values; the surrogate reads {ens.n_features} features.")
    cm = make_cost_model(ens, norm, weights, schema)
    oracle = ModelOnView(model, ens, target, accept=_keeping(constraints, x_hat))
    at_target(ens, target, ens.predict(x_hat[None, :]))          # the target is one the model can give
    q = _Query.of(ens, x_hat, schema, oracle, cm, t0, time_limit,
                  feature_actions(ens, schema, x_hat, fixed=fixed, increase_only=increase_only,
                                  decrease_only=decrease_only))
    X_ref = None if X_ref is None else np.asarray(X_ref, dtype=np.float64)
    opts: dict[str, Any] = dict(schema=schema, norm=norm, weights=weights, fixed=fixed,
                                increase_only=increase_only, decrease_only=decrease_only, n_workers=n_workers)
    if constraints:
        opts["constraints"] = constraints
    rounds_ = _solve_and_repair(q, model, surrogate, lambda ens_, left: solve(
        ens_, x_hat, target, time_limit=left, X_ref=X_ref, **opts), rounds, random_state)
    found, first, refits = rounds_.found, rounds_.first, rounds_.refits
    if not found:
        found = _search_on_model(oracle, x_hat, rounds_.tried, X_ref, cm, q.discrete, q.project)
    params = _params(first, surrogate, refits, oracle)

    def guarantee(status: GuaranteeKind, note: str) -> Guarantee:
        return Guarantee(status, note=note, model_kind="black_box", surrogate_fidelity=surrogate.fidelity,
                         boundary_fidelity=surrogate.boundary_fidelity)

    if not found:
        return _not_found(q, first, params, guarantee("not_found", "Nothing is proven of the model itself."))
    if on_progress is not None:
        z0 = found[0]
        on_progress(_result(ens, oracle, x_hat, z0, cm, t0, params, guarantee, "Valid on the model; polishing."))
    z = _polished(q, found)
    params = _params(first, surrogate, refits, oracle)
    note = "" if not refits else f"The surrogate was refined {refits} time{'s' if refits > 1 else ''} for this row."
    return _result(ens, oracle, x_hat, z, cm, t0, params, guarantee, "", note=note)


def _keeping(constraints: Constraints | None, x_hat: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """Which points keep the analyst's constraints for the query: every point asked about must."""
    def keeps(X: np.ndarray) -> np.ndarray:
        return np.asarray(constraints.holds(x_hat, np.atleast_2d(X)).all(axis=1), dtype=bool) \
            if constraints else np.ones(len(np.atleast_2d(X)), dtype=bool)
    return keeps


@dataclass(frozen=True, eq=False)
class _Query:
    """One query's fixed parts, shared by the repair, the search and the polish."""

    x_hat: np.ndarray
    schema: Schema | None
    oracle: ModelOnView
    cm: CostModel
    t0: float
    time_limit: float
    kinds: list[str]
    groups: list[list[int]]
    categorical: np.ndarray
    discrete: np.ndarray
    actions: np.ndarray

    @classmethod
    def of(cls, ens: TreeEnsemble, x_hat: np.ndarray, schema: Schema | None, oracle: ModelOnView, cm: CostModel,
           t0: float, time_limit: float, actions: list[str]) -> "_Query":
        d = ens.n_features
        kinds = _kinds(schema, d)
        categorical = np.array([c is not None for c in ens.categories])
        discrete = categorical | np.array([k in ("binary", "categorical", "one-hot") for k in kinds])
        return cls(x_hat, schema, oracle, cm, t0, time_limit, kinds, _groups(schema, d), categorical, discrete,
                   np.array(actions, dtype=object))

    def project(self, P: np.ndarray) -> np.ndarray:
        """``P`` moved onto the query's constraints (:func:`_project`)."""
        return _project(P, self.x_hat, self.schema, self.kinds, self.actions)

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0


@dataclass
class _Rounds:
    """What the solves on the surrogate and its refits gave: the points tried, those valid on the model."""

    tried: list[np.ndarray] = field(default_factory=list)
    found: list[np.ndarray] = field(default_factory=list)
    first: CounterfactualResult | None = None
    refits: int = 0


def _solve_and_repair(q: _Query, model: ModelLike, surrogate: Surrogate,
                      solve: Callable[[TreeEnsemble, float], CounterfactualResult], rounds: int,
                      random_state: int) -> _Rounds:
    """Steps 1-3: solve on the surrogate, check on the model, follow the segment past a refused
    point, and refit the surrogate around the counterexamples, ``rounds`` times at most."""
    rng = np.random.default_rng(random_state)
    current = surrogate
    out = _Rounds()
    while True:
        left = q.time_limit - q.elapsed()
        if left <= 0.05:
            break
        res = solve(current.ensemble, left)
        out.first = out.first or res
        if not res.found or res.x is None:      # found: a point (the check names it for the type checker)
            break
        z = res.x
        out.tried.append(z)
        _check_or_extend(q, z, out.found)
        if out.found or out.refits >= rounds or q.elapsed() > 0.6 * q.time_limit:
            break
        extra = np.concatenate([_around(q.x_hat, z, q.cm.span, rng, q.discrete) for z in out.tried])
        current = current.refit(model, q.oracle.native(q.project(extra)), random_state=random_state + out.refits + 1)
        out.refits += 1
    return out


def _check_or_extend(q: _Query, z: np.ndarray, found: list[np.ndarray]) -> None:
    """``z`` added to ``found`` when the model accepts it, else the first accepted point past it."""
    if q.oracle.valid(z)[0]:
        found.append(z)
        return
    past = _beyond(q.oracle, q.x_hat, z, q.discrete, q.project)
    if past is not None:
        found.append(past)


def _not_found(q: _Query, first: CounterfactualResult | None, params: dict[str, Any],
               guarantee: Guarantee) -> CounterfactualResult:
    """The answer when no point valid on the model was found: infeasible when the surrogate's
    query was, else an error saying the model refused every answer."""
    refused = first.message if first is not None and first.status == "infeasible" else None
    infeasible = refused is not None
    message = (f"No counterfactual under these constraints on the surrogate: {refused}" if infeasible
               else "No counterfactual valid on the model was found: the model refused the surrogate's answers "
                    "and the search on the model found none.")
    return CounterfactualResult(
        x=None, cost=float("inf"), status="infeasible" if infeasible else "error", gap=float("inf"),
        elapsed=q.elapsed(), changes=(), backend="surrogate", params=params, x_query=q.x_hat,
        message=message, guarantee=guarantee)


def _polished(q: _Query, found: list[np.ndarray]) -> np.ndarray:
    """Step 5: the first three valid points polished on the model, the cheapest of them shortened."""
    x_hat, cm = q.x_hat, q.cm
    cost_fn = lambda C: cm.cost(x_hat, C)
    polished = [polish_on_model(q.oracle, x_hat, z, cost_fn, kinds=q.kinds, groups=q.groups,
                                categorical=q.categorical) for z in found[:3]]
    z = polished[int(np.argmin(cm.cost(x_hat, np.array(polished))))]
    arr = q.schema.arrays() if q.schema is not None else None
    return shorten_on_model(q.oracle, x_hat, z, kinds=q.kinds, categorical=q.categorical, span=cm.span,
                            lower=None if arr is None else arr["lower"], upper=None if arr is None else arr["upper"])


def _search_on_model(oracle: ModelOnView, x_hat: np.ndarray, tried: list[np.ndarray], X_ref: np.ndarray | None,
                     cm: Any, discrete: np.ndarray, project: Callable[[np.ndarray], np.ndarray]
                     ) -> list[np.ndarray]:
    """Step 4: from the points found and the cheapest reference rows the model accepts
    (moved onto the query's constraints), the first accepted point on each segment."""
    starts = list(tried)
    if X_ref is not None and len(X_ref):
        R = project(X_ref)
        ok = oracle.valid(R)
        if ok.any():
            R = R[ok]
            starts += list(R[np.argsort(cm.cost(x_hat, R))[:10]])
    found = []
    for z in starts:
        ts = np.array((0.25, 0.5, 0.75, 1.0) + EXTEND)
        P = x_hat + ts[:, None] * (z - x_hat)
        P[:, discrete] = z[discrete]
        P = project(P)
        ok = oracle.valid(P)
        if ok.any():
            found.append(P[int(np.flatnonzero(ok)[0])])
    return found


def _params(first: CounterfactualResult | None, surrogate: Surrogate, refits: int, oracle: ModelOnView
            ) -> dict[str, Any]:
    """The settings of the query and what answered it: ``backend`` is "surrogate" (as the
    result's), the exact solver that solved it on the surrogate is ``surrogate_backend``,
    and ``surrogate`` holds the surrogate's fidelity, size and the cost of its own answer
    (the first solve, before any repair: the distance to the surrogate's nearest target)."""
    params = dict(first.params) if first is not None else {}
    solver = params.get("backend", first.backend if first is not None else None)
    own = first.cost if first is not None and first.found else None
    params.update(backend="surrogate", surrogate_backend=solver,
                  surrogate={"fidelity": surrogate.fidelity, "boundary_fidelity": surrogate.boundary_fidelity,
                             "trees": surrogate.native.n_trees, "cost": own},
                  refits=refits, model_calls=oracle.calls)
    return params


def _result(ens: Any, oracle: ModelOnView, x_hat: np.ndarray, z: np.ndarray, cm: Any, t0: float,
            params: dict[str, Any], guarantee: Callable[[GuaranteeKind, str], Guarantee], message: str,
            note: str = "") -> CounterfactualResult:
    return CounterfactualResult(
        x=z, cost=float(cm.cost(x_hat, z[None, :])[0]), status="feasible", gap=float("nan"),
        elapsed=time.perf_counter() - t0, changes=changes_between(ens, x_hat, z), backend="surrogate",
        params=params, x_query=x_hat.copy(), valid=True, message=message, prediction=oracle.predict(z[None, :]),
        guarantee=guarantee("valid_on_model", note))
