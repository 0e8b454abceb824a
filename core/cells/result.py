"""Reading a cell solution back as a checked counterfactual.

Every point a solver or a start returns is first moved, feature by feature,
to the value with the fewest significant digits inside its cell
(:func:`shown_point`, :mod:`core.shown`), so the number a page or an export
writes is the number checked; it is then re-checked with the ensemble and,
when given, the original model (outputs equal and the target met), before it
becomes a :class:`core.counterfactual.CounterfactualResult` (if the short
point failed a check, the solver's own point is checked instead). The result's
``cost`` is the cost of the point it returns (:func:`point_cost`), whatever
solver found it; the solvers' cell cost, the infimum over the cell, is its
proven ``lower_bound`` when it is optimal. :class:`QueryRun`
holds what every result of one query shares (parameters, clock, timings, the
original model), so the solvers' many exits each state only what differs.

Minimal recourse
----------------
A returned counterfactual asks for no change it does not need: after the
checks, :func:`minimal_point` tries to undo each change (a *unit*: one
feature, a one-hot group as one, a number with its "is missing" feature
(:mod:`core.model.missing`) as one, so a fill of a missing value is one change)
and keeps the point without it whenever the target is still met, on the
ensemble and the original model, until no change can be undone. Undoing never
raises the cost (every unit costs at least 0). For a proven optimum only a
change of cost 0 can go (a fill at the column's median with the default
weight 0, a feature of weight 0): among the optima it returns one with no
needless change. Were a change of positive cost to go from a proven optimum
(beyond the integer scaling's rounding, :data:`PROOF_TOLERANCE`), the proof
would not hold: the cheaper point is returned as "feasible", never as
"optimal". From a time-limited or warm-start point an undone change lowers the
cost, and the gap is recomputed.
"""

from __future__ import annotations

import copy
import functools
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from core.cells.cache import GRID_CACHE
from core.cells.problem import CellProblem, explain_infeasible
from core.counterfactual import CounterfactualResult, Target, changes_between
from core.model import TreeEnsemble
from core.model.missing import indicator_of
from core.model.native import native_input, native_outputs
from core.model.threads import predict_threads, small_batch
from core.schema import INTEGRAL_KINDS
from core.shown import shortest_inside
from core.typing import ModelLike

__all__ = ["QueryRun", "check_on_model", "check_rows", "shown_point", "minimal_point", "change_units", "point_cost"]

#: how far (as a share of the feature's span) a shown value may sit from its cell's cheapest point
SHOWN_TOLERANCE = 1e-4

DISAGREES = "The original model disagrees with the converted ensemble on this point."

#: a unit undone from a proven optimum may lower the cost by this share of it at most (CP-SAT's integer
#: scaling rounds each feature's cost by at most n_features / 2e9 of the upper bound)
PROOF_TOLERANCE = 1e-6

NOT_PROVEN = ("The solver's proof of optimality did not hold: the point it returned kept the target without "
              "one of its changes, at a lower cost. This cheaper point is valid; its optimality is not proven.")


@dataclass
class QueryRun:
    """One query's shared context: its parameters, start time, timings and model."""

    prob: CellProblem
    params: dict[str, Any]
    t0: float = field(default_factory=time.perf_counter)
    timings: dict[str, float] = field(default_factory=dict)
    model: Any = None
    bound: float = 0.0              # a lower bound on the cost proven before the solvers ran (the radius bound)
    # the original model's verdicts on points already checked (by their bytes), and a point whose check
    # waits to go with the next ones (:meth:`_ahead`)
    _verdicts: dict[bytes, bool] = field(default_factory=dict, repr=False)
    _pending: list[np.ndarray] = field(default_factory=list, repr=False)

    def result(self, x: np.ndarray | None, cost: float, status: str, *, backend: str, gap: float = 0.0,
               lower_bound: float = 0.0, message: str = "", check: bool = True) -> CounterfactualResult:
        """The result for point ``x`` (None: no point), re-checked on the
        ensemble and, with ``check``, on the original model, then made minimal
        (:func:`minimal_point`); a point that fails becomes status "error"
        without a point."""
        prob, ens = self.prob, self.prob.ens
        valid, pred = False, None
        if x is not None:
            x, valid, disagrees, made = self._first_valid(x, check)
            message = DISAGREES if disagrees else message
            if valid:
                x, (cost, status, gap, lower_bound, message) = _undone_claim(prob, made, (cost, status, gap,
                                                                                          lower_bound, message))
            pred = ens.predict(x[None, :])[0]
        ens, x_hat, x = _callers_columns(prob, x)
        return CounterfactualResult(
            x=x if valid else None, cost=float(cost), status=status if (valid or x is None) else "error",
            gap=float(gap), elapsed=time.perf_counter() - self.t0,
            changes=changes_between(ens, x_hat, x) if (x is not None and valid) else (),
            backend=backend, params=self.params, x_query=x_hat.copy(), lower_bound=float(lower_bound),
            valid=valid, message=message, prediction=pred, timings=dict(self.timings))

    def _first_valid(self, x: np.ndarray, check: bool) -> tuple[np.ndarray, bool, bool, tuple[np.ndarray, float]]:
        """The first of ``x``'s candidates (its short shown form, then itself) valid on the
        ensemble and convincing the original models: ``(point, valid, the model disagreed,
        the point made minimal and the cost that saved)``; ``x`` itself when none is."""
        disagrees, valid = False, False
        made = (x, 0.0)
        for cand in _candidates(self.prob, x):
            valid = bool(self.prob.is_valid(cand[None, :])[0])
            if valid:            # the candidate's check on the model goes with the first undo trials'
                self._pending = [cand]
                made = minimal_point(self.prob, cand, lambda y: self.convinces(y, check),
                                     lambda rows: self._ahead(rows, check))
                valid = self.convinces(cand, check)
                disagrees = not valid
            if valid:
                return cand, True, disagrees, made
        return x, False, disagrees, made

    def convinces(self, x: np.ndarray, check: bool = True) -> bool:
        """Does ``x``, valid on the ensemble, also convince the original model and
        every further model, as loaded (``check`` False: no such check)?"""
        if not check:
            return True
        if self.model is not None:
            key = np.asarray(x, dtype=float).tobytes()
            said = self._verdicts.get(key)
            if said is None:
                said = self._verdicts[key] = check_on_model(self.model, self.prob.ens, x, self.prob.target)
            if not said:
                return False
        return all(check_on_model(o.model, o.ens, x, o.target) for o in self.prob.others if o.model is not None)

    def _ahead(self, rows: np.ndarray, check: bool = True) -> None:
        """The original model's verdicts on ``rows`` (points :func:`minimal_point` is about
        to ask :meth:`convinces` about) and on the pending candidate, in one prediction
        (:func:`check_rows`; a model asked for several rows costs about what it costs for
        one), kept for :meth:`convinces`; nothing when there is one point or the rows
        cannot be read together (then each is checked alone, as before)."""
        new = {r.tobytes(): r for r in (*self._pending, *np.asarray(rows, dtype=float))}
        self._pending = []
        new = {k: r for k, r in new.items() if k not in self._verdicts}
        if not check or self.model is None or len(new) < 2:
            return
        said = check_rows(self.model, self.prob.ens, np.vstack(list(new.values())), self.prob.target)
        if said is not None:
            self._verdicts.update(zip(new, said))

    def infeasible(self, backend: str) -> CounterfactualResult:
        """No point: proven that none exists, and why (:func:`explain_infeasible`)."""
        return self.result(None, np.inf, "infeasible", backend=backend, gap=np.inf, lower_bound=np.inf,
                           message=explain_infeasible(self.prob))

    def out_of_time(self, backend: str) -> CounterfactualResult:
        """No point found within the time limit (nothing proven)."""
        return self.result(None, np.inf, "time_limit", backend=backend, gap=np.inf,
                           message="No counterfactual was found within the time limit; allow more time.")


def _callers_columns(prob: CellProblem, x: np.ndarray | None) -> tuple[TreeEnsemble, np.ndarray, np.ndarray | None]:
    """The ensemble, query and point in the caller's columns (missing values read as bands are
    the caller's fill and "is missing" columns again)."""
    if prob.band is None:
        return prob.ens, prob.x_hat, x
    return prob.band.outer, prob.band.x_hat, None if x is None else prob.band.to_outer(x)


def _undone_claim(prob: CellProblem, made: tuple[np.ndarray, float], claim: tuple[float, str, float, float, str]
                  ) -> tuple[np.ndarray, tuple[float, str, float, float, str]]:
    """The minimal point and its claim ``(cost, status, gap, lower bound, message)``: what the
    undone changes saved taken off (:func:`_after_undo`), then the point's own cost (:func:`_as_point`)."""
    x, saved = made
    cost, status, gap, lower_bound, message = claim
    if not np.isfinite(saved):              # a point off the grid's costs: its cells' cost
        saved = cost - float(prob.cost_of(prob.interval_of(x)[0]))
    if saved > 0:
        cost, status, gap, lower_bound, message = _after_undo(cost, saved, status, gap, lower_bound, message)
    cost, gap, lower_bound = _as_point(prob, x, cost, status, gap, lower_bound)
    return x, (cost, status, gap, lower_bound, message)


def _after_undo(cost: float, saved: float, status: str, gap: float, lower_bound: float, message: str
                ) -> tuple[float, str, float, float, str]:
    """(cost, status, gap, lower bound, message) once undone changes saved ``saved``."""
    new = max(cost - saved, 0.0)
    if status == "optimal":
        if saved <= PROOF_TOLERANCE * max(abs(cost), 1e-12):    # a rounding of the integer scaling
            return new, status, gap, min(lower_bound, new), message
        return new, "feasible", float("inf"), 0.0, NOT_PROVEN
    if np.isfinite(gap) and np.isfinite(lower_bound):
        gap = max(0.0, (new - lower_bound) / max(abs(new), 1e-12))
    return new, status, gap, min(lower_bound, new), message


def point_cost(prob: CellProblem, x: np.ndarray) -> float:
    """The cost model's cost of the point ``x`` (a point of ``prob``) from the query, both
    read as the caller's rows (a missing value's band as its fill and "is missing" 1)."""
    if prob.band is not None:
        return float(prob.cost_model.cost(prob.band.x_hat, prob.band.to_outer(x)[None, :])[0])
    return float(prob.cost_model.cost(prob.x_hat, np.asarray(x, dtype=float)[None, :])[0])


def _as_point(prob: CellProblem, x: np.ndarray, cost: float, status: str, gap: float, lower_bound: float
              ) -> tuple[float, float, float]:
    """(cost, gap, lower bound) of the returned point ``x``: the solvers' ``cost`` is the
    infimum over its cell (an open end is not attained), the point's own cost is at most
    the nudge inside the cell above it (:data:`core.cells.problem.NUDGE` and, for a short
    shown value, :data:`SHOWN_TOLERANCE` of each moved feature's span), and the cost
    reported is the point's. The proven lower bound stays the solvers' (for an optimum,
    the infimum itself); an optimal point's gap stays 0 (no point costs less than the
    nudge below it), any other gap is the point's."""
    own = point_cost(prob, x)
    if not np.isfinite(own):
        return cost, gap, lower_bound
    if status == "optimal":                 # the infimum is proven: no point costs less
        lower_bound = max(lower_bound, min(cost, own))
    lower_bound = min(lower_bound, own)
    if status != "optimal" and np.isfinite(gap) and np.isfinite(lower_bound):
        gap = max(0.0, (own - lower_bound) / max(abs(own), 1e-12))
    return own, gap, lower_bound


def change_units(prob: CellProblem) -> list[np.ndarray]:
    """The features that change together, as the analyst reads a change: each
    one-hot group as one, a number with its "is missing" feature as one, every
    other feature alone."""
    d = prob.n_features
    owner = np.arange(d)
    for g in prob.groups:
        owner[list(g)] = g[0]
    for j, k in indicator_of(prob.ens).items():
        owner[k] = owner[j]
    units: dict[int, list[int]] = {}
    for j, u in enumerate(owner.tolist()):
        units.setdefault(u, []).append(j)
    return [np.array(units[u], dtype=np.intp) for u in sorted(units)]


def minimal_point(prob: CellProblem, x: np.ndarray, convinces: Callable[[np.ndarray], bool] | None = None,
                  ahead: Callable[[np.ndarray], None] | None = None) -> tuple[np.ndarray, float]:
    """``x`` with every change that is not needed undone (see the module
    docstring), and the cost that saved (the cells' costs of the undone units).

    A change is undone when the point without it is still valid
    (:meth:`CellProblem.is_valid`: the target, further models, plausibility)
    and ``convinces`` it (the original models); the costliest changes are tried
    first, and the pass repeats until no change can be undone, so no single
    change of the result can be undone with the target kept. Under the
    L-infinity cost the saving is the drop of the largest change (an undone
    change below it saves nothing). ``ahead(rows)`` is told, each pass, the
    points valid on the ensemble that ``convinces`` may be asked about (to
    check them on the model at once)."""
    x = np.array(x, dtype=float)
    x_hat = prob.x_hat
    moved = (x != x_hat).tolist()
    units = [u for u in change_units(prob) if any(moved[j] for j in u.tolist())]
    if not units:
        return x, 0.0
    cells = prob.interval_of(x)[0]
    at = cells.tolist()
    price = {int(u[0]): float(sum(prob.costs[j][at[j]] for j in u.tolist())) for u in units}
    before = float(prob.cost_of(cells))
    saved = 0.0
    while units:
        gone = _undo_one(prob, x, units, price, convinces, ahead)
        if gone is None:
            break
        x = gone[0]
        saved += price[int(units[gone[1]][0])]
        units.pop(gone[1])
    if prob.cost_model.combine == "max":   # L-infinity: only the largest change counts, not each undone one
        saved = before - float(prob.cost_of(prob.interval_of(x)[0]))
    return x, saved


def _undo_one(prob: CellProblem, x: np.ndarray, units: list[np.ndarray], price: dict[int, float],
              convinces: Callable[[np.ndarray], bool] | None, ahead: Callable[[np.ndarray], None] | None
              ) -> tuple[np.ndarray, int] | None:
    """One pass of :func:`minimal_point`: the point with the costliest unit undone whose undoing
    keeps it valid and convincing, and that unit's index in ``units`` (sorted costliest
    first); None when no unit can be undone."""
    units.sort(key=lambda u: (-price[int(u[0])], int(u[0])))
    trial = np.repeat(x[None, :], len(units), axis=0)
    for i, u in enumerate(units):
        trial[i, u] = prob.x_hat[u]
    ok = prob.is_valid(trial)
    if ahead is not None and convinces is not None:
        ahead(trial[ok])
    gone = next((i for i in np.flatnonzero(ok) if convinces is None or convinces(trial[i])), None)
    return None if gone is None else (trial[gone], int(gone))


def _candidates(prob: CellProblem, x: np.ndarray) -> list[np.ndarray]:
    short = shown_point(prob, x)
    return [short, x] if np.any(short != x) else [x]


def shown_point(prob: CellProblem, x: np.ndarray) -> np.ndarray:
    """``x`` with every moved continuous value replaced by the value with the
    fewest significant digits strictly inside the same cell of the split levels
    and the feature's range, within :data:`SHOWN_TOLERANCE` of the feature's
    span from the cell's cheapest point (:func:`core.shown.shortest_inside`)."""
    out = np.array(x, dtype=float)
    for j in np.flatnonzero(out != prob.x_hat):
        if (prob.kinds and prob.kinds[j] in INTEGRAL_KINDS) or prob.ens.categories[j] is not None:
            continue
        args = _shown_args(prob, int(j), float(out[j]))
        if args is not None:
            out[j] = _shortest_inside(*args) if args[0] != 0 else shortest_inside(*args)   # (-0.0 == 0.0 as keys)
    return out


def _shown_args(prob: CellProblem, j: int, v: float) -> tuple[float, float, float, float, float, float, float] | None:
    """The arguments of :func:`core.shown.shortest_inside` for feature ``j``'s moved value ``v``:
    its cell ``(a, b)``, the feature's range, the cell's cheapest point and the tolerance; None
    when ``v`` stays in the query's own cell or the cheapest point is unbounded."""
    lv = prob.levels[j]
    i = int(np.searchsorted(lv, v, side="left"))
    h = prob.band.fill_hat.get(j, int(prob.hat[j])) if prob.band is not None else int(prob.hat[j])
    if i == h:                             # (a missing value's cheapest side is its fill's)
        return None
    a = lv[i - 1] if i > 0 else -np.inf
    b = lv[i] if i < lv.size else np.inf
    lo = prob.lo[j] if prob.lo is not None else -np.inf
    hi = prob.hi[j] if prob.hi is not None else np.inf
    ref = max(a, lo) if i > h else min(b, hi)
    if not np.isfinite(ref):
        return None
    return (v, float(a), float(b), float(lo), float(hi), float(ref), SHOWN_TOLERANCE * float(prob.cost_model.span[j]))


@functools.lru_cache(maxsize=4096)
def _shortest_inside(v: float, a: float, b: float, lo: float, hi: float, ref: float, tol: float) -> float:
    """:func:`core.shown.shortest_inside`, remembered: a cell's point, and so its shortest
    value, recurs from query to query on one model (the decimal search takes tens of
    microseconds a feature)."""
    return shortest_inside(v, a, b, lo, hi, ref, tol)


def check_on_model(model: ModelLike, ens: TreeEnsemble, x: np.ndarray, target: Target) -> bool:
    """Is ``x`` valid on the original model too? Its outputs must match the
    ensemble's, and its label (or value) must meet the target. The model predicts
    in one thread (:func:`core.model.threads.small_batch`)."""
    model = _one_thread(model)
    with small_batch(1, model):
        return _check_on_model(model, ens, x, target)


def _check_on_model(model: ModelLike, ens: TreeEnsemble, x: np.ndarray, target: Target) -> bool:
    ours, theirs, what = native_outputs(ens, model, x[None, :])
    if theirs is not None and not bool(_isclose(ours, theirs).all()):
        return False
    if _is_booster(model):
        return bool(target.holds(ens, x[None, :])[0])
    out = None if theirs is None else _label_from_outputs(model, ens, what, theirs[0])
    if out is None:
        out = np.ravel(model.predict(native_input(ens, model, x[None, :]), **predict_threads(model, 1)))[0]
    return _meets(target, out)


def _is_booster(model: Any) -> bool:
    """A raw XGBoost / LightGBM booster (or a model giving raw scores): its outputs are the
    ensemble's, so the ensemble's verdict is the model's."""
    module = type(model).__module__.split(".")[0]
    return (module in ("xgboost", "lightgbm") and not hasattr(model, "fit")) or hasattr(model, "raw_scores")


def _label_from_outputs(model: Any, ens: TreeEnsemble, what: str, out: np.ndarray) -> Any:
    """The label the model's ``predict`` gives for a row, read from its outputs without a
    second prediction (a scikit-learn classifier's probabilities, an XGBoost classifier's
    margins); None when they do not give it."""
    if what == "probabilities" and type(model).__module__.startswith("sklearn") and hasattr(model, "classes_"):
        return model.classes_[int(np.argmax(out))]   # scikit-learn's own predict, without a second pass
    if what == "margins":
        return _xgb_label(model, ens, out)
    return None


def _meets(target: Target, out: Any) -> bool:
    """Does the model's label (or value) ``out`` meet the target?"""
    if target.kind == "class":
        return bool(out == target.label)
    return bool(target.lo <= float(out) <= target.hi)


def check_rows(model: ModelLike, ens: TreeEnsemble, X: np.ndarray, target: Target) -> list[bool] | None:
    """:func:`check_on_model` of every row of ``X``, the model asked once for them all (and
    once more for the labels its outputs do not give); None when the model's outputs do not
    come one a row (then each row is checked alone). A small batch is predicted in one
    thread (:func:`core.model.threads.small_batch`)."""
    model = _one_thread(model)
    with small_batch(len(X), model):
        return _check_rows(model, ens, X, target)


def _check_rows(model: ModelLike, ens: TreeEnsemble, X: np.ndarray, target: Target) -> list[bool] | None:
    n = len(X)
    ours, theirs, what = native_outputs(ens, model, X)
    close = _rows_close(ours, theirs, n)
    if close is None:
        return None
    if _is_booster(model):
        held = target.holds(ens, X)
        return [c and bool(h) for c, h in zip(close, held)]
    outs = _labels(model, ens, X, (theirs, what), close)
    return [c and _meets(target, o) for c, o in zip(close, outs)]


def _labels(model: Any, ens: TreeEnsemble, X: np.ndarray, outputs: tuple[np.ndarray | None, str],
            close: list[bool]) -> list[Any]:
    """The model's label (or value) of each row whose outputs match (None for the others):
    read from its ``outputs`` where they give it, else from its own predict, asked once."""
    theirs, what = outputs
    n = len(X)
    outs: list[Any] = [None] * n
    if theirs is not None:
        outs = [_label_from_outputs(model, ens, what, theirs[i]) if close[i] else None for i in range(n)]
    ask = [i for i in range(n) if close[i] and outs[i] is None]
    if ask:                                    # its own predict, for the rows its outputs do not label
        said = np.asarray(model.predict(native_input(ens, model, X[ask]), **predict_threads(model, len(ask))))
        for i, v in zip(ask, said.reshape(len(ask), -1)[:, 0]):
            outs[i] = v
    return outs


def _rows_close(ours: Any, theirs: Any, n: int) -> list[bool] | None:
    """Per row, do the model's outputs match the ensemble's (``np.allclose`` of each row's,
    one output alike broadcast)? None when the outputs do not come one a row."""
    if theirs is None:
        return [True] * n
    if np.shape(theirs)[0] != n or np.shape(ours)[0] != n:
        return None
    o, t = np.asarray(ours).reshape(n, -1), np.asarray(theirs).reshape(n, -1)
    if o.shape[1] != t.shape[1] and 1 not in (o.shape[1], t.shape[1]):
        return None
    close: list[bool] = np.asarray(_isclose(o, t).all(axis=1)).tolist()
    return close


def _isclose(ours: Any, theirs: Any) -> np.ndarray:
    """``np.isclose(ours, theirs, rtol=1e-5, atol=1e-6)``: its test ``|ours - theirs| <= atol +
    rtol |theirs|`` written out for finite outputs (6 against 16 microseconds for one row's),
    numpy's own where one is not finite (equal infinities are close there)."""
    o, t = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    if np.isfinite(o).all() and np.isfinite(t).all():
        out: np.ndarray = np.abs(o - t) <= 1e-6 + 1e-5 * np.abs(t)
        return out
    return np.isclose(o, t, rtol=1e-5, atol=1e-6)


#: an XGBoost classifier's label is read from its margins only this far from a tie: its predict rounds the
#: probabilities to float32 (about 6e-8 apart near 0.5), and a closer margin is left to its predict
XGB_TIE = 1e-5


def _xgb_label(model: Any, ens: TreeEnsemble, margin: np.ndarray) -> Any:
    """The label an XGBoost classifier's ``predict`` gives for the row whose margins are
    ``margin`` (its own, from its booster, over the trees ``ens`` reads), as its ``predict``
    derives it (the probability above 0.5 for a binary logistic model, the largest softmax
    probability for several classes: both orders of the margins), without a second
    prediction; None when it cannot be read so (another model, another objective, margins
    over other trees than its ``predict``'s, a margin within :data:`XGB_TIE` of a tie), and
    its ``predict`` answers."""
    if not type(model).__module__.startswith("xgboost") or not hasattr(model, "n_classes_") or \
            not hasattr(model, "get_booster"):
        return None
    if ens.meta.get("iteration_range") != _predict_trees(model):
        return None
    return _margin_label(getattr(model, "objective", None), np.ravel(margin), getattr(model, "n_classes_", None))


def _predict_trees(model: Any) -> tuple[int, int] | None:
    """The trees an XGBoost model's predict reads: up to its best iteration, if it has one."""
    try:
        return (0, int(model.best_iteration) + 1)
    except (AttributeError, TypeError, ValueError):
        return None


def _margin_label(objective: Any, m: np.ndarray, n_classes: Any) -> Any:
    """The label of margins ``m`` for a binary logistic or softprob objective, None near a tie
    (:data:`XGB_TIE`) or for any other objective."""
    if objective == "binary:logistic" and m.size == 1 and n_classes == 2:
        return None if abs(float(m[0])) <= XGB_TIE else int(m[0] > 0)
    if objective == "multi:softprob" and m.size == n_classes and m.size > 2:
        top2 = np.sort(m)[-2:]
        return None if float(top2[1] - top2[0]) <= XGB_TIE else int(np.argmax(m))
    return None


def _one_thread(model: Any) -> Any:
    """A scikit-learn model set to predict in this thread: for one row, starting
    joblib's workers (n_jobs > 1) costs tens of milliseconds per call. A shallow
    copy, so the caller's model is untouched and its trees are shared. An XGBoost
    model fitted with ``n_jobs > 1`` predicts one row in threads that wake and spin
    for it (several times the prediction's own CPU): the check uses a copy of its
    booster set to one thread, made once per model (:data:`GRID_CACHE`)."""
    if type(model).__module__.startswith("sklearn") and getattr(model, "n_jobs", None) not in (None, 1):
        model = copy.copy(model)
        model.n_jobs = None
    elif type(model).__module__.startswith("xgboost") and hasattr(model, "get_booster") \
            and getattr(model, "n_jobs", None) not in (None, 1):
        return GRID_CACHE.get(model, ("one thread",), lambda: _xgb_one_thread(model))
    return model


def _xgb_one_thread(model: Any) -> Any:
    """A shallow copy of an XGBoost model whose booster is a copy set to one thread."""
    booster = model.get_booster().copy()
    booster.set_param({"nthread": 1})
    out = copy.copy(model)
    out._Booster = booster
    out.n_jobs = 1
    return out
