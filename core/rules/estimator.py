"""The counterfactual-rules estimator: a scikit-learn-style wrapper around the
fitted state (:class:`core.rules.state.FittedRules`, built by ``fit`` and kept
as ``state_``) and the plain functions of :mod:`core.rules.engines`,
:mod:`core.rules.search` and :mod:`core.rules.sampling`."""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import numpy as np

from core.counterfactual import output_mask
from core.errors import NotFittedError, QueryError
from core.model.features import as_table
from core.model.result import older_name
from core.rules import engines, sampling, search
from core.rules.onmodel import EdgeSettings, OnModel, edge_points
from core.rules.reach import resolve, rule_reach
from core.rules.results import Bounded, LocalRule, RegionalRule, RuleLevels, edge_checks, rule_guarantee
from core.rules.state import FittedRules, check_levels, fit_state
from core.settings import RANDOM_STATE, integer, n_jobs_setting, n_workers_setting, optional, probability, validated
from core.typing import ArrayLike, Features, Row, Rows, TargetSpec

if TYPE_CHECKING:
    from core.constraints import Constraints
    from core.schema import Schema

#: a local rule's CRP on the model is measured on at most this many points (one call)
CRP_POINTS = 500


def _listed(items: Any, what: str, of: str) -> list[Any]:
    if isinstance(items, (str, bytes, dict, np.ndarray)) or not isinstance(items, (list, tuple)):
        raise QueryError(f"{what} is a list of {of}; got {type(items).__name__}.")
    return list(items)


def _box(d: int, box: Any, what: str, pair: bool = True) -> Any:
    """A box of the d features: an object with ``lower`` and ``upper`` (a rule, a
    region), or, where ``pair``, a ``(lower, upper)`` pair; each d numbers, lower <= upper."""
    if hasattr(box, "lower") and hasattr(box, "upper"):
        lo, hi = box.lower, box.upper
    elif pair and isinstance(box, (list, tuple)) and len(box) == 2:
        lo, hi = box
    else:
        shape = "a (lower, upper) pair of arrays or " if pair else ""
        raise QueryError(f"Each of {what} is {shape}an object with lower and upper (e.g. a LocalRule); got "
                         f"{type(box).__name__}.")
    try:
        lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    except (TypeError, ValueError):
        raise QueryError(f"{what}: lower and upper hold numbers (-inf / inf where unbounded).") from None
    if lo.shape != (d,) or hi.shape != (d,):
        raise QueryError(f"{what}: lower and upper are arrays of the {d} features; got shapes {lo.shape} and "
                         f"{hi.shape}.")
    if np.isnan(lo).any() or np.isnan(hi).any() or np.any(lo > hi):
        raise QueryError(f"{what}: each interval lower < x <= upper needs lower <= upper and no NaN.")
    return box if hasattr(box, "lower") else (lo, hi)


class CounterfactualRules:
    """Local and regional counterfactual rules from a random-forest surrogate.

    Parameters
    ----------
    n_estimators, max_depth : the surrogate forest (paper: 20 trees, depth 10).
    pi : CDP level of a divergent explanation; pi_c : CRP level of a rule.
    top_k : the search for S runs over the top_k features most used by the
        surrogate's splits.
    groups : one-hot groups as lists of columns, by name or index (moved together).
    random_state : seeds the surrogate, the Isolation Forest and sampling (default
        :data:`core.settings.RANDOM_STATE`; None: unseeded).
    n_workers : threads of the surrogate forest's fit (-1: every core); ``n_jobs`` is
        its deprecated old name (``n_jobs`` means processes elsewhere: :mod:`core.settings`).
    max_rows : the surrogate is fitted on every row, but CDP, CRP and the
        samples use at most this many rows (a seeded sample): the cell
        computations scale with it. Measured on Adult (34k training rows):
        8,000 rows gave the same correctness / plausibility as all rows
        (1.0 / 0.95 on 40 rows) at 0.20 s instead of 0.56 s per rule.

    Attributes (after ``fit``)
    --------------------------
    state_ : the fitted state (:class:`core.rules.state.FittedRules`) that the
        methods pass to the plain functions of :mod:`core.rules.search`,
        :mod:`core.rules.engines` and :mod:`core.rules.sampling`.
    surrogate_ : the fitted scikit-learn forest; ensemble_ : its TreeEnsemble.
    isolation_ : the Isolation Forest fitted on X (plausibility, sampling).
    X_, y_ : the rows the estimates use (at most max_rows) and their outputs.
    feature_names_, n_features_in_, regression_ : as fitted.
    feature_usage_ : number of surrogate splits per column.
    fidelity_ : share of the fitting rows where the surrogate reproduces the
        model's output (classification) or R^2 (regression).
    elapsed_ : seconds the fit took (``fit_time_``, its older name, reads the same and warns).

    Queries take ``fixed`` (and ``increase_only`` / ``decrease_only`` for rules)
    as feature names or column indices; ``pi``, ``pi_c`` and ``top_k`` default
    to the estimator's.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.ensemble import GradientBoostingClassifier
    >>> from core import CounterfactualRules
    >>> data = load_breast_cancer(as_frame=True)
    >>> model = GradientBoostingClassifier(n_estimators=20, random_state=0).fit(data.data, data.target)
    >>> cr = CounterfactualRules(random_state=0).fit(data.data, model.predict(data.data))
    >>> x = data.data.to_numpy()[0]
    >>> rule = cr.local_rule(x, 1, fixed=["mean radius"])
    >>> rule.lower.shape == x.shape, 0 not in rule.features
    (True, True)
    """

    fit_time_ = older_name("fit_time_", "elapsed_")

    @validated(QueryError, n_estimators=integer(1), max_depth=optional(integer(1)), pi=probability, pi_c=probability,
               top_k=integer(1), random_state=optional(integer(0)), n_workers=n_workers_setting,
               n_jobs=optional(n_jobs_setting), max_rows=integer(1))
    def __init__(self, *, n_estimators: int = 20, max_depth: int | None = 10, pi: float = 0.9, pi_c: float = 0.9,
                 top_k: int = 10, groups: Sequence[Sequence[int]] | None = None,
                 random_state: int | None = RANDOM_STATE, n_workers: int = 1, n_jobs: int | None = None,
                 max_rows: int = 8_000):
        if n_jobs is not None:
            warnings.warn("CounterfactualRules(n_jobs=...) is the surrogate forest's threads, now named n_workers "
                          "(n_jobs means processes of our own pool everywhere else: core.settings); "
                          f"using n_workers={n_jobs}.", DeprecationWarning, stacklevel=3)
            n_workers = n_jobs
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.pi = pi
        self.pi_c = pi_c
        self.top_k = top_k
        self.groups = groups
        self.random_state = random_state
        self.n_workers = n_workers
        self.n_jobs = n_jobs
        self.max_rows = max_rows

    # ------------------------------------------------------------------ fit
    @validated(QueryError)
    def fit(self, X: Rows, y_model: ArrayLike, feature_names: Sequence[str] | None = None, *,
            model: OnModel | None = None, schema: Schema | None = None) -> "CounterfactualRules":
        """Fit the surrogate forest on ``(X, y_model)``. ``model`` (keyword-only;
        :func:`core.rules.onmodel.on_model`, e.g. of a workspace's ``query_model()``): the
        model itself; every rule found is then applied at its edge and checked on it (one
        batched call per query), and its guarantee says what the model accepted; ``schema``
        gives the features' kinds and spans for the edge (default: read from ``X``), and its
        constraints between features are those of every query that leaves ``constraints`` at
        None."""
        t0 = time.perf_counter()
        if model is not None and not isinstance(model, OnModel):
            raise QueryError(f"model is the model to check the rules on (core.rules.onmodel.on_model(...)); got "
                             f"{type(model).__name__}.")
        why = n_workers_setting(self.n_workers)        # set after construction: checked again before threads start
        if why is not None:
            raise QueryError(f"CounterfactualRules: n_workers={self.n_workers!r} is not valid; n_workers is {why}.")
        st = fit_state(X, y_model, feature_names, n_estimators=self.n_estimators, max_depth=self.max_depth,
                       levels=RuleLevels(self.pi, self.pi_c, self.top_k), groups=self.groups,
                       random_state=self.random_state, n_workers=self.n_workers, max_rows=self.max_rows)
        if schema is not None and len(schema.features) != st.d:
            raise QueryError(f"The schema describes {len(schema.features)} features; X has {st.d}.")
        self.model_ = model
        self.schema_ = schema
        self.edges_ = EdgeSettings.of(st.X, schema, [u for u in st.units if len(u) >= 2])
        self.state_ = st
        self.n_features_in_ = st.d
        self.feature_names_ = st.feature_names
        self.regression_ = st.regression
        self.surrogate_, self.ensemble_, self.isolation_ = st.surrogate, st.ensemble, st.isolation
        self.fidelity_ = st.fidelity
        self.X_, self.y_ = st.X, st.y
        self.feature_usage_ = st.feature_usage
        self.elapsed_ = time.perf_counter() - t0
        return self

    # ------------------------------------------------------------ plumbing
    @property
    def _state(self) -> FittedRules:
        st = getattr(self, "state_", None)
        if st is None:
            raise NotFittedError("CounterfactualRules is not fitted; call fit(X, y_model) first.")
        return st

    def _levels(self, pi: float | None = None, pi_c: float | None = None, top_k: int | None = None
                ) -> dict[str, Any]:
        """The query's levels: the given ones, else the estimator's (read now,
        so set_params after fit applies)."""
        lv = check_levels(self.pi if pi is None else pi, self.pi_c if pi_c is None else pi_c,
                          self.top_k if top_k is None else top_k)
        return dict(pi=lv.pi, pi_c=lv.pi_c, top_k=lv.top_k)

    def _constraints(self, constraints: Any) -> Constraints | None:
        """The constraints between features of a query: texts or parsed ones, or None for those
        of the schema given to ``fit`` (:func:`core.rules.reach.resolve`); None when none."""
        return resolve(constraints, getattr(self, "schema_", None), self._state.feature_names)

    # -------------------------------------------------------------- queries
    @validated(QueryError)
    def candidate_units(self, *, fixed: Features = (), top_k: int | None = None) -> list[int]:
        """The top_k actionable units (one-hot groups or columns) by split usage;
        ``fixed``: names or column indices."""
        st = self._state
        return search.candidate_units(st, fixed=fixed, top_k=self._levels(top_k=top_k)["top_k"])

    def cdp(self, x: Row, S: Sequence[int], target: TargetSpec) -> float:
        """CDP_S(Y*; x) by the Projected Forest (:func:`core.rules.engines.cdp`)."""
        return engines.cdp(self._state, x, S, target)

    def projected_weights(self, x: Row, S: Sequence[int]) -> np.ndarray:
        """The Projected Forest weights of the fitted rows (:func:`core.rules.engines.projected_weights`)."""
        return engines.projected_weights(self._state, x, S)

    def crp(self, x: Row, lower: np.ndarray, upper: np.ndarray, target: TargetSpec,
            S: Sequence[int] | None = None) -> float:
        """CRP of a rule for ``x`` by the Regional RF (:func:`core.rules.engines.crp`)."""
        return engines.crp(self._state, x, lower, upper, target, S)

    def regional_crp(self, region_lower: np.ndarray, region_upper: np.ndarray, target: TargetSpec,
                     lower: np.ndarray | None = None, upper: np.ndarray | None = None) -> float:
        """CRP of a rule on a region (:func:`core.rules.engines.regional_crp`)."""
        return engines.regional_crp(self._state, region_lower, region_upper, target, lower, upper)

    @validated(QueryError)
    def minimal_divergent_explanations(self, x: Row, target: TargetSpec, *, fixed: Features = (), pi: float | None = None,
                                       top_k: int | None = None) -> list[tuple[tuple[int, ...], float]]:
        """All minimal S with CDP >= pi among the top_k actionable features
        (:func:`core.rules.search.minimal_divergent_explanations`)."""
        st = self._state
        x = st.row(x)
        lv = self._levels(pi, None, top_k)
        return search.minimal_divergent_explanations(st, x, target, fixed=fixed, pi=lv["pi"], top_k=lv["top_k"])

    @validated(QueryError)
    def local_rule(self, x: Row, target: TargetSpec, *, fixed: Features = (), increase_only: Features = None,
                   decrease_only: Features = None, pi: float | None = None, pi_c: float | None = None,
                   top_k: int | None = None, constraints: Iterable[str] | str | Constraints | None = None
                   ) -> LocalRule:
        """The local counterfactual rule of ``x`` for ``target``
        (:func:`core.rules.search.local_rule`: ``fixed``, ``increase_only`` and
        ``decrease_only`` take names or column indices). ``constraints``: constraints
        between features (texts, or parsed; None: those of the schema given to ``fit``);
        only regions the row can reach under them make the rule."""
        st = self._state
        x = st.row(x)
        cons = self._constraints(constraints)
        rule = search.local_rule(st, x, target, fixed=fixed, increase_only=increase_only,
                                 decrease_only=decrease_only, constraints=cons, **self._levels(pi, pi_c, top_k))
        model = getattr(self, "model_", None)
        return rule if model is None else self._check_local(rule, model, cons)

    @staticmethod
    def _checked(rule: Any, model: OnModel, **fields: Any) -> Any:
        """``rule`` with the fields of its check on the model, and the guarantee they give."""
        params = {**rule.params, "checked_on": model.kind}
        done = replace(rule, params=params, **fields)
        return replace(done, guarantee=rule_guarantee(params, edge_checks([done])))

    def _check_local(self, rule: LocalRule, model: OnModel, cons: Constraints | None = None) -> LocalRule:
        """The row moved into the rule at its edge, and the row with the values of S of the
        fitted rows inside the rule (at most :data:`CRP_POINTS`, seeded): one call of the model.
        Under constraints between features, the edge is the least move that keeps them and the
        points are those that keep them."""
        st = self._state
        S = np.asarray(rule.features, dtype=np.int64)
        inside = np.flatnonzero(np.all((st.X[:, S] > rule.lower[S]) & (st.X[:, S] <= rule.upper[S]), axis=1))
        reach = rule_reach(cons, rule.features)
        if reach is not None and len(inside):
            P = np.repeat(rule.x[None, :], len(inside), axis=0)
            P[:, S] = st.X[np.ix_(inside, S)]
            inside = inside[reach.holds(np.repeat(rule.x[None, :], len(inside), axis=0), P)]
        if len(inside) > CRP_POINTS:
            inside = np.sort(np.random.default_rng(st.random_state).choice(inside, CRP_POINTS, replace=False))
        P = np.repeat(rule.x[None, :], len(inside), axis=0)
        P[:, S] = st.X[np.ix_(inside, S)]
        edge = edge_points(rule.x[None, :], rule.lower, rule.upper, self.edges_)
        if reach is not None:
            edge = reach.moves(rule.x[None, :], rule.lower, rule.upper, first=edge, ones=self.edges_.ones)[1]
        ok = model.accepts(np.vstack([rule.x[None, :], edge, P]), rule.target)
        lacks = not ok[0]                                  # a row the model already gives the target moves nowhere
        return self._checked(rule, model, edge_rows=int(lacks), edge_accepted=float(ok[1]) if lacks else math.nan,
                             model_crp=float(ok[2:].mean()) if len(inside) else math.nan,
                             model_crp_rows=len(inside))

    @validated(QueryError)
    def regional_rules(self, regions: Sequence[Any], target: TargetSpec, *, fixed: Features = (),
                       increase_only: Features = None, decrease_only: Features = None, pi: float | None = None, pi_c: float | None = None,
                       top_k: int | None = None, constraints: Iterable[str] | str | Constraints | None = None
                       ) -> list[RegionalRule]:
        """A regional counterfactual rule for each region
        (:func:`core.rules.search.regional_rules`): a ``(lower, upper)`` pair of
        arrays of the d features, or an object with ``lower`` and ``upper``.
        ``constraints``: constraints between features (texts, or parsed; None: those of the
        schema given to ``fit``); a rule none of the region's rows can reach under them is
        dropped (``unreachable``)."""
        st = self._state
        regions = [_box(st.d, r, "regions") for r in _listed(regions, "regions", "(lower, upper) boxes")]
        cons = self._constraints(constraints)
        rules = search.regional_rules(st, regions, target, fixed=fixed, increase_only=increase_only,
                                      decrease_only=decrease_only, constraints=cons, **self._levels(pi, pi_c, top_k))
        model = getattr(self, "model_", None)
        return rules if model is None else self._check_regional(rules, target, model, cons)

    def _check_regional(self, rules: list[RegionalRule], target: TargetSpec, model: OnModel,
                        cons: Constraints | None = None) -> list[RegionalRule]:
        """Each rule applied at its edge to its region's fitted rows that lack the target (by
        the model's outputs the forest was fitted on): one call of the model for every rule.
        Under constraints between features, only the rows that can reach the rule, each at its
        least move that keeps them."""
        st = self._state
        lacking = ~output_mask(st.y, target)
        rows, moved = [], [st.X[:0]]
        for r in rules:
            i = np.zeros(0, dtype=np.int64)
            if r.lower is not None and r.upper is not None:
                i = np.flatnonzero(lacking & np.all((st.X > r.region_lower) & (st.X <= r.region_upper), axis=1))
                Z = edge_points(st.X[i], r.lower, r.upper, self.edges_)
                reach = rule_reach(cons, r.features, *(st.features(r.params.get(k) or (), k) for k in
                                                       ("fixed", "increase_only", "decrease_only")))
                if reach is not None:
                    ok, Z = reach.moves(st.X[i], r.lower, r.upper, first=Z, ones=self.edges_.ones)
                    i, Z = i[ok], Z[ok]
                moved.append(Z)
            rows.append(i)
        ok = model.accepts(np.vstack(moved), target)
        starts = np.cumsum([0] + [len(i) for i in rows])
        return [self._checked(r, model, edge_rows=len(i), edge_accepted=float(ok[a:b].mean()) if len(i) else math.nan)
                for r, i, a, b in zip(rules, rows, starts[:-1], starts[1:])]

    @validated(QueryError)
    def propose_regions(self, target: TargetSpec, max_depth: int = 3, min_share: float = 0.02
                        ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Sub-populations needing recourse (:func:`core.rules.search.propose_regions`)."""
        return search.propose_regions(self._state, target, max_depth, min_share)

    @validated(QueryError)
    def sample_counterfactuals(self, x: Row, rule: Bounded, n: int = 5, *, batch: int = 100, max_iter: int = 100,
                               temp: float = 1.0, patience: int = 20, random_state: int | None = None,
                               constraints: Iterable[str] | str | Constraints | None = None) -> np.ndarray:
        """Counterfactual samples inside a rule (:func:`core.rules.sampling.sample_counterfactuals`);
        ``constraints`` (None: those of the schema given to ``fit``): only samples that keep them."""
        st = self._state
        _box(st.d, rule, "rule", pair=False)
        for name, v in (("n", n), ("batch", batch), ("max_iter", max_iter), ("patience", patience)):
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 1:
                raise QueryError(f"{name} is a positive integer; got {v!r}.")
        return sampling.sample_counterfactuals(st, x, rule, n, batch=batch, max_iter=max_iter, temp=temp,
                                               patience=patience, random_state=random_state,
                                               constraints=self._constraints(constraints))

    def inlier(self, X: np.ndarray) -> np.ndarray:
        """The Isolation Forest's inlier verdict (decision_function >= 0)."""
        return sampling.inlier(self._state, X)

    @validated(QueryError)
    def evaluate(self, X: Rows, predict: Callable[[np.ndarray], np.ndarray], target_of: Callable[[Any], Any], *,
                 fixed: Features = (), progress: Callable[[int, int], None] | None = None,
                 increase_only: Features = None, decrease_only: Features = None, pi: float | None = None,
                 pi_c: float | None = None, top_k: int | None = None,
                 constraints: Iterable[str] | str | Constraints | None = None
                 ) -> tuple[dict[str, float], list[dict[str, Any]]]:
        """Local rules, one sample each, and the paper's metrics for the rows of
        ``X`` (:func:`core.rules.sampling.evaluate`); ``constraints`` (None: those of the
        schema given to ``fit``) as :meth:`local_rule`, each sample keeping them."""
        st = self._state
        X = as_table(X, st.feature_names, error=QueryError, what="X", min_rows=0)
        for name, fn in (("predict", predict), ("target_of", target_of), ("progress", progress)):
            if not callable(fn) and not (name == "progress" and fn is None):
                raise QueryError(f"{name} is a function; got {type(fn).__name__}.")
        return sampling.evaluate(st, X, predict, target_of, fixed=fixed, increase_only=increase_only,
                                 decrease_only=decrease_only, progress=progress,
                                 constraints=self._constraints(constraints), **self._levels(pi, pi_c, top_k))
