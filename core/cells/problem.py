"""The counterfactual problem on the grid of split levels: the shared kernel.

OCEAN (Parmentier & Vidal, ICML 2021) section 3.2: a tree ensemble's output
depends on ``x`` only through the interval between consecutive split levels
that each feature lies in (the order simplex, eqs. 15-20). For feature ``j``
with sorted levels ``L_1 < ... < L_k`` the intervals are ``(L_i, L_{i+1}]``
(``L_0 = -inf``, ``L_{k+1} = +inf``). For a separable cost (eqs. 28-32) the
cheapest point of an interval is its point nearest ``x_hat`` within the
feature's domain (kind, range, actionability: OCEAN table 1), so each interval
gets one cost and one representative point (:func:`build_problem`). Every leaf
of every tree is a box of intervals (:class:`TreeBlock`). A counterfactual is
one interval per feature whose leaves give the target (eqs. 13-14), with the
one-hot groups holding exactly one category (eq. 27) and, with plausibility,
the Isolation Forest's mean path length at least ``delta`` (eq. 33,
:class:`Plausibility`).

Several models at once (model versions: a counterfactual that survives an
update): the same cells on the union of every model's split levels, each
model's leaves a block of its own and each model's target required
(:class:`Other`); the order simplex is shared, so the optimum over the union
grid is the cheapest point valid for all. A probability margin (confident
recourse) tightens each classifier's target: ``p_c >= q`` is linear in the leaf
values for a forest (mean probabilities) and a bound on the margin for a
sigmoid link (``Target.margin``).

Every solver in :mod:`core.solvers` takes a :class:`CellProblem` and returns a
:class:`CellSolution`; :mod:`core.optimal`, :mod:`core.regions` and
:mod:`core.compression` build their problems here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np

from core.cells.cache import GRID_CACHE
from core.counterfactual import CostModel, QueryError, Target, make_cost_model, make_target
from core.jsonable import plain
from core.model import TreeEnsemble, as_ensemble
from core.model.features import feature_indices
from core.model.missing import indicator_of
from core.schema import INTEGRAL_KINDS
from core.typing import ModelLike, Norm, Row, TargetSpec, Weights

if TYPE_CHECKING:
    from core.schema import Schema

__all__ = ["NUDGE", "Plausibility", "TreeBlock", "Band", "CellProblem", "CellSolution", "Other", "check_same_features",
           "build_problem", "feature_levels", "explain_infeasible"]

NUDGE = 1e-6  # fraction of a feature's span used to step strictly inside an open interval end


# ----------------------------------------------------------------- plausibility
@dataclass(frozen=True)
class Plausibility:
    """An Isolation Forest and the mean path length a counterfactual must reach (eq. 33)."""

    forest: TreeEnsemble
    delta: float
    contamination: float | None = None

    @classmethod
    def fit(cls, X_target: np.ndarray, contamination: float = 0.1, n_estimators: int = 100,
            max_samples: int | str = "auto", random_state: int = 0) -> "Plausibility":
        """Fit an Isolation Forest on rows of the target class; ``delta`` leaves
        a ``contamination`` share of them as outliers (the paper uses 10%)."""
        from sklearn.ensemble import IsolationForest

        X_target = np.asarray(X_target, dtype=float)
        if len(X_target) < 10:
            raise QueryError(f"Only {len(X_target)} rows of the target class: too few to fit a plausibility model.")
        iso = IsolationForest(n_estimators=n_estimators, max_samples=max_samples, random_state=random_state)
        iso.fit(X_target)
        return cls.from_forest(iso, X_target, contamination)

    @classmethod
    def from_forest(cls, forest: ModelLike, X_target: np.ndarray | None = None,
                    contamination: float | None = 0.1) -> "Plausibility":
        ens = as_ensemble(forest)
        if ens.task != "anomaly":
            raise QueryError("plausibility needs an IsolationForest.")
        if X_target is not None and contamination is not None:
            depth = ens.predict_raw(np.asarray(X_target, dtype=float))[:, 0]
            return cls(ens, float(np.quantile(depth, contamination)), contamination)
        # the forest's own threshold: decision_function >= 0  <=>  mean depth >= -c log2(-offset)
        return cls(ens, float(-ens.meta["c"] * np.log2(-ens.meta["offset"])), None)

    def holds(self, X: np.ndarray) -> np.ndarray:
        return self.forest.predict_raw(X)[:, 0] >= self.delta - 1e-12



# ----------------------------------------------------------------- the problem
@dataclass
class TreeBlock:
    """The leaves of a set of trees in interval coordinates."""

    tree_of: np.ndarray        # (n_leaves,) tree index
    node: np.ndarray           # (n_leaves,) node index within its tree
    lo: np.ndarray             # (n_leaves, d) smallest allowed interval index
    hi: np.ndarray             # (n_leaves, d) largest allowed interval index
    value: np.ndarray          # (n_leaves, n_outputs) leaf values (mean folded in)
    n_trees: int


@dataclass(frozen=True)
class Other:
    """A further model the counterfactual must also convince (``also_valid_for``):
    its ensemble, its target, its leaves on the shared grid, and its original model."""

    ens: TreeEnsemble
    target: Target
    leaves: TreeBlock
    model: Any = None


@dataclass(frozen=True)
class Band:
    """How a problem with missing values read as bands (:mod:`core.cells.band`) reads
    as the caller's rows."""

    outer: TreeEnsemble                   # the model as the caller reads it ("is missing" columns)
    x_hat: np.ndarray                     # the query as the caller gave it
    cuts: dict[int, tuple[float, float]]  # feature -> (p1, p2): its band x > p1 and the band's point
    indicator: dict[int, int]             # feature -> its "is missing" column
    fill: dict[int, float]                # feature -> the value its column holds where missing
    fill_hat: dict[int, int]              # feature -> the interval of its fill
    leave: dict[int, float] = field(default_factory=dict)      # feature -> the cost of "is missing" 1 -> 0
    raw: dict[int, np.ndarray] = field(default_factory=dict)   # feature -> its numbers' costs from the fill

    def to_outer(self, X: np.ndarray) -> np.ndarray:
        """Points of the problem as the caller's rows (same shape)."""
        out = np.array(X, dtype=float)
        rows = np.atleast_2d(out)
        for j, (p1, _) in self.cuts.items():
            k = self.indicator[j]
            gone = rows[:, j] > p1
            rows[:, k] = gone.astype(float)
            rows[gone, j] = self.fill[j]
        return out

    def to_inner(self, X: np.ndarray) -> np.ndarray:
        """The caller's rows as points of the problem (a new array): a missing value
        is the band's point; a number beyond ``p1`` (above every split level) is read
        as ``p1``, which every split reads alike."""
        out = np.array(X, dtype=float)
        rows = np.atleast_2d(out)
        for j, (p1, p2) in self.cuts.items():
            k = self.indicator[j]
            gone = rows[:, k] > 0.5
            rows[~gone & (rows[:, j] > p1), j] = p1    # a number in the band: p1, which every split reads alike
            rows[gone, j] = p2
            rows[:, k] = 1.0
        return out

    def inner_rows(self, X: np.ndarray) -> np.ndarray:
        """:meth:`to_inner` of reference rows, kept with the array for the next query."""
        key = ("band_rows", tuple(sorted(self.cuts.items())), X.shape,     # as the reference cells are keyed
               X[0].tobytes() if len(X) else b"", X[-1].tobytes() if len(X) else b"")
        return GRID_CACHE.get(X, key, lambda: self.to_inner(X))


@dataclass
class CellProblem:
    """The counterfactual problem on the grid of split levels (see module doc)."""

    ens: TreeEnsemble
    x_hat: np.ndarray
    target: Target
    cost_model: CostModel
    levels: list[np.ndarray]
    points: list[np.ndarray]          # per feature, per interval: representative point (nan: infeasible)
    costs: list[np.ndarray]           # per feature, per interval: cost (inf: infeasible)
    hat: np.ndarray                   # interval of x_hat per feature
    groups: list[list[int]]           # one-hot groups (feature indices)
    model_leaves: TreeBlock
    plaus: Plausibility | None = None
    plaus_leaves: TreeBlock | None = None
    kinds: list[str] = field(default_factory=list)
    grid_key: tuple = ()              # what the grid depends on besides the ensemble (see _grid_key)
    upper_bound: float = np.inf
    nogoods: list[tuple[str, np.ndarray]] = field(default_factory=list)
    exclusions: list[list[int]] = field(default_factory=list)
    lo: np.ndarray | None = None      # per feature, the smallest allowed value (the schema's range)
    hi: np.ndarray | None = None      # per feature, the largest allowed value
    others: list[Other] = field(default_factory=list)   # further models the point must also convince
    band: Band | None = None          # missing values read as a band of their column (core.cells.band)

    @property
    def n_features(self) -> int:
        return len(self.levels)

    def interval_of(self, X: np.ndarray) -> np.ndarray:
        """Interval index of each value, shape like X (n, d)."""
        X = np.atleast_2d(X)
        if X.shape == (1, self.n_features) and self.n_features and np.isfinite(X).all():
            ends, feature, start = self._ends()     # one point: its levels below, counted at once
            return np.add.reduceat((ends < X[0][feature]).astype(np.intp), start)[None, :]
        return np.column_stack([np.searchsorted(self.levels[j], X[:, j], side="left")
                                for j in range(self.n_features)])

    def _ends(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(every interval's upper end, laid end to end, its feature, each feature's first): the
        grid as :meth:`interval_of` reads a point on it (the levels below a value are the upper
        ends below it), the model's (:func:`_flat_grid`), kept with the problem on the first call
        (the levels of a problem never change)."""
        got = self.__dict__.get("_grid_ends")
        if got is None:
            _, _, b, f, start, _ = _flat_grid(self.ens, self.levels, self.grid_key)
            got = self.__dict__["_grid_ends"] = (b, f, start)
        return got

    def point_of(self, cells: np.ndarray) -> np.ndarray:
        """Representative point(s) of cell(s): shape (d,) for (d,), (n, d) for (n, d)."""
        cells = np.asarray(cells)
        if cells.ndim == 1:
            return np.array([p[i] for p, i in zip(self.points, cells.tolist())], dtype=float)
        return np.stack([self.points[j][cells[..., j]] for j in range(self.n_features)], axis=-1)

    def cost_of(self, cells: np.ndarray) -> float:
        """Cost of one cell assignment, shape (d,)."""
        cells = np.asarray(cells)
        if cells.ndim != 1:
            return float(self.costs_of(cells[None, :])[0])
        per = np.array([[c[i] for c, i in zip(self.costs, cells.tolist())]], dtype=float)
        return float(np.asarray(self.cost_model.total(per, axis=-1), dtype=np.float64)[0])

    def costs_of(self, cells: np.ndarray) -> np.ndarray:
        """Costs of cell assignments, shape (n,) for (n, d)."""
        cells = np.asarray(cells)
        per = np.stack([self.costs[j][cells[..., j]] for j in range(self.n_features)], axis=-1)
        return np.asarray(self.cost_model.total(per, axis=-1), dtype=np.float64)

    def is_valid(self, X: np.ndarray) -> np.ndarray:
        X = np.atleast_2d(X)
        ok = self.target.holds(self.ens, X)
        for o in self.others:
            ok &= o.target.holds(o.ens, X)
        if self.plaus is not None:
            ok &= self.plaus.holds(X)
        return ok



@dataclass(frozen=True)
class CellSolution:
    """What a solver returns: the chosen interval per feature and what it proved."""

    status: str                 # "optimal", "feasible", "infeasible" or "unknown"
    cells: np.ndarray | None    # interval index per feature
    lower_bound: float          # proven lower bound on the cost
    slack: float = 0.0          # bound on the optimum's error from integer scaling


def _as_indices(ens: TreeEnsemble, items: Iterable[Any] | None, role: str) -> set[int]:
    """The columns of a role's features (the one resolver: an unknown name gets the closest)."""
    what = "fixed" if role == "fixed" else f"{role}_only"
    return set(feature_indices(ens.feature_names, items, error=QueryError, what=what))


def feature_actions(ens: TreeEnsemble, schema: Schema | None, x_hat: np.ndarray, *, fixed: Iterable[Any] | None = None,
                    increase_only: Iterable[Any] | None = None, decrease_only: Iterable[Any] | None = None
                    ) -> list[str]:
    """Each feature's actionability for a query, as :func:`build_problem` reads it.

    The schema's, unless a list is given: an explicit ``fixed`` (names or
    indices) *replaces* the schema's fixed features (a feature the schema fixes
    and the list leaves out becomes free), and likewise ``increase_only`` and
    ``decrease_only``; None keeps the schema's. An "is missing" column
    (:mod:`core.model.missing`) a list leaves out falls back to decrease-only,
    not free: a known value never becomes missing unless a list says so. A
    one-hot group is fixed as one when any of its columns is."""
    return _domains(ens, schema, x_hat, fixed, increase_only, decrease_only)[3]


def _domains(ens: TreeEnsemble, schema: Schema | None, x_hat: np.ndarray, fixed: Iterable[Any] | None,
             increase_only: Iterable[Any] | None, decrease_only: Iterable[Any] | None
             ) -> tuple[list[str], np.ndarray, np.ndarray, list[str], list[list[int]]]:
    d = ens.n_features
    kinds, lo, hi, action, groups = _schema_domains(d, schema, x_hat)
    explicit = (("fixed", fixed), ("increase", increase_only), ("decrease", decrease_only))
    action = _with_roles(ens, action, explicit)
    for g in groups:  # a one-hot group moves as one: fixed if any column is
        if any(action[j] == "fixed" for j in g):
            for j in g:
                action[j] = "fixed"
    for j in range(d):
        if kinds[j] in ("binary", "one-hot"):
            lo[j], hi[j] = min(0.0, x_hat[j]), max(1.0, x_hat[j])
    return kinds, lo, hi, action, groups


def _schema_domains(d: int, schema: Schema | None, x_hat: np.ndarray
                    ) -> tuple[list[str], np.ndarray, np.ndarray, list[str], list[list[int]]]:
    """Each feature's kind, range (holding the query) and actionability, and the one-hot groups,
    as the schema says (numerical, unbounded and free without one)."""
    kinds = ["numerical"] * d
    lo, hi = np.full(d, -np.inf), np.full(d, np.inf)
    action = ["free"] * d
    if schema is None:
        return kinds, lo, hi, action, []
    for j, f in enumerate(schema.features):
        kinds[j] = f.kind
        lo[j], hi[j] = min(f.lower, x_hat[j]), max(f.upper, x_hat[j])
        action[j] = f.actionability
    return kinds, lo, hi, action, [list(v) for v in schema.groups().values() if len(v) >= 2]


def _with_roles(ens: TreeEnsemble, action: list[str], explicit: tuple[tuple[str, Iterable[Any] | None], ...]
                ) -> list[str]:
    """The actionability with each role's list in place of the schema's: a feature of that role
    the list leaves out becomes free (an "is missing" column decrease-only)."""
    states = set(indicator_of(ens).values())  # "is missing" columns left out of a list: decrease-only
    for role, items in explicit:
        if items is not None:
            action = [("decrease" if j in states else "free") if a == role else a for j, a in enumerate(action)]
    for role, items in explicit:
        for j in _as_indices(ens, items, role):
            action[j] = role
    return action


_ACTIONS = {"free": 0, "fixed": 1, "increase": 2, "decrease": 3}


def _flat_grid(ens: TreeEnsemble, levels: list[np.ndarray], key: tuple
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The intervals of every feature laid end to end: (per feature their number, every
    interval's lower and upper end, its feature, each feature's first, its index within its
    feature), kept with the ensemble (:data:`GRID_CACHE`; ``key``: what the grid depends on
    besides it, :func:`_grid_key`)."""
    d = len(levels)

    def flat():
        sizes = np.array([lv.size + 1 for lv in levels], dtype=np.int64)
        a = np.concatenate([np.concatenate([[-np.inf], lv]) for lv in levels]) if d else np.zeros(0)
        b = np.concatenate([np.concatenate([lv, [np.inf]]) for lv in levels]) if d else np.zeros(0)
        f = np.repeat(np.arange(d), sizes)
        start = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        return sizes, a, b, f, start, np.arange(int(sizes.sum())) - start[f]

    return GRID_CACHE.get(ens, ("flat grid", key, tuple(lv.size for lv in levels)), flat)


def _grids(ens: TreeEnsemble, levels: list[np.ndarray], x_hat: np.ndarray, kinds: list[str], lo: np.ndarray,
           hi: np.ndarray, action: list[str], cm: CostModel, key: tuple
           ) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
    """(points, costs, hat): per feature, the representative point and the cost of every
    interval (its point nearest ``x_hat`` within the feature's domain: kind, range,
    actionability; an open end stepped strictly inside by :data:`NUDGE` of the span), and the
    query's interval. Computed for every feature at once, on the intervals of all features
    laid end to end (their ends kept with the grid, :data:`GRID_CACHE`): a few array
    operations per query rather than a few dozen per feature (and the integral kinds' only
    when a feature has one)."""
    d = len(levels)
    sizes, a, b, f, start, idx = _flat_grid(ens, levels, key)
    xh = x_hat[f]
    # the query's interval: the number of its feature's levels below it (searchsorted "left")
    hat = np.add.reduceat((b < xh).astype(np.int64), start) if d else np.zeros(0, dtype=np.int64)
    h = hat[f]
    lo_f, hi_f, span = lo[f], hi[f], cm.span[f]
    integral_j = np.array([k in INTEGRAL_KINDS for k in kinds], dtype=bool)
    best = np.full(a.size, np.nan)
    point = np.full(a.size, np.nan)
    below, above = idx < h, idx > h
    with np.errstate(invalid="ignore"):
        if integral_j.any():
            integral = integral_j[f]
            # integral kinds: the nearest whole number of the interval within the range
            pb_i = np.floor(np.minimum(b, hi_f))
            ok_bi = below & (pb_i > a) & (pb_i >= np.ceil(lo_f)) & integral
            pa_i = np.maximum(np.floor(a) + 1, np.ceil(lo_f))
            ok_ai = above & (pa_i <= np.minimum(b, hi_f)) & integral
            best[ok_bi], best[ok_ai] = pb_i[ok_bi], pa_i[ok_ai]
            point[ok_bi], point[ok_ai] = pb_i[ok_bi], pa_i[ok_ai]
            below_c, above_c = below & ~integral, above & ~integral
        else:
            below_c, above_c = below, above
        # continuous: the interval's end nearest the query, stepped strictly inside an open end
        step = NUDGE * span
        pb = np.minimum(b, hi_f)
        ok_b = below_c & (pb > a) & (pb >= lo_f)
        inside_b = np.where(pb == b, b - step, pb)
        inside_b = np.where((inside_b <= a) | (inside_b > b), np.nextafter(b, -np.inf), inside_b)
        inside_b = np.where(inside_b <= a, b, inside_b)  # (a, b] holds b alone
        pa = np.maximum(a, lo_f)
        ok_a = above_c & (pa <= np.minimum(b, hi_f)) & (a < hi_f)
        inside_a = np.where(pa == a, a + step, pa)
        inside_a = np.where((inside_a <= a) | (inside_a > b), np.nextafter(a, np.inf), inside_a)
    best[ok_b], point[ok_b] = pb[ok_b], inside_b[ok_b]
    best[ok_a], point[ok_a] = pa[ok_a], inside_a[ok_a]
    at = start + hat
    best[at] = point[at] = x_hat
    act_j = np.array([_ACTIONS.get(v, 0) for v in action], dtype=np.int8)
    if act_j.any():
        act = act_j[f]
        best[((act == 1) & (idx != h)) | ((act == 2) & below) | ((act == 3) & above)] = np.nan
    point[np.isnan(best)] = np.nan
    diff = best - xh
    with np.errstate(invalid="ignore"):
        cost = cm._formula(diff, span, cm.w_down[f], cm.w_up[f])
    cost[np.isnan(best)] = np.inf
    ends = start + sizes
    return ([point[i:j] for i, j in zip(start.tolist(), ends.tolist())],
            [cost[i:j] for i, j in zip(start.tolist(), ends.tolist())], hat)


def _leaf_block(ens: TreeEnsemble, levels: list[np.ndarray]) -> TreeBlock:
    """Leaf boxes of ``ens`` as ranges of interval indices on the grid ``levels``."""
    trees, nodes, los, his, vals = [], [], [], [], []
    scale = 1.0 / ens.n_trees if ens.aggregation == "mean" else 1.0
    for t, (leaves, lower, upper) in enumerate(ens.leaf_boxes()):
        L = np.zeros((leaves.size, len(levels)), dtype=np.int64)
        H = np.zeros((leaves.size, len(levels)), dtype=np.int64)
        for j, lv in enumerate(levels):
            lo_b, hi_b = lower[:, j], upper[:, j]
            L[:, j] = np.where(np.isfinite(lo_b), np.searchsorted(lv, lo_b, side="left") + 1, 0)
            H[:, j] = np.where(np.isfinite(hi_b), np.searchsorted(lv, hi_b, side="left"), lv.size)
        trees.append(np.full(leaves.size, t))
        nodes.append(leaves)
        los.append(L)
        his.append(H)
        vals.append(ens.trees[t].value[leaves] * scale)
    return TreeBlock(np.concatenate(trees), np.concatenate(nodes), np.vstack(los), np.vstack(his),
                     np.vstack(vals), ens.n_trees)


def build_problem(ens: TreeEnsemble, x: Row, target: TargetSpec, *, schema: Schema | None = None, norm: Norm = "l1",
                  weights: Weights = None, fixed: Iterable[Any] | None = None,
                  increase_only: Iterable[Any] | None = None, decrease_only: Iterable[Any] | None = None,
                  plausibility: Plausibility | None = None,
                  also_valid_for: Sequence[tuple[TreeEnsemble, Any]] = (), margin: float | None = None,
                  extra_levels: Mapping[int, Sequence[float]] | None = None) -> CellProblem:
    """The counterfactual problem of ``x`` on the grid of the ensemble's split
    levels; with ``also_valid_for`` ((ensemble, original model or None) pairs
    sharing the features), on the union of every model's levels, each model
    required to give the target (with ``margin``, confidently); ``extra_levels``:
    further levels of some features (feature -> levels) the grid must hold."""
    x_hat = np.asarray(x, dtype=float).ravel()
    if x_hat.shape != (ens.n_features,):
        raise QueryError(f"x has {x_hat.size} values; the model has {ens.n_features} features.")
    if not np.all(np.isfinite(x_hat)):
        raise QueryError("x contains NaN or infinite values; give a complete row.")
    tgt = make_target(ens, target, margin)
    others_ens = [check_same_features(ens, o, k + 2) for k, (o, _) in enumerate(also_valid_for)]
    other_targets = [make_target(o, target, margin) for o in others_ens]
    cm = make_cost_model(ens, norm, weights, schema)
    kinds, lo, hi, action, groups = _domains(ens, schema, x_hat, fixed, increase_only, decrease_only)
    extra = tuple(sorted((int(j), tuple(float(v) for v in lv)) for j, lv in (extra_levels or {}).items()))
    gkey = _grid_key(kinds, plausibility, others_ens)
    levels, model_leaves, plaus_leaves, other_leaves = _grid_structure(ens, kinds, plausibility, others_ens, extra,
                                                                       gkey)
    gkey += (extra,) if extra else ()
    points, costs, hat = _grids(ens, levels, x_hat, kinds, lo, hi, action, cm, gkey)
    others = [Other(o, t, blk, model) for o, t, blk, (_, model) in
              zip(others_ens, other_targets, other_leaves, also_valid_for)]
    return CellProblem(ens, x_hat, tgt, cm, levels, points, costs, hat, groups,
                       model_leaves, plausibility, plaus_leaves, kinds, gkey, lo=lo, hi=hi, others=others)


def check_same_features(ens: TreeEnsemble, other: TreeEnsemble, position: int | str,
                        first: str = "the first model") -> TreeEnsemble:
    """``other`` if it reads the same features as ``ens`` (names, order, categories) and
    does the same task; else a QueryError saying what differs (``position``: its place
    in the list of models, or its name, e.g. "model B", for the message; ``first``:
    how ``ens`` is named)."""
    who = position if isinstance(position, str) else f"model {position}"
    Who = who[:1].upper() + who[1:]
    if other.task != ens.task:
        raise QueryError(f"{Who} is a {other.task} model and {first} a {ens.task} model; a "
                         "counterfactual valid for both needs models of one task.")
    if list(other.feature_names) != list(ens.feature_names):
        raise QueryError(f"{Who} does not read the same features as {first} "
                         f"({_features_differ(list(ens.feature_names), list(other.feature_names))}); load "
                         "models trained on the same columns.")
    if _categories_of(other) != _categories_of(ens):
        raise QueryError(f"{Who} reads a categorical column with other categories than {first}.")
    if ens.task == "classification" and [str(c) for c in _class_names(other)] != [str(c) for c in _class_names(ens)]:
        raise QueryError(f"{Who} has the classes {_classes_text(other)}, {first} {_classes_text(ens)}; "
                         "the models must decide between the same classes.")
    return other


def _features_differ(a: list[Any], b: list[Any]) -> str:
    """How the feature names ``b`` differ from ``a``: the columns one lacks and has, or their order."""
    missing, extra = [f for f in a if f not in b], [f for f in b if f not in a]
    if not (missing or extra):
        return "its features are in another order"
    return (f"it lacks {', '.join(map(str, missing[:5])) or 'no column'} and has "
            f"{', '.join(map(str, extra[:5])) or 'no other'}")


def _categories_of(e: TreeEnsemble) -> list[Any]:
    """Each column's categories (None for a numerical one)."""
    return list(e.categories or [None] * e.n_features)


def _class_names(e: TreeEnsemble) -> list[Any]:
    return [] if e.classes is None else list(e.classes)


def _classes_text(e: TreeEnsemble) -> str:
    return ", ".join(str(plain(c)) for c in _class_names(e))


def feature_levels(ens: TreeEnsemble, kinds: list[str], plausibility: Plausibility | None = None,
                   others: Sequence[TreeEnsemble] = ()) -> list[np.ndarray]:
    """Per feature, the sorted split levels of the ensemble (and of the
    plausibility forest and the other models); binary and one-hot columns also
    get 0.5, so both values are reachable even if no tree splits there."""
    levels = []
    for j in range(ens.n_features):
        lv = ens.split_levels(j)
        for o in others:
            lv = np.union1d(lv, o.split_levels(j))
        if plausibility is not None:
            lv = np.union1d(lv, plausibility.forest.split_levels(j))
        if kinds[j] in ("binary", "one-hot"):
            lv = np.union1d(lv, [0.5])
        levels.append(np.asarray(lv, dtype=float))
    return levels


def _grid_key(kinds: list[str], plausibility: Plausibility | None, others: Sequence[TreeEnsemble] = ()) -> tuple:
    """Besides the ensemble, the grid depends on which columns are 0/1, on the
    plausibility forest and on the other models a point must convince."""
    return (tuple(k in ("binary", "one-hot") for k in kinds),
            None if plausibility is None else plausibility.forest.content_hash(),
            tuple(o.content_hash() for o in others))


def _grid_structure(ens: TreeEnsemble, kinds: list[str], plausibility: Plausibility | None,
                    others: Sequence[TreeEnsemble] = (), extra: tuple = (), grid_key: tuple | None = None):
    """Levels and leaf boxes in interval indices: they do not depend on the query,
    so they are kept (per ensemble, in :data:`core.cells.cache.GRID_CACHE`) for the next query.
    ``grid_key``: :func:`_grid_key` of the same arguments, when the caller has it."""
    key = ("cells", *(_grid_key(kinds, plausibility, others) if grid_key is None else grid_key), extra)

    def build():
        levels = feature_levels(ens, kinds, plausibility, others)
        for j, lv in extra:
            levels[j] = np.union1d(levels[j], lv)
        plaus = None if plausibility is None else _leaf_block(plausibility.forest, levels)
        return levels, _leaf_block(ens, levels), plaus, [_leaf_block(o, levels) for o in others]

    return GRID_CACHE.get(ens, key, build)


def explain_infeasible(prob: CellProblem) -> str:
    """A sentence on why no counterfactual exists under the constraints."""
    names = prob.ens.feature_names
    parts = []
    for word, held in (("fixed", _held_fixed), ("increase-only", _held_increasing), ("decrease-only", _held_decreasing)):
        found = [names[j] for j in range(prob.n_features) if held(prob, j)]
        if found:
            more = "…" if word == "fixed" and len(found) > 5 else ""
            parts.append(f"{', '.join(found[:5])}{more} {word}")
    extra = " and the plausibility constraint" if prob.plaus is not None else ""
    how = f" with {'; '.join(parts)}{extra}" if parts or extra else ""
    return (f"No counterfactual reaching {prob.target.describe()} exists{how} within the features' ranges. "
            "Free some features, widen their ranges or drop the plausibility constraint.")


def _held_fixed(prob: CellProblem, j: int) -> bool:
    """Feature ``j`` has split levels but one allowed interval."""
    return bool(np.isfinite(prob.costs[j]).sum() == 1 and prob.levels[j].size > 0)


def _held_increasing(prob: CellProblem, j: int) -> bool:
    """Feature ``j`` may only rise: nothing allowed below its interval, something above."""
    c, h = prob.costs[j], prob.hat[j]
    return bool(np.all(~np.isfinite(c[:h])) and h > 0 and np.isfinite(c[h + 1:]).any())


def _held_decreasing(prob: CellProblem, j: int) -> bool:
    """Feature ``j`` may only fall: nothing allowed above its interval, something below."""
    c, h = prob.costs[j], prob.hat[j]
    return bool(np.all(~np.isfinite(c[h + 1:])) and h < prob.levels[j].size and np.isfinite(c[:h]).any())
