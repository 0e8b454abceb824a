"""Per-instance optimal counterfactuals (OCEAN, Parmentier & Vidal, ICML 2021).

Build, solve, read
------------------
*Build* (:func:`core.cells.build_problem`, the kernel shared with regions and
FCCA): the ensemble's output depends on ``x`` only through which interval
between consecutive split levels each feature lies in (the order simplex of
OCEAN section 3.2, eqs. 15-20). For a separable cost (eqs. 28-32) each
interval gets one cost and one representative point, the point nearest
``x_hat`` within the feature's domain (kind, range, actionability: OCEAN
table 1). Every leaf of every tree is a box of intervals. A counterfactual is
one interval per feature such that the leaves it reaches give the target
(eqs. 13-14), the one-hot groups hold exactly one category (eq. 27), and,
with plausibility, the Isolation Forest's mean path length is at least
``delta`` (eq. 33).

*Solve*, by one of four methods for the same problem (by default, for a sum of
costs on an ensemble of more than ``race.PROBE_LEAVES`` leaves the box search
bounded by linear programs, else CP-SAT; for the L-infinity cost CP-SAT and the
box search side by side, :mod:`core.solvers.race`: the first proof wins):

* ``"cpsat"`` (:mod:`core.solvers.cpsat`): the cell model. Booleans
  ``g_jm = [x_j > L_m]`` with ``g_jm => g_j(m-1)`` (eq. 15 on booleans), one
  boolean per leaf with exactly one leaf per tree (eqs. 8-12), each leaf
  implying the bounds of its box (eqs. 16-17), the class condition as a
  linear constraint on leaf booleans (eqs. 13-14), the cost telescoped on the
  ``g`` (eq. 31 generalised to any separable cost), scaled to integers and
  solved by OR-Tools CP-SAT.
* ``"boxsearch"`` (:mod:`core.solvers.boxsearch`): best-first branch and bound
  over boxes of intervals, bounded per tree inside each box (Veritas's bound).
* ``"lpbox"`` (:mod:`core.solvers.lpbox`): best-first branch and bound over the
  same boxes, bounded by a linear relaxation on the order simplex re-solved
  per box (GLOP's dual simplex); for a sum of costs.
* ``"highs"`` / ``"gurobi"`` (:mod:`core.solvers.ocean`): OCEAN's MILP as in the
  paper: lambda per depth, flows y per node, order simplex mu per feature
  (eqs. 8-20), l0/l1/l2 on mu (eqs. 30-31; squared l2 on mu is exact at the
  levels, where optima lie), solved by HiGHS or Gurobi.

All are made fast by an upper bound found first: the nearest valid point
among the reference rows (``X_ref``, usually the training data) projected onto
the actionable set, improved greedily (:func:`core.cells.warm_start`), and a greedy descent from
``x_hat`` on the model alone (:func:`core.cells.greedy_start`), so the call
without reference rows is as fast as with them. Leaves whose box cannot be
reached within that bound are removed before solving, and the bound is
given to the solver with the point as a hint.

*Read*: the representative points of the chosen intervals; a point on an
open interval end is pushed strictly inside its cell, and ``cost`` is the cost
of the point returned (at most that nudge above the cell's infimum, the
paper's epsilon -> 0, which ``lower_bound`` reports for a proven optimum:
:func:`core.cells.result.point_cost`). Every returned point is re-checked with
``TreeEnsemble.predict`` (and the original model when given); when integer
scaling admitted an invalid cell (a near tie), that cell is cut off and the
solver runs again, so a returned counterfactual is always valid.

Diverse alternatives (``n_solutions > 1``): each new solution must leave
unchanged at least one of the features changed by every earlier solution,
so no alternative is an earlier one plus extra changes.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable

import numpy as np

from core.cells import (
    CellProblem,
    CellSolution,
    Plausibility,
    QueryRun,
    best_start,
    build_problem,
    explain_infeasible,
    feature_levels,
    greedy_start,
    radius_bound,
    warm_start,
)
from core.cells.band import band_problem
from core.cells.cache import GRID_CACHE
from core.cells.problem import feature_actions
from core.constraints import Constraints
from core.counterfactual import CounterfactualResult, QueryError, check_schema, check_time_limit
from core.model import LinearModel, TreeEnsemble, as_ensemble, as_model
from core.model.features import as_row, feature_roles, reference_rows
from core.model.missing import indicator_of, settled
from core.optimal.anytime import Anytime, stopped_result
from core.optimal.constrained import RecourseCheck, constrained_counterfactual, resolve_constraints, verify_recourse
from core.schema import Schema
from core.settings import (
    TIME_LIMIT,
    boolean,
    cell_norm_setting,
    integer,
    one_of,
    open_probability,
    optional,
    seconds,
    solver_threads,
    validated,
)
from core.solvers import boxsearch, cpsat, lpbox, ocean, race, separable
from core.solvers.linear import linear_counterfactual
from core.solvers.ocean import GurobiUnavailable
from core.surrogate import Surrogate
from core.surrogate.repair import checked_counterfactual
from core.typing import FeatureKey, ModelLike, Norm, Row, Rows, TargetSpec, Weights

__all__ = ["optimal_counterfactual", "OptimalSettings", "other_models", "build_problem", "feature_levels", "Plausibility", "CellProblem",
           "warm_start", "greedy_start", "radius_bound", "explain_infeasible", "BACKENDS", "verify_recourse",
           "RecourseCheck"]

BACKENDS = ("auto", "cpsat", "boxsearch", "lpbox", "highs", "gurobi")


# ------------------------------------------------------------------ solving
#: how long (seconds) :func:`gurobi_licence_present`'s answer is kept: looking at the files took
#: about 2% of an easy query (20 us); a licence installed meanwhile is seen this much later at most
LICENCE_LOOK_EVERY = 1.0
_licence_seen: dict[tuple[str, str], tuple[float, bool]] = {}


def gurobi_licence_present() -> bool:
    """A full Gurobi licence file is installed (the pip wheel's own licence is
    size-limited to about 2000 variables, too small for most forests); looked at again
    after :data:`LICENCE_LOOK_EVERY`, or at once where ``GRB_LICENSE_FILE`` or ``HOME``
    changed."""
    key = (os.environ.get("GRB_LICENSE_FILE", ""), os.environ.get("HOME", ""))
    now = time.monotonic()
    seen = _licence_seen.get(key)
    if seen is not None and now - seen[0] < LICENCE_LOOK_EVERY:
        return seen[1]
    try:
        import gurobipy  # noqa: F401  - optional and heavy: only imported to look
    except ImportError:
        present = False
    else:
        paths = [key[0], os.path.join(os.path.expanduser("~"), "gurobi.lic"), "/opt/gurobi/gurobi.lic"]
        present = any(p and os.path.isfile(p) for p in paths)     # (os.path: a tenth of pathlib's cost)
    _licence_seen.clear()
    _licence_seen[key] = (now, present)
    return present


def _choose_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise QueryError(f"Unknown backend {backend!r}; choose one of {BACKENDS}.")
    if backend == "auto":
        return "gurobi" if gurobi_licence_present() else "cpsat"
    return backend


@dataclass(frozen=True)
class OptimalSettings:
    """Every setting of an optimal-counterfactual query, as :func:`optimal_counterfactual`
    received them (kept with the query; the defaults are the function's).

    The question: schema (core.schema.Schema; kinds, ranges, actionability,
    weights; without it every feature is numerical, free and unbounded, in raw
    units), norm ("l0", "l1", "l2" (squared), "linf" or a dict of weights, see
    core.counterfactual), weights (per feature: an array (d,) or (d, 2) =
    (decrease, increase), or a dict name -> weight or (decrease, increase)),
    fixed / increase_only / decrease_only (feature names or indices; a list
    replaces the schema's features of that role, None keeps the schema's: see
    :func:`core.cells.problem.feature_actions`), plausibility (a :class:`Plausibility`, or a
    fitted IsolationForest: its own threshold is used), also_valid_for (further
    models, TreeEnsembles or supported model objects reading the same features:
    the point must get the target from every one; solved on the union of their
    split levels, CP-SAT and the box search only, each original model re-checked), margin (a
    classifier's probability for the target class must be at least this, on
    every model: confident recourse, away from the decision boundary).
    How it is solved: backend ("auto" (CP-SAT unless a Gurobi licence is installed;
    for norm "linf" CP-SAT raced by the box search; for a sum of costs on a larger
    ensemble the LP box search), "cpsat", "boxsearch", "lpbox", "highs" or "gurobi"), time_limit (seconds for the whole
    query), n_solutions (diverse solutions, see the module doc), n_workers
    (solver threads), warm (False skips both starts, reference rows and the
    model's own: the plain formulation, for benchmarks).
    """

    schema: Schema | None
    norm: Any
    weights: Any
    fixed: Iterable[Any] | None
    increase_only: Iterable[Any] | None
    decrease_only: Iterable[Any] | None
    plausibility: Plausibility | Any | None
    also_valid_for: Iterable[Any]
    margin: float | None
    backend: str
    time_limit: float
    n_solutions: int
    n_workers: int
    warm: bool


def _held_states(ens: TreeEnsemble, x: np.ndarray, action: list[str]) -> TreeEnsemble:
    """``ens`` with the query's "is missing" columns that cannot move held at their
    value (:func:`core.model.missing.settled`: a known value never becomes missing, a
    missing one kept so stays): the same answers on every point the query may
    reach, from trees without the other state's subtrees."""
    states = indicator_of(ens)
    held = {k: float(x[k]) for k in states.values()
            if action[k] == "fixed" or (action[k] == "decrease" and x[k] <= 0.0)
            or (action[k] == "increase" and x[k] >= 1.0)}
    return settled(ens, held)


def _problem(ens: TreeEnsemble, x: np.ndarray, target: Any, s: OptimalSettings, plausibility: Plausibility | None,
             others: list[tuple[TreeEnsemble, Any]], solver: str) -> CellProblem:
    """The query's cell problem. The "is missing" columns that cannot move are held
    (:func:`_held_states`); with missing values that may become known, each is a band of
    its column (:mod:`core.cells.band`) when CP-SAT answers (``solver``, as
    :func:`_solve_once` takes it): a box search needs costs that rise away from the
    query, which the band's do not, and answers the rewrite faster than CP-SAT the band
    (Adult's HGB, ``bench/missing.py``: 1.67x the imputed rows' time through the band and
    CP-SAT, 0.97x through the rewrite and the LP box search)."""
    kw: dict[str, Any] = dict(schema=s.schema, norm=s.norm, weights=s.weights, fixed=s.fixed,
                              increase_only=s.increase_only, decrease_only=s.decrease_only,
                              plausibility=plausibility, also_valid_for=others, margin=s.margin)
    if indicator_of(ens) and x.shape == (ens.n_features,) and np.all(np.isfinite(x)):
        action = feature_actions(ens, s.schema, x, fixed=s.fixed, increase_only=s.increase_only,
                                 decrease_only=s.decrease_only)
        held = build_problem(_held_states(ens, x, action), x, target, **kw)
        if plausibility is None and not others and not _box_reads(held, solver):
            prob = band_problem(ens, x, action,
                                lambda inner, extra: build_problem(inner, x, target, extra_levels=extra, **kw))
            if prob is not None:
                return prob
        return held
    return build_problem(ens, x, target, **kw)


def _box_reads(prob: CellProblem, solver: str) -> bool:
    """Does a box search answer ``prob`` (the LP box search, the probe or the race's box search)?"""
    if solver == "race":
        return race.takes(prob) or race.probes(prob) or race.uses_lpbox(prob)
    return (solver == "boxsearch" and boxsearch.applies(prob) is None) or \
        (solver == "lpbox" and lpbox.applies(prob) is None)


@validated(QueryError, norm=cell_norm_setting, backend=one_of(*BACKENDS), time_limit=seconds,
           n_solutions=integer(1), n_workers=solver_threads, warm=boolean, margin=optional(open_probability))
def optimal_counterfactual(ensemble: ModelLike, x: Row, target: TargetSpec, *, schema: Schema | None = None,
                           norm: Norm = "l1", weights: Weights = None,
                           fixed: Iterable[Any] | None = None, increase_only: Iterable[Any] | None = None,
                           decrease_only: Iterable[Any] | None = None, plausibility: Plausibility | ModelLike = None,
                           also_valid_for: Iterable[Any] = (), margin: float | None = None,
                           backend: str = "auto", time_limit: float = TIME_LIMIT, n_solutions: int = 1,
                           n_workers: int = 2, warm: bool = True, X_ref: Rows | None = None, model: ModelLike = None,
                           on_progress: Callable[[CounterfactualResult], None] | None = None,
                           should_stop: Callable[[], bool] | None = None,
                           surrogate: Surrogate | None = None,
                           constraints: Iterable[str] | Constraints | None = None) -> CounterfactualResult:
    """The minimum-cost change of ``x`` that gives ``target``, proven optimal.

    What "optimal" means depends on the model, and the result's ``guarantee`` says it:
    a tree ensemble (the cell problem, CP-SAT or a MILP) and a linear model (a MILP on
    its score, :mod:`core.solvers.linear`) are solved exactly, proven optimal; any other
    model is given as ``model`` with its ``surrogate`` (:func:`core.surrogate.distill`):
    the query is solved exactly on the surrogate's trees and every point is checked and
    repaired on the model itself (:func:`core.surrogate.repair.checked_counterfactual`),
    valid on the model, never claimed optimal for it.

    Parameters
    ----------
    ensemble : TreeEnsemble, LinearModel or a supported model
        A linear model (or a fitted scikit-learn linear model, or a pipeline ending in
        one) is solved exactly as a MILP on its score (:mod:`core.solvers.linear`),
        its result carrying ``guarantee``; ``backend``, ``warm`` and ``X_ref`` are
        for tree ensembles and do not apply to it.
    x : array-like of shape (n_features,), the query.
    target : a class label (classifiers) or an interval ``(lo, hi)`` (regressors).
    schema : Schema or None, default None
        Kinds, ranges, actionability and weights; without it every feature is
        numerical, free and unbounded, in raw units.
    norm : {"l1", "l0", "l2", "linf"} or dict, default "l1"
        The cost (:mod:`core.counterfactual`): "l2" is squared; a dict mixes them; "linf"
        is the largest weighted, range-scaled change (CP-SAT and the box search only).
    weights : array (d,) or (d, 2) = (decrease, increase), or dict name -> weight, default None.
    fixed, increase_only, decrease_only : feature names or indices, default None
        A list replaces the schema's features of that role; None keeps the schema's.
    plausibility : Plausibility or a fitted IsolationForest, default None.
    also_valid_for : further models reading the same features, default ()
        The point must get the target from every one (CP-SAT and the box search only).
    margin : float in (0, 1) or None, default None
        A classifier's probability for the target must be at least this.
    backend : {"auto", "cpsat", "boxsearch", "lpbox", "highs", "gurobi"}, default "auto"
        "auto" is CP-SAT unless a full Gurobi licence is installed; for norm "linf" it
        races CP-SAT and the box search (:mod:`core.solvers.race`; the result's
        ``backend`` names the one that proved first); for a sum of costs on a small
        ensemble (at most ``race.PROBE_LEAVES`` leaves) the box search runs alone
        first for a bounded number of boxes, then CP-SAT; on a larger one the box
        search bounded by linear programs answers ("lpbox"). "boxsearch" is the box search
        alone, "lpbox" the box search bounded by linear programs (a sum of costs); CP-SAT
        takes what they do not, with a notice.
    time_limit : float, default 30.0, seconds for the whole query.
    n_solutions : int, default 1, diverse solutions (see the module doc).
    n_workers : int, default 2, the solver's threads.
    warm : bool, default True; False skips both starts (the plain formulation, for benchmarks).
    X_ref : array-like (n, n_features), reference rows for the warm start
        (usually the training data); optional.
    model : the original model, if any: each result is also checked on it.
    on_progress : called while the query runs, on a tree ensemble with every improvement
        once a valid point exists (the warm start first, then the solver's better points
        and proven lower bounds, from the solver's threads): a result with status
        "feasible", the best valid point so far, its ``cost``, ``lower_bound`` and ``gap``;
        the cost never rises and the bound never falls (CP-SAT, the box search and their
        race; the MILP backends report the warm start only).
    should_stop : polled while the query runs (tree ensembles); when it returns True the
        solver stops and the result is the best valid point found so far, checked on the
        model, with status "stopped", its ``lower_bound`` and ``gap``, and a guarantee saying
        how far from the optimum it may be; without a point, ``found`` is False and
        ``message`` says so.
    surrogate : Surrogate or None, default None
        With a model that is not read exactly (``model``, e.g. a BlackBoxModel), its
        surrogate; ``ensemble`` is then ignored (the surrogate's view is solved).
    constraints : constraint texts (:mod:`core.constraints`: linear rows over new values,
        ``old(...)`` and ``delta(...)``, implications, category moves), default None
        (the schema's own, if any). With constraints in force the query is solved exactly
        by the constrained MILP (:mod:`core.optimal.constrained`, backend "milp"); a row no
        action can help is "infeasible", proven; ``binding`` lists the constraints that
        hold with equality at the optimum.

    Returns
    -------
    CounterfactualResult

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from core import from_model, infer_schema, optimal_counterfactual
    >>> data = load_breast_cancer(as_frame=True)
    >>> rf = RandomForestClassifier(10, max_depth=3, random_state=0).fit(data.data, data.target)
    >>> X = data.data.to_numpy()
    >>> res = optimal_counterfactual(from_model(rf), X[0], 1, schema=infer_schema(data.data), X_ref=X)
    >>> import pandas as pd
    >>> res.status, int(rf.predict(pd.DataFrame([res.x], columns=data.data.columns))[0])
    ('optimal', 1)
    """
    if surrogate is not None:             # any other model: solved on its surrogate, checked on itself
        return _surrogate_query(ensemble, x, target, surrogate, model, plausibility=plausibility,
                                also_valid_for=also_valid_for, n_solutions=n_solutions, margin=margin,
                                schema=schema, norm=norm, weights=weights, fixed=fixed, increase_only=increase_only,
                                decrease_only=decrease_only, time_limit=time_limit, X_ref=X_ref,
                                n_workers=n_workers, on_progress=on_progress, constraints=constraints)
    read = ensemble if isinstance(ensemble, (TreeEnsemble, LinearModel)) else as_model(ensemble)
    cons = resolve_constraints(constraints, schema)
    if len(cons):                          # constraints between features: the one solver that takes them
        return _constrained_query(read, ensemble, x, target, cons, schema=schema, norm=norm, weights=weights,
                                  fixed=fixed, increase_only=increase_only, decrease_only=decrease_only,
                                  plausibility=plausibility, also_valid_for=also_valid_for, margin=margin,
                                  backend=backend, time_limit=time_limit, n_solutions=n_solutions, model=model,
                                  X_ref=X_ref)
    if isinstance(read, LinearModel):      # a linear model: a MILP on its score (core.solvers.linear)
        return _linear_query(read, ensemble, x, target, schema=schema, norm=norm, weights=weights, fixed=fixed,
                             increase_only=increase_only, decrease_only=decrease_only, plausibility=plausibility,
                             also_valid_for=also_valid_for, margin=margin, time_limit=time_limit,
                             n_solutions=n_solutions, n_workers=n_workers, model=model)
    t0 = time.perf_counter()
    ens = as_ensemble(read)
    x, X_ref, roles = query_door(ens, x, X_ref, schema, fixed=fixed, increase_only=increase_only,
                                 decrease_only=decrease_only)
    _check_callbacks(on_progress, should_stop, n_solutions)
    s = OptimalSettings(schema=schema, norm=norm, weights=weights, plausibility=plausibility,
                        also_valid_for=also_valid_for, margin=margin, backend=backend, time_limit=time_limit,
                        n_solutions=n_solutions, n_workers=n_workers, warm=warm, **roles)
    plausibility = _plausibility_of(s.plausibility)
    time_limit = check_time_limit(s.time_limit)
    be = _choose_backend(s.backend)
    others = other_models(s.also_valid_for)
    prob = _problem(ens, x, target, s, plausibility, others, _solver(be, s.backend))
    if prob.band is not None and X_ref is not None:     # reference rows as the problem reads them
        X_ref = prob.band.inner_rows(X_ref)
    be, notice = _backend_taking(prob, be, s.backend, bool(others))
    params = _params(s, time_limit, plausibility, target)
    if notice:
        params["notice"] = notice
    return _solutions(prob, s, be, params, t0, X_ref, model, on_progress, should_stop)


def _solutions(prob: CellProblem, s: OptimalSettings, be: str, params: dict[str, Any], t0: float,
               X_ref: np.ndarray | None, model: Any, on_progress: Callable[[CounterfactualResult], None] | None,
               should_stop: Callable[[], bool] | None) -> CounterfactualResult:
    """The first solution and, for ``n_solutions > 1``, the diverse alternatives after it,
    within the query's time limit (``params``) counted from ``t0``."""
    time_limit = params["time_limit"]
    build_s = time.perf_counter() - t0
    results: list[CounterfactualResult] = []
    ended = ""                     # why the solutions ended before n_solutions (see _fewer)
    for _ in range(s.n_solutions):
        left = time_limit - (time.perf_counter() - t0)
        run = QueryRun(prob, params, t0, {"build": build_s}, model)
        anytime = Anytime(run, on_progress if not results else None, should_stop).open()
        try:
            res = _solve_with_checks(run, _solver(be, s.backend), max(left, 0.01), X_ref, s.warm, s.n_workers,
                                     anytime)
        finally:
            anytime.close()
        results.append(res)
        if anytime.stopped or not res.found:
            ended = "stopped" if anytime.stopped else res.status
            break
        if not _exclude_changes(prob, res):
            ended = "nothing"
            break
        if time.perf_counter() - t0 >= time_limit:
            ended = "time"
            break
    first = results[0]
    if len(results) > 1:
        first = replace(first, alternatives=tuple(r for r in results[1:] if r.found))
    fewer = _fewer(first, s.n_solutions, ended)
    if fewer:
        first = replace(first, params={**first.params, "notice": " ".join(
            t for t in (first.params.get("notice"), fewer) if t)})
    return first


def _fewer(first: CounterfactualResult, asked: int, ended: str) -> str:
    """Why fewer solutions than asked came back ("" when all did, or when there is none):
    ``ended`` is how the search for the next one ended ("stopped", "nothing": the last one
    changes nothing to exclude, "time": the query's time was up, else the status it ended with)."""
    got = 1 + len(first.alternatives)
    if not first.found or got >= asked:
        return ""
    why = {"stopped": "the search was stopped",
           "nothing": "the last one changes nothing to leave alone",
           "time": "the query's time limit was reached",
           "infeasible": "no other counterfactual leaves unchanged one feature of every earlier solution's "
                         "changes"}.get(ended, f"the search for the next one ended without one (status {ended})")
    return f"{got} of the {asked} solutions asked: {why}."


def _plausibility_of(given: Any) -> Plausibility | None:
    """The plausibility test: as given, or a fitted IsolationForest's with its own threshold."""
    if given is not None and not isinstance(given, Plausibility):
        return Plausibility.from_forest(given, None, None)
    return given


def _surrogate_query(given: Any, x: Any, target: Any, surrogate: Surrogate, model: Any, *, plausibility: Any,
                     also_valid_for: Any, n_solutions: int, margin: Any, schema: Any,
                     constraints: Any, **kw: Any) -> CounterfactualResult:
    """Any other model: the query solved on its surrogate and checked (and repaired) on the model itself."""
    if model is None and not isinstance(given, (TreeEnsemble, LinearModel)) and hasattr(given, "predict"):
        model = given                     # optimal_counterfactual(black_box, x, target, surrogate=s): the model itself
    if model is None:
        raise QueryError("A surrogate is given without the model it stands for: pass model= as well (or the "
                         "model itself as the first argument).")
    unsupported = [what for what, used in (("plausibility", plausibility is not None),
                                           ("also_valid_for", bool(tuple(also_valid_for or ()))),
                                           ("n_solutions > 1", n_solutions > 1),
                                           ("a probability margin", margin is not None)) if used]
    if unsupported:
        raise QueryError(f"Through a surrogate the optimal counterfactual does not take {', '.join(unsupported)}"
                         " yet; leave them out.")
    return checked_counterfactual(model, x, target, surrogate=surrogate, solve=optimal_counterfactual,
                                  schema=schema, constraints=resolve_constraints(constraints, schema), **kw)


def _check_callbacks(on_progress: Any, should_stop: Any, n_solutions: int) -> None:
    """``on_progress`` and ``should_stop`` are functions or None; ``n_solutions`` at least 1."""
    if on_progress is not None and not callable(on_progress):
        raise QueryError(f"on_progress is a function called with the first valid point, or None; got "
                         f"{type(on_progress).__name__}.")
    if should_stop is not None and not callable(should_stop):
        raise QueryError(f"should_stop is a function polled to stop the query (True stops it), or None; got "
                         f"{type(should_stop).__name__}.")
    if n_solutions < 1:
        raise QueryError("n_solutions must be at least 1.")


def _solver(backend: str, asked: str) -> str:
    """The solver that runs for ``backend``: "auto" runs CP-SAT beside the box search (the race)."""
    return "race" if backend == "cpsat" and asked == "auto" else backend


def _backend_taking(prob: CellProblem, backend: str, asked: str, several: bool) -> tuple[str, str | None]:
    """The backend that can take the problem, and the notice saying why it is not the one
    chosen: the MILP backends take one model, no margin and a sum of costs; a box search
    hands what it does not take to CP-SAT. A backend chosen by name that cannot take it is
    refused."""
    notice = None
    needs = [what for what, used in (("several models (also_valid_for)", several),
                                     ("a probability margin", prob.target.margin is not None),
                                     ("the L-infinity cost (norm 'linf')", prob.cost_model.combine == "max"))
             if used]
    if needs and backend not in ("cpsat", "boxsearch", "lpbox"):
        if asked != "auto":
            raise QueryError(f"{needs[0][0].upper()}{needs[0][1:]} is solved by CP-SAT and the box search only; the "
                             f"{backend} backend cannot take it. Choose backend 'cpsat', 'boxsearch' or 'auto'.")
        backend, notice = "cpsat", f"Solved by CP-SAT: the MILP backends cannot take {' and '.join(needs)}."
    for name, module in (("boxsearch", boxsearch), ("lpbox", lpbox)):
        if backend == name and module.applies(prob) is not None:
            notice = f"Solved by CP-SAT: {module.applies(prob)}."
    return backend, notice


def _exclude_changes(prob: CellProblem, res: CounterfactualResult) -> bool:
    """Make the next solution leave one of ``res``'s changes alone (diverse alternatives);
    False when there is nothing to exclude (no point, or no change)."""
    if not res.found or res.x is None:
        return False
    inner = res.x if prob.band is None else prob.band.to_inner(res.x)
    changed = [j for j in range(prob.n_features) if inner[j] != prob.x_hat[j]]
    if not changed:
        return False
    prob.exclusions.append(changed)
    prob.nogoods = []
    return True


def _constrained_query(read: Any, given: Any, x: Any, target: Any, cons: Any, *, schema: Any, backend: str,
                       plausibility: Any, also_valid_for: Any, margin: Any, n_solutions: int, model: Any,
                       time_limit: float, **kw: Any) -> CounterfactualResult:
    """The query under constraints between features (:mod:`core.optimal.constrained`)."""
    unsupported = [what for what, used in (("a probability margin", margin is not None),
                                           ("n_solutions > 1", n_solutions > 1)) if used]
    if unsupported:
        raise QueryError(f"Under constraints between features the optimal counterfactual does not take "
                         f"{', '.join(unsupported)}; leave them out.")
    if isinstance(kw["norm"], str) and kw["norm"] == "linf" and isinstance(read, LinearModel):
        raise QueryError("The L-infinity cost (norm 'linf') is solved on tree ensembles; on a linear model "
                         "choose 'l0', 'l1', 'l2' or a mix of them.")
    time_limit = check_time_limit(time_limit)
    read, others, plausibility, original = _constrained_reading(read, given, model, schema, plausibility,
                                                                also_valid_for)
    params = dict(norm=kw["norm"] if isinstance(kw["norm"], str) else dict(kw["norm"]), time_limit=time_limit,
                  fixed=_names(kw["fixed"]), increase_only=_names(kw["increase_only"]),
                  decrease_only=_names(kw["decrease_only"]), target=str(target),
                  model_kind=read.kind)
    if backend not in ("auto", "highs"):
        params["notice"] = (f"Solved by the constrained MILP (HiGHS): the {backend} backend cannot take constraints "
                            "between features.")

    def free(limit: float) -> CounterfactualResult:     # the same query by the solvers made for it
        return optimal_counterfactual(given, x, target, schema=schema, constraints=(), plausibility=plausibility,
                                      also_valid_for=also_valid_for, backend=backend, time_limit=limit,
                                      model=model, **kw)
    return constrained_counterfactual(read, x, target, cons=cons, schema=schema, params=params, model=original,
                                      time_limit=time_limit, plausibility=plausibility, others=others, free=free,
                                      **kw)


def _constrained_reading(read: Any, given: Any, model: Any, schema: Any, plausibility: Any, also_valid_for: Any
                         ) -> tuple[Any, list[tuple[TreeEnsemble, Any]], Any, Any]:
    """What a constrained query reads: ``(model read, further models, plausibility, original
    model to check on)``; a linear model takes neither plausibility nor further models."""
    if isinstance(read, LinearModel):
        if plausibility is not None or tuple(also_valid_for or ()):
            raise QueryError("On a linear model the optimal counterfactual does not take plausibility or "
                             "also_valid_for; leave them out.")
        return read, [], plausibility, model if model is not None else (None if isinstance(given, LinearModel)
                                                                          else given)
    read = as_ensemble(read)
    check_schema(read, schema)
    others = other_models(also_valid_for)
    if plausibility is not None and not isinstance(plausibility, Plausibility):
        plausibility = Plausibility.from_forest(plausibility, None, None)
    return read, others, plausibility, model


def _linear_query(lin: LinearModel, given: Any, x: Any, target: Any, *, plausibility: Any, also_valid_for: Any,
                  n_solutions: int, model: Any, **kw: Any) -> CounterfactualResult:
    """The linear path of :func:`optimal_counterfactual` (see :mod:`core.solvers.linear`)."""
    if isinstance(kw["norm"], str) and kw["norm"] == "linf":
        raise QueryError("The L-infinity cost (norm 'linf') is solved on tree ensembles; on a linear model "
                         "choose 'l0', 'l1', 'l2' or a mix of them.")
    unsupported = [what for what, used in (("plausibility", plausibility is not None),
                                           ("also_valid_for", bool(tuple(also_valid_for or ()))),
                                           ("n_solutions > 1", n_solutions > 1)) if used]
    if unsupported:
        raise QueryError(f"On a linear model the optimal counterfactual does not take {', '.join(unsupported)} "
                         "(those are solved on a tree ensemble's cells); leave them out.")
    x = as_row(x, lin.feature_names, error=QueryError, missing=True)    # NaN: the model's own fill reads it
    feature_roles(lin.feature_names, error=QueryError, fixed=kw["fixed"], increase_only=kw["increase_only"],
                  decrease_only=kw["decrease_only"])
    original = model if model is not None else (None if isinstance(given, LinearModel) else given)
    params = dict(norm=kw["norm"] if isinstance(kw["norm"], str) else dict(kw["norm"]), time_limit=kw["time_limit"],
                  fixed=_names(kw["fixed"]), increase_only=_names(kw["increase_only"]),
                  decrease_only=_names(kw["decrease_only"]), target=str(target), margin=kw["margin"],
                  model_kind="linear")
    return linear_counterfactual(lin, x, target, model=original, params=params, **kw)


def query_door(ens: TreeEnsemble, x: Row, X_ref: Rows | None, schema: object, *, error: type[Exception] = QueryError,
               **roles: FeatureKey | Iterable[FeatureKey] | None
               ) -> tuple[np.ndarray, np.ndarray | None, dict[str, list[str] | None]]:
    """A query's inputs checked at the door (:mod:`core.model.features`): the row
    ``x`` as d finite floats, the reference rows ``X_ref`` as (n, d) floats or None,
    the schema of the model's features, and each of ``roles`` (``fixed``,
    ``increase_only``, ``decrease_only``: names or indices; None keeps the
    schema's) as feature names; ``error`` says what is wrong."""
    names = list(ens.feature_names)
    row = as_row(x, names, error=error, what="x")
    ref = None if X_ref is None else _reference(X_ref, names, error)
    check_schema(ens, schema, error)
    resolved = {role: None if cols is None else [names[j] for j in cols]
                for role, cols in feature_roles(names, error=error, **roles).items()}
    return row, ref, resolved


def _reference(X_ref: Rows, names: list[str], error: type[Exception]) -> np.ndarray:
    """:func:`core.model.features.reference_rows` of ``X_ref``; an array it passes and keeps as
    is, given again (the same array, dtype, shape, first and last rows), is not read again:
    that verdict is kept with it (:data:`core.cells.cache.GRID_CACHE`) as its grid cells are
    (:mod:`core.cells.starts`), where reading every value took about a tenth of an easy query."""
    if not (isinstance(X_ref, np.ndarray) and X_ref.ndim == 2 and len(X_ref)):
        return reference_rows(X_ref, names, error=error)
    key = ("reference rows", len(names), X_ref.dtype.str, X_ref.shape, X_ref[0].tobytes(), X_ref[-1].tobytes())
    kept = GRID_CACHE.get(X_ref, key, lambda: reference_rows(X_ref, names, error=error) is X_ref)
    return X_ref if kept else reference_rows(X_ref, names, error=error)


def other_models(items: Iterable[Any]) -> list[tuple[TreeEnsemble, Any]]:
    """``also_valid_for`` as (ensemble, original model or None) pairs: an item is a
    TreeEnsemble, a supported model (converted; checked as loaded too), or a
    ``(TreeEnsemble, model)`` pair (converted once by the caller)."""
    if isinstance(items, (str, bytes)) or not isinstance(items, Iterable) and items is not None:
        raise QueryError(f"also_valid_for is a list of further models (TreeEnsembles or fitted models); got "
                         f"{type(items).__name__}.")
    out = []
    for o in items or ():
        if isinstance(o, tuple) and len(o) == 2 and isinstance(o[0], TreeEnsemble):
            out.append((o[0], o[1]))
        elif isinstance(o, TreeEnsemble):
            out.append((o, None))
        else:
            out.append((as_ensemble(o), o))
    return out


def _params(s: OptimalSettings, time_limit: float, plausibility: Plausibility | None,
            target: Any) -> dict[str, Any]:
    """The settings a result reports (JSON-ready), as asked: ``backend`` is the one asked for
    ("auto" runs the solvers that suit the problem; the result's ``backend`` names the one that
    answered), so the same settings ask the same query again."""
    return dict(norm=s.norm if isinstance(s.norm, str) else dict(s.norm), backend=s.backend, time_limit=time_limit,
                n_solutions=s.n_solutions, fixed=_names(s.fixed),
                increase_only=_names(s.increase_only), decrease_only=_names(s.decrease_only),
                plausibility=None if plausibility is None else {"delta": plausibility.delta,
                                                               "contamination": plausibility.contamination},
                target=str(target), margin=s.margin, also_valid_for=len(tuple(s.also_valid_for or ())))


def _names(items: Iterable[Any] | None) -> list[str] | None:
    return None if items is None else [str(v) for v in items]


def _solve_once(prob: CellProblem, backend: str, time_limit: float, hint: np.ndarray | None, n_workers: int,
                anytime: Anytime, later: "_LateStart | None" = None) -> tuple[CellSolution, str]:
    """(solution, the solver that gave it): "race" runs CP-SAT beside the box search
    (:mod:`core.solvers.race`); the box search hands what it does not take to CP-SAT.
    The solvers that can tell ``anytime`` their points and bounds while they run, and
    stop on its event, do. ``later``: the reference rows' start, for the LP box search
    to compute beside its first LP (:func:`_upper_bound`)."""
    stop = anytime.stop if anytime.should_stop is not None else None
    lower = anytime.lower if anytime.listening else None

    def found(name: str) -> Callable[[np.ndarray], None] | None:   # a solver's points, told under its name
        return (lambda cells: anytime.cells(cells, name)) if anytime.listening else None

    if backend == "race":
        return race.solve(prob, time_limit=time_limit, hint=hint, n_workers=n_workers, stop=stop,
                          on_solution=found(_answering(prob, backend)), on_bound=lower, later=later)
    if backend in ("boxsearch", "lpbox"):
        tell = None if lower is None else (lambda lo, _up: lower(lo))
        sol = (boxsearch.solve(prob, time_limit=time_limit, hint=hint, stop=stop, on_bound=tell)
               if backend == "boxsearch" else
               lpbox.solve(prob, time_limit=time_limit, hint=hint, stop=stop, on_bound=tell, n_workers=n_workers,
                           on_solution=found("lpbox"), later=later))
        if sol is not None:
            return sol, backend
        backend = "cpsat"
    if backend == "cpsat":
        return cpsat.solve(prob, time_limit=time_limit, hint=hint, n_workers=n_workers, stop=stop,
                           on_solution=found("cpsat"), on_bound=lower), "cpsat"
    return ocean.solve(prob, solver=backend, time_limit=time_limit), backend


def _separable(run: QueryRun) -> CounterfactualResult | None:
    """Boosted stumps: exact branch and bound (core.solvers.separable), or None to use the general model."""
    prob = run.prob
    ts = time.perf_counter()
    sol = separable.solve(prob)
    run.timings["solve"] = time.perf_counter() - ts
    if sol is None:
        return None
    if sol.status == "infeasible":
        return run.infeasible("separable")
    if sol.cells is None:
        return None
    x = prob.point_of(sol.cells)
    if not prob.is_valid(x[None, :])[0]:   # a rounding near-tie: let the general model decide
        return None
    cost = prob.cost_of(sol.cells)
    return run.result(x, cost, "optimal", backend="separable", lower_bound=cost)


def _answering(prob: CellProblem, backend: str) -> str:
    """The solver that answers ``backend`` on ``prob``: "race" names the one the race runs, and a box
    search hands a problem it does not take to CP-SAT."""
    if backend == "race":
        return race.solver_name(prob)
    if (backend == "boxsearch" and boxsearch.applies(prob) is not None) or \
            (backend == "lpbox" and lpbox.applies(prob) is not None):
        return "cpsat"
    return backend


class _LateStart:
    """The reference rows' start (:func:`core.cells.warm_start`) computed while the LP box
    search runs: by its second worker while the first solves the root LP, or by the only
    worker before it starts. It runs on the first call; every call returns its point (or
    None), which is told to ``anytime`` and kept in ``x`` and ``cost``."""

    def __init__(self, run: QueryRun, X_ref: np.ndarray, anytime: Anytime):
        self.run, self.X_ref, self.anytime = run, X_ref, anytime
        self.ran = False
        self.x: np.ndarray | None = None
        self.cost = np.inf

    def __call__(self, stop: Callable[[], bool] | None = None) -> np.ndarray | None:
        if not self.ran:
            self.ran = True
            t = time.perf_counter()
            self.x, self.cost = warm_start(self.run.prob, self.X_ref, stop=stop)
            self.run.timings["reference_start"] = time.perf_counter() - t
            if self.x is not None:
                self.anytime.point(self.x, self.cost, "warm start")
        return self.x


def _late(run: QueryRun, backend: str, X_ref: np.ndarray | None, warm: bool, n_workers: int,
          anytime: Anytime) -> _LateStart | None:
    """The reference rows' start, when it is to run beside the LP box search rather than before
    it (:func:`_upper_bound`), else None."""
    prob = run.prob
    if not (_answering(prob, backend) == "lpbox" and warm and n_workers >= 2 and X_ref is not None and len(X_ref)
            and not prob.exclusions):
        return None
    return _LateStart(run, np.asarray(X_ref, dtype=float), anytime)


def _upper_bound(run: QueryRun, X_ref: np.ndarray | None, warm: bool, time_limit: float,
                 anytime: Anytime, later: _LateStart | None = None) -> tuple[np.ndarray | None, float]:
    """The cheaper of the reference rows' and the model's own start (none for
    alternatives, which must avoid earlier solutions' changes, nor with
    ``warm=False``, the plain formulation benchmarks compare against).

    With ``later``, only the model's own start runs here, and the reference rows' runs
    beside the LP box search's first LP: that search finds points as cheap from its LPs
    (on breast cancer, RF(100, depth 5), L1, it proved the 20 bench queries in a median
    0.383 s from the cheaper start and 0.395 s from the model's own), so the reference
    rows' local search (0.066 s a query) no longer holds up its start."""
    prob = run.prob
    tw = time.perf_counter()
    ws_x, ws_cost = None, np.inf
    if warm and not prob.exclusions:
        deadline = tw + 0.25 * time_limit
        ws_x, ws_cost = greedy_start(prob, deadline=deadline) if later is not None else \
            best_start(prob, X_ref, deadline=deadline)
    run.timings["warm_start"] = time.perf_counter() - tw
    prob.upper_bound = ws_cost
    if ws_x is not None:
        anytime.point(ws_x, ws_cost, "warm start")
    return ws_x, ws_cost


def _quick_box(run: QueryRun, backend: str, anytime: Anytime) -> CounterfactualResult | None:
    """The L-infinity race's first step: the box search alone for :data:`race.QUICK_BOXES` boxes,
    before any start, bound or solver model is built; its proof is the answer (its first valid
    cheapest point is optimal, and its root bound is the radius bound), else None and the query
    goes on as before. Veritas's cheap case, at its cost: most queries are proven here in a few
    dozen boxes, for a few milliseconds."""
    prob = run.prob
    if backend != "race" or not race.takes(prob) or prob.exclusions or prob.nogoods:
        return None
    ts = time.perf_counter()
    sol = boxsearch.solve(prob, time_limit=max(0.01, run.t0 + float(run.params.get("time_limit", 30.0))
                                               - time.perf_counter()),
                          stop=anytime.stop if anytime.should_stop is not None else None,
                          node_limit=race.QUICK_BOXES)
    run.timings["quick_box"] = time.perf_counter() - ts
    if sol is None or sol.status not in ("optimal", "infeasible"):
        return None
    if sol.status == "infeasible":
        return run.infeasible("boxsearch")
    assert sol.cells is not None                  # (valid: the search proves only a point it checked)
    cost = prob.cost_of(sol.cells)
    return run.result(prob.point_of(sol.cells), cost, "optimal", backend="boxsearch", lower_bound=cost)


def _solve_with_checks(run: QueryRun, backend: str, time_limit: float, X_ref: np.ndarray | None, warm: bool,
                       n_workers: int, anytime: Anytime) -> CounterfactualResult:
    start = time.perf_counter()
    shortcut = _shortcut(run, backend, anytime)
    if shortcut is not None:
        return shortcut
    prob, timings = run.prob, run.timings
    later = _late(run, backend, X_ref, warm, n_workers, anytime)
    ws = _upper_bound(run, X_ref, warm, time_limit, anytime, later)
    proven = _radius_first(run, ws, anytime)
    if proven is not None:
        return proven
    deadline = start + time_limit      # time_limit: what the query has left for this solution
    used = _answering(prob, backend)   # the solver a result names
    for _ in range(50):  # cut off near-tie cells the integer scaling admitted
        left = deadline - time.perf_counter()
        if left <= 0 or anytime.stopped:
            break
        ts = time.perf_counter()
        try:
            sol, used = _solve_once(prob, backend, left, ws[0], n_workers, anytime, later)
        except GurobiUnavailable as exc:
            backend = used = "cpsat"
            run.params["notice"] = f"{exc} Solved with CP-SAT instead."
            continue
        timings["solve"] = timings.get("solve", 0.0) + time.perf_counter() - ts
        ws, later = _cheaper_start(later, ws), None     # the reference rows' start, run now if no solver ran it
        if sol.status == "infeasible":
            return _infeasible(run, used, ws)
        if sol.cells is None:  # no solution within the time limit
            break
        res = _solution_result(run, sol, used, ws, anytime)
        if res is not None:
            return res
    return _unproven(run, anytime, used, later, ws)


def _shortcut(run: QueryRun, backend: str, anytime: Anytime) -> CounterfactualResult | None:
    """The answers found before any start or solver model: boosted stumps' exact branch and
    bound, then the L-infinity race's quick box search; None when neither answers."""
    prob = run.prob
    if backend in ("cpsat", "race") and not prob.exclusions and not prob.nogoods and not prob.others \
            and prob.target.margin is None and prob.cost_model.combine == "sum":
        fast = _separable(run)
        if fast is not None:
            return fast
    return _quick_box(run, backend, anytime)


def _radius_first(run: QueryRun, ws: tuple[np.ndarray | None, float], anytime: Anytime) -> CounterfactualResult | None:
    """The radius lower bound (first solutions only): infeasible when infinite, the warm start
    proven optimal when it meets the bound, else None with the bound told to ``anytime``."""
    prob, timings = run.prob, run.timings
    if prob.exclusions or prob.nogoods:
        return None
    tb = time.perf_counter()
    lb = radius_bound(prob)
    timings["bound"] = time.perf_counter() - tb
    run.bound = lb
    if not np.isfinite(lb):
        return run.infeasible("bound")
    ws_x, ws_cost = ws
    if ws_x is not None and ws_cost <= lb * (1 + 1e-9) + 1e-15:  # the bound proves the warm start optimal
        return run.result(ws_x, ws_cost, "optimal", backend="bound", lower_bound=lb)
    anytime.lower(lb)
    return None


def _infeasible(run: QueryRun, used: str, ws: tuple[np.ndarray | None, float]) -> CounterfactualResult:
    """The answer when the solver proves no cell valid: infeasible, unless a warm point exists
    (possible only when the bound was tight: the warm point is then optimal)."""
    if ws[0] is not None:
        return run.result(ws[0], ws[1], "optimal", backend=used, lower_bound=ws[1])
    return run.infeasible(used)


def _cheaper_start(later: _LateStart | None, ws: tuple[np.ndarray | None, float]) -> tuple[np.ndarray | None, float]:
    """The reference rows' start (run now if no solver ran it) when there is one cheaper than ``ws``."""
    if later is not None and later() is not None and later.cost < ws[1]:
        return later.x, later.cost
    return ws


def _solution_result(run: QueryRun, sol: CellSolution, used: str, ws: tuple[np.ndarray | None, float],
                     anytime: Anytime) -> CounterfactualResult | None:
    """The result for a solver's cells (the warm start where it is cheaper); None when the
    point is not valid on the model, whose leaves are then cut off for the next solve."""
    prob = run.prob
    assert sol.cells is not None
    x_cf = prob.point_of(sol.cells)
    cost = prob.cost_of(sol.cells)
    if sol.status != "optimal" and anytime.stopped:
        anytime.cells(sol.cells, used)          # the solver's last point, if the callbacks were off
        return _stopped(run, anytime, used, sol.lower_bound)
    if not prob.is_valid(x_cf[None, :])[0]:
        _add_nogood(prob, x_cf)
        return None
    ws_x, ws_cost = ws
    if ws_x is not None and ws_cost < cost - 1e-12:  # solver stopped above the warm start
        x_cf, cost = ws_x, ws_cost
    if sol.status == "optimal":
        return run.result(x_cf, cost, "optimal", backend=used, lower_bound=cost)
    lb = float(min(max(sol.lower_bound, run.bound, anytime.bound), cost))
    gap = max(0.0, (cost - lb) / max(abs(cost), 1e-12))
    return run.result(x_cf, cost, "time_limit", backend=used, gap=gap, lower_bound=lb,
                      message="The time limit was reached before optimality was proven: "
                              f"this is the best valid point found (gap {gap:.1%}).")


def _unproven(run: QueryRun, anytime: Anytime, used: str, later: _LateStart | None,
              ws: tuple[np.ndarray | None, float]) -> CounterfactualResult:
    """The answer when no solve proved one: stopped, else the best start, else out of time."""
    if anytime.stopped:
        return _stopped(run, anytime, used, 0.0)
    ws_x, ws_cost = ws
    if later is not None and ws_x is None:   # out of time before any solve: the reference rows' start, as before
        ws_x, ws_cost = later(), later.cost
    if ws_x is not None:
        lb = run.bound
        return run.result(ws_x, ws_cost, "time_limit", backend=used, lower_bound=lb,
                          gap=max(0.0, (ws_cost - lb) / max(ws_cost, 1e-12)),
                          message="The time limit was reached before optimality was proven; this is the best "
                                  "valid point found.")
    return run.out_of_time(used)


def _stopped(run: QueryRun, anytime: Anytime, backend: str, bound: float) -> CounterfactualResult:
    """The answer when ``should_stop`` ended the query: the best valid point the
    solvers told (:class:`Anytime`; it holds the warm start too), checked on the
    model, with the largest proven lower bound."""
    best = anytime.last
    lb = max(bound, anytime.bound, run.bound)
    if best is None:
        return stopped_result(run, None, np.inf, lb, backend)
    return stopped_result(run, best.x, best.cost, lb, best.backend)


def _add_nogood(prob: CellProblem, x: np.ndarray) -> None:
    """Exclude the leaf combination of an invalid point (a near tie admitted by scaling)."""
    ok_target = prob.target.holds(prob.ens, x[None, :])[0]
    if not ok_target:
        prob.nogoods.append(("model", prob.ens.apply(x[None, :])[0]))
    for k, o in enumerate(prob.others):
        if not o.target.holds(o.ens, x[None, :])[0]:
            prob.nogoods.append((f"other{k}", o.ens.apply(x[None, :])[0]))
    if prob.plaus is not None and not prob.plaus.holds(x[None, :])[0]:
        prob.nogoods.append(("plaus", prob.plaus.forest.apply(x[None, :])[0]))
