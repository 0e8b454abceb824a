"""FCCA: supervised feature compression by counterfactual analysis.

Piccialli, Romero Morales and Salvatore, "Supervised feature compression based
on counterfactual analysis", EJOR 2023; Algorithm 1, in three phases.

1. *Counterfactuals.* The rows of M (eq. 13) are those the model classifies
   correctly, ``f(x_i) = y_i``, with the probability of that class in
   ``[p0, p1]``. Each gets its optimal counterfactual, problem (2)-(7), with
   cost ``lambda0 * l0 + lambda1 * l1 + lambda2 * l2^2`` on features scaled to
   [0, 1] (eq. 2: our cost model with the schema's ranges as scales), solved
   exactly by :func:`core.optimal.optimal_counterfactual` and run over rows by
   :func:`core.optimal.batch.map_rows`. The problem (2)-(7) has no actionability, so
   every feature is free here whatever the schema says; the schema gives
   kinds (integer, binary, one-hot) and ranges.
2. *Thresholds* (eqs. 10-11). For each pair ``(x0, xCE)`` and each feature
   with ``|x0_j - xCE_j| > eps_j`` the paper takes
   ``t_j = xCE_j + eps_j * sign(x0_j - xCE_j)``. Its MILP puts ``xCE_j``
   ``eps_j`` beyond the split it crosses (constraints 3-4), so ``t_j`` is that
   split of the model. :mod:`core.optimal` returns the infimum point instead
   (on the split, or 1e-6 of the range past it), so we take that split
   directly: the model's split level on feature ``j`` between ``x0_j`` and
   ``xCE_j`` nearest to ``xCE_j`` (the paper's formula on our point is the
   fallback when no split lies between them). Equal splits from different
   pairs are one threshold; its multiplicity ``pi_t`` counts the pairs.
   ``eps_j`` defaults to the smallest gap between consecutive distinct
   observed values of feature ``j``, as in the paper.
3. *Discretisation* (eq. 12 and Phase 3). ``F_Q`` is the Q-quantile of the
   frequency distribution of the multiplicities, as the paper defines it: the
   smallest count ``c`` with at least a share Q of the thresholds counted
   ``<= c`` (the inverse of their distribution function). It is always a
   count some threshold has, and a threshold is kept at Q exactly when at
   least a share Q of the thresholds are counted at most as often as it; the
   authors' code interpolates between counts (numpy's default), which can
   land between two counts and drop the threshold sitting exactly at the
   quantile (breast cancer: 74.7 between 72 and 99 at Q = 0.9, dropping the
   count 72 that 27 of the 30 counts do not exceed). The thresholds with
   ``pi_t >= F_Q`` are kept (ties with ``F_Q`` included);
   ``b_it = [x_ij > t]``; features with no kept threshold are dropped.
   Compression rate ``eta = 1 - distinct rows / rows``; inconsistency rate
   (eq. 15) ``delta = sum over cells of (cell size - count of its majority
   label) / rows``, which is ``min(|Omega^0|, |Omega^1|)`` per cell for two
   classes.

The surrogate is a tree of depth <= 3 on the binary columns: CART
(scikit-learn) or GOSDT (Lin et al. 2020, the paper's optimal sparse tree,
regularisation ``10 / n_train`` as in section 4.1) when the ``gosdt`` package
is installed.

Multiclass models are handled one-vs-rest: a row's counterfactual leaves its
class for the cheapest other class (each other class is solved and the
cheapest kept), and the probability filter uses the probability of the
row's class. Regressors and anomaly detectors are refused.

A model that is not a tree ensemble (an MLP run in its worker; a linear model, whose
splits are not its own) is given as ``model`` (:func:`core.rules.onmodel.on_model`) with
the tree-ensemble ``surrogate`` its ``ensemble`` is the view of: the counterfactuals are
then the surrogate's, optimal for it, and the thresholds the surrogate's splits. They
are labelled so: every counterfactual is checked on the model itself (one batched call
for all of them), each threshold says how many of its pairs the model accepts, and the
guarantee is an estimate through the surrogate (its fidelity), never an exact or proven
answer about the model. M is then the rows the model classifies correctly and the
surrogate decides as the model does (a counterfactual of the surrogate starts from a
row it reads as the model).

``run_time_limit`` bounds the whole run: no counterfactual starts after it and the one
running stops at it (its best point so far kept, as a time limit does); rows not
reached are counted as ``"not reached"``. The rows are solved in a seeded shuffled
order, so the rows reached are an even spread of M, not its first rows.

Phases 1-2 are here (:func:`fcca`); the result, with Q and all read from it, in
:mod:`core.compression.result`; the surrogate tree in :mod:`core.compression.tree`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

import numpy as np
import pandas as pd

from core.cells import feature_levels
from core.compression.result import FCCAResult, explain_flat_curves
from core.compression.tree import TreeFit, gosdt_available, same_labels
from core.counterfactual import check_schema
from core.errors import FCCAError
from core.model import TreeEnsemble, as_ensemble
from core.model.features import as_table, feature_index
from core.model.missing import indicator_of, missing_as_states
from core.optimal import optimal_counterfactual
from core.optimal.batch import map_rows
from core.rules.onmodel import OnModel
from core.schema import Schema, infer_schema, with_missing_states
from core.settings import (
    N_JOBS,
    ROW_TIME_LIMIT,
    integer,
    n_jobs_setting,
    nonnegative,
    norm_setting,
    optional,
    probability,
    scheduler_setting,
    seconds,
    validated,
)
from core.typing import ArrayLike, ModelLike, Rows

if TYPE_CHECKING:
    from distributed import Client

    from core.constraints import Constraints
    from core.surrogate import Surrogate

__all__ = ["fcca", "FCCASettings", "FCCAResult", "TreeFit", "FCCAError", "default_eps", "gosdt_available",
           "explain_flat_curves"]


def default_eps(X: np.ndarray) -> np.ndarray:
    """Per feature, the smallest gap between consecutive distinct values (1 for a constant column)."""
    X = np.asarray(X, dtype=float)
    eps = np.ones(X.shape[1])
    for j in range(X.shape[1]):
        u = np.unique(X[:, j][np.isfinite(X[:, j])])
        if u.size >= 2:
            eps[j] = float(np.min(np.diff(u)))
    return eps


# ---------------------------------------------------------------- phase 1-2
#: what a row not reached before the run's time limit gives (its status)
NOT_REACHED = "not reached"


def _one_row(item: tuple[np.ndarray, list[Any]], ensemble: TreeEnsemble, kwargs: dict[str, Any],
             deadline: float | None = None):
    """The cheapest counterfactual of ``x`` over its target classes (one-vs-rest); with a
    ``deadline`` (wall-clock, :func:`time.time`, the same in every process of the machine) none
    starts after it and a running one stops at it."""
    x, targets = item
    results = []
    for t in targets:
        if deadline is not None:
            left = deadline - time.time()
            if left <= 0:
                break
            kw = {**kwargs, "time_limit": min(float(kwargs["time_limit"]), left),
                  "should_stop": lambda: time.time() >= deadline}
        else:
            kw = kwargs
        results.append(optimal_counterfactual(ensemble, x, t, **kw))
    if not results:
        return NOT_REACHED
    found = [r for r in results if r.found]
    return min(found, key=lambda r: r.cost) if found else results[0]


def _crossed(levels: np.ndarray, a: float, b: float) -> float | None:
    """The split level between ``a`` (query) and ``b`` (counterfactual) nearest ``b``
    (splits send ``x <= level`` left)."""
    if b < a:   # moved down: levels with b <= L < a; nearest b is the smallest
        k = np.searchsorted(levels, b, side="left")
        return float(levels[k]) if k < levels.size and levels[k] < a else None
    k = np.searchsorted(levels, b, side="left") - 1   # moved up: a <= L < b; nearest b is the largest
    return float(levels[k]) if k >= 0 and levels[k] >= a else None


@dataclass(frozen=True)
class FCCASettings:
    """FCCA's settings that change its answer, as :func:`fcca` received them (kept with the result).

    p0, p1 : bounds on the probability of the row's class for rows in M.
    lambda0, lambda1, lambda2 : weights of l0, l1 and squared l2 (eq. 2) on
        features scaled to [0, 1] by the schema's ranges.
    eps : per-feature tolerance (array or dict name -> value); default: the
        smallest gap between consecutive observed values.
    max_points : keep at most this many rows of M (an even spread), or all.
    time_limit : seconds per counterfactual; a row without a valid
        counterfactual in time is left out (``statuses`` counts it).
    """

    p0: float
    p1: float
    lambda0: float
    lambda1: float
    lambda2: float
    eps: Any
    max_points: int | None
    time_limit: float


#: FCCA's default cost (the paper's): 0.1 per changed feature plus the l1 distance on range-scaled features
FCCA_NORM = {"l0": 0.1, "l1": 1.0, "l2": 0.0}


def _cost_mix(norm: Any, lambdas: dict[str, Any]) -> dict[str, Any]:
    """The weights of l0, l1 and squared l2: ``norm`` (the vocabulary of every analysis), or
    the ``lambda0/1/2`` aliases, each left out taking :data:`FCCA_NORM`'s weight."""
    if norm is None:
        return {k: FCCA_NORM[k] if v is None else v for k, v in lambdas.items()}
    given = [f"lambda{k[1]}" for k, v in lambdas.items() if v is not None]
    if given:
        raise FCCAError(f"fcca(): give the cost once, as norm={norm!r} or as {', '.join(given)} (their aliases), "
                        "not both.")
    mix = {norm: 1.0} if isinstance(norm, str) else dict(norm)
    return {k: float(mix.get(k, 0.0)) for k in lambdas}


@validated(FCCAError, p0=probability, p1=probability, norm=optional(norm_setting), lambda0=optional(nonnegative),
           lambda1=optional(nonnegative), lambda2=optional(nonnegative), max_points=optional(integer(1)),
           time_limit=seconds, n_jobs=n_jobs_setting, scheduler=scheduler_setting, run_time_limit=optional(seconds))
def fcca(ensemble: ModelLike, X: Rows, y: ArrayLike, *, schema: Schema | None = None, p0: float = 0.5, p1: float = 1.0,
         norm: str | Mapping[str, float] | None = None, lambda0: float | None = None,
         lambda1: float | None = None, lambda2: float | None = None, eps: ArrayLike | Mapping[str, float] | None = None,
         max_points: int | None = None, time_limit: float = ROW_TIME_LIMIT, n_jobs: int = N_JOBS,
         scheduler: str | Client | None = None,
         progress: Callable[[int, int], None] | None = None,
         should_stop: Callable[[], bool] | None = None, model: OnModel | None = None,
         surrogate: Surrogate | None = None, run_time_limit: float | None = None,
         constraints: Iterable[str] | str | Constraints | None = None) -> FCCAResult:
    """Run FCCA's phases 1-2 (see the module docstring); Q is applied later.

    Parameters
    ----------
    ensemble : TreeEnsemble or a supported classifier.
    X : array or DataFrame (n_samples, n_features): the training rows (a DataFrame is read by
        name). Missing values (NaN), when the model routes them, are one more state of their
        column, as in the app: each feature missing somewhere gets an "is missing" column after
        the features (:func:`core.model.missing.missing_as_states`), and the result's rows and
        counterfactuals have those columns too.
    y : labels of X, required: the true labels (the paper: M holds the rows the
        model classifies correctly), or the model's own predictions to describe
        the model alone.
    schema : Schema or None, default None, kinds and ranges; inferred from X if None.
    p0, p1 : float, default 0.5 and 1.0, bounds on the probability of the row's class for rows in M.
    norm : the cost, as in every analysis (:func:`core.optimal.optimal_counterfactual`): "l0",
        "l1", "l2" (squared) or a mix such as ``{"l0": 0.1, "l1": 1.0}``, on features scaled to
        [0, 1] by the schema's ranges; default None: :data:`FCCA_NORM`, the paper's
        ``{"l0": 0.1, "l1": 1.0, "l2": 0.0}`` (eq. 2).
    lambda0, lambda1, lambda2 : float, aliases of the mix's weights of l0, l1 and squared l2 (the
        paper's names); one left out keeps its default weight. Give either these or ``norm``.
    eps : array or dict name -> value, default None, per-feature tolerance (None: the
        smallest gap between consecutive observed values).
    max_points : int or None, default None, keep at most this many rows of M (an even spread).
    time_limit : float, default 10.0, seconds per counterfactual (a row without one in time is
        left out; ``statuses`` counts it).
    n_jobs, scheduler : default 1 and None, local processes for the counterfactuals (-1: every
        core), or a Dask scheduler address or Client (:mod:`core.settings`).
    progress : called as progress(done, total).
    should_stop : polled between rows; True stops early (``cancelled``).
    model : the model itself when ``ensemble`` is not it (:func:`core.rules.onmodel.on_model`):
        every counterfactual is checked on it, and the result says what kind of model it was.
    surrogate : the :class:`core.surrogate.Surrogate` that ``ensemble`` is the view of (its
        fidelity goes into the guarantee); needs ``model``.
    run_time_limit : float or None, default None, seconds for the whole run (module docstring).
    constraints : the analyst's constraints between features (:mod:`core.constraints`: texts,
        or parsed), default None: the schema's own. Every counterfactual is then found under
        them (:func:`core.optimal.optimal_counterfactual` with ``constraints=``), so the
        thresholds come from moves a person can make; a row of M that no such move brings to
        another class is counted in ``statuses`` as ``"infeasible"`` (proven). The result's
        ``params["constraints"]`` names them.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from core import fcca, from_model
    >>> data = load_breast_cancer(as_frame=True)
    >>> X, y = data.data.iloc[:, :4], data.target
    >>> rf = RandomForestClassifier(5, max_depth=3, random_state=0).fit(X, y)
    >>> result = fcca(from_model(rf), X.iloc[:40], y.iloc[:40], n_jobs=1)
    >>> len(result.rows) > 0
    True
    """
    t_start = time.perf_counter()
    mix = _cost_mix(norm, {"l0": lambda0, "l1": lambda1, "l2": lambda2})
    s = FCCASettings(p0=p0, p1=p1, lambda0=mix["l0"], lambda1=mix["l1"], lambda2=mix["l2"], eps=eps,
                     max_points=max_points, time_limit=time_limit)
    ens, A, labels, names, eps_arr, schema = _read_rows(ensemble, X, y, schema, s)
    cons = _constraints(constraints, schema)
    free = _free_schema(schema, ens)

    checker = _checker(model, surrogate)
    deadline = None if run_time_limit is None else time.time() + float(run_time_limit)
    own = ens.predict(A)
    pred = own if checker is None else np.asarray(checker.predict(A))      # the model's own decisions
    cand, n_candidates = _select(ens, A, labels, pred, s, own)
    t_select = time.perf_counter()
    norm = {"l0": float(s.lambda0), "l1": float(s.lambda1), "l2": float(s.lambda2)}
    kwargs = dict(schema=free, norm=norm, time_limit=float(s.time_limit), X_ref=A, warm=True,
                  n_workers=1 if (n_jobs != 1 or scheduler) else 2, constraints=cons)
    results = _counterfactuals(ens.classes, A, cand, pred, partial(_one_row, ensemble=ens, kwargs=kwargs, deadline=deadline),
                               partial(map_rows, n_jobs=n_jobs, chunk_size="auto", progress=progress,
                                       should_stop=should_stop, scheduler=scheduler))
    t_cf = time.perf_counter()

    levels = feature_levels(ens, [f.kind for f in schema.features])   # the splits a counterfactual can cross
    pairs = _pairs(A, cand, results, levels, eps_arr)
    if not pairs.rows:
        raise _no_pairs(pairs, cand.size, cons)
    checked = None if checker is None else _check_pairs(checker, ens, np.array(pairs.xces), pred[pairs.rows])
    t_end = time.perf_counter()
    timings = {"select": t_select - t_start, "counterfactuals": t_cf - t_select, "thresholds": t_end - t_cf,
               "total": t_end - t_start}
    kind, table = _thresholds(pairs, names, checker, surrogate, checked)
    fidelity, boundary = (None, None) if surrogate is None else (surrogate.fidelity, surrogate.boundary_fidelity)
    return FCCAResult(names, A, labels, pred, np.array(pairs.rows, dtype=int), np.array(pairs.x0s),
                      np.array(pairs.xces), np.array(pairs.costs), pairs.pair_t, table, eps_arr, pairs.statuses,
                      _params(s, n_jobs, run_time_limit, cons), timings, n_candidates, any(r is None for r in results),
                      ens, kind, fidelity, boundary, checked)


class _Rows(NamedTuple):
    """The rows as read: the ensemble and rows with their "is missing" columns, the labels,
    the columns' names, the tolerance per column and the schema."""

    ens: TreeEnsemble
    A: np.ndarray
    y: np.ndarray
    names: list[str]
    eps: np.ndarray
    schema: Schema


def _read_rows(ensemble: ModelLike, X: Rows, y: ArrayLike, schema: Schema | None, s: FCCASettings) -> _Rows:
    """The classifier, its rows and labels read and checked, missing values made one more
    state of their column (:func:`core.model.missing.missing_as_states`), the schema inferred when not given."""
    ens = as_ensemble(ensemble)
    if not ens.is_classifier:
        raise FCCAError(f"FCCA explains a classifier's decisions; this model is a {ens.task} model.")
    check_schema(ens, schema, FCCAError)
    A = as_table(X, ens.feature_names, error=FCCAError, missing=True)
    labels = _labels(y, len(A))
    d = ens.n_features
    eps_arr = _check_settings(s, ens, A)
    ens, A, _ = missing_as_states(ens, A, error=FCCAError)     # missing values: one more state of a column
    names = list(ens.feature_names)
    eps_arr = np.concatenate([eps_arr, np.ones(len(names) - d)])   # an "is missing" column: 0 or 1
    if schema is None:
        schema = infer_schema(pd.DataFrame(A[:, :d], columns=names[:d]), protected=[])
    return _Rows(ens, A, labels, names, eps_arr, with_missing_states(schema, ens))


def _params(s: FCCASettings, n_jobs: int, run_time_limit: float | None, cons: Constraints) -> dict[str, Any]:
    """The result's ``params``: the settings, and the constraints' texts when there are any."""
    return {"p0": s.p0, "p1": s.p1, "lambda0": s.lambda0, "lambda1": s.lambda1, "lambda2": s.lambda2,
            "max_points": s.max_points, "time_limit": s.time_limit, "n_jobs": n_jobs,
            "run_time_limit": run_time_limit, **({"constraints": cons.texts} if len(cons) else {})}


def _thresholds(pairs: _Pairs, names: list[str], checker: OnModel | None, surrogate: Surrogate | None,
                checked: np.ndarray | None) -> tuple[str, pd.DataFrame]:
    """The kind of model answered, and the thresholds' table (whose splits they are, and, checked
    on the model, how many of each threshold's pairs it accepts)."""
    kind = "tree_ensemble" if checker is None else checker.kind
    source = "model" if kind == "tree_ensemble" and surrogate is None else "surrogate"
    return kind, _threshold_table(pairs.pair_t, names, source, None if checked is None else
                                  {r for r, ok in zip(pairs.rows, checked) if ok})


def _free_schema(schema: Schema, ens: TreeEnsemble) -> Schema:
    """The schema the counterfactuals are found under: every feature free (FCCA asks where the
    model's splits are, not what a person may change), but an "is missing" column may only go
    down (a missing value may become a value, a value never becomes missing)."""
    free = schema
    states = set(indicator_of(ens).values())
    for j, f in enumerate(schema.features):
        if j in states:
            free = free.with_updates(f.name, actionability="decrease")
        elif f.actionability != "free":
            free = free.with_updates(f.name, actionability="free")
    return free


def _counterfactuals(classes: Any, A: np.ndarray, cand: np.ndarray, pred: np.ndarray,
                     one_row: Callable[[Any], Any], run_rows: Callable[..., Iterable[Any]]) -> list[Any]:
    """Phase 1: a counterfactual of each row of M to any other class, run in a random order (any
    prefix of the run, when it stops early, is an even spread of M) and returned in M's order."""
    others = {c: [o for o in classes if o != c] for c in classes}
    order = np.random.default_rng(0).permutation(cand.size)
    items = [(A[cand[k]], others[pred[cand[k]]]) for k in order]
    done = run_rows(one_row, items)
    results: list[Any] = [None] * cand.size
    for k, res in zip(order, done):
        results[k] = res
    return results


def _no_pairs(pairs: _Pairs, n: int, cons: Constraints) -> FCCAError:
    """Why none of the ``n`` selected rows gave a counterfactual: the constraints preclude each, or time ran out."""
    if len(cons) and pairs.statuses.get("infeasible", 0) == n:
        return FCCAError(f"None of the {n} selected rows has a counterfactual under the constraints between "
                         f"features ({'; '.join(cons.texts)}): each is precluded (proven). Loosen the constraints.")
    return FCCAError(f"No counterfactual was found for the {n} selected rows "
                     f"(statuses: {pairs.statuses}); raise the time limit.")


def _constraints(constraints: Any, schema: Schema) -> Constraints:
    """The constraints between features in force, read against the schema of the rows as read
    (with their "is missing" columns; a line that cannot be read raises ConstraintError)."""
    from core.constraints import Constraints
    from core.optimal.constrained import resolve_constraints

    if isinstance(constraints, Constraints) and constraints.schema is not schema:
        constraints = constraints.texts
    return resolve_constraints(constraints, schema)


def _checker(model: OnModel | None, surrogate: Surrogate | None) -> OnModel | None:
    """The model to check on, checked."""
    if model is not None and not isinstance(model, OnModel):
        raise FCCAError(f"model is the model to check the counterfactuals on (core.rules.onmodel.on_model(...)); "
                        f"got {type(model).__name__}.")
    if surrogate is not None and model is None:
        raise FCCAError("A surrogate is given without the model it stands for: pass model= as well.")
    return model


@dataclass
class _Pairs:
    """The counterfactual pairs found, in the order of M, and their thresholds."""

    rows: list[int] = field(default_factory=list)
    x0s: list[np.ndarray] = field(default_factory=list)
    xces: list[np.ndarray] = field(default_factory=list)
    costs: list[float] = field(default_factory=list)
    pair_t: list[tuple[int, int, float]] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)


def _pairs(A: np.ndarray, cand: np.ndarray, results: list[Any], levels: list[np.ndarray], eps: np.ndarray
           ) -> _Pairs:
    out = _Pairs()
    for i, res in zip(cand, results):
        st = "not run" if res is None else NOT_REACHED if isinstance(res, str) else res.status
        out.statuses[st] = out.statuses.get(st, 0) + 1
        if res is None or isinstance(res, str) or not res.found:
            continue
        x0, xc = A[i], np.asarray(res.x, dtype=float)
        out.rows.append(int(i))
        out.costs.append(float(res.cost))
        out.x0s.append(x0)
        out.xces.append(xc)
        out.pair_t.extend((int(i), j, t) for j, t in _pair_thresholds(levels, x0, xc, eps))
    return out


def _check_pairs(checker: OnModel, ens: TreeEnsemble, X_ce: np.ndarray, own: np.ndarray) -> np.ndarray:
    """Per pair: does the model itself give the counterfactual the class it was found for
    on the surrogate (another class than the row's)? One call for all of them."""
    theirs = np.asarray(checker.predict(X_ce))
    reached = ens.predict(X_ce)
    return same_labels(theirs, reached) & ~same_labels(theirs, own)


def _labels(y: Any, n: int) -> np.ndarray:
    """The labels of the n rows, one each."""
    if y is None or isinstance(y, (str, bytes, dict)):
        raise FCCAError(f"y is the labels of X's rows (an array of {n} class labels: the true labels, or the "
                        f"model's predictions); got {type(y).__name__}.")
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != n:
        raise FCCAError(f"y has shape {y.shape}; X has {n} rows: give one label per row.")
    return y


def _check_settings(s: FCCASettings, ens: TreeEnsemble, A: np.ndarray) -> np.ndarray:
    """Validate the settings; the per-feature eps."""
    if not (0.0 <= s.p0 <= s.p1 <= 1.0):
        raise FCCAError(f"Need 0 <= p0 <= p1 <= 1; got p0={s.p0}, p1={s.p1}.")
    if min(s.lambda0, s.lambda1, s.lambda2) < 0 or s.lambda0 + s.lambda1 + s.lambda2 <= 0:
        raise FCCAError("lambda0, lambda1 and lambda2 must be >= 0 and not all zero.")
    try:
        eps_arr = _eps(s.eps, ens, A)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, FCCAError):
            raise
        raise FCCAError(f"eps holds numbers: one, one per feature, or a dict feature -> number; got "
                        f"{s.eps!r:.60}.") from None
    if np.any(~np.isfinite(eps_arr)) or np.any(eps_arr < 0):
        raise FCCAError(f"eps (the tolerance per feature) must be finite and >= 0; got {s.eps!r:.60}.")
    return eps_arr


def _eps(eps: Any, ens: TreeEnsemble, A: np.ndarray) -> np.ndarray:
    """The tolerance per feature: the default (:func:`default_eps`), with a dict's features
    replaced, or one number for all, or one per feature."""
    d = ens.n_features
    if eps is None:
        return default_eps(A)
    if isinstance(eps, dict):
        eps_arr = default_eps(A)
        for k, v in eps.items():
            eps_arr[feature_index(ens.feature_names, k, error=FCCAError, what="eps")] = float(v)
        return eps_arr
    arr = np.asarray(eps, dtype=float)
    if arr.shape not in ((), (d,)):
        raise FCCAError(f"eps has shape {arr.shape}; give one number, {d} numbers (one per feature) or a "
                        "dict feature -> number.")
    return np.broadcast_to(arr, (d,)).copy()


def _select(ens: TreeEnsemble, A: np.ndarray, y: np.ndarray, pred: np.ndarray, s: FCCASettings,
            solved: np.ndarray) -> tuple[np.ndarray, int]:
    """The rows of M (classified correctly with probability in [p0, p1], and decided by
    ``ensemble``, whose labels are ``solved``, as by the model), at most ``max_points`` of
    them evenly spread, and how many there were."""
    cls_pos = {c: i for i, c in enumerate(() if ens.classes is None else ens.classes)}
    agree = same_labels(pred, solved)
    cls = [cls_pos[p] if ok else 0 for p, ok in zip(solved, agree)]
    own = ens.predict_proba(A)[np.arange(len(A)), cls]                        # probability of the row's class
    cand = np.flatnonzero(same_labels(pred, y) & agree & (own >= s.p0 - 1e-12) & (own <= s.p1 + 1e-12))
    n_candidates = int(cand.size)
    if s.max_points is not None and cand.size > s.max_points:
        cand = cand[np.unique(np.linspace(0, cand.size - 1, int(s.max_points)).round().astype(int))]
    if cand.size == 0:
        raise FCCAError(f"No row is classified correctly with probability in [{s.p0}, {s.p1}]: "
                        "widen [p0, p1] or check that the labels match the model's classes.")
    return cand, n_candidates


def _pair_thresholds(levels: list[np.ndarray], x0: np.ndarray, xc: np.ndarray, eps: np.ndarray):
    """(feature, threshold) for each feature the counterfactual changed: the model
    split it crossed, or the paper's xCE + eps * sign(x0 - xCE) when none was."""
    for j in np.flatnonzero(x0 != xc):
        t = _crossed(levels[j], x0[j], xc[j])
        if t is None:
            if abs(x0[j] - xc[j]) <= eps[j]:
                continue
            t = float(xc[j] + eps[j] * np.sign(x0[j] - xc[j]))
        yield int(j), t


def _threshold_table(pair_t: list[tuple[int, int, float]], names: list[str], source: str = "model",
                     accepted: set[int] | None = None) -> pd.DataFrame:
    """Thresholds with their counts, indexed by feature, sorted; ``source`` says whose split
    each is ("model", or "surrogate" when the ensemble solved stands for the model); with
    ``accepted`` (the rows whose counterfactual the model itself accepts), the column
    ``accepted by the model``: how many of the threshold's pairs those are."""
    checked = accepted is not None
    if not pair_t:
        empty = {"threshold": np.array([], dtype=float), "count": np.array([], dtype=int),
                 "source": np.array([], dtype=object)}
        if checked:
            empty["accepted by the model"] = np.array([], dtype=int)
        return pd.DataFrame(empty, index=pd.Index([], name="feature", dtype=object))
    tab = pd.DataFrame(pair_t, columns=["row", "j", "threshold"])
    tab["ok"] = tab["row"].isin(accepted or ())
    tab = tab.groupby(["j", "threshold"]).agg(count=("row", "size"), ok=("ok", "sum")).reset_index()
    tab = tab.sort_values(["j", "threshold"])
    cols = {"threshold": tab["threshold"].to_numpy(dtype=float), "count": tab["count"].to_numpy(dtype=int),
            "source": np.full(len(tab), source, dtype=object)}
    if checked:
        cols["accepted by the model"] = tab["ok"].to_numpy(dtype=int)
    return pd.DataFrame(cols, index=pd.Index([names[j] for j in tab["j"]], name="feature"))
