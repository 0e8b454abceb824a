"""Exact counterfactuals of additive single-feature ensembles (boosted stumps).

When every tree of a binary sigmoid ensemble (gradient boosting) splits on
one feature only, the score is a sum of per-feature step functions: choosing
an interval ``k_j`` for each feature gives score ``C + sum_j G_j[k_j]`` and
cost ``sum_j c_j[k_j]`` (OCEAN's separable cost, eqs. 28-32). The
counterfactual problem is then a multiple-choice knapsack: minimise the cost
subject to the score reaching the target's side of 0. It is solved exactly by
depth-first branch and bound:

* per feature, only Pareto options are kept (each dearer option must raise
  the score more than every cheaper one); the query's own interval is the
  free option;
* the bound of a node is the LP relaxation of the remaining features, the
  greedy fill of their upper convex hulls (gain against cost) by decreasing
  gain per unit cost (Sinha and Zoltners' MCKP relaxation), precomputed for
  every suffix of the feature order;
* the search stops at a node budget; the caller then falls back to the
  general CP-SAT model, so a result from here is always proven optimal.

Applies when there is no plausibility model, no one-hot group (categories
couple columns) and the target is a class of a one-output sigmoid ensemble.
"""

from __future__ import annotations

import numpy as np

from core.cells.problem import CellProblem, CellSolution, TreeBlock

__all__ = ["separable_gains", "solve"]


def separable_gains(prob: CellProblem) -> tuple[list[np.ndarray], float, bool] | None:
    """Per feature the signed score of each interval, the constant, and whether
    the target needs the signed score > 0 (strict) or >= 0. None when the
    problem is not separable in this sense."""
    ens, tgt, blk = prob.ens, prob.target, prob.model_leaves
    if (tgt.kind != "class" or ens.link != "sigmoid" or ens.n_outputs != 1 or prob.plaus is not None
            or prob.groups):
        return None
    n_int = np.array([lv.size + 1 for lv in prob.levels])
    restricted = ~((blk.lo == 0) & (blk.hi == n_int - 1))      # (n_leaves, d): feature restricted
    if _two_features_a_tree(np.asarray(blk.tree_of), restricted):
        return None
    sign = 1.0 if tgt.class_index == 1 else -1.0
    scale = 1.0 / ens.n_trees if ens.aggregation == "mean" else 1.0
    v = sign * scale * np.asarray(blk.value[:, 0], dtype=float)
    any_r = restricted.any(axis=1)
    const = sign * float(ens.base_score[0]) + float(v[~any_r].sum())
    G = _interval_scores(blk, v, restricted, n_int)
    strict = (tgt.class_index == 1) != bool(ens.positive_at_tie)
    return G, const, strict


def _interval_scores(blk: TreeBlock, v: np.ndarray, restricted: np.ndarray, n_int: np.ndarray) -> list[np.ndarray]:
    """Per feature the signed score of each interval: each leaf bounding it adds its value ``v``
    over its range."""
    any_r = restricted.any(axis=1)
    feat_of = np.argmax(restricted, axis=1)
    G = []
    for j, n in enumerate(n_int):
        mine = np.flatnonzero(any_r & (feat_of == j))
        diff = np.zeros(n + 1)
        np.add.at(diff, blk.lo[mine, j], v[mine])
        np.add.at(diff, blk.hi[mine, j] + 1, -v[mine])
        G.append(np.cumsum(diff[:-1]))
    return G


def _two_features_a_tree(tree_of: np.ndarray, restricted: np.ndarray) -> bool:
    """Does some tree split on two features (``restricted``: per leaf, the features its box bounds)?"""
    if tree_of.size and np.any(np.diff(tree_of) < 0):          # leaves grouped by tree, as _leaf_block makes them
        order = np.argsort(tree_of, kind="stable")
        tree_of, restricted = tree_of[order], restricted[order]
    if not tree_of.size:
        return False
    starts = np.flatnonzero(np.r_[True, tree_of[1:] != tree_of[:-1]])
    per_tree = np.logical_or.reduceat(restricted, starts, axis=0)
    return bool(np.any(per_tree.sum(axis=1) > 1))


def _pareto(costs: np.ndarray, gains: np.ndarray, hat: int) -> list[tuple[float, float, int]]:
    """(cost, gain over the query's interval, interval) of the Pareto options, the free one first."""
    g0 = gains[hat]
    opts = [(float(costs[k]), float(gains[k] - g0), int(k)) for k in np.flatnonzero(np.isfinite(costs)) if k != hat]
    opts.sort(key=lambda o: (o[0], -o[1]))
    out = [(0.0, 0.0, int(hat))]
    best = 0.0
    for c, g, k in opts:
        if g > best:
            out.append((c, g, k))
            best = g
    return out


def _hull(opts: list[tuple[float, float, int]]) -> list[tuple[float, float]]:
    """Segments (d_cost, d_gain) of the upper concave hull of gain against cost, from the free option."""
    pts = [(c, g) for c, g, _ in opts]
    hull = [pts[0]]
    for p in pts[1:]:
        while len(hull) >= 2:
            (c1, g1), (c2, g2) = hull[-2], hull[-1]
            # drop the middle point if it lies on or below the chord from hull[-2] to p
            if (g2 - g1) * (p[0] - c1) <= (p[1] - g1) * (c2 - c1):
                hull.pop()
            else:
                break
        hull.append(p)
    return [(hull[i + 1][0] - hull[i][0], hull[i + 1][1] - hull[i][1]) for i in range(len(hull) - 1)]


def solve(prob: CellProblem, node_limit: int = 200_000) -> CellSolution | None:
    """The optimal cells (status "optimal"), or status "infeasible" when no
    counterfactual exists, proven by branch and bound over ``prob.costs`` (inf:
    interval not allowed); None if not separable or over the node budget."""
    costs = prob.costs
    sep = separable_gains(prob)
    if sep is None:
        return None
    G, const, strict = sep
    hat = prob.hat
    base = const + sum(float(G[j][hat[j]]) for j in range(len(G)))
    need = -base                       # sum of gains must reach this (> or >=)
    feats = []
    for j in range(len(G)):
        if not np.isfinite(costs[j][hat[j]]):
            return None                # the query's own interval is not allowed: leave it to the general model
        opts = _pareto(costs[j], G[j], hat[j])
        if len(opts) > 1:
            feats.append((j, opts, _hull(opts)))
    # most efficient features first: good solutions early, tight bounds
    feats.sort(key=lambda f: -max(dg / max(dc, 1e-300) for dc, dg in f[2]))
    n = len(feats)
    # LP bound of every suffix: its hull segments by decreasing efficiency, cumulated
    suffix = []
    for i in range(n + 1):
        segs = [s for f in feats[i:] for s in f[2]]
        segs.sort(key=lambda s: -s[1] / max(s[0], 1e-300))
        dc = np.array([s[0] for s in segs])
        dg = np.array([s[1] for s in segs])
        suffix.append((np.concatenate([[0.0], np.cumsum(dg)]), np.concatenate([[0.0], np.cumsum(dc)]), dc, dg))

    def lp_bound(i: int, r: float) -> float:
        if r <= 0:
            return 0.0
        cg, cc, dc, dg = suffix[i]
        if cg[-1] < r:
            return np.inf
        k = int(np.searchsorted(cg, r, side="left"))   # cg[k-1] < r <= cg[k]
        return float(cc[k - 1] + dc[k - 1] * (r - cg[k - 1]) / dg[k - 1])

    best = np.inf
    best_choice: list[int] | None = None
    choice = [0] * n
    nodes = 0

    def meets(r: float) -> bool:   # signed score = -r; the caller re-checks the point on the model
        return r < 0 if strict else r <= 0

    def dfs(i: int, cost: float, r: float) -> bool:
        nonlocal best, best_choice, nodes
        nodes += 1
        if nodes > node_limit:
            return False
        if meets(r):
            if cost < best * (1 - 1e-12) - 1e-15:
                best, best_choice = cost, list(choice[:i]) + [0] * (n - i)
            return True
        if i == n or cost + lp_bound(i, r) >= best * (1 - 1e-12) - 1e-15:
            return True
        opts = feats[i][1]
        for o in range(len(opts) - 1, -1, -1):   # largest gain first
            c, g, _ = opts[o]
            choice[i] = o
            if not dfs(i + 1, cost + c, r - g):
                return False
        choice[i] = 0
        return True

    if not dfs(0, 0.0, need):
        return None
    if best_choice is None:
        return CellSolution("infeasible", None, np.inf)
    cells = hat.copy()
    for i, o in enumerate(best_choice):
        j, opts, _ = feats[i]
        cells[j] = opts[o][2]
    return CellSolution("optimal", cells, best)
