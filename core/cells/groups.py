"""Leaves read as category sets of one-hot groups, for the cell model.

In a one-hot group exactly one column is 1 (OCEAN eq. 27). Under that
constraint a leaf box's bounds on the group's columns say only *which
category* may be the hot one: a point with category ``c`` hot lies in the box
iff column ``c``'s range holds 1 and every other column's range holds 0. So
each leaf has an allowed set ``A`` of categories, and its box can be written
canonically: columns in ``A`` span ``[0, 1]``, the others are held at 0 (the
same points once the group holds exactly one category; a leaf with ``A``
empty is never reached and is dropped).

That matters for native categorical splits: :func:`core.model.categorical.expand`
rewrites ``x in S`` as a chain of one-hot tests with a copy of the subtree per
chained category, so one native leaf becomes several leaves with the same
value whose boxes differ only in that group. In canonical form those copies
are one leaf with the union of their category sets (:func:`grouped_leaves`):
the cell model then carries one boolean per native leaf instead of one per
copy (measured on Adult's LightGBM categorical forest: see bench/intake.py).
Merging needs equal values (bit for bit) and equal bounds on every column
outside the group, so it is exact: a point reaches the merged leaf iff it
reaches one of its members, and the leaf's output is theirs.
"""

from __future__ import annotations

import numpy as np

from core.cells.cache import GRID_CACHE
from core.cells.problem import CellProblem, TreeBlock

__all__ = ["grouped_leaves", "zero_one_intervals", "MERGE_COPIES"]

# False keeps one leaf per expanded leaf (boxes still canonical): the reference
# bench/intake.py compares the merged model against, and a switch for tests.
MERGE_COPIES = True


def zero_one_intervals(levels: list[np.ndarray], g: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Interval index of the value 0 and of the value 1 of each column of group ``g``."""
    i0 = np.array([np.searchsorted(levels[j], 0.0, side="left") for j in g])
    i1 = np.array([np.searchsorted(levels[j], 1.0, side="left") for j in g])
    return i0, i1


def _canonical(blk: TreeBlock, levels: list[np.ndarray], groups: list[list[int]]
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lo, hi, keep): boxes with each group's bounds in canonical form, and
    the mask of leaves some single category can reach."""
    lo, hi = blk.lo.copy(), blk.hi.copy()
    keep = np.ones(lo.shape[0], dtype=bool)
    for g in groups:
        i0, i1 = zero_one_intervals(levels, g)
        L, H = lo[:, g], hi[:, g]
        not0 = ~((L <= i0) & (i0 <= H))
        has1 = (L <= i1) & (i1 <= H)
        allowed = has1 & ((not0.sum(axis=1)[:, None] - not0) == 0)
        keep &= allowed.any(axis=1)
        lo[:, g] = i0
        hi[:, g] = np.where(allowed, i1, i0)
    return lo, hi, keep


def _merge(tree_of, node, lo, hi, value, g, levels):
    """Merge leaves equal in tree, value and every bound outside group ``g``;
    returns the merged arrays and, per input row, its merged row."""
    others = np.setdiff1d(np.arange(lo.shape[1]), g)
    vbits = np.ascontiguousarray(value).view(np.int64).reshape(value.shape[0], -1)
    key = np.column_stack([tree_of, vbits, lo[:, others], hi[:, others]])
    _, first, inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
    inv = inv.ravel()
    if first.size == key.shape[0]:
        return tree_of, node, lo, hi, value, np.arange(key.shape[0])
    i0, i1 = zero_one_intervals(levels, g)
    allowed = np.zeros((first.size, len(g)), dtype=bool)
    np.logical_or.at(allowed, inv, hi[:, g] >= i1)
    lo2, hi2 = lo[first], hi[first]                # fancy indexing: copies
    hi2[:, g] = np.where(allowed, i1, i0)
    order = np.argsort(first, kind="stable")       # keep the trees' leaf order
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    f = first[order]
    return tree_of[f], node[f], lo2[order], hi2[order], value[f], rank[inv]


def _build(blk: TreeBlock, levels: list[np.ndarray], groups: list[list[int]]
           ) -> tuple[TreeBlock, np.ndarray]:
    lo, hi, keep = _canonical(blk, levels, groups)
    rows = np.flatnonzero(keep)
    tree_of, node, value = blk.tree_of[rows], blk.node[rows], blk.value[rows]
    lo, hi = lo[rows], hi[rows]
    row_of = np.full(blk.tree_of.size, -1, dtype=np.int64)
    cur = np.arange(rows.size)
    for g in groups if MERGE_COPIES else ():
        tree_of, node, lo, hi, value, step = _merge(tree_of, node, lo, hi, value, g, levels)
        cur = step[cur]
    row_of[rows] = cur
    return TreeBlock(tree_of, node, lo, hi, value, blk.n_trees), row_of


def grouped_leaves(prob: CellProblem, blk: TreeBlock) -> tuple[TreeBlock, np.ndarray]:
    """``blk`` with its boxes in canonical form for ``prob``'s one-hot groups and
    the leaves that differ only in one group's category set merged (see the
    module doc), and per leaf of ``blk`` its row in the result (-1: never
    reached by a point with one category per group). ``blk`` itself when the
    problem has no group. Kept with the ensemble for the next query."""
    if not prob.groups:
        return blk, np.arange(blk.tree_of.size)
    which = "model" if blk is prob.model_leaves else "plaus" if blk is prob.plaus_leaves else None
    if which is None:                       # another model's block (also valid for): built per query
        return _build(blk, prob.levels, prob.groups)
    key = ("grouped", which, MERGE_COPIES, prob.grid_key, tuple(tuple(g) for g in prob.groups))
    return GRID_CACHE.get(prob.ens, key, lambda: _build(blk, prob.levels, prob.groups))
