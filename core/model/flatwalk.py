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
from core.model.tree import Tree, _bits_hold

try:  # compiled traversal (core/model/_treewalk.c); numpy does the same more slowly
    from core.model import _treewalk  # type: ignore[attr-defined]  # compiled: no stub
except ImportError:  # pragma: no cover - no C compiler at install time
    _treewalk = None

#: set to False to force the numpy traversal (tests compare both)
USE_COMPILED = _treewalk is not None

__all__ = ["USE_COMPILED", "PACKED_NODE", "leaves", "leaf_sum"]


def _flatten(trees: Sequence[Tree]) -> dict[str, Any]:
    """Stack all trees into one node array for vectorised traversal.

    Leaves loop on themselves (feature 0, threshold +inf), so a fixed number of
    steps (the maximum depth) walks every tree to its leaf.
    """
    sizes = np.array([t.n_nodes for t in trees])
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    left = np.concatenate([np.where(t.is_leaf, np.arange(t.n_nodes), t.children_left) + o
                           for t, o in zip(trees, offsets)]).astype(np.int64)
    right = np.concatenate([np.where(t.is_leaf, np.arange(t.n_nodes), t.children_right) + o
                            for t, o in zip(trees, offsets)]).astype(np.int64)
    feat_raw = np.concatenate([t.feature for t in trees])
    thr_raw = np.concatenate([t.threshold for t in trees])
    feat = np.where(feat_raw < 0, 0, feat_raw).astype(np.int64)
    thr = np.where(feat_raw < 0, np.inf, thr_raw)
    value = np.ascontiguousarray(np.concatenate([t.value for t in trees]))
    depth = max(t.max_depth for t in trees)
    cat_node = np.concatenate([t.is_categorical for t in trees])
    words = max(t.bits.shape[1] for t in trees)
    bits = np.concatenate([np.pad(t.bits, ((0, 0), (0, words - t.bits.shape[1])))
                           for t in trees]) if words else np.zeros((len(cat_node), 0), dtype=np.uint64)
    missing_left = np.concatenate([np.zeros(t.n_nodes, dtype=bool) if t.missing_left is None else t.missing_left
                                   for t in trees])
    packed = _pack(trees, offsets)
    packed["packed_value"] = np.ascontiguousarray(value[packed["packed_to_node"]])
    return {"left": left, "right": right, "feature": feat, "threshold": thr,
            "feature_raw": feat_raw, "threshold_raw": thr_raw, "value": value, "missing_left": missing_left,
            "offsets": offsets, "depth": depth, "cat_node": cat_node, "cat_bits": bits, **packed}


PACKED_NODE = np.dtype([("threshold", "<f8"), ("feature", "<i4"), ("left", "<i4")])
NAN_RIGHT = 1 << 30           # a threshold split's feature with this bit: a missing value goes right


def _pack(trees: Sequence[Tree], offsets: np.ndarray) -> dict[str, np.ndarray]:
    """Nodes as 16-byte records for the compiled walk (core/model/_treewalk.c).

    Each tree is laid out breadth first with the two children of a node side
    by side (right = left + 1), so one step reads one record. A threshold split
    whose missing values (NaN) go right (``Tree.missing_left`` False, or no
    routing: ``x <= T`` is false for NaN) has the bit :data:`NAN_RIGHT` set in
    its feature. A categorical split stores ``-(feature + 2)`` as its feature and, as its threshold, the
    offset of its left set in ``packed_bits``: the number of words, then the
    words (a code beyond them is not in the set, as in :func:`_bits_hold`); a
    leaf has feature -1.
    """
    parts, to_node, roots, pool = [], [], [], []
    pool_size = 0
    base = 0
    for t, off in zip(trees, offsets):
        levels, cur = [np.array([0])], np.array([0])
        while cur.size:
            inner = cur[t.children_left[cur] >= 0]
            nxt = np.empty(2 * inner.size, dtype=np.int64)
            nxt[0::2], nxt[1::2] = t.children_left[inner], t.children_right[inner]
            levels.append(nxt)
            cur = nxt
        order = np.concatenate(levels)
        pos = np.empty(t.n_nodes, dtype=np.int64)
        pos[order] = np.arange(t.n_nodes)
        rec = np.zeros(t.n_nodes, dtype=PACKED_NODE)
        rec["threshold"] = np.nan_to_num(t.threshold[order], nan=0.0)
        rec["feature"] = t.feature[order]
        cat = t.is_categorical[order]
        nan_right = (t.children_left[order] >= 0) & ~cat
        if t.missing_left is not None:
            nan_right &= ~t.missing_left[order]
        rec["feature"][nan_right] |= NAN_RIGHT
        if cat.any():
            w, k = t.bits.shape[1], int(cat.sum())
            rec["feature"][cat] = -(t.feature[order][cat] + 2)
            rec["threshold"][cat] = pool_size + (w + 1) * np.arange(k)
            pool.append(np.hstack([np.full((k, 1), w, dtype=np.uint64), t.bits[order][cat]]).ravel())
            pool_size += (w + 1) * k
        inner = t.children_left[order] >= 0
        rec["left"][inner] = pos[t.children_left[order][inner]] + base
        parts.append(rec)
        to_node.append(order + off)
        roots.append(base)
        base += t.n_nodes
    if base >= 2**31:
        raise ModelError("The model has more than 2^31 nodes; it is too large to analyse.")
    if any(t.feature.size and int(t.feature.max()) >= NAN_RIGHT for t in trees):
        raise ModelError(f"A tree splits on feature {NAN_RIGHT:,} or beyond; the analyses take fewer features.")
    to_node_arr = np.concatenate(to_node)
    bits = np.concatenate(pool).astype(np.uint64) if pool else np.zeros(1, dtype=np.uint64)
    return {"packed": np.concatenate(parts), "packed_roots": np.array(roots, dtype=np.int64),
            "packed_to_node": to_node_arr, "packed_bits": np.ascontiguousarray(bits)}


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


def leaf_sum(fl: dict[str, Any], X: np.ndarray, n_outputs: int, n_trees: int) -> np.ndarray:
    """Sum over the trees of the leaf values reached, shape (n_samples, n_outputs)."""
    X = _rows(X)
    if USE_COMPILED and _treewalk is not None:
        out = np.zeros((X.shape[0], n_outputs))
        _in_threads(lambda a, b: _treewalk.accumulate(X, fl["packed"], fl["packed_roots"], fl["packed_bits"],
                                                      fl["packed_value"], n_outputs, out,
                                                      X.shape[1], a, b),
                    X.shape[0], n_trees)
        return out
    out = np.empty((X.shape[0], n_outputs))
    step = max(1, 2_000_000 // max(1, n_trees))
    for s in range(0, X.shape[0], step):
        out[s:s + step] = fl["value"][_apply_flat(fl, X[s:s + step])].sum(axis=1)
    return out
