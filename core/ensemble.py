"""One internal representation for every supported tree-ensemble model.

``TreeEnsemble`` is what every analysis in ``core`` reads. It is built by
:func:`from_model` from a scikit-learn, XGBoost or LightGBM model; the parsers
live in :mod:`core.parsing`, one module per source library.

Tree layout (documented like scikit-learn's ``sklearn/tree/_tree.pyx``)
-----------------------------------------------------------------------
Each :class:`Tree` holds parallel arrays over its ``n_nodes`` nodes; node 0 is
the root and every child has a larger index than its parent:

children_left : ndarray of shape (n_nodes,), dtype int32
    Index of the left child, ``-1`` at a leaf.
children_right : ndarray of shape (n_nodes,), dtype int32
    Index of the right child, ``-1`` at a leaf.
feature : ndarray of shape (n_nodes,), dtype int32
    Feature split on, ``-1`` at a leaf.
threshold : ndarray of shape (n_nodes,), dtype float64
    Split threshold, NaN at a leaf.
value : ndarray of shape (n_nodes, n_outputs), dtype float64
    Leaf output (only read at leaves).
category_bits : ndarray of shape (n_nodes, n_words), dtype uint64
    At a categorical split, bit ``k`` (word ``k // 64``, bit ``k % 64``) is set
    iff category code ``k`` goes left; zero elsewhere. ``n_words`` is 0 when
    the tree has no categorical split.

**One split rule**: at a numerical split a sample goes left iff
``x[feature] <= threshold``, with ``x`` compared as float64; at a categorical
split (``threshold`` is NaN) it goes left iff its category code ``x[feature]``
is in the node's left set (``category_bits``).

Categorical features
--------------------
``TreeEnsemble.categories[j]`` is None for a numerical feature, or the tuple
of the model's categories of feature ``j`` (their original values: str, int,
float or bool). Such a feature is given to the ensemble as an integer *code*:
``0 .. K-1`` for the ``K`` categories, and ``K`` (:meth:`TreeEnsemble.missing_code`)
for a missing or unseen value, routed at every split as the source library
routes one. Every split on a categorical feature is a categorical split. The parsers fold every library's own convention
into the threshold: scikit-learn casts X to float32 and tests
``float32(x) <= t``; XGBoost tests ``float32(x) < t`` with a float32 ``t``;
LightGBM tests ``x <= t`` in double precision. For the float32 rules the
stored threshold is the largest float64 ``T`` with
``float32(x) <= a  <=>  x <= T`` (rounding to float32 is monotone, so such
a ``T`` exists); see :func:`float32_le_bound`.

Aggregation
-----------
``raw = base_score + combine_t value_t[leaf_t(x)]`` with ``combine`` a sum
(boosting) or a mean (forests), of shape (n_samples, n_outputs). Then
``link`` maps raw to the model's output: ``"identity"`` (forest class
probabilities, regression values), ``"sigmoid"`` (binary boosting, with
``sigmoid_scale``), ``"softmax"`` (multiclass boosting) or ``"isolation"``
(Isolation Forest: raw is the mean path length, score ``-2**(-raw/c)``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

import numpy as np

from core.errors import ModelError, UnsupportedModelError
from core.jsonable import plain

try:  # compiled traversal (core/_treewalk.c); numpy does the same more slowly
    from core import _treewalk
except ImportError:  # pragma: no cover - no C compiler at install time
    _treewalk = None

#: set to False to force the numpy traversal (tests compare both)
USE_COMPILED = _treewalk is not None

__all__ = [
    "Tree",
    "TreeEnsemble",
    "from_model",
    "float32_le_bound",
    "SUPPORTED_MODELS",
    "category_bits_from_sets",
]

Link = Literal["identity", "sigmoid", "softmax", "isolation"]
Task = Literal["classification", "regression", "anomaly"]


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
    """One tree as parallel node arrays; see the module docstring."""

    children_left: np.ndarray
    children_right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    value: np.ndarray
    category_bits: np.ndarray | None = None

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
        bits = (np.zeros((n, 0), dtype=np.uint64) if self.category_bits is None
                else np.ascontiguousarray(self.category_bits, dtype=np.uint64))
        if bits.ndim != 2 or bits.shape[0] != n:
            raise ModelError(f"category_bits has shape {bits.shape}; expected ({n}, n_words).")
        if np.any(ft[internal] < 0):
            raise ModelError("Tree invariant broken: an internal node has no feature.")
        if np.any(np.isinf(th[internal])):
            raise ModelError("Tree invariant broken: an internal node has an infinite threshold.")
        cat = internal & np.isnan(th)
        if cat.any() and bits.shape[1] == 0:
            raise ModelError("Tree invariant broken: an internal node has no threshold and no category set.")
        bits = np.where((~cat)[:, None], np.uint64(0), bits).astype(np.uint64)
        ft = np.where(leaf, -1, ft).astype(np.int32)
        th = np.where(leaf, np.nan, th)
        for name, arr in (("children_left", cl), ("children_right", cr), ("feature", ft),
                          ("threshold", th), ("value", val), ("category_bits", bits)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    @property
    def n_nodes(self) -> int:
        return int(self.children_left.shape[0])

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
        words = self.category_bits[node]
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
            c = cat[nd]
            if c.any():
                go_left[c] = _bits_hold(self.category_bits[nd[c]], v[c])
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


@dataclass(frozen=True, eq=False)
class TreeEnsemble:
    """A tree ensemble in one representation; see the module docstring.

    Attributes
    ----------
    trees : tuple of Tree
    n_features : int
    feature_names : tuple of str, length n_features
    task : "classification", "regression" or "anomaly"
    aggregation : "sum" or "mean" over trees
    link : "identity", "sigmoid", "softmax" or "isolation"
    base_score : ndarray of shape (n_outputs,), added to the aggregate
    classes : ndarray of shape (n_classes,) or None (regression, anomaly)
    sigmoid_scale : float, ``proba = 1 / (1 + exp(-scale * raw))``
    positive_at_tie : bool, binary sigmoid models whose ``predict`` gives the
        positive class at ``raw == 0`` (scikit-learn's gradient boosting)
    source : str, e.g. ``"sklearn.RandomForestClassifier"``
    meta : dict, family-specific constants (Isolation Forest: ``c``, ``offset``);
        ``meta["input"]`` says how the source model takes its input (see
        :mod:`core.parsing.native`).
    categories : tuple of length n_features (or empty: no categorical feature),
        None for a numerical feature, the tuple of category values of a
        categorical one (see the module docstring).
    """

    trees: tuple[Tree, ...]
    n_features: int
    feature_names: tuple[str, ...]
    task: Task
    aggregation: Literal["sum", "mean"]
    link: Link
    base_score: np.ndarray
    classes: np.ndarray | None = None
    sigmoid_scale: float = 1.0
    positive_at_tie: bool = False
    source: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    categories: tuple[tuple[Any, ...] | None, ...] = ()

    def __post_init__(self) -> None:
        if not self.trees:
            raise ModelError("The model has no trees.")
        object.__setattr__(self, "trees", tuple(self.trees))
        base = np.atleast_1d(np.asarray(self.base_score, dtype=np.float64)).copy()
        n_out = self.trees[0].value.shape[1]
        if any(t.value.shape[1] != n_out for t in self.trees):
            raise ModelError("All trees must have the same number of outputs.")
        if base.shape != (n_out,):
            raise ModelError(f"base_score has shape {base.shape}; expected ({n_out},).")
        base.setflags(write=False)
        object.__setattr__(self, "base_score", base)
        names = tuple(str(n) for n in self.feature_names)
        if len(names) != self.n_features:
            raise ModelError(f"{len(names)} feature names for {self.n_features} features.")
        object.__setattr__(self, "feature_names", names)
        cats = tuple(self.categories) or (None,) * self.n_features
        if len(cats) != self.n_features:
            raise ModelError(f"categories has {len(cats)} entries for {self.n_features} features.")
        cats = tuple(None if c is None else tuple(c) for c in cats)
        object.__setattr__(self, "categories", cats)
        is_cat = np.array([c is not None for c in cats], dtype=bool)
        n_codes = np.array([0 if c is None else len(c) + 1 for c in cats], dtype=np.int64)
        for t in self.trees:
            used = t.feature[t.feature >= 0]
            if used.size and used.max() >= self.n_features:
                raise ModelError("A tree splits on a feature index beyond n_features.")
            internal = t.children_left >= 0
            cat_node = t.is_categorical
            if np.any(cat_node != (internal & is_cat[np.maximum(t.feature, 0)])):
                raise ModelError("A categorical split is on a numerical feature, or a threshold split on a "
                                 "categorical feature.")
            for i in np.flatnonzero(cat_node):
                k = int(n_codes[t.feature[i]])
                extra = t.category_bits[i].copy()
                if k < 64 * extra.size:  # no bit beyond the feature's codes
                    w = k >> 6
                    if w < extra.size:
                        extra[w] &= ~np.uint64((1 << (k & 63)) - 1)
                    extra[:w] = 0
                    if extra.any():
                        raise ModelError(f"A categorical split sends a code beyond the {k} codes of feature "
                                         f"{self.feature_names[t.feature[i]]!r} left.")
        if self.classes is not None:
            object.__setattr__(self, "classes", np.asarray(self.classes))
        object.__setattr__(self, "_flat", _flatten(self.trees))

    # ------------------------------------------------------------------ shape
    @property
    def n_trees(self) -> int:
        return len(self.trees)

    @property
    def n_outputs(self) -> int:
        return int(self.base_score.shape[0])

    @property
    def n_classes(self) -> int:
        return 0 if self.classes is None else int(len(self.classes))

    @property
    def is_classifier(self) -> bool:
        return self.task == "classification"

    @property
    def max_depth(self) -> int:
        return max(t.max_depth for t in self.trees)

    @property
    def n_leaves(self) -> int:
        return int(sum(int(t.is_leaf.sum()) for t in self.trees))

    @property
    def categorical_features(self) -> list[int]:
        """Indices of the categorical features."""
        return [j for j, c in enumerate(self.categories) if c is not None]

    def is_categorical(self, j: int) -> bool:
        return self.categories[j] is not None

    def n_codes(self, j: int) -> int:
        """Number of codes of categorical feature ``j``: its categories plus the missing code."""
        c = self.categories[j]
        if c is None:
            raise ValueError(f"Feature {self.feature_names[j]!r} is numerical, not categorical.")
        return len(c) + 1

    def missing_code(self, j: int) -> int:
        """The code standing for a missing or unseen value of categorical feature ``j``."""
        return self.n_codes(j) - 1

    def category_label(self, j: int, code: Any) -> str:
        """The category a code of feature ``j`` stands for, as text."""
        c = self.categories[j]
        k = int(code)
        if k == len(c):
            return "(missing)"
        return str(c[k])

    def feature_index(self, f: int | str) -> int:
        """Index of a feature given by index or name."""
        if isinstance(f, (int, np.integer)):
            if not 0 <= int(f) < self.n_features:
                raise ValueError(f"Feature index {f} is out of range 0..{self.n_features - 1}.")
            return int(f)
        try:
            return self.feature_names.index(str(f))
        except ValueError:
            raise ValueError(
                f"Unknown feature {f!r}; the model's features are {list(self.feature_names)}."
            ) from None

    # ------------------------------------------------------------- structure
    def split_counts(self) -> np.ndarray:
        """Number of splits on each feature over all trees, shape (n_features,)."""
        f = self._flat["feature_raw"]
        return np.bincount(f[f >= 0].astype(np.int64), minlength=self.n_features)

    def split_levels(self, j: int) -> np.ndarray:
        """Sorted distinct thresholds on numerical feature ``j`` over all trees.

        For a categorical feature: the half-integers ``0.5 .. n_codes - 1.5``
        between its codes, so that every code is a cell of its own on the grid
        of split levels the analyses use."""
        if self.categories[j] is not None:
            return np.arange(self.n_codes(j) - 1) + 0.5
        f, t = self._flat["feature_raw"], self._flat["threshold_raw"]
        return np.unique(t[(f == j) & ~np.isnan(t)])

    def leaf_boxes(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per tree, ``(leaves, lower, upper)`` as in :meth:`Tree.leaf_boxes`;
        categorical features are unbounded here, see :meth:`leaf_category_masks`."""
        cache = self._flat.setdefault("leaf_boxes", None)
        if cache is None:
            cache = [t.leaf_boxes(self.n_features) for t in self.trees]
            self._flat["leaf_boxes"] = cache
        return cache

    def leaf_category_masks(self) -> list[dict[int, np.ndarray]]:
        """Per tree, ``{j: bool array (n_leaves, n_codes(j))}``: the codes of each
        categorical feature that each leaf (in :meth:`leaf_boxes` order) admits."""
        cache = self._flat.setdefault("leaf_category_masks", None)
        if cache is None:
            n_codes = {j: self.n_codes(j) for j in self.categorical_features}
            cache = []
            for t in self.trees:
                leaves = np.flatnonzero(t.is_leaf)
                cache.append({j: m[leaves] for j, m in node_category_masks(t, n_codes).items()})
            self._flat["leaf_category_masks"] = cache
        return cache

    def used_features(self) -> np.ndarray:
        """Indices of the features that at least one split uses."""
        f = self._flat["feature_raw"]
        return np.unique(f[f >= 0])

    # ------------------------------------------------------------ prediction
    def _check_X(self, X: Any) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim == 1:
            X = X[None, :]
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(
                f"X has shape {X.shape}; the model expects (n_samples, {self.n_features})."
            )
        if np.isnan(X).any():
            raise ValueError(
                "X contains NaN: missing values are not supported; impute or drop those rows first."
            )
        for j in self.categorical_features:
            col = X[:, j]
            bad = (col < 0) | (col >= self.n_codes(j)) | (col != np.floor(col))
            if bad.any():
                raise ValueError(
                    f"Column {self.feature_names[j]!r} is categorical: it takes integer codes 0..{self.n_codes(j) - 1}, "
                    f"got {col[bad][0]!r}."
                )
        return np.ascontiguousarray(X)

    def apply(self, X: Any) -> np.ndarray:
        """Leaf node index per row and tree, shape (n_samples, n_trees)."""
        X = self._check_X(X)
        fl = self._flat
        if USE_COMPILED and _treewalk is not None:
            out = np.empty((X.shape[0], self.n_trees), dtype=np.int64)
            _in_threads(lambda a, b: _treewalk.apply(X, fl["packed"], fl["packed_roots"], fl["packed_bits"], out,
                                                     X.shape[1], a, b),
                        X.shape[0], self.n_trees)
            out = fl["packed_to_node"][out]
        else:
            out = _apply_flat(fl, X)
        return out - fl["offsets"][None, :]

    def predict_raw(self, X: Any) -> np.ndarray:
        """Aggregated leaf values plus base score, shape (n_samples, n_outputs).

        Forest classifiers: mean class probabilities. Boosting: margins.
        Regression: predicted values. Isolation Forest: mean path length.
        """
        X = self._check_X(X)
        fl = self._flat
        if USE_COMPILED and _treewalk is not None:
            out = np.zeros((X.shape[0], self.n_outputs))
            _in_threads(lambda a, b: _treewalk.accumulate(X, fl["packed"], fl["packed_roots"], fl["packed_bits"],
                                                          fl["packed_value"], self.n_outputs, out,
                                                          X.shape[1], a, b),
                        X.shape[0], self.n_trees)
        else:
            out = np.empty((X.shape[0], self.n_outputs))
            step = max(1, 2_000_000 // max(1, self.n_trees))
            for s in range(0, X.shape[0], step):
                out[s:s + step] = fl["value"][_apply_flat(fl, X[s:s + step])].sum(axis=1)
        if self.aggregation == "mean":
            out /= self.n_trees
        return out + self.base_score

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities, shape (n_samples, n_classes), in ``classes`` order."""
        if not self.is_classifier:
            raise ValueError(f"predict_proba needs a classifier; this model is a {self.task} model.")
        raw = self.predict_raw(X)
        return self.proba_from_raw(raw)

    def proba_from_raw(self, raw: np.ndarray) -> np.ndarray:
        """Class probabilities from aggregated raw outputs (``predict_raw``, or a
        region's ``raw``): the link of the model applied."""
        if self.link == "sigmoid":
            p = 1.0 / (1.0 + np.exp(-self.sigmoid_scale * raw[:, 0]))
            return np.column_stack([1.0 - p, p])
        if self.link == "softmax":
            z = raw - raw.max(axis=1, keepdims=True)
            e = np.exp(z)
            return e / e.sum(axis=1, keepdims=True)
        return raw / np.maximum(raw.sum(axis=1, keepdims=True), np.finfo(float).tiny)

    def predict(self, X: Any) -> np.ndarray:
        """Labels (classifiers, in the source model's label set), values
        (regression), or +1 inlier / -1 outlier (Isolation Forest)."""
        raw = self.predict_raw(X)
        if self.task == "regression":
            return raw[:, 0].copy()
        if self.task == "anomaly":
            return np.where(self._decision_from_raw(raw) >= 0, 1, -1)
        if self.link == "sigmoid":
            pos = raw[:, 0] >= 0 if self.positive_at_tie else raw[:, 0] > 0
            return self.classes[pos.astype(int)]
        return self.classes[np.argmax(self.proba_from_raw(raw), axis=1)]

    # ------------------------------------------------------- isolation forest
    def _decision_from_raw(self, raw: np.ndarray) -> np.ndarray:
        return self._score_from_raw(raw) - self.meta["offset"]

    def _score_from_raw(self, raw: np.ndarray) -> np.ndarray:
        c = self.meta["c"]
        return -(2.0 ** (-raw[:, 0] / c)) if c > 0 else -np.ones(raw.shape[0])

    def score_samples(self, X: Any) -> np.ndarray:
        """Isolation Forest anomaly score (as scikit-learn's ``score_samples``)."""
        if self.task != "anomaly":
            raise ValueError("score_samples is defined for Isolation Forest models only.")
        return self._score_from_raw(self.predict_raw(X))

    def decision_function(self, X: Any) -> np.ndarray:
        """Isolation Forest ``score_samples - offset`` (negative = outlier)."""
        if self.task != "anomaly":
            raise ValueError("decision_function is defined for Isolation Forest models only.")
        return self._decision_from_raw(self.predict_raw(X))

    def summary(self) -> dict[str, Any]:
        """Plain facts about the model for display."""
        return {
            "family": self.source,
            "task": self.task,
            "trees": self.n_trees,
            "max depth": self.max_depth,
            "leaves": self.n_leaves,
            "features": self.n_features,
            "features used": int(self.used_features().size),
            "categorical features": len(self.categorical_features),
            "classes": None if self.classes is None else [str(c) for c in self.classes],
        }

    # ------------------------------------------------------ arrays round trip
    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Plain arrays and JSON-able metadata that :meth:`from_arrays` turns back
        into this ensemble: no pickle, so they can cross a process boundary from
        an untrusted parse (``np.savez`` / ``json``)."""
        cat_w = max((t.category_bits.shape[1] for t in self.trees), default=0)
        bits = np.concatenate([np.pad(t.category_bits, ((0, 0), (0, cat_w - t.category_bits.shape[1])))
                               for t in self.trees]).astype(np.uint64)
        arrays = {
            "node_counts": np.array([t.n_nodes for t in self.trees], dtype=np.int64),
            "children_left": np.concatenate([t.children_left for t in self.trees]),
            "children_right": np.concatenate([t.children_right for t in self.trees]),
            "feature": np.concatenate([t.feature for t in self.trees]),
            "threshold": np.concatenate([t.threshold for t in self.trees]),
            "value": np.concatenate([t.value for t in self.trees]),
            "category_bits": bits,
            "base_score": np.asarray(self.base_score, dtype=np.float64),
        }
        meta = {
            "n_features": int(self.n_features), "feature_names": list(self.feature_names),
            "task": self.task, "aggregation": self.aggregation, "link": self.link,
            "classes": None if self.classes is None else [plain(c) for c in self.classes],
            "sigmoid_scale": float(self.sigmoid_scale), "positive_at_tie": bool(self.positive_at_tie),
            "source": self.source, "meta": plain(self.meta),
            "categories": [None if c is None else [plain(v) for v in c] for c in self.categories],
        }
        return arrays, meta

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> "TreeEnsemble":
        """Rebuild an ensemble from :meth:`to_arrays` output, checking every invariant again."""
        try:
            counts = np.asarray(arrays["node_counts"], dtype=np.int64)
            total = int(counts.sum())
            if counts.ndim != 1 or counts.size == 0 or np.any(counts <= 0):
                raise ModelError("The parsed model has no trees or an empty tree.")
            cols = {k: np.asarray(arrays[k]) for k in ("children_left", "children_right", "feature", "threshold",
                                                        "value", "category_bits")}
            if any(len(v) != total for v in cols.values()):
                raise ModelError("The parsed model's arrays do not add up to its node counts.")
            bounds = np.concatenate([[0], np.cumsum(counts)])
            trees = tuple(Tree(*(cols[k][a:b] for k in ("children_left", "children_right", "feature",
                                                         "threshold", "value", "category_bits")))
                          for a, b in zip(bounds[:-1], bounds[1:]))
            classes = meta.get("classes")
            return cls(trees, n_features=int(meta["n_features"]), feature_names=tuple(meta["feature_names"]),
                       task=meta["task"], aggregation=meta["aggregation"], link=meta["link"],
                       base_score=np.asarray(arrays["base_score"], dtype=np.float64),
                       classes=None if classes is None else np.asarray(classes),
                       sigmoid_scale=float(meta.get("sigmoid_scale", 1.0)),
                       positive_at_tie=bool(meta.get("positive_at_tie", False)), source=str(meta.get("source", "")),
                       meta=_unplain(dict(meta.get("meta") or {})),
                       categories=tuple(None if c is None else tuple(c) for c in meta.get("categories") or ()))
        except (KeyError, TypeError, IndexError) as exc:
            raise ModelError(f"The parsed model is incomplete ({type(exc).__name__}: {exc}).") from None

    def content_hash(self) -> str:
        """SHA-256 of the ensemble's arrays and metadata: equal for equal models,
        whatever file or training run they came from (a cache key)."""
        cache = self._flat.get("content_hash")
        if cache is None:
            arrays, meta = self.to_arrays()
            h = hashlib.sha256(json.dumps(meta, sort_keys=True, default=str).encode())
            for k in sorted(arrays):
                a = np.ascontiguousarray(arrays[k])
                h.update(f"{k}:{a.dtype.str}:{a.shape}".encode())
                h.update(a.tobytes())
            cache = self._flat["content_hash"] = h.hexdigest()
        return cache


def _unplain(meta: dict[str, Any]) -> dict[str, Any]:
    if isinstance(meta.get("iteration_range"), list):
        meta["iteration_range"] = tuple(meta["iteration_range"])
    return meta


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
    words = max(t.category_bits.shape[1] for t in trees)
    bits = np.concatenate([np.pad(t.category_bits, ((0, 0), (0, words - t.category_bits.shape[1])))
                           for t in trees]) if words else np.zeros((len(cat_node), 0), dtype=np.uint64)
    packed = _pack(trees, offsets)
    packed["packed_value"] = np.ascontiguousarray(value[packed["packed_to_node"]])
    return {"left": left, "right": right, "feature": feat, "threshold": thr,
            "feature_raw": feat_raw, "threshold_raw": thr_raw, "value": value,
            "offsets": offsets, "depth": depth, "cat_node": cat_node, "cat_bits": bits, **packed}


PACKED_NODE = np.dtype([("threshold", "<f8"), ("feature", "<i4"), ("left", "<i4")])


def _pack(trees: Sequence[Tree], offsets: np.ndarray) -> dict[str, np.ndarray]:
    """Nodes as 16-byte records for the compiled walk (core/_treewalk.c).

    Each tree is laid out breadth first with the two children of a node side
    by side (right = left + 1), so one step reads one record. A categorical
    split stores ``-(feature + 2)`` as its feature and, as its threshold, the
    offset of its left-set words in ``packed_bits``; a leaf has feature -1.
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
        if cat.any():
            w = t.category_bits.shape[1]
            rec["feature"][cat] = -(t.feature[order][cat] + 2)
            rec["threshold"][cat] = pool_size + w * np.arange(int(cat.sum()))
            pool.append(t.category_bits[order][cat].ravel())
            pool_size += w * int(cat.sum())
        inner = t.children_left[order] >= 0
        rec["left"][inner] = pos[t.children_left[order][inner]] + base
        parts.append(rec)
        to_node.append(order + off)
        roots.append(base)
        base += t.n_nodes
    if base >= 2**31:
        raise ModelError("The model has more than 2^31 nodes; it is too large to analyse.")
    to_node_arr = np.concatenate(to_node)
    bits = np.concatenate(pool).astype(np.uint64) if pool else np.zeros(1, dtype=np.uint64)
    return {"packed": np.concatenate(parts), "packed_roots": np.array(roots, dtype=np.int64),
            "packed_to_node": to_node_arr, "packed_bits": np.ascontiguousarray(bits)}


def _in_threads(fn: Any, n_rows: int, n_trees: int) -> None:
    """Run ``fn(start, stop)`` over row ranges, in two threads for large jobs
    (the compiled walk releases the GIL)."""
    import os

    n_threads = min(os.cpu_count() or 1, 4) if n_rows * n_trees >= 200_000 else 1
    if n_threads == 1:
        fn(0, n_rows)
        return
    from concurrent.futures import ThreadPoolExecutor

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
    for _ in range(fl["depth"]):
        v = Xf[row_base + feat[nodes]]
        go = v <= thr[nodes]
        if has_cat:
            c = cat_node[nodes]
            if c.any():
                go[c] = _bits_hold(cat_bits[nodes[c]], v[c])
        nodes = np.where(go, left[nodes], right[nodes])
    return nodes


SUPPORTED_MODELS = (
    "scikit-learn: DecisionTreeClassifier, DecisionTreeRegressor, RandomForestClassifier, "
    "RandomForestRegressor, ExtraTreesClassifier, ExtraTreesRegressor, "
    "GradientBoostingClassifier, GradientBoostingRegressor, IsolationForest; "
    "XGBoost: XGBClassifier, XGBRegressor, Booster (binary:logistic, multi:softprob, "
    "multi:softmax, reg:squarederror); "
    "LightGBM: LGBMClassifier, LGBMRegressor, Booster (binary, multiclass, regression); "
    "CatBoost: JSON export (save_model(format='json')), .cbm with the catboost package "
    "(Logloss, MultiClass, RMSE and other identity losses; float and one-hot categorical splits)"
)


def from_model(model: Any, *, feature_names: Sequence[str] | None = None,
               verify: bool = True) -> TreeEnsemble:
    """Convert a fitted model into a :class:`TreeEnsemble`.

    Parameters
    ----------
    model : a fitted model of a supported family (see ``SUPPORTED_MODELS``),
        or a ``TreeEnsemble`` (returned as is, renamed if names are given).
    feature_names : optional names overriding the model's own.
    verify : if True, predictions of the result are compared with the source
        model's on random points and points on the split thresholds; a
        mismatch raises ``UnsupportedModelError`` rather than returning an
        approximation.

    Raises
    ------
    UnsupportedModelError
        For an unsupported type, objective or split kind.
    """
    from core.parsing import parse

    ens = model if isinstance(model, TreeEnsemble) else parse(model)
    if feature_names is not None:
        if len(feature_names) != ens.n_features:
            raise ValueError(
                f"{len(feature_names)} feature names given; the model has {ens.n_features} features."
            )
        ens = _replace(ens, feature_names=tuple(feature_names))
    if verify and not isinstance(model, TreeEnsemble):
        from core.parsing import verify_against_source

        verify_against_source(ens, model)
    return ens


def _replace(ens: TreeEnsemble, **changes: Any) -> TreeEnsemble:
    from dataclasses import replace

    return replace(ens, **changes)


def describe_unsupported(model: Any) -> UnsupportedModelError:
    return UnsupportedModelError(
        f"Unsupported model type {type(model).__module__}.{type(model).__name__}. "
        f"Supported: {SUPPORTED_MODELS}."
    )
