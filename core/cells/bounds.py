"""Bounds on the cost of a counterfactual, shared by every solver.

* Upper side: interval costs above a known upper bound are cut off
  (:func:`bounded_costs`), and so are the leaves whose box cannot be reached
  within it (:func:`reachable_leaves`): OCEAN's MILP and the cell model then
  only carry what can still be part of a cheaper solution.
* Lower side: :func:`radius_bound`, the smallest cost radius within which
  every tree, on its own, can reach leaves whose best values add up to the
  target (the class condition of OCEAN eqs. 13-14 split per tree); ``inf``
  proves that no counterfactual exists. :func:`score_needs` states the target
  as (per-leaf score, required sum) pairs; :mod:`core.regions` bounds its
  branch-and-bound nodes with the same pairs.
* Box distances: the cheapest allowed point of a box of intervals, by range
  minima on each feature's interval costs (sparse tables, O(1) per query).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from core.cells.groups import grouped_leaves
from core.cells.problem import CellProblem, TreeBlock

if TYPE_CHECKING:
    from core.counterfactual import Target
    from core.model import TreeEnsemble

__all__ = ["bounded_costs", "range_min_table", "range_min", "box_distances", "reachable_leaves",
           "leaf_distances", "score_needs", "radius_for", "radius_bound"]


def bounded_costs(prob: CellProblem) -> list[np.ndarray]:
    """Per feature, the interval costs with intervals dearer than the known
    upper bound made infinite (a solution using one cannot beat the bound)."""
    ub = prob.upper_bound
    out = []
    for c in prob.costs:
        c = c.copy()
        if np.isfinite(ub):
            c[c > ub * (1 + 1e-9) + 1e-12] = np.inf
        out.append(c)
    return out


def range_min_table(c: np.ndarray) -> list[np.ndarray]:
    """Sparse table for O(1) minima of ``c`` over index ranges."""
    table = [c]
    k = 1
    while 2 * k <= c.size:
        prev = table[-1]
        table.append(np.minimum(prev[:-k], prev[k:]))
        k *= 2
    return table


def range_min(table: list[np.ndarray], lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """min of c[lo..hi] (inclusive) for each pair; inf where lo > hi."""
    n = np.maximum(hi - lo + 1, 1)
    k = np.floor(np.log2(n)).astype(int)
    out = np.full(lo.shape, np.inf)
    for p in np.unique(k):
        sel = k == p
        t = table[p]
        a = np.minimum(lo[sel], t.size - 1)
        b = np.clip(hi[sel] - (1 << p) + 1, 0, t.size - 1)
        out[sel] = np.minimum(t[a], t[b])
    out[hi < lo] = np.inf
    return out


def box_distances(costs: list[np.ndarray], lo: np.ndarray, hi: np.ndarray, combine: str = "sum") -> np.ndarray:
    """Cost of the cheapest allowed point of each box of interval ranges, shape (n_boxes,).

    A box that spans a feature's whole grid gets that feature's minimum; only
    the boxes that restrict it go through the range-minimum table (in a forest
    most leaves bound a handful of the features, and an expanded categorical
    feature's one-hot columns are bounded by few leaves each). The features'
    costs are added, or with ``combine="max"`` (the L-infinity cost) the
    largest is taken."""
    out = np.zeros(lo.shape[0])
    for j, c in enumerate(costs):
        cut = np.flatnonzero((lo[:, j] > 0) | (hi[:, j] < c.size - 1))
        low = c.min()
        if combine == "max":
            np.maximum(out, low, out=out)
            if cut.size:
                out[cut] = np.maximum(out[cut], range_min(range_min_table(c), lo[cut, j], hi[cut, j]))
            continue
        out += low
        if cut.size:
            out[cut] += range_min(range_min_table(c), lo[cut, j], hi[cut, j]) - low
    return out


def reachable_leaves(blk: TreeBlock, costs: list[np.ndarray], ub: float, combine: str = "sum") -> np.ndarray:
    """Mask of leaves whose box meets the allowed intervals within the bound."""
    total = box_distances(costs, blk.lo, blk.hi, combine)
    return np.isfinite(total) & (total <= ub * (1 + 1e-9) + 1e-12)


def leaf_distances(prob: CellProblem, blk: TreeBlock) -> np.ndarray:
    """Cost of the cheapest allowed point of each leaf box, shape (n_leaves,)."""
    return box_distances(prob.costs, blk.lo, blk.hi, prob.cost_model.combine)


def score_needs(prob: CellProblem, blk: TreeBlock | None = None) -> list[tuple[np.ndarray, float]]:
    """The target as (per-leaf score, required sum) pairs, all of which must
    hold: the sum over trees of the reached leaves' scores reaches the need.
    Scores are per leaf of ``blk`` (default: the model's leaves)."""
    return target_needs(prob.ens, prob.target, (prob.model_leaves if blk is None else blk).value)


def target_needs(ens: TreeEnsemble, tgt: Target, V: np.ndarray) -> list[tuple[np.ndarray, float]]:
    """:func:`score_needs` of ensemble ``ens`` and target ``tgt`` on leaf values ``V``
    (with a margin: the probability's bound, as in :mod:`core.solvers.cpsat`)."""
    base = ens.base_score
    if tgt.kind == "class" and ens.link == "sigmoid":
        sign = 1.0 if tgt.class_index == 1 else -1.0
        cut = 0.0 if tgt.margin is None else float(np.log(tgt.margin / (1 - tgt.margin))) / ens.sigmoid_scale
        return [(sign * V[:, 0], cut - sign * base[0])]
    if tgt.kind == "class":
        c0 = tgt.class_index
        needs = [(V[:, c0] - V[:, c], base[c] - base[c0]) for c in range(V.shape[1]) if c != c0]
        if tgt.margin is not None:
            q = float(tgt.margin)
            needs.append((V[:, c0] - q * V.sum(axis=1), q * float(np.sum(base)) - base[c0]))
        return needs
    needs = []
    if np.isfinite(tgt.lo):
        needs.append((V[:, 0], tgt.lo - base[0]))
    if np.isfinite(tgt.hi):
        needs.append((-V[:, 0], base[0] - tgt.hi))
    return needs


def radius_for(dist: np.ndarray, tree_of: np.ndarray, score: np.ndarray, need: float) -> float:
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
    tree on its own). ``inf`` proves that no counterfactual exists. Leaves are
    read with one category per one-hot group (:mod:`core.cells.groups`)."""
    blk, _ = grouped_leaves(prob, prob.model_leaves)
    dist = leaf_distances(prob, blk)
    rs = [radius_for(dist, blk.tree_of, score, need) for score, need in score_needs(prob, blk)]
    if prob.plaus_leaves is not None and prob.plaus is not None:
        pb, _ = grouped_leaves(prob, prob.plaus_leaves)
        rs.append(radius_for(leaf_distances(prob, pb), pb.tree_of, pb.value[:, 0], prob.plaus.delta))
    return max(rs) if rs else 0.0
