"""Best-first branch and bound over boxes of intervals: our own exact solver of the cell problem.

A node is a box: per feature a range ``[lo_j, hi_j]`` of intervals (the root:
every allowed interval). Within a box everything the bound needs is exact and
cheap, because each interval's cost rises with its distance from ``x_hat``
(the cheapest interval of a range is the allowed one nearest the query's):

* the box's cheapest point ``p`` (per feature the cheapest interval of its
  range) and its cost ``base`` (the sum of the features' costs, or the
  largest for the L-infinity cost);
* per leaf that the box meets, the cost ``e_l`` of the cheapest point of
  leaf and box together (``base`` plus what the leaf's own bounds add);
* the bound: the smallest cost ``r`` such that every tree, each on its own,
  can reach a leaf within ``r`` whose scores add up to the target (the
  per-tree radius of :func:`core.cells.bounds.radius_for`, here inside the
  box; for every need of the target, the plausibility forest's and the other
  models'). For the L-infinity cost this is Veritas's merged per-tree bound on
  the box, for a sum it only counts the dearest leaf of each tree: the box
  splits add the rest.

The search pops the box of smallest bound. If its cheapest point is valid
(checked on the ensemble), that point is optimal: every other box costs at
least its bound. Else the box is split on one feature at one level: each tree
whose best leaf within the bound does not hold ``p`` votes (by the score its
leaf would gain) for the level of that leaf's bound nearest ``p``; the level
with the most votes splits the box into the side holding ``p`` (where those
trees lose the leaf, so the bound rises) and the far side (where the base cost
rises). The incumbent (the warm start, then every valid cheapest point) prunes
boxes whose bound reaches it; the smallest bound left in the queue is a proven
lower bound at every moment (anytime).

Each box is evaluated once, as it is queued: its bound, its cheapest point and
the split it would get if popped (:meth:`BoxSearch.expand`). The node bound is
computed in C (``core/solvers/_boxsearch.c``) when the extension is built, else
in numpy; both give the same numbers. With the extension the loop itself runs
in C too (:func:`_run_compiled`: the same boxes in the same order as the Python
loop, :func:`_run`), back in Python only to check a candidate on the model, to
tell a lower bound, and every few dozen boxes to look at the clock.

The C side takes the problem's arrays once per query (checked then, kept in a
capsule). For the L-infinity cost a leaf's cost within a box is one interval's,
so it reads ranks of interval costs and orders the leaves by a counting sort on
them (a sum goes to a radix sort); and since a child box differs from its parent
on the split feature alone, only narrower, it is evaluated from its parent's
leaves (only those bounded on that feature change). What does not depend on the
query (the grid's offsets, the leaves in sparse form, grouped by feature) is
kept with the model's leaves between queries (:data:`core.cells.cache.GRID_CACHE`).
"""

from __future__ import annotations

import functools
import heapq
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from core.cells.bounds import box_distances, radius_for, target_needs
from core.cells.cache import GRID_CACHE
from core.cells.problem import CellProblem, CellSolution, TreeBlock

try:  # compiled node bound and split (core/solvers/_boxsearch.c); numpy gives the same answers more slowly
    from core.solvers import _boxsearch  # type: ignore[attr-defined]  # compiled: no stub
except ImportError:  # pragma: no cover - built by setup.py when a C compiler is present
    _boxsearch = None

#: tests switch this off to run the numpy version
USE_COMPILED = True

__all__ = ["solve", "applies", "BoxSearch", "USE_COMPILED"]

REL_TOL = 1e-9
#: pairwise merges of trees before the search (0: none), and the most leaves a merged pair may have
MERGE_LEVELS = 0
MERGE_CAP = 4096


def applies(prob: CellProblem) -> str | None:
    """None when the box search takes the problem, else why not (a sentence)."""
    if prob.groups:
        return "the box search does not take one-hot groups"
    if prob.exclusions:
        return "the box search does not take diverse alternatives"
    return None


@dataclass
class _Block:
    """One leaf block of the problem (the model, another model, the plausibility forest) in sparse form."""

    tree: np.ndarray           # (n_leaves,) global tree index
    needs: list[tuple[np.ndarray, float]]


class BoxSearch:
    """The search state of one problem (see the module doc)."""

    def __init__(self, prob: CellProblem, merge_levels: int | None = None):
        merge_levels = MERGE_LEVELS if merge_levels is None else merge_levels
        self.prob = prob
        self.combine = prob.cost_model.combine
        d = prob.n_features
        self.d = d
        sizes = np.array([c.size for c in prob.costs], dtype=np.int64)
        self.off, self._feature = _grid(prob, sizes)
        # the interval costs, those above the upper bound cut off (:func:`core.cells.bounds.bounded_costs`)
        flat = np.concatenate(prob.costs).astype(float, copy=False) if d else np.zeros(0)   # a new array
        ub = float(prob.upper_bound)
        if np.isfinite(ub):
            flat[flat > ub * (1 + 1e-9) + 1e-12] = np.inf
        self.flat = flat
        self.hat = prob.hat.astype(np.int64)
        self.root_lo = np.zeros(d, dtype=np.int64)
        self.root_hi = sizes - 1
        self.sizes = sizes
        # leaves of every block, sparse: (leaf, feature, lo, hi) for the bounds that cut the feature's grid
        (self.n_leaf, self.n_tree, self.tree, self.E_leaf, self.E_f, self.E_lo, self.E_hi, self.needs,
         self.ptr), leaf_arrays = _leaf_structure(prob, lambda: self.costs, sizes, merge_levels)
        self.nodes = 0
        self.static = None
        self.ctx = None
        if _boxsearch is not None and USE_COMPILED and self.n_leaf > 0:
            for x in (self.off, sizes, self.hat, flat):
                x.setflags(write=False)
            self.static = (self.off, sizes, self.hat, flat, *leaf_arrays, 1 if self.combine == "max" else 0)
            # checks every index the kernels follow; None: not this solver's problem (see _nearest_allowed)
            self.ctx = _boxsearch.prepare(*self.static)
            self.ok = self.ctx is not None
        else:
            self.ok = self._nearest[2]

    @functools.cached_property
    def costs(self) -> list[np.ndarray]:
        """Per feature, the interval costs (those above the upper bound cut off): views of ``flat``."""
        return [self.flat[a:b] for a, b in zip(self.off.tolist(), (self.off + self.sizes).tolist())]

    @functools.cached_property
    def _nearest(self) -> tuple[np.ndarray, np.ndarray, bool]:
        return _nearest_allowed(self.flat, self._feature, self.off, self.sizes, self.hat)

    @property
    def prev(self) -> np.ndarray:
        """Per interval, the nearest allowed interval at or below it (see :func:`_nearest_allowed`)."""
        return self._nearest[0]

    @property
    def next(self) -> np.ndarray:
        """Per interval, the nearest allowed interval at or above it (see :func:`_nearest_allowed`)."""
        return self._nearest[1]

    # --------------------------------------------------------------- costs of ranges
    def _range_min(self, f: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Cheapest allowed interval of each range [a, b] of feature f and its cost (inf: none)."""
        o = self.off[f]
        h = self.hat[f]
        best = h + o
        below, above = b < h, a > h
        best = np.where(below, self.prev[np.clip(b + o, 0, self.flat.size - 1)], best)
        best = np.where(above, self.next[np.clip(a + o, 0, self.flat.size - 1)], best)
        ok = (best >= a + o) & (best <= b + o) & (a <= b)
        cost = np.where(ok, self.flat[np.clip(best, 0, self.flat.size - 1)], np.inf)
        return np.where(ok, best - o, h), cost

    def evaluate(self, lo: np.ndarray, hi: np.ndarray) -> tuple[float, np.ndarray, float, np.ndarray, bool]:
        """(bound, cheapest cells p, their cost, per-leaf cost e, whether the leaves holding
        p meet every need) of the box [lo, hi]."""
        if self.ctx is not None:
            p = np.empty(self.d, dtype=np.int64)
            e: np.ndarray = np.empty(self.n_leaf)      # per-leaf costs (a sum below is typed floating)
            bound, base, holds = _boxsearch.evaluate(self.ctx, lo, hi, p, e)
            return bound, p, base, e, bool(holds)
        feats = np.arange(self.d)
        p, m = self._range_min(feats, lo, hi)
        e = np.full(self.n_leaf, np.inf)
        if not np.all(np.isfinite(m)):
            return np.inf, p, np.inf, e, False
        base = float(m.max() if self.combine == "max" else m.sum())
        f = self.E_f
        a = np.maximum(self.E_lo, lo[f])
        b = np.minimum(self.E_hi, hi[f])
        _, c = self._range_min(f, a, b)
        if self.combine == "max":
            e = np.full(self.n_leaf, base)
            np.maximum.at(e, self.E_leaf, c)
        else:
            e = base + np.bincount(self.E_leaf, weights=c - m[f], minlength=self.n_leaf)
        bound = base
        for start, n, score, need in self.needs:
            bound = max(bound, radius_for(e[start:start + n], self.tree[start:start + n], score, need))
            if not np.isfinite(bound):
                return bound, p, base, e, False
        at_p = self.holds(p)
        holds = all(float(score[at_p[start:start + n]].sum()) >= need - 1e-12 * max(1.0, abs(need))
                    for start, n, score, need in self.needs)
        return bound, p, base, e, holds

    def expand(self, lo: np.ndarray, hi: np.ndarray, cut: float
               ) -> tuple[float, np.ndarray, float, bool, tuple[int, int] | None]:
        """(bound, cheapest cells p, their cost, whether the leaves holding p meet every need, and
        the split of the box) of the box [lo, hi]: :meth:`evaluate`, then, when the bound is below
        ``cut`` (the box is kept), :meth:`split`; else the split is None. The box search computes a
        box's split as it queues the box, so the box is evaluated once."""
        if self.ctx is not None:
            p = np.empty(self.d, dtype=np.int64)
            bound, base, holds, sp = _boxsearch.expand(self.ctx, lo, hi, p, np.empty(self.n_leaf), cut)
            return bound, p, base, bool(holds), sp
        bound, p, base, e, holds = self.evaluate(lo, hi)
        sp = self.split(lo, hi, p, e, bound) if np.isfinite(bound) and bound < cut else None
        return bound, p, base, holds, sp

    def holds(self, p: np.ndarray) -> np.ndarray:
        """Mask of the leaves whose box holds the cells ``p``."""
        f = self.E_f
        return np.bincount(self.E_leaf, weights=(p[f] < self.E_lo) | (p[f] > self.E_hi),
                           minlength=self.n_leaf) == 0

    def split(self, lo: np.ndarray, hi: np.ndarray, p: np.ndarray, e: np.ndarray, bound: float
              ) -> tuple[int, int] | None:
        """(feature j, level s): the box splits into intervals < s and >= s of feature j; None if no split."""
        if self.ctx is not None:
            return _boxsearch.split(self.ctx, lo, hi, p, e, float(bound))
        f = self.E_f
        at_p = self.holds(p)
        W = np.zeros((self.d, 2))
        near = np.full((self.d, 2), -1, dtype=np.int64)
        lim = bound * (1 + REL_TOL) + 1e-15
        for start, n, score, _ in self.needs:
            tr = self.tree[start:start + n]
            ee = e[start:start + n]
            within = np.isfinite(ee) & (ee <= lim)
            for t in np.unique(tr):
                mine = np.flatnonzero(tr == t)
                cand = mine[within[mine]]
                if cand.size == 0:
                    continue
                lb = int(cand[np.argmax(score[cand])])          # the first of equal scores
                at = mine[at_p[start + mine]]
                pl = int(at[0]) if at.size else -1
                gain = score[lb] - (score[pl] if pl >= 0 else 0.0)
                if lb == pl or not gain > 0:
                    continue
                for k in range(self.ptr[start + lb], self.ptr[start + lb + 1]):
                    j = int(f[k])
                    if p[j] < self.E_lo[k]:
                        sv, side = max(int(self.E_lo[k]), int(lo[j])), 1
                    elif p[j] > self.E_hi[k]:
                        sv, side = min(int(self.E_hi[k]), int(hi[j])) + 1, 0
                    else:
                        continue
                    if not lo[j] < sv <= hi[j]:
                        continue
                    if near[j, side] < 0 or (sv < near[j, side] if side == 1 else sv > near[j, side]):
                        near[j, side] = sv
                    W[j, side] += gain
        flatW = W.ravel()
        if np.any(flatW > 0):
            top = int(np.argmax(flatW))
            return top // 2, int(near.ravel()[top])
        # no tree prefers another leaf (a tie at p): split at any leaf bound inside the box
        at = np.flatnonzero((self.E_lo > lo[f]) & (self.E_lo <= hi[f]))
        if at.size:
            return int(f[at[0]]), int(self.E_lo[at[0]])
        at = np.flatnonzero((self.E_hi >= lo[f]) & (self.E_hi < hi[f]))
        if at.size:
            return int(f[at[0]]), int(self.E_hi[at[0]]) + 1
        return None


_Structure = tuple[int, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                   list[tuple[int, int, np.ndarray, float]], np.ndarray]


def _grid(prob: CellProblem, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(offset of each feature's intervals in the flat arrays, feature of each flat interval): the
    grid's, kept with the model's leaves (:data:`core.cells.cache.GRID_CACHE`)."""
    def build() -> tuple[np.ndarray, np.ndarray]:
        off = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        feat = np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)
        for x in (off, feat):
            x.setflags(write=False)
        return off, feat

    return GRID_CACHE.get(prob.model_leaves, ("boxsearch grid", tuple(sizes.tolist())), build)


def _nearest_allowed(flat: np.ndarray, feat: np.ndarray, off: np.ndarray, sizes: np.ndarray, hat: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, bool]:
    """(prev, next, ok): per interval the nearest allowed interval at or below / at or above it
    within its feature (flat indices; ``off - 1`` / ``off + size`` when none), and whether the
    problem is this solver's: the query's own interval allowed on every feature and the costs
    never falling away from it (on each side, along the allowed intervals)."""
    F = flat.size
    finite = np.isfinite(flat)
    at = np.arange(F, dtype=np.int64)
    start, end = off[feat], off[feat] + sizes[feat]
    below = np.maximum.accumulate(np.where(finite, at, -1)) if F else at
    prev = np.where(below >= start, below, start - 1)
    above = np.minimum.accumulate(np.where(finite, at, F)[::-1])[::-1] if F else at
    nxt = np.where(above < end, above, end)
    here = off + hat                                          # the query's intervals
    ok = bool(np.all((hat >= 0) & (hat < sizes))) and bool(np.all(finite[here]))
    if ok:
        # consecutive allowed intervals of one feature: falling up to the query's, rising after it
        i = np.flatnonzero(finite)
        a, b = i[:-1], i[1:]
        same = feat[a] == feat[b]
        step = flat[b] - flat[a]
        tol = 1e-15 * (1 + np.abs(flat[b]))
        left = same & (b <= here[feat[a]])
        right = same & (a >= here[feat[a]])
        ok = not (np.any(step[left] > tol[left]) or np.any(step[right] < -tol[right]))
    return prev.astype(np.int64), nxt.astype(np.int64), ok


def _leaf_structure(prob: CellProblem, costs: Callable[[], list[np.ndarray]], sizes: np.ndarray, merge_levels: int
                    ) -> tuple[_Structure, tuple[np.ndarray, ...]]:
    """(leaves, trees, tree of each leaf, and the sparse leaf bounds E_leaf, E_f, E_lo, E_hi, the
    needs (first leaf, leaves, scores, need), the leaves' offsets in E), and the same as the
    compiled kernel reads it (:func:`_leaf_arrays`): the blocks' leaves on the grid. Without an
    upper bound to drop leaves by, merges, further models or plausibility, this depends on the
    model and the target only, and is kept with the model's leaves for the next query
    (:data:`core.cells.cache.GRID_CACHE`). ``costs()``: the interval costs (for merges), asked only
    when the structure is built."""
    def build() -> tuple[_Structure, tuple[np.ndarray, ...]]:
        st = _build_structure(prob, costs(), sizes, merge_levels)
        return st, _leaf_arrays(st, prob.n_features)

    ub = float(prob.upper_bound)
    if merge_levels == 0 and not np.isfinite(ub) and not prob.others and prob.plaus_leaves is None:
        t = prob.target
        key = ("boxsearch", t.kind, t.class_index, t.lo, t.hi, t.margin)
        return GRID_CACHE.get(prob.model_leaves, key, build)
    return build()


def _leaf_arrays(st: _Structure, d: int) -> tuple[np.ndarray, ...]:
    """The leaf structure as the compiled kernel reads it (read-only, C-contiguous): ptr, ef, elo,
    ehi, tree, per need its first leaf, its number of leaves, its scores' offset, the sum the
    trees must reach, and the scores; then each leaf bound's leaf and the bounds grouped by
    feature (offsets, positions) (see core/solvers/_boxsearch.c)."""
    _, _, tree, E_leaf, E_f, E_lo, E_hi, needs, ptr = st
    arrays = [ptr, E_f, E_lo, E_hi, tree,
              np.array([a for a, _, _, _ in needs], dtype=np.int64),
              np.array([n for _, n, _, _ in needs], dtype=np.int64),
              np.concatenate([[0], np.cumsum([n for _, n, _, _ in needs])[:-1]]).astype(np.int64),
              np.array([nd for _, _, _, nd in needs], dtype=float),
              np.concatenate([sc for _, _, sc, _ in needs] or [np.zeros(0)]).astype(float),
              E_leaf.astype(np.int64),
              np.concatenate([[0], np.cumsum(np.bincount(E_f, minlength=d))]).astype(np.int64),
              np.argsort(E_f, kind="stable").astype(np.int64)]
    out = tuple(np.ascontiguousarray(x) for x in arrays)
    for x in out:
        x.setflags(write=False)
    return out


def _build_structure(prob: CellProblem, costs: list[np.ndarray], sizes: np.ndarray, merge_levels: int
                     ) -> _Structure:
    """:func:`_leaf_structure`, built."""
    combine = prob.cost_model.combine
    blocks = _blocks(prob)
    trees, needs, E_leaf, E_f, E_lo, E_hi = [], [], [], [], [], []
    n_leaf, n_tree = 0, 0
    ub = float(prob.upper_bound)
    for blk, nd in blocks:
        if merge_levels == 0 and not np.isfinite(ub):       # every leaf as it is
            lo_b, hi_b, tree_b, sc_b = blk.lo, blk.hi, blk.tree_of.astype(np.int64), [s_ for s_, _ in nd]
            n_tb = int(blk.n_trees)
        else:
            lo_b, hi_b, tree_b, n_tb, sc_b = merge_trees(blk.lo, blk.hi, blk.tree_of, [s_ for s_, _ in nd], costs,
                                                        ub, combine, merge_levels)
        L = tree_b.size
        cut = (lo_b > 0) | (hi_b < sizes - 1)
        r, f = np.nonzero(cut)
        E_leaf.append(r + n_leaf)
        E_f.append(f)
        E_lo.append(lo_b[r, f])
        E_hi.append(hi_b[r, f])
        trees.append(tree_b + n_tree)
        for score, (_, need) in zip(sc_b, nd):
            needs.append((n_leaf, L, np.asarray(score, dtype=float), float(need)))
        n_leaf += L
        n_tree += n_tb
    e_leaf = np.concatenate(E_leaf).astype(np.int64)
    ptr = np.concatenate([[0], np.cumsum(np.bincount(e_leaf, minlength=n_leaf))]).astype(np.int64)
    out = (n_leaf, n_tree, np.concatenate(trees).astype(np.int64), e_leaf, np.concatenate(E_f).astype(np.int64),
           np.concatenate(E_lo).astype(np.int64), np.concatenate(E_hi).astype(np.int64), needs, ptr)
    for a in out[2:7] + (ptr,):
        a.setflags(write=False)
    return out


def _blocks(prob: CellProblem) -> list[tuple[TreeBlock, list[tuple[np.ndarray, float]]]]:
    """The leaf blocks the search bounds and their needs: the model's, each further model's, the
    plausibility forest's."""
    blocks = [(prob.model_leaves, target_needs(prob.ens, prob.target, prob.model_leaves.value))]
    for other in prob.others:
        blocks.append((other.leaves, target_needs(other.ens, other.target, other.leaves.value)))
    if prob.plaus_leaves is not None and prob.plaus is not None:     # set together
        blocks.append((prob.plaus_leaves, [(prob.plaus_leaves.value[:, 0], float(prob.plaus.delta))]))
    return blocks


def merge_trees(lo: np.ndarray, hi: np.ndarray, tree_of: np.ndarray, scores: list[np.ndarray],
                costs: list[np.ndarray], ub: float, combine: str, levels: int = 1, cap: int = MERGE_CAP
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, list[np.ndarray]]:
    """Leaves of trees merged in pairs (Veritas's merge), ``levels`` times: a merged
    tree's leaves are the pairs of its two trees' leaves whose boxes meet, each the
    boxes' intersection with the scores added; the same points reach the same
    total, so every bound computed on merged trees holds, and the per-tree bound
    now sees which leaves of the two trees exclude each other. Leaves (and pairs)
    whose cheapest point costs more than ``ub`` are dropped first; trees are paired
    by the features they share, and a pair with more than ``cap`` leaves stays
    unmerged. Returns (lo, hi, tree, n_trees, scores), leaves grouped by tree."""
    sizes = np.array([c.size for c in costs])
    keep = np.ones(tree_of.size, dtype=bool)
    if np.isfinite(ub):
        keep = box_distances(costs, lo, hi, combine) <= ub * (1 + 1e-9) + 1e-12
    n_trees = int(tree_of.max()) + 1 if tree_of.size else 0
    groups = [(lo[m], hi[m], [sc[m] for sc in scores]) for m in
              (np.flatnonzero((tree_of == t) & keep) for t in range(n_trees))]
    for _ in range(levels):
        groups = _merged_once(groups, sizes, costs, ub, combine, cap)
    return _stacked(groups, lo.shape[1], len(scores))


#: a tree's leaves: (lower bounds, upper bounds, scores per need)
_Leaves = tuple[np.ndarray, np.ndarray, list[np.ndarray]]


def _merged_once(groups: list[_Leaves], sizes: np.ndarray, costs: list[np.ndarray], ub: float, combine: str,
                 cap: int) -> list[_Leaves]:
    """One level of :func:`merge_trees`: each tree, in turn, with the free tree it shares most
    features with (a pair of more than ``cap`` leaves, or the last tree alone, stays as it is)."""
    uses = np.array([((g[0] > 0) | (g[1] < sizes - 1)).any(axis=0) for g in groups], dtype=np.int64)
    overlap = uses @ uses.T if len(groups) else np.zeros((0, 0), dtype=np.int64)
    free = np.ones(len(groups), dtype=bool)
    out = []
    for t in range(len(groups)):
        if not free[t]:
            continue
        free[t] = False
        cand = np.flatnonzero(free)
        if cand.size == 0:
            out.append(groups[t])
            continue
        u = int(cand[np.argmax(overlap[t, cand])])
        pair = _pair(groups[t], groups[u], costs, ub, combine, cap)
        if pair is None:
            out.append(groups[t])
            continue
        free[u] = False
        out.append(pair)
    return out


def _pair(a: _Leaves, b: _Leaves, costs: list[np.ndarray], ub: float, combine: str, cap: int) -> _Leaves | None:
    """Two trees merged: the pairs of their leaves whose boxes meet (and, under an upper bound,
    whose cheapest point is within it), each the boxes' intersection with the scores added;
    None when more than ``cap`` pairs."""
    (la, ha, sa), (lb, hb, sb) = a, b
    L = np.maximum(la[:, None, :], lb[None, :, :])
    H = np.minimum(ha[:, None, :], hb[None, :, :])
    ok = np.all(L <= H, axis=2)
    i, j = np.nonzero(ok)
    L, H = L[i, j], H[i, j]
    if np.isfinite(ub) and i.size:
        near = box_distances(costs, L, H, combine) <= ub * (1 + 1e-9) + 1e-12
        i, j, L, H = i[near], j[near], L[near], H[near]
    if i.size > cap:
        return None
    return L, H, [x[i] + y[j] for x, y in zip(sa, sb)]


def _stacked(groups: list[_Leaves], d: int, n_scores: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, list[np.ndarray]]:
    """The trees' leaves stacked: (lo, hi, tree, n_trees, scores), leaves grouped by tree."""
    n = len(groups)
    counts = [g[0].shape[0] for g in groups]
    lo_m = np.vstack([g[0] for g in groups]) if n else np.zeros((0, d), dtype=np.int64)
    hi_m = np.vstack([g[1] for g in groups]) if n else np.zeros((0, d), dtype=np.int64)
    tree_m = np.repeat(np.arange(n), counts).astype(np.int64)
    sc_m = [np.concatenate([g[2][k] for g in groups]) if n else np.zeros(0) for k in range(n_scores)]
    return lo_m.astype(np.int64), hi_m.astype(np.int64), tree_m, n, sc_m


def solve(prob: CellProblem, time_limit: float = 30.0, hint: np.ndarray | None = None,
          stop: threading.Event | None = None, node_limit: int | None = None,
          on_bound: Callable[[float, float], None] | None = None,
          head: tuple[int, threading.Event] | None = None) -> CellSolution | None:
    """The cheapest cell reaching the target by best-first box search, proven
    optimal (status "optimal" or "infeasible"), or with a proven lower bound
    (status "feasible" with the incumbent, "unknown" without) when
    ``time_limit``, ``node_limit`` or ``stop`` ends it first; None when the
    problem is not for this solver (:func:`applies`). ``hint``: a valid point
    (the warm start), the first incumbent; ``on_bound(lower, upper)`` is told
    every improvement of either bound; ``head`` = (n, event): the event is set once the
    search has evaluated n boxes without an answer (a race's cue to start its other solver)."""
    if applies(prob) is not None:
        return None
    deadline = time.perf_counter() + time_limit
    S = BoxSearch(prob)
    if not S.ok:
        return None
    ub, inc = float(prob.upper_bound), None
    if hint is not None:
        hc = prob.interval_of(np.asarray(hint, dtype=float)[None, :])[0]
        if prob.is_valid(prob.point_of(hc)[None, :])[0]:
            inc, ub = hc, min(ub, float(prob.cost_of(hc)))
    cut = ub * (1 - REL_TOL) - 1e-15           # a box whose bound is not below it cannot beat the incumbent
    loop = _run_compiled if S.ctx is not None else _run
    ended = loop(S, cut, deadline, stop, node_limit, on_bound, ub, head)
    if ended[0] == "stopped":                    # the incumbent, and the smallest bound left: proven
        return CellSolution("feasible" if inc is not None else "unknown", inc, min(ended[1], ub))
    if ended[0] == "optimal":
        inc, ub = ended[1], ended[2]
    if inc is None:
        return CellSolution("infeasible", None, np.inf)
    return CellSolution("optimal", inc, float(ub))


#: how a search loop ended: ("optimal", cells, cost), ("empty",) or ("stopped", the smallest bound left)
_Ended = tuple[Any, ...]


def _run(S: BoxSearch, cut: float, deadline: float, stop: threading.Event | None, node_limit: int | None,
         on_bound: Callable[[float, float], None] | None, ub: float,
         head: tuple[int, threading.Event] | None) -> _Ended:
    """The search loop (see the module doc), in Python: the numpy node bound's."""
    prob = S.prob
    heap: list = []
    counter = 0
    lb_told = -np.inf

    def push(lo: np.ndarray, hi: np.ndarray, depth: int) -> None:
        nonlocal counter
        bound, p, base, holds, sp = S.expand(lo, hi, cut)      # the box's split too, should it be popped
        S.nodes += 1
        if np.isfinite(bound) and bound < cut:      # equal bounds: the deepest box first (nearest a point)
            heapq.heappush(heap, (bound, -depth, counter, lo, hi, p, base, holds, sp))
            counter += 1

    push(S.root_lo.copy(), S.root_hi.copy(), 0)
    while heap:
        if (stop is not None and stop.is_set()) or time.perf_counter() > deadline or \
                (node_limit is not None and S.nodes > node_limit):
            return ("stopped", heap[0][0])
        if head is not None and S.nodes >= head[0]:
            head[1].set()
        bound, neg_depth, _, lo, hi, p, base, holds, sp = heapq.heappop(heap)
        if on_bound is not None and bound > lb_told:
            lb_told = bound
            on_bound(bound, ub)
        if holds and base >= bound * (1 - REL_TOL) - 1e-15 and prob.is_valid(prob.point_of(p)[None, :])[0]:
            return ("optimal", p, float(base))         # the smallest bound is attained: optimal
        if sp is None:
            continue                     # one leaf per tree and p invalid: the box holds no solution
        j, sv = sp
        hi1 = hi.copy()
        hi1[j] = sv - 1
        lo2 = lo.copy()
        lo2[j] = sv
        push(lo, hi1, 1 - neg_depth)
        push(lo2, hi, 1 - neg_depth)
    return ("empty",)


#: the compiled loop returns to Python at least every CHUNK boxes, to look at the clock and the stop event
CHUNK = 32
#: L-infinity, compiled: the most memory (bytes) a search keeps its queued boxes' leaves in, so that a box's
#: children are evaluated from them (only the leaves bounded on the split feature change); beyond it a
#: box's children are evaluated from scratch. A few thousand boxes of a forest of a few thousand leaves
LEAVES_BUDGET = 32 << 20


def _run_compiled(S: BoxSearch, cut: float, deadline: float, stop: threading.Event | None, node_limit: int | None,
                  on_bound: Callable[[float, float], None] | None, ub: float,
                  head: tuple[int, threading.Event] | None) -> _Ended:
    """:func:`_run` with the loop in C (core/solvers/_boxsearch.c: the same boxes in the same order),
    which returns here for what needs Python: a candidate's check on the model, a lower bound to
    tell, and every :data:`CHUNK` boxes (and at ``node_limit`` and at the race's cue, exactly) the
    stop event, the clock and the limits."""
    prob = S.prob
    run = _boxsearch.search(S.ctx, cut, LEAVES_BUDGET)
    p = np.empty(S.d, dtype=np.int64)
    S.nodes = 1
    while True:
        event, S.nodes, value = _boxsearch.run(run, _chunk_end(S.nodes, node_limit, head), on_bound is not None, p)
        if event == "empty":
            return ("empty",)
        if event == "limit":
            if _past_limits(S.nodes, stop, deadline, node_limit):
                return ("stopped", value)
            if head is not None and S.nodes >= head[0]:
                head[1].set()
        elif event == "bound":
            assert on_bound is not None
            on_bound(value, ub)
        elif prob.is_valid(prob.point_of(p)[None, :])[0]:      # a candidate, valid: optimal
            return ("optimal", p.copy(), float(value))


def _chunk_end(nodes: int, node_limit: int | None, head: tuple[int, threading.Event] | None) -> int:
    """Where the compiled loop next returns: :data:`CHUNK` boxes on, or at ``node_limit`` or the
    race's cue if sooner."""
    stop_at = nodes + CHUNK
    if node_limit is not None:
        stop_at = min(stop_at, node_limit)
    if head is not None and not head[1].is_set():
        stop_at = min(stop_at, head[0] - 1)
    return stop_at


def _past_limits(nodes: int, stop: threading.Event | None, deadline: float, node_limit: int | None) -> bool:
    """Is the search to stop: the stop event set, the clock past the deadline, or past ``node_limit`` boxes?"""
    return (stop is not None and stop.is_set()) or time.perf_counter() > deadline or \
        (node_limit is not None and nodes > node_limit)
