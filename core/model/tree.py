"""One tree as parallel node arrays (:class:`Tree`), and what is read off such arrays.

The float32 bounds the parsers fold into thresholds (:func:`float32_le_bound`,
:func:`float32_floor`), the box and the admitted category codes of every node
(:func:`node_boxes`, :func:`node_category_masks`) and the category bitsets
(:func:`category_bits_from_sets`). The node layout and the one split rule are
documented in :mod:`core.model`. :func:`stacked_trees` makes the trees of a whole
ensemble from their arrays stacked, checked all at once as :class:`Tree` checks one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from core.errors import ModelError

try:  # the compiled checks of stacked trees (core/model/_treewalk.c); numpy makes the same
    from core.model import _treewalk  # type: ignore[attr-defined]  # compiled: no stub
except ImportError:  # pragma: no cover - no C compiler at install time
    _treewalk = None

__all__ = ["Tree", "MISSING_ONLY", "float32_le_bound", "float32_floor", "node_boxes", "node_category_masks",
           "category_bits_from_sets", "stacked_trees", "StackedTrees"]

#: the threshold of a split that only separates missing values: every number goes left
MISSING_ONLY = float(np.finfo(np.float64).max)


def float32_le_bound(a: np.ndarray) -> np.ndarray:
    """Largest float64 ``T`` with ``float32(x) <= a  <=>  x <= T``.

    Parameters
    ----------
    a : ndarray of float32 values (any float dtype; each must be exactly
        representable in float32).

    Returns
    -------
    T : ndarray of float64, same shape.
    """
    a32 = np.asarray(a, dtype=np.float32)
    a64 = a32.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        nxt = np.nextafter(a32, np.float32(np.inf)).astype(np.float64)
        mid = (a64 + nxt) / 2.0  # exact in float64: float32 has 24-bit mantissas
        rounds_down = mid.astype(np.float32) <= a32
    t = np.where(rounds_down, mid, np.nextafter(mid, -np.inf))
    return np.where(np.isposinf(a64), np.inf, t)


def _bits_hold(words: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """For rows of bit words (n, n_words) and codes (n,): is each code's bit set?"""
    codes = codes.astype(np.int64)
    w = codes >> 6
    ok = w < words.shape[1]
    got = words[np.arange(len(codes)), np.minimum(w, max(words.shape[1] - 1, 0))] if words.shape[1] else \
        np.zeros(len(codes), dtype=np.uint64)
    return ok & (((got >> (codes & 63).astype(np.uint64)) & np.uint64(1)) == 1)


def float32_floor(t: np.ndarray) -> np.ndarray:
    """Largest float32 value ``<= t`` (as float32)."""
    t = np.asarray(t, dtype=np.float64)
    f = t.astype(np.float32)
    return np.where(f.astype(np.float64) > t, np.nextafter(f, np.float32(-np.inf)), f)


def node_boxes(children_left: np.ndarray, children_right: np.ndarray, feature: np.ndarray,
               threshold: np.ndarray, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """The box of every node of a tree given as parallel arrays (children after
    parents): ``lower, upper`` of shape (n_nodes, n_features), a point being in
    node i iff ``lower[i] < x <= upper[i]``."""
    n = len(children_left)
    lo = np.full((n, n_features), -np.inf)
    hi = np.full((n, n_features), np.inf)
    for i in range(n):
        left, right = children_left[i], children_right[i]
        if left < 0:
            continue
        f, t = feature[i], threshold[i]
        lo[left], hi[left] = lo[i], hi[i]
        lo[right], hi[right] = lo[i], hi[i]
        if t != t:  # a categorical split: no numerical bound (see node_category_masks)
            continue
        hi[left, f] = min(hi[i, f], t)
        lo[right, f] = max(lo[i, f], t)
    return lo, hi


def node_category_masks(tree: "Tree", n_codes: dict[int, int]) -> dict[int, np.ndarray]:
    """Per categorical feature ``j`` (``n_codes[j]`` codes), the codes each node
    admits: ``{j: bool array (n_nodes, n_codes[j])}``, a point being in node i
    iff its code of every such feature is admitted (and its numerical values
    are in the node's box)."""
    n = tree.n_nodes
    masks = {j: np.ones((n, k), dtype=bool) for j, k in n_codes.items()}
    for i in range(n):
        left, right = tree.children_left[i], tree.children_right[i]
        if left < 0:
            continue
        for m in masks.values():
            m[left] = m[right] = m[i]
        if tree.threshold[i] == tree.threshold[i]:
            continue
        j = int(tree.feature[i])
        go = tree.left_codes(i, n_codes[j])
        masks[j][left] &= go
        masks[j][right] &= ~go
    return masks


def category_bits_from_sets(left_sets: Sequence[Sequence[int] | None], n_codes: int) -> np.ndarray:
    """``category_bits`` of shape (len(left_sets), ceil(n_codes / 64)) from, per
    node, the codes that go left (None at numerical splits and leaves)."""
    words = max(1, -(-n_codes // 64))
    bits = np.zeros((len(left_sets), words), dtype=np.uint64)
    for i, codes in enumerate(left_sets):
        for k in (() if codes is None else codes):
            k = int(k)
            if not 0 <= k < n_codes:
                raise ModelError(f"Category code {k} is outside 0..{n_codes - 1}.")
            bits[i, k >> 6] |= np.uint64(1) << np.uint64(k & 63)
    return bits


@dataclass(frozen=True, eq=False)
class Tree:
    """One tree as parallel node arrays; see the docstring of :mod:`core.model`."""

    children_left: np.ndarray
    children_right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    value: np.ndarray
    category_bits: np.ndarray | None = None
    missing_left: np.ndarray | None = None

    def __post_init__(self) -> None:
        cl = np.ascontiguousarray(self.children_left, dtype=np.int32)
        cr = np.ascontiguousarray(self.children_right, dtype=np.int32)
        ft = np.ascontiguousarray(self.feature, dtype=np.int32)
        th = np.ascontiguousarray(self.threshold, dtype=np.float64)
        val = np.ascontiguousarray(self.value, dtype=np.float64)
        if val.ndim == 1:
            val = val[:, None]
        n = cl.shape[0]
        if not (cr.shape == ft.shape == th.shape == (n,)) or val.shape[0] != n or n == 0:
            raise ModelError("Tree arrays must all have the same non-zero length n_nodes.")
        leaf = cl < 0
        _check_links(cl, cr, leaf)
        internal = ~leaf
        bits = (np.zeros((n, 0), dtype=np.uint64) if self.category_bits is None
                else np.ascontiguousarray(self.category_bits, dtype=np.uint64))
        if bits.ndim != 2 or bits.shape[0] != n:
            raise ModelError(f"category_bits has shape {bits.shape}; expected ({n}, n_words).")
        cat = _check_splits(ft, th, bits, internal)
        bits = np.where((~cat)[:, None], np.uint64(0), bits).astype(np.uint64)
        object.__setattr__(self, "missing_left", _missing_left(self.missing_left, internal & ~cat))
        ft = np.where(leaf, -1, ft).astype(np.int32)
        th = np.where(leaf, np.nan, th)
        for name, arr in (("children_left", cl), ("children_right", cr), ("feature", ft),
                          ("threshold", th), ("value", val), ("category_bits", bits)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    def __getattr__(self, name: str) -> Any:
        """A tree :func:`stacked_trees` made holds where its nodes lie in the stacked arrays
        (``_stacked``) until one of its arrays is first read: their views are made then, all at
        once (a model of hundreds of trees is mostly read through its stacked arrays, and making
        every tree's views took as long as checking every node)."""
        at = self.__dict__.get("_stacked") if name in _TREE_FIELDS else None
        if at is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        fields, start, end = at
        self.__dict__.update({field: None if arr is None else arr[start:end] for field, arr in fields})
        self.__dict__.pop("_stacked", None)         # after the views: another thread reading meanwhile finds them
        return self.__dict__[name]

    def __getstate__(self) -> dict[str, Any]:       # pickled, copied: its own views, not the stacked arrays
        return {name: getattr(self, name) for name in _TREE_FIELDS}

    @property
    def n_nodes(self) -> int:
        return int(self.children_left.shape[0])

    @property
    def bits(self) -> np.ndarray:
        """``category_bits`` as set in ``__post_init__``: (n_nodes, n_words), no words
        when no split is categorical (never None once the tree is made)."""
        assert self.category_bits is not None
        return self.category_bits

    @property
    def is_leaf(self) -> np.ndarray:
        return self.children_left < 0

    @property
    def is_categorical(self) -> np.ndarray:
        """Mask of the categorical splits (internal nodes without a threshold)."""
        return (self.children_left >= 0) & np.isnan(self.threshold)

    def left_codes(self, node: int, n_codes: int) -> np.ndarray:
        """Bool array (n_codes,): which category codes go left at a categorical split."""
        codes = np.arange(n_codes)
        words = self.bits[node]
        w = np.minimum(codes >> 6, max(words.size - 1, 0))
        if words.size == 0:
            return np.zeros(n_codes, dtype=bool)
        inside = (codes >> 6) < words.size
        return inside & (((words[w] >> (codes & 63).astype(np.uint64)) & np.uint64(1)) == 1)

    @property
    def max_depth(self) -> int:
        depth = np.zeros(self.n_nodes, dtype=np.int64)
        for i in range(self.n_nodes):  # children come after parents
            if self.children_left[i] >= 0:
                depth[self.children_left[i]] = depth[i] + 1
                depth[self.children_right[i]] = depth[i] + 1
        return int(depth.max())

    def apply(self, X: np.ndarray) -> np.ndarray:
        """Leaf index reached by each row of ``X`` (n_samples, n_features)."""
        node = np.zeros(X.shape[0], dtype=np.int64)
        rows = np.arange(X.shape[0])
        active = ~self.is_leaf[node]
        cat = self.is_categorical
        while np.any(active):
            r = rows[active]
            nd = node[active]
            v = X[r, self.feature[nd]]
            go_left = v <= self.threshold[nd]
            if self.missing_left is not None:
                nan = np.isnan(v)
                if nan.any():
                    go_left[nan] = self.missing_left[nd[nan]]
            c = cat[nd]
            if c.any():
                go_left[c] = _bits_hold(self.bits[nd[c]], v[c])
            node[active] = np.where(go_left, self.children_left[nd], self.children_right[nd])
            active = ~self.is_leaf[node]
        return node

    def leaf_boxes(self, n_features: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The hyperrectangle of every leaf.

        Returns
        -------
        leaves : ndarray of shape (n_leaves,), node indices.
        lower, upper : ndarrays of shape (n_leaves, n_features); a point is in
            the leaf iff ``lower < x <= upper`` on every feature.
        """
        lo, hi = node_boxes(self.children_left, self.children_right, self.feature, self.threshold, n_features)
        leaves = np.flatnonzero(self.is_leaf)
        return leaves, lo[leaves], hi[leaves]


_TREE_FIELDS = ("children_left", "children_right", "feature", "threshold", "value", "category_bits", "missing_left")
# The defaults of the last two are __init__'s alone, not the class's: a tree made stacked has none of
# its arrays until one is read (Tree.__getattr__), and a class attribute would be found instead.
del Tree.category_bits, Tree.missing_left


def _check_links(cl: np.ndarray, cr: np.ndarray, leaf: np.ndarray) -> None:
    """The children arrays make one tree: two children per internal node, each after its
    parent and in range, every node reached exactly once from the root."""
    n = cl.shape[0]
    if np.any(leaf != (cr < 0)):
        raise ModelError("A node has exactly one child; every internal node needs two.")
    idx = np.arange(n)
    internal = ~leaf
    if np.any(cl[internal] <= idx[internal]) or np.any(cr[internal] <= idx[internal]):
        raise ModelError("Tree invariant broken: a child index is not larger than its parent's.")
    if np.any(cl[internal] >= n) or np.any(cr[internal] >= n):
        raise ModelError("Tree invariant broken: a child index is out of range.")
    reached = np.zeros(n, dtype=np.int64)
    np.add.at(reached, cl[internal], 1)
    np.add.at(reached, cr[internal], 1)
    reached[0] += 1
    if np.any(reached != 1):
        raise ModelError("Tree invariant broken: some node is not reached exactly once from the root.")


def _check_splits(ft: np.ndarray, th: np.ndarray, bits: np.ndarray, internal: np.ndarray) -> np.ndarray:
    """Every internal node splits a feature on a finite threshold or a category set; the
    categorical splits (no threshold) as a mask."""
    if np.any(ft[internal] < 0):
        raise ModelError("Tree invariant broken: an internal node has no feature.")
    if np.any(np.isinf(th[internal])):
        raise ModelError("Tree invariant broken: an internal node has an infinite threshold.")
    cat: np.ndarray = internal & np.isnan(th)
    if cat.any() and bits.shape[1] == 0:
        raise ModelError("Tree invariant broken: an internal node has no threshold and no category set.")
    return cat


def _missing_left(missing_left: Any, threshold_splits: np.ndarray) -> np.ndarray | None:
    """Where NaN goes at each threshold split (None: not known), read-only, False elsewhere."""
    if missing_left is None:
        return None
    n = threshold_splits.shape[0]
    miss = np.ascontiguousarray(missing_left, dtype=bool)
    if miss.shape != (n,):
        raise ModelError(f"missing_left has shape {miss.shape}; expected ({n},).")
    known: np.ndarray = miss & threshold_splits
    known.setflags(write=False)
    return known


def stacked_trees(counts: np.ndarray, children_left: np.ndarray, children_right: np.ndarray, feature: np.ndarray,
                  threshold: np.ndarray, value: np.ndarray, category_bits: np.ndarray | None = None,
                  missing_left: np.ndarray | None = None) -> tuple[Tree, ...]:
    """The trees whose arrays are stacked one after the other (``counts`` nodes each, each
    tree's children indexed within it), checked and normalised all at once as :class:`Tree`
    checks and normalises one: the same refusal, the first tree's first. A model of hundreds
    of trees is made in a few numpy steps over all its nodes rather than a few dozen per tree;
    each tree's arrays are views of the stacked ones (read-only)."""
    counts = np.asarray(counts, dtype=np.int64).ravel()
    a = _stacked_arrays(counts, children_left, children_right, feature, threshold, value)
    n = int(counts.sum())
    bits = (np.zeros((n, 0), dtype=np.uint64) if category_bits is None
            else np.ascontiguousarray(category_bits, dtype=np.uint64))
    if bits.ndim != 2 or bits.shape[0] != n:
        raise ModelError(f"category_bits has shape {(int(counts[0]),) + bits.shape[1:]}; expected "
                         f"({int(counts[0])}, n_words).")
    miss = None if missing_left is None else np.ascontiguousarray(missing_left, dtype=bool)
    if miss is not None and miss.shape != (n,):
        raise ModelError(f"missing_left has shape {(int(counts[0]),) + miss.shape[1:]}; expected ({int(counts[0])},).")
    _check_stacked(a, bits, counts)
    leaf = a["children_left"] < 0
    cat = ~leaf & np.isnan(a["threshold"])
    a["category_bits"] = np.where((~cat)[:, None], np.uint64(0), bits).astype(np.uint64)
    a["missing_left"] = None if miss is None else miss & ~leaf & ~cat
    a["feature"] = np.where(leaf, -1, a["feature"]).astype(np.int32)
    a["threshold"] = np.where(leaf, np.nan, a["threshold"])
    for arr in a.values():
        if arr is not None:
            arr.setflags(write=False)
    ends = np.cumsum(counts).tolist()
    fields = tuple((name, a[name]) for name in _TREE_FIELDS)
    trees = []
    for start, end in zip([0] + ends[:-1], ends):       # its views made when first read (Tree.__getattr__)
        tree = object.__new__(Tree)
        tree.__dict__["_stacked"] = (fields, start, end)
        trees.append(tree)
    return StackedTrees(trees, a, counts)


class StackedTrees(tuple[Tree, ...]):
    """The trees :func:`stacked_trees` made, in order: each :class:`Tree`'s arrays are views of
    ``arrays`` (the stacked ones, checked and normalised, read-only), ``counts`` nodes each. A
    :class:`core.model.TreeEnsemble` made of them reads the stacked arrays as they are instead of
    stacking its trees' arrays again (:func:`core.model.flatwalk._stack`); it keeps a plain tuple."""

    arrays: dict[str, Any]
    counts: np.ndarray

    def __new__(cls, trees: Sequence[Tree], arrays: dict[str, Any], counts: np.ndarray) -> StackedTrees:
        out = super().__new__(cls, trees)
        out.arrays, out.counts = arrays, counts
        return out

    def __reduce__(self) -> tuple[Any, ...]:     # pickled as the plain tuple it is
        return tuple, (tuple(self),)


def _stacked_arrays(counts: np.ndarray, *arrays: np.ndarray) -> dict[str, Any]:
    """Children, features, thresholds and values stacked, in Tree's dtypes, of one length (the
    sum of ``counts``, each positive) as Tree requires of one tree's."""
    a: dict[str, Any] = {name: np.ascontiguousarray(arr, dtype=dtype) for name, arr, dtype in
                         zip(_TREE_FIELDS[:5], arrays, (np.int32, np.int32, np.int32, np.float64, np.float64))}
    if a["value"].ndim == 1:
        a["value"] = a["value"][:, None]
    n = int(counts.sum())
    if counts.size == 0 or np.any(counts <= 0) or any(v.shape[0] != n for v in a.values()) \
            or any(a[k].ndim != 1 for k in _TREE_FIELDS[:4]):
        raise ModelError("Tree arrays must all have the same non-zero length n_nodes.")
    return a


def _check_stacked(a: dict[str, Any], bits: np.ndarray, counts: np.ndarray) -> None:
    """:class:`Tree`'s checks on every tree at once; raises the first failing tree's first
    failing check, as making the trees one by one would."""
    cl, cr, ft, th = a["children_left"], a["children_right"], a["feature"], a["threshold"]
    if _treewalk is not None:            # one pass over the nodes (the same checks, in the same order)
        k = _treewalk.check_stacked(cl, cr, ft, th, counts, bits.shape[1] > 0)
        if k >= 0:
            raise ModelError(_STACKED_CHECKS[k])
        return
    n = cl.shape[0]
    start = np.repeat(np.cumsum(counts) - counts, counts)
    size = np.repeat(counts, counts)
    idx = np.arange(n) - start
    leaf = cl < 0
    internal = ~leaf
    inside = [internal & (child >= 0) & (child < size) for child in (cl, cr)]   # (the others fail a check before)
    reached = np.bincount(np.concatenate([cl[inside[0]] + start[inside[0]], cr[inside[1]] + start[inside[1]],
                                          np.cumsum(counts) - counts]), minlength=n)
    checks = [leaf != (cr < 0), internal & ((cl <= idx) | (cr <= idx)), internal & ((cl >= size) | (cr >= size)),
              reached != 1, internal & (ft < 0), internal & np.isinf(th), internal & np.isnan(th) & (bits.shape[1] == 0)]
    tree_of = np.repeat(np.arange(counts.size), counts)
    first = [(int(tree_of[np.argmax(bad)]), k) for k, bad in enumerate(checks) if bad.any()]
    if first:
        raise ModelError(_STACKED_CHECKS[min(first)[1]])


#: what :func:`_check_stacked` says of its checks, in their order (the compiled kernel's too)
_STACKED_CHECKS = ("A node has exactly one child; every internal node needs two.",
                   "Tree invariant broken: a child index is not larger than its parent's.",
                   "Tree invariant broken: a child index is out of range.",
                   "Tree invariant broken: some node is not reached exactly once from the root.",
                   "Tree invariant broken: an internal node has no feature.",
                   "Tree invariant broken: an internal node has an infinite threshold.",
                   "Tree invariant broken: an internal node has no threshold and no category set.")
