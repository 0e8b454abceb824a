"""Missing values as a state of a feature, for the analyses.

A model that routes missing values (``TreeEnsemble.routes_missing``: XGBoost's
and LightGBM's default directions, scikit-learn's ``missing_go_to_left``)
sends a NaN of feature ``j`` to one side at each split on ``j``, a side that
may differ from split to split: no number stands for "missing". The analyses
need rows without NaN, so :func:`expand` rewrites the ensemble, exactly, over
the same columns plus one 0/1 column ``"j is missing"`` per feature that may
be missing (like :mod:`core.model.categorical`, which gives each category a column):

* a split ``x[j] <= t`` with NaN going to side ``m`` becomes the test
  ``x[j is missing] > 0.5``: yes leads to a copy of the subtree below in which
  every split on ``j`` takes its missing side ``m``; no leads to a copy with
  the split ``x[j] <= t`` and no further missing test on ``j`` (on each path
  the indicator of ``j`` is tested once, at its first split);
* a split that only separates missing values (threshold
  :data:`core.model.tree.MISSING_ONLY`: every number left) becomes the indicator
  test alone, or, for a feature that is never missing in the data, its left
  child.

The rewritten ensemble gives the same output as the original on every row
where ``x[j]`` is any number and the indicator is 0, or the indicator is 1
(whatever ``x[j]`` holds): tests compare it with the original on rows with
NaN. Where a value is missing its column holds a fill value (the column's
median), so that giving it a value costs what moving from the median costs,
plus the indicator's own weight (0 by default, set by the analyst); a
counterfactual may leave "missing" (the indicator may decrease) but a value
never becomes missing (the schema makes the indicator decrease-only).
``meta["input"] = "missing"`` lets :func:`core.model.native.model_input`
give the source model NaN where the indicator is 1, so every counterfactual is
still checked on the original model.

Missing as one more level of the grid (:func:`banded`)
------------------------------------------------------
The rewrite above tests the indicator once per path and copies the subtree
below for each state: a leaf that both numbers and missing values reach is
there twice (Adult's HGB: 7,837 leaves against 3,098). For a query whose value
of ``j`` is missing and may be given one, :func:`banded` instead reads
"missing" as the band ``x > p1`` of ``j``'s own column, above every split level
and value the column holds (:func:`band_cut`). A split whose missing side is
the right one (XGBoost's and LightGBM's usual default) routes the band as a
number, unchanged; a split that sends missing values left gets the band cut
off at ``p1`` and sent left, as the rewrite would. So no leaf is copied where
the rewrite did not copy it, and a leaf on a path of right-going missing
values is not copied at all (Adult: about 3,600 leaves). The band's points are
decoded as NaN for the source model (:func:`to_native`).
"""

from __future__ import annotations

import sys
import weakref
from typing import Any, Sequence

import numpy as np

from core.errors import SchemaError, UnsupportedModelError
from core.model.ensemble import TreeEnsemble, _replace
from core.model.features import names_text
from core.model.tree import MISSING_ONLY, Tree

__all__ = ["expand", "indicator_name", "to_native", "info", "settled", "banded", "band_cut", "MAX_NODES", "SUFFIX",
           "missing_as_states"]

MAX_NODES = 3_000_000
SUFFIX = " is missing"


def indicator_name(feature: str) -> str:
    return f"{feature}{SUFFIX}"


def info(ens: TreeEnsemble) -> dict[str, Any] | None:
    """``{"features": [...], "indicators": [...], "fill": [...], "n_features": d,
    "input": ...}`` of an ensemble rewritten by :func:`expand`, else None."""
    return ens.meta.get("missing") if ens.meta.get("input") == "missing" else None


def indicator_of(ens: TreeEnsemble) -> dict[int, int]:
    """Feature index -> the index of its "is missing" column (empty when none)."""
    got = info(ens)
    return {} if got is None else {int(j): int(k) for j, k in zip(got["features"], got["indicators"])}


def to_native(meta: dict[str, Any], X: np.ndarray) -> np.ndarray:
    """Rows of the rewritten ensemble as rows of the original: NaN where an
    indicator is 1, the indicator columns dropped."""
    got = meta["missing"]
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    out = X[:, :int(got["n_features"])].copy()
    band = {int(j): float(p1) for j, p1, _ in got.get("band", ())}
    for j, k in zip(got["features"], got["indicators"]):
        if j in band:                                   # rows of a banded ensemble: the band is missing
            out[X[:, j] > band[j], j] = np.nan
        else:
            out[X[:, k] > 0.5, j] = np.nan
    return out


class _Nodes:
    """A tree being written node by node, each node after its parent (the rewrites below)."""

    def __init__(self, tree: Tree, max_nodes: int, too_big: str):
        self.cl: list[int] = []
        self.cr: list[int] = []
        self.ft: list[int] = []
        self.th: list[float] = []
        self.val: list[np.ndarray] = []
        self.cb: list[np.ndarray] = []
        self.words = tree.bits.shape[1]
        self.max_nodes, self.too_big = max_nodes, too_big

    def new(self, feature: int, threshold: float, value: np.ndarray, b: np.ndarray | None = None) -> int:
        """A node without children yet (a leaf until :meth:`link` gives it two)."""
        if len(self.cl) >= self.max_nodes:
            raise UnsupportedModelError(self.too_big.format(self.max_nodes))
        self.cl.append(-1)
        self.cr.append(-1)
        self.ft.append(feature)
        self.th.append(threshold)
        self.val.append(value)
        if self.words:
            self.cb.append(np.zeros(self.words, dtype=np.uint64) if b is None else b)
        return len(self.cl) - 1

    def link(self, k: int, left: int, right: int) -> int:
        self.cl[k], self.cr[k] = left, right
        return k

    def tree(self) -> Tree:
        return Tree(np.array(self.cl), np.array(self.cr), np.array(self.ft), np.array(self.th), np.array(self.val),
                    np.array(self.cb) if self.words else None)


def _rewrite(tree: Tree, ind: dict[int, int], max_nodes: int) -> Tree:
    nodes = _Nodes(tree, max_nodes, "Reading missing values as a state of their features would grow this model past "
                                    "{:,} nodes; impute the missing values (or drop those rows) and upload again.")
    new = nodes.new
    bits = tree.bits
    has_bits = nodes.words > 0
    miss = tree.missing_left if tree.missing_left is not None else np.zeros(tree.n_nodes, dtype=bool)

    zero = np.zeros(tree.value.shape[1])

    def build(i: int, state: dict[int, bool]) -> int:
        while tree.children_left[i] >= 0:                 # splits this path settles: skipped
            j, t = int(tree.feature[i]), float(tree.threshold[i])
            if np.isnan(t):                               # categorical: kept
                break
            known = state.get(j, None if j in ind else False)
            if known is None:
                break
            if known:                                     # missing: its side at every split
                i = int(tree.children_left[i] if miss[i] else tree.children_right[i])
            elif t >= MISSING_ONLY:                       # a number: left of a split on NaN only
                i = int(tree.children_left[i])
            else:
                break
        if tree.children_left[i] < 0:
            return new(-1, np.nan, tree.value[i])
        j, t = int(tree.feature[i]), float(tree.threshold[i])
        if not np.isnan(t) and j in ind and j not in state:   # first split on j here: its indicator
            k = new(ind[j], 0.5, zero)
            return nodes.link(k, build(i, {**state, j: False}), build(i, {**state, j: True}))
        k = new(j, t, zero, bits[i] if has_bits and np.isnan(t) else None)
        return nodes.link(k, build(int(tree.children_left[i]), state), build(int(tree.children_right[i]), state))

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 4 * tree.max_depth + 200))
    try:
        build(0, {})
    finally:
        sys.setrecursionlimit(old)
    return nodes.tree()


def expand(ens: TreeEnsemble, features: Sequence[int], fill: Sequence[float],
           max_nodes: int = MAX_NODES) -> TreeEnsemble:
    """The same model without NaN routing, one "is missing" column per feature of
    ``features`` (numerical features that may be missing), appended after the
    others; ``fill``: the value each such column holds where missing. ``ens``
    itself when there is nothing to rewrite."""
    features = [int(j) for j in features]
    if any(ens.categories and ens.categories[j] is not None for j in features):
        raise ValueError("A categorical feature's missing value is its missing code, not an indicator column.")
    if features and not ens.routes_missing:
        raise UnsupportedModelError("This model does not take missing values (its library refuses them); impute "
                                    "the missing values (or drop those rows) and upload again.")
    only_nan = any(np.any((t.children_left >= 0) & (t.threshold >= MISSING_ONLY)) for t in ens.trees)
    if not features and not only_nan and not ens.routes_missing:
        return ens
    d = ens.n_features
    ind = {j: d + k for k, j in enumerate(features)}
    trees = tuple(_rewrite(t, ind, max_nodes) for t in ens.trees)
    names = tuple(ens.feature_names) + tuple(indicator_name(ens.feature_names[j]) for j in features)
    cats = (tuple(ens.categories) + (None,) * len(features)) if ens.categories else ()
    meta = dict(ens.meta)
    if features:
        meta.update({"input": "missing",
                     "missing": {"features": features, "indicators": [ind[j] for j in features],
                                 "fill": [float(v) for v in fill], "n_features": d,
                                 "input": ens.meta.get("input", "array")}})
    wide = _replace(ens, trees=trees, n_features=d + len(features), feature_names=names, categories=cats,
                    meta=meta)
    if features:
        wide._flat["missing_source"] = ens        # the routing model, for :func:`banded` (kept when pickled)
    return wide


def band_cut(source: TreeEnsemble, j: int, fill: float) -> tuple[float, float]:
    """``(p1, p2)``: "missing" in column ``j`` is the band ``x > p1`` above every split
    level of ``j`` and its fill, and ``p2`` the point that stands for it."""
    lv = source.split_levels(j)
    lv = lv[lv < MISSING_ONLY]
    top = max(float(lv[-1]) if lv.size else fill, fill)
    p1 = top + max(1.0, abs(top))
    return p1, p1 + max(1.0, abs(p1))


def _band_tree(tree: Tree, band: dict[int, tuple[float, float]], always: set[int], max_nodes: int) -> Tree:
    """One tree of :func:`banded`. Each banded feature carries a state along the
    path: the numbers ``(lo, hi]`` that still reach the node (the band itself
    excluded) and whether the band does. A split whose missing side is the
    band's side by position is kept; one that sends missing values the other
    way is written as splits at ``t``, ``p1`` and ``p2``, one branch per
    segment (the band's segment to the missing side). Features of ``always``
    are missing wherever this tree is read: their splits take the missing side;
    every other feature holds a number: a split on missing values only takes
    its numbers' side."""
    nodes = _Nodes(tree, max_nodes, "Reading missing values as a band of their columns would grow this model past "
                                    "{:,} nodes.")
    new = nodes.new
    bits = tree.bits
    has_bits = nodes.words > 0
    miss = tree.missing_left if tree.missing_left is not None else np.zeros(tree.n_nodes, dtype=bool)
    zero = np.zeros(tree.value.shape[1])

    State = dict[int, tuple[float, float, bool]]

    def build(i: int, st: State) -> int:
        while tree.children_left[i] >= 0:
            j, t = int(tree.feature[i]), float(tree.threshold[i])
            if np.isnan(t):
                break
            if j in always:
                i = int(tree.children_left[i] if miss[i] else tree.children_right[i])
            elif j not in band:
                if t < MISSING_ONLY:
                    break
                i = int(tree.children_left[i])
            else:
                lo, hi, m_in = st[j]
                if not lo < hi:                           # only the band reaches: its side
                    i = int(tree.children_left[i] if miss[i] else tree.children_right[i])
                elif t >= MISSING_ONLY and not m_in:
                    i = int(tree.children_left[i])
                else:
                    return split(i, j, st)
        if tree.children_left[i] < 0:
            return new(-1, np.nan, tree.value[i])
        k = new(int(tree.feature[i]), float(tree.threshold[i]), zero,
                bits[i] if has_bits and np.isnan(tree.threshold[i]) else None)
        return nodes.link(k, build(int(tree.children_left[i]), st), build(int(tree.children_right[i]), st))

    def split(i: int, j: int, st: State) -> int:
        lo, hi, m_in = st[j]
        p1 = band[j][0]
        t = float(tree.threshold[i])
        left, right = int(tree.children_left[i]), int(tree.children_right[i])
        numeric = t < MISSING_ONLY                       # else every number goes left
        to_miss = left if miss[i] else right
        by_position = right if numeric else left         # where the band goes as a number would
        cut_band = m_in and by_position != to_miss
        cuts = ({t} if numeric else set()) | ({p1} if cut_band else set())
        cuts_in = sorted(c for c in cuts if lo < c < hi)
        bounds = [lo, *cuts_in, hi]
        branches = []
        for u, v in zip(bounds[:-1], bounds[1:]):
            if cut_band and u == p1:                     # the band's segment: to the missing side
                branches.append((to_miss, (p1, p1, True)))
            else:
                child = left if (not numeric or v <= t) else right
                branches.append((child, (u, v, m_in and not cut_band and v > p1)))
        return chain(j, cuts_in, branches, st)

    def chain(j: int, cuts: list[float], branches: list, st: State) -> int:
        if not cuts:
            child, s_j = branches[0]
            return build(child, {**st, j: s_j})
        k = new(j, cuts[0], zero)
        return nodes.link(k, build(branches[0][0], {**st, j: branches[0][1]}), chain(j, cuts[1:], branches[1:], st))

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 8 * tree.max_depth + 200))
    try:
        build(0, {j: (-np.inf, np.inf, True) for j in band})
    finally:
        sys.setrecursionlimit(old)
    return nodes.tree()


_BANDED: "weakref.WeakKeyDictionary[TreeEnsemble, dict]" = weakref.WeakKeyDictionary()


def banded(wide: TreeEnsemble, band: dict[int, tuple[float, float]], always: Sequence[int] = ()) -> TreeEnsemble | None:
    """The model ``wide`` (rewritten by :func:`expand`) for queries in which the
    features of ``band`` are missing and may be given a value, "missing" read as
    the band ``x > p1`` of each one's column (:func:`band_cut`; see the module
    docstring), the features of ``always`` missing and staying so, every other
    feature holding a number. Its trees never split on an "is missing" column;
    its ``meta`` tells :func:`to_native` which values are the band. None when
    ``wide`` does not know the model it was rewritten from. Cached per ensemble."""
    source = wide._flat.get("missing_source")
    got = info(wide)
    if source is None or got is None:
        return None
    key = (tuple(sorted((int(j), float(a), float(b)) for j, (a, b) in band.items())),
           tuple(sorted(int(j) for j in always)))
    cache = _BANDED.setdefault(wide, {})
    if key not in cache:
        if len(cache) > 64:
            cache.clear()
        cuts = {int(j): (float(a), float(b)) for j, (a, b) in band.items()}
        trees = tuple(_band_tree(t, cuts, set(key[1]), MAX_NODES) for t in source.trees)
        meta = {**wide.meta, "missing": {**got, "band": [list(v) for v in key[0]]}}
        cache[key] = _replace(wide, trees=trees, meta=meta)
    return cache[key]


_SETTLED: "weakref.WeakKeyDictionary[TreeEnsemble, dict]" = weakref.WeakKeyDictionary()


def _settle_tree(tree: Tree, values: dict[int, float]) -> Tree:
    """``tree`` with every split on a feature of ``values`` replaced by the child that
    value goes to (preorder, so children still come after their parent)."""
    cl, cr, ft, th = tree.children_left, tree.children_right, tree.feature, tree.threshold
    new: dict[int, int] = {}
    out: list[int] = []

    def resolve(i: int) -> int:
        while cl[i] >= 0 and int(ft[i]) in values and not np.isnan(th[i]):
            i = int(cl[i] if values[int(ft[i])] <= th[i] else cr[i])
        return i

    stack = [resolve(0)]
    while stack:
        i = stack.pop()
        new[i] = len(out)
        out.append(i)
        if cl[i] >= 0:
            stack.append(resolve(int(cr[i])))
            stack.append(resolve(int(cl[i])))
    idx = np.array(out)
    a, b = cl[idx], cr[idx]
    left = np.array([new[resolve(int(c))] if c >= 0 else -1 for c in a], dtype=np.int32)
    right = np.array([new[resolve(int(c))] if c >= 0 else -1 for c in b], dtype=np.int32)
    bits = tree.bits[idx] if tree.bits.shape[1] else None
    return Tree(left, right, ft[idx], th[idx], tree.value[idx], bits,
                None if tree.missing_left is None else tree.missing_left[idx])


def settled(ens: TreeEnsemble, values: dict[int, float]) -> TreeEnsemble:
    """``ens`` with the features of ``values`` held at those values: every split on
    them resolved (exact wherever they hold these values). For a query whose "is
    missing" columns cannot move (a known value never becomes missing), the
    subtrees of the other state drop out. Cached per ensemble."""
    if not values:
        return ens
    key = tuple(sorted((int(k), float(v)) for k, v in values.items()))
    cache = _SETTLED.setdefault(ens, {})
    if key not in cache:
        if len(cache) > 64:
            cache.clear()
        vals = dict(key)
        cache[key] = _replace(ens, trees=tuple(_settle_tree(t, vals) for t in ens.trees))
    return cache[key]


def missing_as_states(ens: TreeEnsemble, X: np.ndarray, reference: np.ndarray | None = None, *,
                      error: type[Exception] = SchemaError) -> tuple[Any, np.ndarray, np.ndarray | None]:
    """Rows with missing values read as the app's workspace reads them.

    ``X`` (and ``reference``, e.g. the reference rows of the warm starts) hold
    NaN where a value is missing. Each numerical feature missing somewhere gets
    an "is missing" column, appended after the features in feature order, and
    the ensemble is rewritten exactly over them (:func:`core.model.missing.expand`);
    the value column holds the feature's median where missing (of
    ``reference`` when it has known values, else of ``X``), so giving it a value
    costs the move from the median. Returns ``(ensemble, X, reference)``, the
    same objects when nothing is missing. ``error``: the model does not take
    missing values, or a categorical feature holds NaN (its missing value is a
    code)."""
    tables = [X] + ([reference] if reference is not None else [])
    gaps = np.zeros(ens.n_features, dtype=bool)
    for T in tables:
        gaps |= np.isnan(T).any(axis=0)
    feats = [int(j) for j in np.flatnonzero(gaps)]
    if not feats:
        return ens, X, reference
    names = list(ens.feature_names)
    cats = [j for j in feats if ens.categories and ens.categories[j] is not None]
    if cats:
        raise error(f"Feature {names[cats[0]]!r} is categorical: a missing value is its code "
                    f"{ens.missing_code(cats[0])}, not NaN.")
    if not ens.routes_missing:
        raise error(f"The rows have missing values (NaN) in {names_text([names[j] for j in feats], 6)}, and this "
                    "model does not take missing values (its library refuses them): impute or drop those rows.")
    fill = []
    for j in feats:
        known = tables[-1][:, j]                          # the reference's values, else X's
        known = known[~np.isnan(known)]
        if known.size == 0:
            known = np.concatenate([T[:, j] for T in tables])
            known = known[~np.isnan(known)]
        fill.append(float(np.median(known)) if known.size else 0.0)
    wide = expand(ens, feats, fill)
    values = np.zeros(ens.n_features)
    values[feats] = fill

    def rows(T: np.ndarray) -> np.ndarray:
        nan = np.isnan(T)
        return np.hstack([np.where(nan, values[None, :], T), nan[:, feats].astype(np.float64)])

    return wide, rows(X), None if reference is None else rows(reference)
