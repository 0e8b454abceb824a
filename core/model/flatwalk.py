"""All trees of an ensemble stacked into flat node arrays, and walked at once.

:func:`_flatten` builds, once per ensemble, the stacked node arrays the numpy
walk reads (:func:`_apply_flat`; leaves loop on themselves) and the 16-byte
node records of the compiled walk (``core/model/_treewalk.c``, :func:`_pack`).
:func:`leaves` and :func:`leaf_sum` walk rows through every tree, by the
compiled kernel when it is built and ``USE_COMPILED`` is set, else by numpy;
both give the same result (tests switch ``USE_COMPILED`` off to compare). Both
take ``X`` as float64 C-contiguous rows (:func:`_rows` converts what it is handed);
the kernel itself refuses any other buffer with a ValueError (see its header).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

import numpy as np

from core.errors import ModelError
from core.model.tree import StackedTrees, Tree, _bits_hold

try:  # compiled traversal (core/model/_treewalk.c); numpy does the same more slowly
    from core.model import _treewalk  # type: ignore[attr-defined]  # compiled: no stub
except ImportError:  # pragma: no cover - no C compiler at install time
    _treewalk = None

#: set to False to force the numpy traversal (tests compare both)
USE_COMPILED = _treewalk is not None

__all__ = ["USE_COMPILED", "PACKED_NODE", "leaves", "leaf_sum"]


def _stack(trees: Sequence[Tree]) -> dict[str, Any]:
    """Every tree's node arrays one after the other (each tree's children indexed within it):
    ``sizes``, ``offsets`` (each tree's first node), ``children_left`` / ``children_right``
    (int64), ``feature_raw``, ``threshold_raw``, ``value``, ``cat_node``, ``cat_bits`` (each
    tree's words, zeros after them; ``widths`` its number of words), ``missing_left``
    (False where a tree routes none) and ``routes_missing`` (every tree says where a missing value
    goes at each split). Trees made stacked (:class:`core.model.tree.StackedTrees`)
    give their stacked arrays as they are."""
    if isinstance(trees, StackedTrees):         # the arrays as they were stacked and checked
        a, sizes = trees.arrays, np.asarray(trees.counts, dtype=np.int64)
        cl, cr, feature, thr_raw, value = (a[k] for k in ("children_left", "children_right", "feature", "threshold",
                                                          "value"))
        bits = a["category_bits"]
        widths = np.full(sizes.size, bits.shape[1], dtype=np.int64)
        routes = a["missing_left"] is not None
        missing = a["missing_left"] if routes else np.zeros(len(cl), dtype=bool)
    else:
        sizes = np.array([t.n_nodes for t in trees], dtype=np.int64)
        cl, cr, feature, thr_raw, value = (np.concatenate([getattr(t, k) for t in trees]) for k in
                                           ("children_left", "children_right", "feature", "threshold", "value"))
        widths = np.array([t.bits.shape[1] for t in trees], dtype=np.int64)
        words = int(widths.max())
        bits = np.concatenate([np.pad(t.bits, ((0, 0), (0, words - t.bits.shape[1])))
                               for t in trees]) if words else np.zeros((len(cl), 0), dtype=np.uint64)
        missing = np.concatenate([np.zeros(t.n_nodes, dtype=bool) if t.missing_left is None else t.missing_left
                                  for t in trees])
        routes = all(t.missing_left is not None for t in trees)
    cl = cl.astype(np.int64)
    return {"sizes": sizes, "offsets": np.cumsum(sizes) - sizes, "children_left": cl,
            "children_right": cr.astype(np.int64), "feature_raw": feature, "threshold_raw": thr_raw,
            "value": np.ascontiguousarray(value), "cat_node": (cl >= 0) & np.isnan(thr_raw), "cat_bits": bits,
            "widths": widths, "missing_left": missing, "routes_missing": routes}


def _flatten(trees: Sequence[Tree], stacked: dict[str, Any] | None = None) -> dict[str, Any]:
    """Stack all trees into one node array for vectorised traversal (``stacked``: what
    :func:`_stack` gave for them, when the caller has it).

    Leaves loop on themselves (feature 0, threshold +inf), so a fixed number of
    steps (the maximum depth) walks every tree to its leaf.
    """
    st = _stack(trees) if stacked is None else stacked
    sizes, cl, cr, feat_raw = st["sizes"], st["children_left"], st["children_right"], st["feature_raw"]
    at = np.arange(cl.size, dtype=np.int64)
    shift = np.repeat(st["offsets"], sizes)
    inner = cl >= 0
    fl = {"left": np.where(inner, cl + shift, at), "right": np.where(inner, cr + shift, at),
          "feature": np.where(feat_raw < 0, 0, feat_raw).astype(np.int64),
          "threshold": np.where(feat_raw < 0, np.inf, st["threshold_raw"]),
          **{k: st[k] for k in ("feature_raw", "threshold_raw", "value", "missing_left", "routes_missing", "offsets",
                                "cat_node", "cat_bits")}}
    fl.update(_pack(fl, inner, np.repeat(st["widths"], sizes)))
    fl["packed_value"] = np.ascontiguousarray(fl["value"][fl["packed_to_node"]])
    return fl


PACKED_NODE = np.dtype([("threshold", "<f8"), ("feature", "<i4"), ("left", "<i4")])
NAN_RIGHT = 1 << 30           # a threshold split's feature with this bit: a missing value goes right


def _breadth_first(fl: dict[str, Any], inner: np.ndarray) -> tuple[np.ndarray, int]:
    """Every node, tree by tree, each tree breadth first with a node's two children side by
    side; and the depth of the deepest tree. The compiled kernel walks each tree with a queue;
    numpy walks all trees one level at a time together: each level holds the trees in order,
    so a stable sort by tree keeps each tree's own breadth-first order."""
    if USE_COMPILED and _treewalk is not None:
        order = np.empty(inner.size, dtype=np.int64)
        count, depth = _treewalk.breadth_first(fl["left"], fl["right"], inner, fl["offsets"], order)
        if count == inner.size:
            return order, depth
    levels, cur = [fl["offsets"]], fl["offsets"]
    while cur.size:
        p = cur[inner[cur]]
        cur = np.empty(2 * p.size, dtype=np.int64)
        cur[0::2], cur[1::2] = fl["left"][p], fl["right"][p]
        levels.append(cur)
    order = np.concatenate(levels)
    tree = np.searchsorted(fl["offsets"], order, side="right")
    return order[np.argsort(tree, kind="stable")], len(levels) - 2


def _pack(fl: dict[str, Any], inner: np.ndarray, widths: np.ndarray) -> dict[str, Any]:
    """Nodes as 16-byte records for the compiled walk (core/model/_treewalk.c).

    Each tree is laid out breadth first with the two children of a node side
    by side (right = left + 1), so one step reads one record. A threshold split
    whose missing values (NaN) go right (``Tree.missing_left`` False, or no
    routing: ``x <= T`` is false for NaN) has the bit :data:`NAN_RIGHT` set in
    its feature. A categorical split stores ``-(feature + 2)`` as its feature and,
    as its threshold, the offset of its left set in ``packed_bits``: the number of
    words of its tree's sets, then the words (a code beyond them is not in the set,
    as in :func:`_bits_hold`); a leaf has feature -1. ``widths``: the words of each
    node's tree. Also each node's place among the records (``packed_position``, the inverse of
    ``packed_to_node``) and the depth of the deepest tree (``depth``).
    """
    order, depth = _breadth_first(fl, inner)
    n = order.size
    if n >= 2**31:
        raise ModelError("The model has more than 2^31 nodes; it is too large to analyse.")
    if int(fl["feature_raw"].max()) >= NAN_RIGHT:
        raise ModelError(f"A tree splits on feature {NAN_RIGHT:,} or beyond; the analyses take fewer features.")
    rec = np.zeros(n, dtype=PACKED_NODE)
    pos = np.empty(n, dtype=np.int64)
    if USE_COMPILED and _treewalk is not None:    # one pass over the nodes instead of numpy's nine
        _treewalk.pack(order, fl["left"], np.ascontiguousarray(fl["feature_raw"], dtype=np.int32),
                       fl["threshold_raw"], inner, fl["missing_left"], fl["cat_node"], rec, pos)
    else:
        _pack_numpy(fl, inner, order, rec, pos)
    bits = np.zeros(1, dtype=np.uint64)
    if fl["cat_node"].any():
        cat = fl["cat_node"][order]
        nodes = order[cat]
        w = widths[nodes]
        start = np.cumsum(w + 1) - (w + 1)
        rec["feature"][cat] = -(fl["feature_raw"][nodes] + 2)
        rec["threshold"][cat] = start
        bits = np.zeros(int((w + 1).sum()), dtype=np.uint64)
        bits[start] = w.astype(np.uint64)
        for k in range(int(w.max())):
            has = w > k
            bits[start[has] + 1 + k] = fl["cat_bits"][nodes[has], k]
    return {"packed": rec, "packed_roots": fl["offsets"].astype(np.int64), "packed_to_node": order,
            "packed_position": pos, "packed_bits": np.ascontiguousarray(bits), "depth": depth}


def _in_threads(fn: Any, n_rows: int, n_trees: int) -> None:
    """Run ``fn(start, stop)`` over row ranges, in two threads for large jobs
    (the compiled walk releases the GIL)."""
    n_threads = min(os.cpu_count() or 1, 4) if n_rows * n_trees >= 200_000 else 1
    if n_threads == 1:
        fn(0, n_rows)
        return
    bounds = np.linspace(0, n_rows, n_threads + 1).astype(int)
    with ThreadPoolExecutor(n_threads) as pool:
        list(pool.map(lambda i: fn(int(bounds[i]), int(bounds[i + 1])), range(n_threads)))


def _apply_flat(fl: dict[str, Any], X: np.ndarray) -> np.ndarray:
    """Global node index of the leaf reached, shape (n_samples, n_trees)."""
    n, d = X.shape
    nodes = np.broadcast_to(fl["offsets"], (n, fl["offsets"].shape[0])).copy()
    row_base = (np.arange(n, dtype=np.int64) * d)[:, None]
    Xf = X.ravel()
    feat, thr, left, right = fl["feature"], fl["threshold"], fl["left"], fl["right"]
    cat_node, cat_bits = fl["cat_node"], fl["cat_bits"]
    has_cat = bool(cat_node.any())
    missing_left = fl["missing_left"]
    for _ in range(fl["depth"]):
        v = Xf[row_base + feat[nodes]]
        go = v <= thr[nodes]
        nan = np.isnan(v)
        if nan.any():                  # a missing value: each split's own routing
            go[nan] = missing_left[nodes[nan]]
        if has_cat:
            c = cat_node[nodes]
            if c.any():
                go[c] = _bits_hold(cat_bits[nodes[c]], v[c])
        nodes = np.where(go, left[nodes], right[nodes])
    return nodes


def _rows(X: Any) -> np.ndarray:
    """``X`` as the walks take it: float64, 2-D, C-contiguous (a copy only when needed)."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X has {X.ndim} dimensions; the tree walk takes rows (n_samples, n_features).")
    return X


def _pack_numpy(fl: dict[str, Any], inner: np.ndarray, order: np.ndarray, rec: np.ndarray, pos: np.ndarray) -> None:
    """The compiled kernel's ``pack`` (see ``core/model/_treewalk.c``) in numpy: each node's place
    ``pos`` in ``order``, and the records ``rec`` of the nodes in that order (a categorical split's
    feature and threshold written by :func:`_pack`)."""
    n = order.size
    pos[order] = np.arange(n)
    rec["threshold"] = np.nan_to_num(fl["threshold_raw"][order], nan=0.0)
    feature = fl["feature_raw"][order].astype(np.int32)
    split = inner[order]
    feature[split & ~fl["cat_node"][order] & ~fl["missing_left"][order]] |= NAN_RIGHT
    rec["left"][split] = pos[fl["left"][order[split]]]
    rec["feature"] = feature


def leaves(fl: dict[str, Any], X: np.ndarray, n_trees: int) -> np.ndarray:
    """Global node index of the leaf reached, shape (n_samples, n_trees), for
    checked rows ``X`` and the arrays ``fl`` of :func:`_flatten`."""
    X = _rows(X)
    if USE_COMPILED and _treewalk is not None:
        out = np.empty((X.shape[0], n_trees), dtype=np.int64)
        _in_threads(lambda a, b: _treewalk.apply(X, fl["packed"], fl["packed_roots"], fl["packed_bits"], out,
                                                 X.shape[1], a, b),
                    X.shape[0], n_trees)
        return fl["packed_to_node"][out]
    return _apply_flat(fl, X)


def leaf_sum(fl: dict[str, Any], X: np.ndarray, n_outputs: int, n_trees: int,
             seen: np.ndarray | None = None) -> np.ndarray:
    """Sum over the trees of the leaf values reached, shape (n_samples, n_outputs); ``seen``
    (uint8, one per node in packed order), when given, set to 1 at every leaf reached."""
    X = _rows(X)
    if seen is not None and (seen.dtype != np.uint8 or seen.shape != (fl["packed"].shape[0],)):
        raise ValueError("seen must hold one uint8 per node")
    if USE_COMPILED and _treewalk is not None:
        out = np.zeros((X.shape[0], n_outputs))
        _in_threads(lambda a, b: _treewalk.accumulate(X, fl["packed"], fl["packed_roots"], fl["packed_bits"],
                                                      fl["packed_value"], n_outputs, out,
                                                      X.shape[1], a, b, seen),
                    X.shape[0], n_trees)
        return out
    out = np.empty((X.shape[0], n_outputs))
    step = max(1, 2_000_000 // max(1, n_trees))
    for s in range(0, X.shape[0], step):
        reached = _apply_flat(fl, X[s:s + step])
        out[s:s + step] = fl["value"][reached].sum(axis=1)
        if seen is not None:
            seen[fl["packed_position"][reached]] = 1
    return out
