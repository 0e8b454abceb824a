"""A counterfactual for any model: optimal on its surrogate, checked and repaired on the model.

:func:`checked_counterfactual` answers the optimal-counterfactual question for a
model known only by its answers (:class:`core.model.blackbox.BlackBoxModel`):

1. *solve* the question exactly on the surrogate
   (:func:`core.optimal.optimal_counterfactual` on :attr:`Surrogate.ensemble`: proven
   optimal *for the surrogate*, under every constraint of the query);
2. *check* the point on the model itself (one call);
3. *repair* a point the model refuses: the counterexample, points on the segment
   from the query to it and a few points around it, labelled by the model, are
   added to the surrogate's data with a larger weight, the surrogate is refitted
   and the query solved again (``rounds`` times at most);
4. *search on the model* when the rounds did not give a valid point: from each
   point found so far (and the nearest reference rows the model already gives the
   target) the segment from the query is followed beyond the point until the
   model gives the target;
5. *polish* the valid point on the model: changes that are not needed are undone
   (a minimal recourse: no single change can be dropped with the target kept),
   then each moved value is brought back towards the query as far as the model
   allows (a bisection per feature, in batched calls). Moving back towards the
   query keeps every constraint the solver respected (fixed features do not move,
   increase-only features stay above their value, ranges and kinds hold), so the
   cost only goes down.

What is returned is always valid on the model (checked on it, the last call);
its guarantee says so, with the surrogate's fidelity, and never claims
optimality for the model. A row with no valid counterfactual says so.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from core.counterfactual import (
    CounterfactualResult,
    QueryError,
    at_target,
    changes_between,
    check_time_limit,
    make_cost_model,
)
from core.model import Guarantee
from core.optimal import optimal_counterfactual
from core.schema import INTEGRAL_KINDS, Schema
from core.surrogate.distill import Surrogate, decode_frame

__all__ = ["checked_counterfactual", "polish_on_model"]

SHRINK_GRID = 12            # values tried at once per feature and pass of the bisection


def _valid(model: Any, ens: Any, target: Any, X: np.ndarray) -> np.ndarray:
    if len(X) == 0:
        return np.zeros(0, dtype=bool)
    return at_target(ens, target, model.predict(X))


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


def polish_on_model(model: Any, ens: Any, target: Any, x_hat: np.ndarray, z: np.ndarray, cost_fn: Callable[
        [np.ndarray], np.ndarray], *, kinds: list[str], groups: list[list[int]]) -> np.ndarray:
    """``z`` (valid on the model) made minimal and cheaper, moving only towards ``x_hat``
    (see the module docstring, step 5). Returns a point valid on the model."""
    z = np.array(z, dtype=float)
    # 1. undo whole changes while the target holds: the most expensive first
    while True:
        moved = [g for g in groups if np.any(z[g] != x_hat[g])]
        if not moved:
            break
        cands = []
        for g in moved:
            c = z.copy()
            c[g] = x_hat[g]
            cands.append(c)
        C = np.array(cands)
        ok = _valid(model, ens, target, C)
        if not ok.any():
            break
        costs = cost_fn(C)
        z = C[np.flatnonzero(ok)[np.argmin(costs[ok])]]
    # 2. bring each moved numerical value back towards the query (two grid passes)
    for j in np.argsort(-np.abs(z - x_hat)):
        if z[j] == x_hat[j] or getattr(ens, "categories", [None] * len(z))[j] is not None or \
                kinds[j] in ("binary", "categorical") or np.isnan(z[j]) or np.isnan(x_hat[j]):
            continue
        lo, hi = float(x_hat[j]), float(z[j])      # lo: the query's value (invalid side), hi: valid
        for _ in range(2):
            ts = np.linspace(0.0, 1.0, SHRINK_GRID + 1)[1:-1]
            vals = lo + ts * (hi - lo)
            if kinds[j] in INTEGRAL_KINDS:
                vals = np.where(hi > lo, np.ceil(vals), np.floor(vals))
                vals = np.unique(vals[(vals != x_hat[j])])
            if not len(vals):
                break
            C = np.repeat(z[None, :], len(vals), axis=0)
            C[:, j] = vals
            ok = _valid(model, ens, target, C)
            if not ok.any():
                break
            dist = np.abs(vals - x_hat[j])
            best = int(np.flatnonzero(ok)[np.argmin(dist[ok])])
            new_hi = float(vals[best])
            bad = ~ok & (dist < abs(new_hi - x_hat[j]))
            new_lo = float(vals[np.flatnonzero(bad)[np.argmax(dist[bad])]]) if bad.any() else lo
            z[j] = new_hi
            lo, hi = new_lo, new_hi
            if kinds[j] in INTEGRAL_KINDS and abs(hi - lo) <= 1:
                break
    return z


def _refit(surrogate: Surrogate, model: Any, X_new: np.ndarray, weight: float, random_state: int) -> Any:
    """The surrogate refitted with the points the model disagreed on, weighted up."""
    import lightgbm as lgb

    from core.model import as_ensemble
    from core.surrogate.distill import _labels, _with_model_names

    assert surrogate.X_fit is not None and surrogate.y_fit is not None
    y_new = _labels(model, X_new)
    X = np.concatenate([surrogate.X_fit, X_new])
    y = np.concatenate([surrogate.y_fit, y_new])
    w = np.concatenate([np.ones(len(surrogate.X_fit)), np.full(len(X_new), weight)])
    p = surrogate.params
    kw = dict(n_estimators=p["n_estimators"], num_leaves=p["num_leaves"], learning_rate=p["learning_rate"],
              random_state=random_state, n_jobs=1, verbose=-1, min_child_samples=5, deterministic=True,
              force_row_wise=True)
    est = (lgb.LGBMClassifier if model.is_classifier else lgb.LGBMRegressor)(**kw)
    est.fit(decode_frame(model, X), y, sample_weight=w)
    return _with_model_names(as_ensemble(est), model, est)


def _around(x_hat: np.ndarray, z: np.ndarray, span: np.ndarray, rng: np.random.Generator, cat: np.ndarray,
            n: int = 12) -> np.ndarray:
    """The counterexample, the segment from the query through it, and a small cloud around it."""
    ts = np.array([0.8, 0.9, 1.0, 1.1, 1.25, 1.5])
    seg = x_hat + ts[:, None] * (z - x_hat)
    seg[:, cat] = z[cat]
    cloud = z + rng.normal(size=(n, len(z))) * 0.01 * span
    cloud[:, cat] = z[cat]
    return np.concatenate([seg, cloud])


def checked_counterfactual(model: Any, x: Any, target: Any, *, surrogate: Surrogate, schema: Schema | None = None,
                           norm: str | Mapping[str, float] = "l1", weights: Any = None,
                           fixed: Iterable[Any] | None = None, increase_only: Iterable[Any] | None = None,
                           decrease_only: Iterable[Any] | None = None, time_limit: float = 30.0,
                           rounds: int = 3, X_ref: Any = None, n_workers: int = 2, random_state: int = 0,
                           on_progress: Callable[[CounterfactualResult], None] | None = None
                           ) -> CounterfactualResult:
    """The cheapest change of ``x`` found on the surrogate that the model itself accepts
    (see the module docstring). The result's ``guarantee`` is ``valid_on_model`` with the
    surrogate's fidelity, or ``not_found``.

    Parameters
    ----------
    model : BlackBoxModel (or any model with ``predict`` on codes-view rows).
    x : array-like of shape (n_features,), the query (codes view).
    target : a class label, or an interval ``(lo, hi)`` of a regressor's output.
    surrogate : the :class:`Surrogate` distilled from ``model`` (:func:`core.surrogate.distill`).
    schema, norm, weights, fixed, increase_only, decrease_only : as
        :func:`core.optimal.optimal_counterfactual` (the same costs and constraints).
    time_limit : seconds for the whole query (solves, repairs and the search).
    rounds : repairs of the surrogate at most, before the search on the model.
    X_ref : reference rows (codes view; usually the data): warm starts, and the rows the
        search on the model may start from.
    """
    t0 = time.perf_counter()
    time_limit = check_time_limit(time_limit)
    if not isinstance(surrogate, Surrogate):
        raise QueryError("A model that is not read exactly needs its surrogate (core.surrogate.distill); "
                         f"got {type(surrogate).__name__}.")
    ens = surrogate.ensemble
    if tuple(ens.feature_names) != tuple(model.feature_names):
        raise QueryError("The surrogate was fitted for other features than the model's; distill it again.")
    x_hat = np.asarray(x, dtype=np.float64).ravel()
    if x_hat.shape != (len(model.feature_names),):
        raise QueryError(f"x has {x_hat.size} values; the model takes {len(model.feature_names)} features.")
    cm = make_cost_model(ens, norm, weights, schema)
    d = len(x_hat)
    kinds, groups = _kinds(schema, d), _groups(schema, d)
    cat = np.array([c is not None for c in ens.categories])
    rng = np.random.default_rng(random_state)
    X_ref = None if X_ref is None else np.asarray(X_ref, dtype=np.float64)
    guarantee = dict(model_kind="black_box", surrogate_fidelity=surrogate.fidelity,
                     boundary_fidelity=surrogate.boundary_fidelity)
    opts = dict(schema=schema, norm=norm, weights=weights, fixed=fixed, increase_only=increase_only,
                decrease_only=decrease_only, n_workers=n_workers)
    calls_before = getattr(model, "calls", None)
    current = ens
    tried: list[np.ndarray] = []
    valid_points: list[np.ndarray] = []
    first: CounterfactualResult | None = None
    rounds_used = 0
    for r in range(max(int(rounds), 0) + 1):
        left = time_limit - (time.perf_counter() - t0)
        if left <= 0.05:
            break
        res = optimal_counterfactual(current, x_hat, target, time_limit=left, X_ref=X_ref, **opts)
        if first is None:
            first = res
        if res.status == "infeasible" and r == 0:
            # the constraints admit no point at all on the surrogate: say so, but nothing is proven of the model
            break
        if not res.found:
            break
        tried.append(res.x)
        if _valid(model, ens, target, res.x[None, :])[0]:
            valid_points.append(res.x)
            if on_progress is not None:
                on_progress(_result(model, ens, x_hat, res.x, cm, "feasible", t0, res, surrogate, guarantee,
                                    "Valid on the model; polishing.", rounds_used))
            break
        if r == rounds or time.perf_counter() - t0 > 0.6 * time_limit:
            break
        rounds_used += 1
        span = cm.span
        extra = np.concatenate([_around(x_hat, z, span, rng, cat) for z in tried])
        current = _refit(surrogate, model, extra, weight=5.0, random_state=random_state + rounds_used)
    if not valid_points:
        valid_points = _search_on_model(model, ens, target, x_hat, tried, X_ref, cm, actions=_actions(
            ens, schema, x_hat, fixed, increase_only, decrease_only), schema=schema, kinds=kinds)
    if not valid_points:
        message = ("No counterfactual valid on the model was found: the surrogate's answers were refused by the "
                   "model and the search on the model found none.")
        if first is not None and first.status == "infeasible":
            message = f"No counterfactual on the surrogate under these constraints: {first.message}"
        return CounterfactualResult(
            x=None, cost=float("inf"), status="infeasible" if first is not None and first.status == "infeasible"
            else "error", gap=float("inf"), solve_time=time.perf_counter() - t0, changes=(), backend="surrogate",
            params=_params(first, surrogate, rounds_used, model, calls_before), x_query=x_hat, message=message,
            guarantee=Guarantee("not_found", note="Nothing is proven of the model itself.", **guarantee))
    costs = cm.cost(x_hat, np.array(valid_points))
    z = valid_points[int(np.argmin(costs))]
    z = polish_on_model(model, ens, target, x_hat, z, lambda C: cm.cost(x_hat, C), kinds=kinds, groups=groups)
    if not _valid(model, ens, target, z[None, :])[0]:          # the last word is the model's
        raise AssertionError("a polished point lost its validity")  # polish only keeps valid points
    return _result(model, ens, x_hat, z, cm, "feasible", t0, first, surrogate, guarantee, "", rounds_used,
                   calls_before)


def _actions(ens: Any, schema: Schema | None, x_hat: np.ndarray, fixed: Any, increase_only: Any,
             decrease_only: Any) -> np.ndarray:
    from core.cells.problem import feature_actions

    return np.array(feature_actions(ens, schema, x_hat, fixed, increase_only, decrease_only), dtype=object)


def _project(P: np.ndarray, x_hat: np.ndarray, schema: Schema | None, kinds: list[str],
             actions: np.ndarray) -> np.ndarray:
    """Points kept within the query's constraints: fixed features at the query's value,
    increase / decrease-only features on their side of it, the schema's ranges, integral
    kinds rounded away from the query."""
    P = np.array(P, dtype=float)
    P[:, actions == "fixed"] = x_hat[actions == "fixed"]
    up, down = actions == "increase", actions == "decrease"
    P[:, up] = np.maximum(P[:, up], x_hat[up])
    P[:, down] = np.minimum(P[:, down], x_hat[down])
    if schema is not None:
        arr = schema.arrays()
        P = np.clip(P, arr["lower"], arr["upper"])
    for j, k in enumerate(kinds):
        if k in INTEGRAL_KINDS:
            P[:, j] = np.where(P[:, j] >= x_hat[j], np.ceil(P[:, j]), np.floor(P[:, j]))
    return P


def _search_on_model(model: Any, ens: Any, target: Any, x_hat: np.ndarray, tried: list[np.ndarray],
                     X_ref: np.ndarray | None, cm: Any, actions: np.ndarray, schema: Schema | None,
                     kinds: list[str]) -> list[np.ndarray]:
    """Step 4: the segments from the query through each point found, followed beyond it,
    and towards the cheapest reference rows the model gives the target (fixed features kept)."""
    starts = list(tried)
    if X_ref is not None and len(X_ref):
        R = _project(X_ref, x_hat, schema, kinds, actions)
        ok = _valid(model, ens, target, R)
        if ok.any():
            R = R[ok]
            starts += list(R[np.argsort(cm.cost(x_hat, R))[:10]])
    cat = np.array([c is not None for c in ens.categories])
    found = []
    for z in starts:
        ts = np.array([1.0, 1.25, 1.5, 2.0, 3.0])
        P = x_hat + ts[:, None] * (z - x_hat)
        P[:, cat] = z[cat]
        P = _project(P, x_hat, schema, kinds, actions)
        ok = _valid(model, ens, target, P)
        if ok.any():
            found.append(P[int(np.flatnonzero(ok)[0])])
    return found


def _params(first: CounterfactualResult | None, surrogate: Surrogate, rounds: int, model: Any,
            calls_before: Any) -> dict[str, Any]:
    params = dict(first.params) if first is not None else {}
    params.update(surrogate={"fidelity": surrogate.fidelity, "boundary_fidelity": surrogate.boundary_fidelity,
                             "trees": surrogate.ensemble.n_trees}, repairs=rounds)
    if calls_before is not None:
        params["model_calls"] = int(getattr(model, "calls", 0)) - int(calls_before)
    return params


def _result(model: Any, ens: Any, x_hat: np.ndarray, z: np.ndarray, cm: Any, status: str, t0: float,
            first: CounterfactualResult | None, surrogate: Surrogate, guarantee: dict[str, Any], message: str,
            rounds: int, calls_before: Any = None) -> CounterfactualResult:
    note = f"Repaired in {rounds} round{'s' if rounds != 1 else ''} of the surrogate." if rounds else ""
    return CounterfactualResult(
        x=z, cost=float(cm.cost(x_hat, z[None, :])[0]), status=status, gap=float("nan"),
        solve_time=time.perf_counter() - t0, changes=changes_between(ens, x_hat, z), backend="surrogate",
        params=_params(first, surrogate, rounds, model, calls_before), x_query=x_hat.copy(), valid=True,
        message=message, prediction=model.predict(z[None, :])[0],
        guarantee=Guarantee("valid_on_model", note=note, **guarantee))

