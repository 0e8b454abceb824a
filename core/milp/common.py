"""Helpers both formulations share: costs capped by the upper bound, range
minima, and the leaves still reachable within the bound."""

from __future__ import annotations

import numpy as np


def bounded_costs(prob) -> list[np.ndarray]:
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


def box_distances(costs: list[np.ndarray], lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Cost of the cheapest allowed point of each box of interval ranges, shape (n_boxes,)."""
    out = np.zeros(lo.shape[0])
    for j, c in enumerate(costs):
        out += range_min(range_min_table(c), lo[:, j], hi[:, j])
    return out


def reachable_leaves(blk, costs: list[np.ndarray], ub: float) -> np.ndarray:
    """Mask of leaves whose box meets the allowed intervals within the bound."""
    total = box_distances(costs, blk.lo, blk.hi)
    return np.isfinite(total) & (total <= ub * (1 + 1e-9) + 1e-12)
