"""Per-instance optimal counterfactuals (OCEAN, Parmentier & Vidal, ICML 2021).

Build, solve, read
------------------
*Build* (:func:`build_problem`): the ensemble's output depends on ``x`` only
through which interval between consecutive split levels each feature lies in
(the order simplex of OCEAN section 3.2, eqs. 15-20). For feature ``j`` with
sorted levels ``L_1 < ... < L_k`` the intervals are ``(L_i, L_{i+1}]``
(``L_0 = -inf``, ``L_{k+1} = +inf``). For a separable cost (eqs. 28-32) the
cheapest point of an interval is its point nearest ``x_hat`` within the
feature's domain (its kind: numerical, integer, binary, one-hot; its range;
its actionability, OCEAN table 1), so each interval gets one cost and one
representative point. Every leaf of every tree is a box of intervals. A
counterfactual is one interval per feature such that the leaves it reaches
give the target (eqs. 13-14), the one-hot groups hold exactly one category
(eq. 27), and, with plausibility, the Isolation Forest's mean path length is
at least ``delta`` (eq. 33).

*Solve*, by one of two formulations of the same problem:

* ``"cpsat"`` (default, :mod:`core.milp.cpsat`): the cell model. Booleans
  ``g_jm = [x_j > L_m]`` with ``g_jm => g_j(m-1)`` (eq. 15 on booleans), one
  boolean per leaf with exactly one leaf per tree (eqs. 8-12), each leaf
  implying the bounds of its box (eqs. 16-17), the class condition as a
  linear constraint on leaf booleans (eqs. 13-14), the cost telescoped on the
  ``g`` (eq. 31 generalised to any separable cost), scaled to integers and
  solved by OR-Tools CP-SAT.
* ``"highs"`` / ``"gurobi"`` (:mod:`core.milp.ocean`): OCEAN's MILP as in the
  paper: lambda per depth, flows y per node, order simplex mu per feature
  (eqs. 8-20), l0/l1/l2 on mu (eqs. 30-31; squared l2 on mu is exact at the
  levels, where optima lie), solved by HiGHS or Gurobi.

Both are made fast by an upper bound found first: the nearest valid point
among the reference rows (``X_ref``, usually the training data) projected onto
the actionable set, improved greedily (:func:`warm_start`), and a greedy
descent from ``x_hat`` on the model alone (:func:`greedy_start`), so the call
without reference rows is as fast as with them. Leaves whose box cannot be
reached within that bound are removed before solving, and the bound is
given to the solver with the point as a hint.

*Read*: the representative points of the chosen intervals; a point on an
open interval end is pushed strictly inside its cell (``cost`` reports the
infimum, the paper's epsilon -> 0). Every returned point is re-checked with
``TreeEnsemble.predict`` (and the original model when given); when integer
scaling admitted an invalid cell (a near tie), that cell is cut off and the
solver runs again, so a returned counterfactual is always valid.

Diverse alternatives (``n_solutions > 1``): each new solution must leave
unchanged at least one of the features changed by every earlier solution,
so no alternative is an earlier one plus extra changes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable

import numpy as np

from core.counterfactual import (CostModel, CounterfactualResult, QueryError, Target, changes_between,
                                 check_time_limit, make_cost_model, make_target)
from core.ensemble import TreeEnsemble, from_model
from core.schema import INTEGRAL_KINDS

__all__ = ["optimal_counterfactual", "build_problem", "feature_levels", "Plausibility", "CellProblem",
           "warm_start", "BACKENDS"]

BACKENDS = ("auto", "cpsat", "highs", "gurobi")
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
    def from_forest(cls, forest: Any, X_target: np.ndarray | None = None,
                    contamination: float | None = 0.1) -> "Plausibility":
        ens = from_model(forest)
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
    upper_bound: float = np.inf
    nogoods: list[tuple[str, np.ndarray]] = field(default_factory=list)
    exclusions: list[list[int]] = field(default_factory=list)

    @property
    def n_features(self) -> int:
        return len(self.levels)

    def interval_of(self, X: np.ndarray) -> np.ndarray:
        """Interval index of each value, shape like X (n, d)."""
        X = np.atleast_2d(X)
        return np.column_stack([np.searchsorted(self.levels[j], X[:, j], side="left")
                                for j in range(self.n_features)])

    def point_of(self, cells: np.ndarray) -> np.ndarray:
        """Representative point(s) of cell(s): shape (d,) for (d,), (n, d) for (n, d)."""
        cells = np.asarray(cells)
        return np.stack([self.points[j][cells[..., j]] for j in range(self.n_features)], axis=-1)

    def cost_of(self, cells: np.ndarray) -> float | np.ndarray:
        """Cost of cell(s): a float for (d,), shape (n,) for (n, d)."""
        cells = np.asarray(cells)
        total = sum(self.costs[j][cells[..., j]] for j in range(self.n_features))
        return float(total) if np.ndim(total) == 0 else total

    def is_valid(self, X: np.ndarray) -> np.ndarray:
        X = np.atleast_2d(X)
        ok = self.target.holds(self.ens, X)
        if self.plaus is not None:
            ok &= self.plaus.holds(X)
        return ok


def _as_indices(ens: TreeEnsemble, items: Iterable[Any] | None) -> set[int]:
    return {ens.feature_index(f) for f in (items or ())}


def _domains(ens, schema, x_hat, immutable, increase_only, decrease_only):
    d = ens.n_features
    kinds = ["numerical"] * d
    lo, hi = np.full(d, -np.inf), np.full(d, np.inf)
    action = ["free"] * d
    groups: list[list[int]] = []
    if schema is not None:
        for j, f in enumerate(schema.features):
            kinds[j] = f.kind
            lo[j], hi[j] = min(f.lower, x_hat[j]), max(f.upper, x_hat[j])
            action[j] = f.actionability
        groups = [list(v) for v in schema.groups().values() if len(v) >= 2]
    for j in _as_indices(ens, immutable):
        action[j] = "fixed"
    for j in _as_indices(ens, increase_only):
        action[j] = "increase"
    for j in _as_indices(ens, decrease_only):
        action[j] = "decrease"
    for g in groups:  # a one-hot group moves as one: fixed if any column is
        if any(action[j] == "fixed" for j in g):
            for j in g:
                action[j] = "fixed"
    for j in range(d):
        if kinds[j] in ("binary", "one-hot"):
            lo[j], hi[j] = min(0.0, x_hat[j]), max(1.0, x_hat[j])
    return kinds, lo, hi, action, groups


def _feature_grid(levels, xh, kind, lo, hi, action, cm: CostModel, j):
    """Representative point and cost of every interval of one feature."""
    k = levels.size
    a = np.concatenate([[-np.inf], levels])
    b = np.concatenate([levels, [np.inf]])
    hat = int(np.searchsorted(levels, xh, side="left"))
    idx = np.arange(k + 1)
    best = np.full(k + 1, np.nan)      # the infimum point (for the cost)
    point = np.full(k + 1, np.nan)     # the returned point (strictly inside)
    integral = kind in INTEGRAL_KINDS
    span = cm.span[j]
    below, above = idx < hat, idx > hat
    with np.errstate(invalid="ignore"):
        if integral:
            pb = np.floor(np.minimum(b, hi))
            ok_b = below & (pb > a) & (pb >= np.ceil(lo))
            pa = np.maximum(np.floor(a) + 1, np.ceil(lo))
            ok_a = above & (pa <= np.minimum(b, hi))
            best[ok_b], best[ok_a] = pb[ok_b], pa[ok_a]
            point[:] = best
        else:
            step = NUDGE * span
            pb = np.minimum(b, hi)
            ok_b = below & (pb > a) & (pb >= lo)
            best[ok_b] = pb[ok_b]
            inside_b = np.where(pb == b, b - step, pb)
            inside_b = np.where((inside_b <= a) | (inside_b > b), np.nextafter(b, -np.inf), inside_b)
            inside_b = np.where(inside_b <= a, b, inside_b)  # (a, b] holds b alone
            point[ok_b] = inside_b[ok_b]
            pa = np.maximum(a, lo)
            ok_a = above & (pa <= np.minimum(b, hi)) & (a < hi)
            best[ok_a] = pa[ok_a]
            inside_a = np.where(pa == a, a + step, pa)
            inside_a = np.where((inside_a <= a) | (inside_a > b), np.nextafter(a, np.inf), inside_a)
            point[ok_a] = inside_a[ok_a]
    best[hat] = point[hat] = xh
    if action == "fixed":
        best[idx != hat] = np.nan
    elif action == "increase":
        best[below] = np.nan
    elif action == "decrease":
        best[above] = np.nan
    point[np.isnan(best)] = np.nan
    diff = best - xh
    D = np.abs(diff) / span
    w = np.where(diff < 0, cm.w_down[j], cm.w_up[j])
    cost = w * (cm.l0 * (diff != 0) + cm.l1 * D + cm.l2 * D * D)
    cost[np.isnan(best)] = np.inf
    return point, cost, hat


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


def build_problem(ens: TreeEnsemble, x: Any, target: Any, *, schema: Any = None, norm: Any = "l1",
                  weights: Any = None, immutable: Iterable[Any] = (), increase_only: Iterable[Any] = (),
                  decrease_only: Iterable[Any] = (), plausibility: Plausibility | None = None) -> CellProblem:
    """The counterfactual problem of ``x`` on the grid of the ensemble's split levels."""
    x_hat = np.asarray(x, dtype=float).ravel()
    if x_hat.shape != (ens.n_features,):
        raise QueryError(f"x has {x_hat.size} values; the model has {ens.n_features} features.")
    if not np.all(np.isfinite(x_hat)):
        raise QueryError("x contains NaN or infinite values; give a complete row.")
    tgt = make_target(ens, target)
    cm = make_cost_model(ens, norm, weights, schema)
    kinds, lo, hi, action, groups = _domains(ens, schema, x_hat, immutable, increase_only, decrease_only)
    levels, model_leaves, plaus_leaves = _grid_structure(ens, kinds, plausibility)
    points, costs, hat = [], [], np.zeros(ens.n_features, dtype=np.int64)
    for j in range(ens.n_features):
        p, c, h = _feature_grid(levels[j], x_hat[j], kinds[j], lo[j], hi[j], action[j], cm, j)
        points.append(p)
        costs.append(c)
        hat[j] = h
    return CellProblem(ens, x_hat, tgt, cm, levels, points, costs, hat, groups,
                       model_leaves, plausibility, plaus_leaves, kinds)


def feature_levels(ens: TreeEnsemble, kinds: list[str], plausibility: Plausibility | None = None
                   ) -> list[np.ndarray]:
    """Per feature, the sorted split levels of the ensemble (and of the
    plausibility forest); binary and one-hot columns also get 0.5, so both
    values are reachable even if no tree splits there."""
    levels = []
    for j in range(ens.n_features):
        lv = ens.split_levels(j)
        if plausibility is not None:
            lv = np.union1d(lv, plausibility.forest.split_levels(j))
        if kinds[j] in ("binary", "one-hot"):
            lv = np.union1d(lv, [0.5])
        levels.append(np.asarray(lv, dtype=float))
    return levels


def _grid_structure(ens: TreeEnsemble, kinds: list[str], plausibility: Plausibility | None):
    """Levels and leaf boxes in interval indices: they do not depend on the query,
    so they are kept on the ensemble for the next query."""
    key = ("cells", tuple(k in ("binary", "one-hot") for k in kinds),
           None if plausibility is None else id(plausibility.forest))
    cache = ens._flat.setdefault("query_cache", {})
    if key not in cache:
        levels = feature_levels(ens, kinds, plausibility)
        plaus = None if plausibility is None else _leaf_block(plausibility.forest, levels)
        if len(cache) > 8:
            cache.clear()
        cache[key] = (levels, _leaf_block(ens, levels), plaus, plausibility)
    levels, model_leaves, plaus_leaves, _ = cache[key]
    return levels, model_leaves, plaus_leaves


# --------------------------------------------------------------- warm start
def _reference_cells(prob: CellProblem, X_ref: np.ndarray, max_candidates: int) -> np.ndarray:
    """Interval indices of the reference rows (at most ``max_candidates``, evenly
    spread): the grid does not depend on the query, so they are kept on the
    ensemble for the next query with the same reference array."""
    cache = prob.ens._flat.setdefault("query_cache", {})
    key = ("ref_cells", id(X_ref), X_ref.shape, X_ref[0].tobytes(), X_ref[-1].tobytes(), max_candidates,
           tuple(id(lv) for lv in prob.levels))
    cells = cache.get(key)
    if cells is None:
        rows = X_ref
        if len(rows) > max_candidates:  # a fixed, spread-out subset keeps this fast and deterministic
            rows = rows[np.linspace(0, len(rows) - 1, max_candidates).astype(int)]
        cells = prob.interval_of(rows)
        for k in [k for k in cache if isinstance(k, tuple) and k and k[0] == "ref_cells"]:
            del cache[k]            # one reference set at a time
        cache[key] = cells
    return cells


def warm_start(prob: CellProblem, X_ref: np.ndarray | None, max_candidates: int = 10000,
               chunk: int = 1024) -> tuple[np.ndarray | None, float]:
    """A valid point and its (cell) cost from reference rows, or (None, inf).

    Rows of ``X_ref`` (at most ``max_candidates``, evenly spread) are projected
    onto the feasible set (each feature to its interval's allowed point, or
    kept at x_hat when that interval is not allowed) and sorted by cost;
    validity is checked cheapest first, a chunk at a time, and the five
    cheapest valid candidates are polished by :func:`local_search`.
    """
    if X_ref is None or len(X_ref) == 0:
        return None, np.inf
    X_ref = np.asarray(X_ref, dtype=float)
    cells = _reference_cells(prob, X_ref, max_candidates)
    offs = np.cumsum([0] + [c.size for c in prob.costs[:-1]])
    flat_cost = np.concatenate(prob.costs)
    flat_point = np.concatenate(prob.points)
    proj = np.where(np.isfinite(flat_cost[cells + offs]), cells, prob.hat)
    for g in prob.groups:  # keep one-hot groups one-hot
        bad = np.abs(flat_point[proj[:, g] + offs[g]].sum(axis=1) - 1) > 1e-9
        proj[np.ix_(bad, g)] = prob.hat[g]
    order = np.argsort(flat_cost[proj + offs].sum(axis=1), kind="stable")
    found: list[np.ndarray] = []
    seen: set[bytes] = set()
    for a in range(0, len(order), chunk):
        C = proj[order[a:a + chunk]]
        for c in C[prob.is_valid(prob.point_of(C))]:
            if c.tobytes() not in seen and len(found) < 5:
                seen.add(c.tobytes())
                found.append(c)
        if len(found) >= 5:
            break
    if not found:
        return None, np.inf
    best_cells, best_cost = None, np.inf
    for c0 in found:  # polish the five cheapest valid candidates
        cells_ = local_search(prob, c0)
        c = prob.cost_of(cells_)
        if c < best_cost:
            best_cells, best_cost = cells_, c
    return prob.point_of(best_cells), best_cost


def target_margin(prob: CellProblem, X: np.ndarray) -> np.ndarray:
    """How deep each row lies inside the target (and the plausibility set):
    positive inside, the smaller of the two when both apply. Shape (n,)."""
    raw = prob.ens.predict_raw(X)
    tgt, ens = prob.target, prob.ens
    if tgt.kind == "class" and ens.link == "sigmoid":
        m = raw[:, 0] if tgt.class_index == 1 else -raw[:, 0]
    elif tgt.kind == "class":
        m = raw[:, tgt.class_index] - np.delete(raw, tgt.class_index, axis=1).max(axis=1)
    else:
        m = np.minimum(raw[:, 0] - tgt.lo, tgt.hi - raw[:, 0])
    if prob.plaus is not None:
        m = np.minimum(m, prob.plaus.forest.predict_raw(X)[:, 0] - prob.plaus.delta)
    return m


def _moves(prob: CellProblem, per_feature: int) -> tuple[np.ndarray, np.ndarray, list[tuple[list[int], np.ndarray]]]:
    """The one-feature moves (feature, interval) of the greedy start, at most
    ``per_feature`` intervals per feature (those nearest ``x_hat`` and an even
    spread of the rest), and one move per category of each one-hot group."""
    in_group = {j for g in prob.groups for j in g}
    J, I = [], []
    for j in range(prob.n_features):
        if j in in_group:
            continue
        ok = np.flatnonzero(np.isfinite(prob.costs[j]))
        ok = ok[ok != prob.hat[j]]
        if ok.size > per_feature:
            near = ok[np.argsort(np.abs(ok - prob.hat[j]), kind="stable")[:per_feature // 2]]
            spread = ok[np.linspace(0, ok.size - 1, per_feature - near.size).astype(int)]
            ok = np.union1d(near, spread)
        J.extend([j] * ok.size)
        I.extend(ok.tolist())
    group_moves = []
    for g in prob.groups:
        for k in g:
            pattern = np.array([np.searchsorted(prob.levels[j], 1.0 if j == k else 0.0, side="left") for j in g])
            if all(np.isfinite(prob.costs[j][c]) for j, c in zip(g, pattern)):
                group_moves.append((g, pattern))
    return np.asarray(J, dtype=np.int64), np.asarray(I, dtype=np.int64), group_moves


def greedy_start(prob: CellProblem, max_steps: int | None = None, per_feature: int = 48,
                 deadline: float = np.inf) -> tuple[np.ndarray | None, float]:
    """A valid point and its cost found from the model alone, or (None, inf).

    Greedy descent on the cell grid: from ``x_hat``, while the point is not
    valid, take the one-feature (or one-hot group) move that is valid and
    cheapest if any, else the one that gains most target margin per unit of
    cost; then :func:`local_search`. It needs no reference rows, so a caller
    without training data gets an upper bound as tight as the reference
    rows' (on Adult's forests usually the optimum itself)."""
    J, I, group_moves = _moves(prob, per_feature)
    n = J.size + len(group_moves)
    if n == 0:
        return None, np.inf
    cells = prob.hat.copy()
    cur_m = target_margin(prob, prob.point_of(cells)[None, :])[0]
    cur_c = prob.cost_of(cells)
    for _ in range(max_steps or 2 * prob.n_features + 2):
        if time.perf_counter() > deadline:
            break
        C = np.repeat(cells[None, :], n, axis=0)
        C[np.arange(J.size), J] = I
        for r, (g, pattern) in enumerate(group_moves, start=J.size):
            C[r, g] = pattern
        P = prob.point_of(C)
        cost = prob.cost_of(C)
        valid = prob.is_valid(P)
        if valid.any():
            r = np.flatnonzero(valid)[np.argmin(cost[valid])]
            best = local_search(prob, C[r])
            return prob.point_of(best), prob.cost_of(best)
        gain = target_margin(prob, P) - cur_m
        score = np.where(gain > 1e-12, gain / np.maximum(cost - cur_c, 1e-12), -np.inf)
        r = int(np.argmax(score))
        if not np.isfinite(score[r]):
            break
        cells, cur_m, cur_c = C[r], cur_m + gain[r], cost[r]
    return None, np.inf


def local_search(prob: CellProblem, cells: np.ndarray, max_rounds: int = 200) -> np.ndarray:
    """Improve a valid cell assignment: move one feature (or one-hot group) at a
    time to the interval nearest ``x_hat`` that keeps the point valid, taking the
    largest saving each round, until no move saves anything."""
    cells = cells.copy()
    singles = [j for j in range(prob.n_features) if not any(j in g for g in prob.groups)]
    for _ in range(max_rounds):
        moves: list[tuple[int, int]] = []  # (feature, new interval)
        for j in singles:
            cur, h = int(cells[j]), int(prob.hat[j])
            if cur == h:
                continue
            rng = range(h, cur) if cur > h else range(cur + 1, h + 1)
            cheaper = [i for i in rng if prob.costs[j][i] < prob.costs[j][cur]]
            moves.extend((j, i) for i in cheaper)
        group_moves = []
        for g in prob.groups:
            if any(cells[j] != prob.hat[j] for j in g):
                group_moves.append(g)
        n = len(moves) + len(group_moves)
        if n == 0:
            break
        C = np.repeat(cells[None, :], n, axis=0)
        for r, (j, i) in enumerate(moves):
            C[r, j] = i
        for r, g in enumerate(group_moves, start=len(moves)):
            C[r, g] = prob.hat[g]
        costs = prob.cost_of(C)
        valid = prob.is_valid(prob.point_of(C))
        if not valid.any():
            break
        costs[~valid] = np.inf
        r = int(np.argmin(costs))
        if costs[r] >= prob.cost_of(cells) - 1e-15:
            break
        cells = C[r]
    return cells




# ----------------------------------------------------------- a lower bound
def leaf_distances(prob: CellProblem, blk: TreeBlock) -> np.ndarray:
    """Cost of the cheapest allowed point of each leaf box, shape (n_leaves,)."""
    from core.milp.common import box_distances

    return box_distances(prob.costs, blk.lo, blk.hi)


def _radius_for(dist: np.ndarray, tree_of: np.ndarray, score: np.ndarray, need: float) -> float:
    """Smallest r with sum_t max{score_l : l in tree t, dist_l <= r} >= need."""
    ok = np.isfinite(dist)
    dist, tree_of, score = dist[ok], tree_of[ok], score[ok]
    if dist.size == 0:
        return np.inf
    order = np.lexsort((dist, tree_of))
    t_s, d_s, v_s = tree_of[order], dist[order], score[order]
    first = np.r_[True, t_s[1:] != t_s[:-1]]
    # running maximum within each tree in one pass: lift each tree above the previous ones
    grp = np.cumsum(first) - 1
    lift = grp * (2.0 * (float(v_s.max() - v_s.min()) + 1.0))
    run = np.maximum.accumulate(v_s + lift) - lift
    prev = np.r_[-np.inf, run[:-1]]
    inc = np.where(first, run, run - prev)
    r0 = float(np.max(d_s[first]))  # every tree has a leaf within r0
    by_d = np.argsort(d_s, kind="stable")
    d_sorted, cum = d_s[by_d], np.cumsum(inc[by_d])
    last_of_tie = np.r_[d_sorted[1:] != d_sorted[:-1], True]
    hit = np.flatnonzero(last_of_tie & (d_sorted >= r0) & (cum >= need - 1e-12 * max(1.0, abs(need))))
    return float(d_sorted[hit[0]]) if hit.size else np.inf


def radius_bound(prob: CellProblem) -> float:
    """A lower bound on the optimal cost: the smallest cost radius within which
    every tree can reach leaves whose best values add up to the target (each
    tree on its own). ``inf`` proves that no counterfactual exists."""
    blk, ens, tgt = prob.model_leaves, prob.ens, prob.target
    dist = leaf_distances(prob, blk)
    V, base = blk.value, ens.base_score
    rs = []
    if tgt.kind == "class" and ens.link == "sigmoid":
        sign = 1.0 if tgt.class_index == 1 else -1.0
        rs.append(_radius_for(dist, blk.tree_of, sign * V[:, 0], -sign * base[0]))
    elif tgt.kind == "class":
        c0 = tgt.class_index
        for c in range(V.shape[1]):
            if c != c0:
                rs.append(_radius_for(dist, blk.tree_of, V[:, c0] - V[:, c], base[c] - base[c0]))
    else:
        if np.isfinite(tgt.lo):
            rs.append(_radius_for(dist, blk.tree_of, V[:, 0], tgt.lo - base[0]))
        if np.isfinite(tgt.hi):
            rs.append(_radius_for(dist, blk.tree_of, -V[:, 0], base[0] - tgt.hi))
    if prob.plaus_leaves is not None:
        pb = prob.plaus_leaves
        rs.append(_radius_for(leaf_distances(prob, pb), pb.tree_of, pb.value[:, 0], prob.plaus.delta))
    return max(rs) if rs else 0.0


# ------------------------------------------------------------------ solving
def gurobi_licence_present() -> bool:
    """A full Gurobi licence file is installed (the pip wheel's own licence is
    size-limited to about 2000 variables, too small for most forests)."""
    import os
    from pathlib import Path

    try:
        import gurobipy  # noqa: F401
    except ImportError:
        return False
    paths = [os.environ.get("GRB_LICENSE_FILE", ""), str(Path.home() / "gurobi.lic"), "/opt/gurobi/gurobi.lic"]
    return any(p and Path(p).is_file() for p in paths)


def _solve_once(prob: CellProblem, backend: str, time_limit: float, hint: np.ndarray | None,
                n_workers: int):
    if backend == "cpsat":
        from core.milp.cpsat import solve_cells
        return solve_cells(prob, time_limit=time_limit, hint=hint, n_workers=n_workers)
    from core.milp.ocean import solve_ocean
    return solve_ocean(prob, solver=backend, time_limit=time_limit)


def _choose_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise QueryError(f"Unknown backend {backend!r}; choose one of {BACKENDS}.")
    if backend == "auto":
        return "gurobi" if gurobi_licence_present() else "cpsat"
    return backend


def optimal_counterfactual(ensemble: Any, x: Any, target: Any, *, schema: Any = None, norm: Any = "l1",
                           weights: Any = None, immutable: Iterable[Any] = (),
                           increase_only: Iterable[Any] = (), decrease_only: Iterable[Any] = (),
                           plausibility: Plausibility | Any | None = None, backend: str = "auto",
                           time_limit: float = 30.0, n_solutions: int = 1, X_ref: Any = None,
                           model: Any = None, n_workers: int = 2, warm: bool = True,
                           on_progress: Callable[[CounterfactualResult], None] | None = None
                           ) -> CounterfactualResult:
    """The minimum-cost change of ``x`` that gives ``target``, proven optimal.

    Parameters
    ----------
    ensemble : TreeEnsemble or a supported model.
    x : array-like of shape (n_features,), the query.
    target : a class label (classifiers) or an interval ``(lo, hi)`` (regressors).
    schema : core.schema.Schema; kinds, ranges, actionability, weights. Without
        it every feature is numerical, free and unbounded, in raw units.
    norm : "l0", "l1", "l2" (squared) or a dict of weights, see core.counterfactual.
    weights : per-feature weights: an array (d,) or (d, 2) = (decrease, increase),
        or a dict name -> weight or (decrease, increase).
    immutable, increase_only, decrease_only : feature names or indices overriding
        the schema's actionability.
    plausibility : a :class:`Plausibility`, or a fitted IsolationForest (its own
        threshold is used).
    backend : "auto" (= "cpsat"), "cpsat", "highs" or "gurobi".
    time_limit : seconds for the whole query.
    n_solutions : number of diverse solutions (see module doc).
    X_ref : array-like (n, n_features), reference rows for the warm start
        (usually the training data); optional.
    model : the original model, if any: each result is also checked on it.
    on_progress : called with the warm-start result as soon as it exists.

    Returns
    -------
    CounterfactualResult
    """
    t0 = time.perf_counter()
    ens = from_model(ensemble) if not isinstance(ensemble, TreeEnsemble) else ensemble
    if plausibility is not None and not isinstance(plausibility, Plausibility):
        plausibility = Plausibility.from_forest(plausibility, None, None)
    if n_solutions < 1:
        raise QueryError("n_solutions must be at least 1.")
    time_limit = check_time_limit(time_limit)
    be = _choose_backend(backend)
    params = dict(norm=norm if isinstance(norm, str) else dict(norm), backend=be, time_limit=time_limit,
                  n_solutions=n_solutions, immutable=[str(v) for v in immutable],
                  increase_only=[str(v) for v in increase_only], decrease_only=[str(v) for v in decrease_only],
                  plausibility=None if plausibility is None else {"delta": plausibility.delta,
                                                                 "contamination": plausibility.contamination},
                  target=str(target))
    prob = build_problem(ens, x, target, schema=schema, norm=norm, weights=weights, immutable=immutable,
                         increase_only=increase_only, decrease_only=decrease_only, plausibility=plausibility)
    timings = {"build": time.perf_counter() - t0}
    if X_ref is not None and not isinstance(X_ref, np.ndarray):
        X_ref = np.asarray(X_ref, dtype=float)
    results: list[CounterfactualResult] = []
    for _ in range(n_solutions):
        left = time_limit - (time.perf_counter() - t0)
        res = _solve_with_checks(prob, be, max(left, 0.01), X_ref if warm else None, model, params,
                                 n_workers, on_progress if not results else None, t0, dict(timings))
        results.append(res)
        if not res.found:
            break
        changed = [j for j in range(prob.n_features) if res.x[j] != prob.x_hat[j]]
        if not changed:
            break
        prob.exclusions.append(changed)
        prob.nogoods = []
        if time.perf_counter() - t0 >= time_limit:
            break
    first = results[0]
    if len(results) > 1:
        first = replace(first, alternatives=tuple(r for r in results[1:] if r.found))
    return first


def _result(prob, x, cost, status, gap, lb, backend, params, t0, message="", timings=None, model=None):
    ens = prob.ens
    valid = False
    pred = None
    if x is not None:
        valid = bool(prob.is_valid(x[None, :])[0])
        pred = ens.predict(x[None, :])[0]
        if valid and model is not None:
            valid = _check_on_model(model, ens, x, prob.target)
            if not valid:
                message = "The original model disagrees with the converted ensemble on this point."
    return CounterfactualResult(
        x=x if valid else None, cost=float(cost), status=status if (valid or x is None) else "error",
        gap=float(gap), solve_time=time.perf_counter() - t0,
        changes=changes_between(ens.feature_names, prob.x_hat, x) if (x is not None and valid) else (),
        backend=backend, params=params, x_query=prob.x_hat.copy(), lower_bound=float(lb), valid=valid,
        message=message, prediction=pred, timings=dict(timings or {}))


def _check_on_model(model: Any, ens: TreeEnsemble, x: np.ndarray, target: Target) -> bool:
    """Is ``x`` valid on the original model too? Its outputs must match the
    ensemble's, and its label (or value) must meet the target."""
    from core.parsing.native import native_input, native_outputs

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
    import copy

    if type(model).__module__.startswith("sklearn") and getattr(model, "n_jobs", None) not in (None, 1):
        model = copy.copy(model)
        model.n_jobs = None
    return model


def _separable(prob: CellProblem, params, t0, timings, model) -> CounterfactualResult | None:
    """Boosted stumps: exact branch and bound (core.milp.separable), or None to use the general model."""
    from core.milp.separable import solve_separable

    ts = time.perf_counter()
    sol = solve_separable(prob)
    timings["solve"] = time.perf_counter() - ts
    if sol is None:
        return None
    if sol.status == "infeasible":
        return _result(prob, None, np.inf, "infeasible", np.inf, np.inf, "separable", params, t0,
                       message=explain_infeasible(prob), timings=timings)
    x = prob.point_of(sol.cells)
    if not prob.is_valid(x[None, :])[0]:   # a rounding near-tie: let the general model decide
        return None
    cost = prob.cost_of(sol.cells)
    return _result(prob, x, cost, "optimal", 0.0, cost, "separable", params, t0, timings=timings, model=model)


def _solve_with_checks(prob: CellProblem, backend: str, time_limit: float, X_ref, model, params, n_workers,
                       on_progress, t0, timings) -> CounterfactualResult:
    if backend == "cpsat" and not prob.exclusions and not prob.nogoods:
        fast = _separable(prob, params, t0, timings, model)
        if fast is not None:
            return fast
    tw = time.perf_counter()
    # alternatives must avoid earlier solutions' changes, which the warm start does not know
    ws_x, ws_cost = None, np.inf
    if not prob.exclusions:
        ws_x, ws_cost = warm_start(prob, X_ref)
        gx, g_cost = greedy_start(prob, deadline=tw + 0.25 * time_limit)
        if g_cost < ws_cost - 1e-12:       # the model's own start beats the reference rows (or there are none)
            ws_x, ws_cost = gx, g_cost
    timings["warm_start"] = time.perf_counter() - tw
    prob.upper_bound = ws_cost
    if ws_x is not None and on_progress is not None:
        on_progress(_result(prob, ws_x, ws_cost, "feasible", np.inf, 0.0, "warm start", params, t0,
                            timings=timings))
    if not prob.exclusions and not prob.nogoods:
        tb = time.perf_counter()
        lb = radius_bound(prob)
        timings["bound"] = time.perf_counter() - tb
        timings["lower_bound"] = lb
        if not np.isfinite(lb):
            return _result(prob, None, np.inf, "infeasible", np.inf, np.inf, "bound", params, t0,
                           message=explain_infeasible(prob), timings=timings)
        if ws_x is not None and ws_cost <= lb * (1 + 1e-9) + 1e-15:  # the bound proves the warm start optimal
            return _result(prob, ws_x, ws_cost, "optimal", 0.0, lb, "bound", params, t0,
                           timings=timings, model=model)
    deadline = t0 + time_limit
    for _ in range(50):  # cut off near-tie cells the integer scaling admitted
        left = deadline - time.perf_counter()
        if left <= 0:
            break
        ts = time.perf_counter()
        try:
            sol = _solve_once(prob, backend, left, ws_x, n_workers)
        except RuntimeError as exc:
            from core.milp.ocean import GurobiUnavailable

            if not isinstance(exc, GurobiUnavailable):
                raise
            notice = f"{exc} Solved with CP-SAT instead."
            backend = "cpsat"
            params["notice"] = notice
            continue
        timings["solve"] = timings.get("solve", 0.0) + time.perf_counter() - ts
        if sol.status == "infeasible":
            if ws_x is not None:  # cannot happen unless the bound was tight: keep the warm point
                return _result(prob, ws_x, ws_cost, "optimal", 0.0, ws_cost, backend, params, t0,
                               timings=timings, model=model)
            return _result(prob, None, np.inf, "infeasible", np.inf, np.inf, backend, params, t0,
                           message=explain_infeasible(prob), timings=timings)
        if sol.cells is None:  # no solution within the time limit
            break
        x_cf = prob.point_of(sol.cells)
        cost = prob.cost_of(sol.cells)
        if prob.is_valid(x_cf[None, :])[0]:
            if ws_x is not None and ws_cost < cost - 1e-12:  # solver stopped above the warm start
                x_cf, cost = ws_x, ws_cost
            if sol.status == "optimal":
                return _result(prob, x_cf, cost, "optimal", 0.0, cost, backend, params, t0,
                               timings=timings, model=model)
            lb = max(sol.lower_bound, timings.get("lower_bound", 0.0))
            gap = max(0.0, (cost - lb) / max(abs(cost), 1e-12))
            return _result(prob, x_cf, cost, "time_limit", gap, lb, backend, params, t0, timings=timings,
                           model=model, message="The time limit was reached before optimality was proven: "
                                                f"this is the best valid point found (gap {gap:.1%}).")
        _add_nogood(prob, x_cf)
    if ws_x is not None:
        lb = timings.get("lower_bound", 0.0)
        return _result(prob, ws_x, ws_cost, "time_limit", max(0.0, (ws_cost - lb) / max(ws_cost, 1e-12)), lb,
                       backend, params, t0,
                       message="The time limit was reached before optimality was proven; this is the best "
                               "valid point found.", timings=timings, model=model)
    return _result(prob, None, np.inf, "time_limit", np.inf, 0.0, backend, params, t0,
                   message="No counterfactual was found within the time limit; allow more time.",
                   timings=timings)


def _add_nogood(prob: CellProblem, x: np.ndarray) -> None:
    """Exclude the leaf combination of an invalid point (a near tie admitted by scaling)."""
    ok_target = prob.target.holds(prob.ens, x[None, :])[0]
    if not ok_target:
        prob.nogoods.append(("model", prob.ens.apply(x[None, :])[0]))
    if prob.plaus is not None and not prob.plaus.holds(x[None, :])[0]:
        prob.nogoods.append(("plaus", prob.plaus.forest.apply(x[None, :])[0]))


def explain_infeasible(prob: CellProblem) -> str:
    """A sentence on why no counterfactual exists under the constraints."""
    names = prob.ens.feature_names
    fixed = [names[j] for j in range(prob.n_features) if np.isfinite(prob.costs[j]).sum() == 1
             and prob.levels[j].size > 0]
    inc = [names[j] for j in range(prob.n_features)
           if np.all(~np.isfinite(prob.costs[j][:prob.hat[j]])) and prob.hat[j] > 0
           and np.isfinite(prob.costs[j][prob.hat[j] + 1:]).any()]
    dec = [names[j] for j in range(prob.n_features)
           if np.all(~np.isfinite(prob.costs[j][prob.hat[j] + 1:])) and prob.hat[j] < prob.levels[j].size
           and np.isfinite(prob.costs[j][:prob.hat[j]]).any()]
    parts = []
    if fixed:
        parts.append(f"{', '.join(fixed[:5])}{'…' if len(fixed) > 5 else ''} fixed")
    if inc:
        parts.append(f"{', '.join(inc[:5])} increase-only")
    if dec:
        parts.append(f"{', '.join(dec[:5])} decrease-only")
    extra = " and the plausibility constraint" if prob.plaus is not None else ""
    how = f" with {'; '.join(parts)}{extra}" if parts or extra else ""
    return (f"No counterfactual reaching {prob.target.describe()} exists{how} within the features' ranges. "
            "Free some features, widen their ranges or drop the plausibility constraint.")
