"""Reading a cell solution back as a checked counterfactual.

Every point a solver or a start returns is first moved, feature by feature,
to the value with the fewest significant digits inside its cell
(:func:`shown_point`, :mod:`core.shown`), so the number a page or an export
writes is the number checked; it is then re-checked with the ensemble and,
when given, the original model (outputs equal and the target met), before it
becomes a :class:`core.counterfactual.CounterfactualResult` (if the short
point failed a check, the solver's own point is checked instead). :class:`QueryRun`
holds what every result of one query shares (parameters, clock, timings, the
original model), so the solvers' many exits each state only what differs.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.cells.problem import CellProblem, explain_infeasible
from core.counterfactual import CounterfactualResult, Target, changes_between
from core.model import TreeEnsemble
from core.model.native import native_input, native_outputs
from core.schema import INTEGRAL_KINDS
from core.shown import shortest_inside

__all__ = ["QueryRun", "check_on_model", "shown_point"]

#: how far (as a share of the feature's span) a shown value may sit from its cell's cheapest point
SHOWN_TOLERANCE = 1e-4

DISAGREES = "The original model disagrees with the converted ensemble on this point."


@dataclass
class QueryRun:
    """One query's shared context: its parameters, start time, timings and model."""

    prob: CellProblem
    params: dict[str, Any]
    t0: float = field(default_factory=time.perf_counter)
    timings: dict[str, float] = field(default_factory=dict)
    model: Any = None

    def result(self, x: np.ndarray | None, cost: float, status: str, *, backend: str, gap: float = 0.0,
               lower_bound: float = 0.0, message: str = "", check: bool = True) -> CounterfactualResult:
        """The result for point ``x`` (None: no point), re-checked on the
        ensemble and, with ``check``, on the original model; a point that fails
        becomes status "error" without a point."""
        prob, ens = self.prob, self.prob.ens
        valid, pred = False, None
        if x is not None:
            disagrees = False
            for cand in _candidates(prob, x):
                valid = bool(prob.is_valid(cand[None, :])[0])
                if valid and check and self.model is not None:
                    valid = check_on_model(self.model, ens, cand, prob.target)
                    disagrees = not valid
                if valid and check:                 # every other model a point must convince, as loaded
                    valid = all(check_on_model(o.model, o.ens, cand, o.target) for o in prob.others
                                if o.model is not None)
                    disagrees = not valid
                if valid:
                    x = cand
                    break
            message = DISAGREES if disagrees else message
            pred = ens.predict(x[None, :])[0]
        return CounterfactualResult(
            x=x if valid else None, cost=float(cost), status=status if (valid or x is None) else "error",
            gap=float(gap), solve_time=time.perf_counter() - self.t0,
            changes=changes_between(ens, prob.x_hat, x) if (x is not None and valid) else (),
            backend=backend, params=self.params, x_query=prob.x_hat.copy(), lower_bound=float(lower_bound),
            valid=valid, message=message, prediction=pred, timings=dict(self.timings))

    def infeasible(self, backend: str) -> CounterfactualResult:
        """No point: proven that none exists, and why (:func:`explain_infeasible`)."""
        return self.result(None, np.inf, "infeasible", backend=backend, gap=np.inf, lower_bound=np.inf,
                           message=explain_infeasible(self.prob))

    def out_of_time(self, backend: str) -> CounterfactualResult:
        """No point found within the time limit (nothing proven)."""
        return self.result(None, np.inf, "time_limit", backend=backend, gap=np.inf,
                           message="No counterfactual was found within the time limit; allow more time.")


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
        lv = prob.levels[j]
        i = int(np.searchsorted(lv, out[j], side="left"))
        if i == prob.hat[j]:
            continue
        a = lv[i - 1] if i > 0 else -np.inf
        b = lv[i] if i < lv.size else np.inf
        lo = prob.lo[j] if prob.lo is not None else -np.inf
        hi = prob.hi[j] if prob.hi is not None else np.inf
        ref = max(a, lo) if i > prob.hat[j] else min(b, hi)
        if not np.isfinite(ref):
            continue
        out[j] = shortest_inside(out[j], a, b, lo, hi, ref, SHOWN_TOLERANCE * float(prob.cost_model.span[j]))
    return out


def check_on_model(model: Any, ens: TreeEnsemble, x: np.ndarray, target: Target) -> bool:
    """Is ``x`` valid on the original model too? Its outputs must match the
    ensemble's, and its label (or value) must meet the target."""
    model = _one_thread(model)
    ours, theirs, what = native_outputs(ens, model, x[None, :])
    if theirs is not None and not np.allclose(ours, theirs, rtol=1e-5, atol=1e-6):
        return False
    module = type(model).__module__.split(".")[0]
    is_booster = (module in ("xgboost", "lightgbm") and not hasattr(model, "fit")) or hasattr(model, "raw_scores")
    if is_booster:
        return bool(target.holds(ens, x[None, :])[0])
    if what == "probabilities" and type(model).__module__.startswith("sklearn") and hasattr(model, "classes_"):
        out = model.classes_[int(np.argmax(theirs[0]))]   # scikit-learn's own predict, without a second pass
    else:
        out = np.ravel(model.predict(native_input(ens, model, x[None, :])))[0]
    if target.kind == "class":
        return bool(out == target.label)
    return bool(target.lo <= float(out) <= target.hi)


def _one_thread(model: Any) -> Any:
    """A scikit-learn model set to predict in this thread: for one row, starting
    joblib's workers (n_jobs > 1) costs tens of milliseconds per call. A shallow
    copy, so the caller's model is untouched and its trees are shared."""
    if type(model).__module__.startswith("sklearn") and getattr(model, "n_jobs", None) not in (None, 1):
        model = copy.copy(model)
        model.n_jobs = None
    return model
