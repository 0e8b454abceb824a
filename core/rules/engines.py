"""The two estimators of counterfactual rules (module doc of :mod:`core.rules`):
the Projected Forest's CDP (bitsets over the fitting rows, or the compiled
kernel) and the Regional RF's CRP, as plain functions of the fitted state
(:class:`core.rules.state.FittedRules`)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

import numpy as np

from core.rules import bitsets
from core.rules.bitsets import _below, _popcount, _unpack
from core.rules.state import FittedRules
from core.typing import Row, TargetSpec

__all__ = ["counts", "mean_share", "free_columns", "cells", "cdp_from_cells", "cdp", "projected_weights",
           "crp_fn", "crp_batch", "crp_from_reach", "crp", "regional_crp"]


def counts(state: FittedRules, x: np.ndarray, free: np.ndarray, target: TargetSpec | None = None, weights: bool = False):
    """Compiled projected-forest cells: (cnt, pos) of shape (M, T) for the
    boolean column masks ``free`` (M, d) (pos counts target rows; 0 without
    a target), and the weights of the rows for one subset."""
    if target is None:
        ybool, ybits = np.zeros(state.n, dtype=np.uint8), np.zeros(state.words, dtype=np.uint64)
    else:
        mask, ybits, _ = state.target(target)
        ybool = mask.astype(np.uint8)
    fl = state.flat
    m, T = len(free), state.ensemble.n_trees
    cnt = np.zeros((m, T), dtype=np.int64)
    pos = np.zeros((m, T), dtype=np.int64)
    w = np.zeros(state.n) if weights else None
    free = np.ascontiguousarray(free, dtype=np.uint8).reshape(m, state.d)
    # the kernel takes exactly these dtypes, C-contiguous (and refuses anything else)
    x = np.ascontiguousarray(x, dtype=np.float64).reshape(state.d)
    X = np.ascontiguousarray(state.X, dtype=np.float64)

    def run(a: int, b: int) -> None:
        bitsets._projected.counts(fl["cl"], fl["cr"], fl["feat"], fl["thr"], fl["roots"], x, free[a:b], X,
                                  ybool, state.split_bits, state.valid, ybits, cnt[a:b], pos[a:b], w,
                                  state.d, state.words)

    if m >= 32 and not weights:      # the kernel releases the GIL: two threads
        with ThreadPoolExecutor(2) as ex:
            list(ex.map(lambda ab: run(*ab), [(0, m // 2), (m // 2, m)]))
    else:
        run(0, m)
    return cnt, pos, w


def mean_share(cnt: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Per row of (cnt, pos) (M, T): the mean over the trees with a non-empty
    cell of the target share in the cell (0 when no cell holds a row)."""
    ok = cnt > 0
    used = ok.sum(axis=1)
    share = np.where(ok, pos / np.maximum(cnt, 1), 0.0).sum(axis=1)
    return np.where(used > 0, share / np.maximum(used, 1), 0.0)


def free_columns(state: FittedRules, cand: Sequence[int], subsets: np.ndarray) -> np.ndarray:
    """(M, d) the columns each subset of the units ``cand`` frees."""
    free = np.zeros((len(subsets), state.d), dtype=bool)
    for k, u in enumerate(cand):
        free[np.ix_(subsets[:, k], np.asarray(state.units[u], dtype=int))] = True
    return free


def cells(state: FittedRules, x: np.ndarray, cand: Sequence[int], subsets: np.ndarray, level: int) -> list[Any]:
    """Projected-forest cells of ``x`` per tree for every subset (rows of
    ``subsets``, bool over ``cand``): an array (M, words), (words,) when the
    same for all subsets, or None for all rows.

    A node reached only when the candidate units ``need`` are free matters
    only to the subsets containing ``need``: results are kept on those
    subsets alone, so the work follows the (node, subset) pairs that exist.
    """
    pos = np.full(len(state.units), -1)
    pos[list(cand)] = np.arange(len(cand))
    upos = pos[state.unit_of]
    m = len(subsets)
    smask = (subsets.astype(np.int64) << np.arange(subsets.shape[1])).sum(axis=1) if m else np.zeros(0, int)
    index: dict[int, np.ndarray] = {0: np.arange(m)}
    where: dict[tuple[int, int], np.ndarray] = {}

    def idx(need: int) -> np.ndarray:
        got = index.get(need)
        if got is None:
            got = index[need] = np.flatnonzero((smask & need) == need)
        return got

    out = []
    for t, tree in enumerate(state.ensemble.trees):
        cl, cr, ft, th = tree.children_left, tree.children_right, tree.feature, tree.threshold

        def ev(v: int, need: int) -> Any:
            if cl[v] < 0:
                return None
            f = ft[v]
            left = x[f] <= th[v]
            cx, co = (cl[v], cr[v]) if left else (cr[v], cl[v])
            bits = state.left_bits(t, v)
            agree = bits if left else ~bits
            rx = ev(cx, need)
            fixed = agree if rx is None else agree & rx
            c = upos[f]
            if c < 0:
                return fixed
            nn = need | (1 << int(c))
            if nn.bit_count() > level:
                return fixed          # no subset of this size frees this split here
            sub = idx(nn)
            if not len(sub):
                return fixed
            ro = ev(co, nn)
            key = (need, int(c))
            at = where.get(key)
            if at is None:
                at = where[key] = np.searchsorted(idx(need), sub)
            rxs = rx if rx is None or rx.ndim == 1 else rx[at]
            free = rxs if ro is None else (ro if rxs is None else rxs & ro)
            if free is None:
                free = state.valid
            full = len(idx(need))
            res = np.empty((full, state.words), dtype=np.uint64)
            res[:] = fixed
            res[at] = free
            return res

        out.append(ev(0, 0))
    return out


def cdp_from_cells(state: FittedRules, cells: list[Any], ybits: np.ndarray, m: int) -> np.ndarray:
    """CDP of the ``m`` subsets from their cells (:func:`cells`)."""
    num = np.zeros(m)
    used = np.zeros(m)
    for c in cells:
        c = state.valid if c is None else c & state.valid
        cnt = np.broadcast_to(_popcount(c), (m,))
        pos = np.broadcast_to(_popcount(c & ybits), (m,))
        ok = cnt > 0
        num += np.where(ok, pos / np.maximum(cnt, 1), 0.0)
        used += ok
    return np.where(used > 0, num / np.maximum(used, 1), 0.0)


# -------------------------------------------------------------- probabilities
def cdp(state: FittedRules, x: Row, S: Sequence[int], target: TargetSpec) -> float:
    """CDP_S(Y*; x) = P(f(X) in Y* | X_Sbar = x_Sbar) by the Projected Forest.
    ``S``: column indices (a one-hot group is freed whole if any of its columns is in S)."""
    x = state.row(x)
    units = state.units_of(S)
    _, ybits, _ = state.target(target)
    sub = np.ones((1, len(units)), dtype=bool)
    if bitsets.USE_COMPILED:
        cnt, pos, _ = counts(state, x, free_columns(state, units, sub), target)
        return float(mean_share(cnt, pos)[0])
    got = cells(state, x, units, sub, len(units))
    return float(cdp_from_cells(state, got, ybits, 1)[0])


def projected_weights(state: FittedRules, x: Row, S: Sequence[int]) -> np.ndarray:
    """Projected Forest weights ``w_i(x_Sbar)`` of the fitted rows (sum 1,
    or all 0 when no tree's cell holds a fitted row)."""
    x = state.row(x)
    units = state.units_of(S)
    sub = np.ones((1, len(units)), dtype=bool)
    if bitsets.USE_COMPILED:
        cnt, _, w = counts(state, x, free_columns(state, units, sub), weights=True)
        used = int((cnt > 0).sum())
        return w / used if used else w
    got = cells(state, x, units, sub, len(units))
    w = np.zeros(state.n)
    used = 0
    for c in got:
        c = state.valid if c is None else (c & state.valid).reshape(-1)
        keep = _unpack(c, state.n)
        if keep.any():
            w[keep] += 1.0 / keep.sum()
            used += 1
    return w / used if used else w


def crp_batch(state: FittedRules, qlo: np.ndarray, qhi: np.ndarray, pos: np.ndarray,
              base: np.ndarray | None = None, dims: np.ndarray | None = None) -> np.ndarray:
    """Regional-RF CRP of query boxes (Q, len(dims)) on the columns ``dims``,
    only the leaves in ``base`` (all when None) being candidates."""
    return crp_fn(state, pos, base, np.arange(state.d) if dims is None else dims)(qlo, qhi)


def crp_fn(state: FittedRules, pos: np.ndarray, base: np.ndarray | None, dims: np.ndarray
           ) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """:func:`crp_batch` with the leaves, their bounds and counts prepared once."""
    leaves = np.arange(len(state.leaf_counts)) if base is None else np.flatnonzero(base)
    tree_of = np.searchsorted(state.tree_starts, leaves, side="right") - 1
    onehot = np.zeros((len(leaves), len(state.tree_starts)))
    onehot[np.arange(len(leaves)), tree_of] = 1.0
    cnt_l, pos_l = onehot * state.leaf_counts[leaves, None], onehot * pos[leaves, None]
    LO, HI = state.leaf_lower[np.ix_(leaves, dims)], state.leaf_upper[np.ix_(leaves, dims)]
    step = max(1, int(2e7 // max(1, LO.size)))

    def crp_of(qlo: np.ndarray, qhi: np.ndarray) -> np.ndarray:
        out = np.empty(qlo.shape[0])
        for a in range(0, qlo.shape[0], step):
            lo, hi = qlo[a:a + step], qhi[a:a + step]
            reach = np.all((lo[:, None, :] < HI[None]) & (hi[:, None, :] > LO[None]), axis=2).astype(float)
            out[a:a + step] = mean_share(reach @ cnt_l, reach @ pos_l)
        return out

    return crp_of


def crp_from_reach(state: FittedRules, reach: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Regional-RF CRP from the reached leaves (M, n_leaves)."""
    cnt_t = np.add.reduceat(reach * state.leaf_counts[None, :], state.tree_starts, axis=1)
    pos_t = np.add.reduceat(reach * pos[None, :], state.tree_starts, axis=1)
    return mean_share(cnt_t, pos_t)


def crp(state: FittedRules, x: Row, lower: np.ndarray, upper: np.ndarray, target: TargetSpec,
        S: Sequence[int] | None = None) -> float:
    """CRP: P(f(X) in Y* | X_S in (lower, upper], X_Sbar = x_Sbar) by the
    Regional RF; S defaults to the columns with a finite bound."""
    x = state.row(x)
    lower, upper = np.asarray(lower, float), np.asarray(upper, float)
    inS = np.isfinite(lower) | np.isfinite(upper)
    if S is not None:
        inS = np.isin(np.arange(len(x)), list(S))
    qlo = np.where(inS, lower, _below(x))
    qhi = np.where(inS, upper, x)
    _, _, pos = state.target(target)
    return float(crp_batch(state, qlo[None], qhi[None], pos, dims=np.arange(len(x)))[0])


def regional_crp(state: FittedRules, region_lower: np.ndarray, region_upper: np.ndarray, target: TargetSpec,
                 lower: np.ndarray | None = None, upper: np.ndarray | None = None) -> float:
    """P(f(X) in Y* | X_S in rule, X_Sbar in region_Sbar); without a rule,
    P(f(X) in Y* | X in region)."""
    qlo, qhi = np.asarray(region_lower, float).copy(), np.asarray(region_upper, float).copy()
    if lower is not None and upper is not None:
        S = np.isfinite(lower) | np.isfinite(upper)
        qlo[S], qhi[S] = np.asarray(lower)[S], np.asarray(upper)[S]
    _, _, pos = state.target(target)
    return float(crp_batch(state, qlo[None], qhi[None], pos, dims=np.arange(len(qlo)))[0])
