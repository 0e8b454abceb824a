"""What every parser shares: the list of supported models, the error that names
it (:func:`describe_unsupported`), and :func:`build_tree`, which turns a
parser's node dicts into a :class:`core.model.tree.Tree`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, TypedDict

import numpy as np

from core.errors import ModelError, UnsupportedModelError
from core.model.ensemble import TreeEnsemble
from core.model.tree import Tree, category_bits_from_sets
from core.typing import ModelLike

__all__ = ["SUPPORTED_MODELS", "EnsembleHeader", "describe_unsupported", "build_tree", "resolve_redirects",
           "drop_last_level"]


class EnsembleHeader(TypedDict):
    """What a scikit-learn model says of its inputs, as every :class:`TreeEnsemble` made from one takes it."""

    n_features: int
    feature_names: tuple[str, ...]
    source: str


SUPPORTED_MODELS = (
    "scikit-learn: DecisionTreeClassifier, DecisionTreeRegressor, RandomForestClassifier, "
    "RandomForestRegressor, ExtraTreesClassifier, ExtraTreesRegressor, "
    "GradientBoostingClassifier, GradientBoostingRegressor, HistGradientBoostingClassifier, "
    "HistGradientBoostingRegressor (identity-link losses), IsolationForest; "
    "XGBoost: XGBClassifier, XGBRegressor, Booster (binary:logistic, multi:softprob, "
    "multi:softmax, reg:squarederror); "
    "LightGBM: LGBMClassifier, LGBMRegressor, Booster (binary, multiclass, regression); "
    "CatBoost: JSON export (save_model(format='json')), .cbm with the catboost package "
    "(Logloss, MultiClass, RMSE and other identity losses; float and one-hot categorical splits); "
    "ONNX: .onnx files whose graph is one ai.onnx.ml tree-ensemble operator (TreeEnsembleClassifier, "
    "TreeEnsembleRegressor, TreeEnsemble) with the converters' wrapper nodes (skl2onnx, onnxmltools)"
)


def describe_unsupported(model: ModelLike) -> UnsupportedModelError:
    return UnsupportedModelError(
        f"Unsupported model type {type(model).__module__}.{type(model).__name__}. "
        f"Supported: {SUPPORTED_MODELS}."
    )


def build_tree(nodes: list[dict[str, Any]], n_outputs: int, n_codes: int | None = None,
               routes_missing: bool = False) -> Tree:
    """Build a ``Tree`` from nodes given as dicts, re-indexed in preorder.

    Each node dict has either ``feature``, ``threshold`` (already in the
    ``x <= t`` convention), ``left`` and ``right`` (indices into ``nodes``),
    or ``value`` (a float or a sequence of length ``n_outputs``). A categorical
    split has ``categories_left`` (the codes that go left) instead of
    ``threshold``; ``n_codes`` (the largest number of codes, missing code
    included, of any categorical feature) sizes the bitsets. Preorder
    numbering guarantees that children come after their parent, and drops
    nodes the root does not reach (pruned or deleted nodes). With
    ``routes_missing`` a threshold node's ``missing_left`` (default False) says
    where a missing value goes (``Tree.missing_left``).
    """
    order = _preorder(nodes)
    new_id = {old: k for k, old in enumerate(order)}
    n = len(order)
    cl = np.full(n, -1, dtype=np.int32)
    cr = np.full(n, -1, dtype=np.int32)
    ft = np.full(n, -1, dtype=np.int32)
    th = np.full(n, np.nan)
    val = np.zeros((n, n_outputs))
    left_sets: list[Any] = [None] * n
    miss = np.zeros(n, dtype=bool) if routes_missing else None
    for k, old in enumerate(order):
        nd = nodes[old]
        if "left" in nd:
            cl[k], cr[k] = new_id[nd["left"]], new_id[nd["right"]]
            ft[k] = nd["feature"]
            if miss is not None:
                miss[k] = bool(nd.get("missing_left", False))
            if "categories_left" in nd:          # categorical split: these codes go left
                left_sets[k] = nd["categories_left"]
            else:
                th[k] = nd["threshold"]
        else:
            val[k] = nd["value"]
    return Tree(cl, cr, ft, th, val, _category_bits(left_sets, n_codes), missing_left=miss)


def _category_bits(left_sets: list[Any], n_codes: int | None) -> np.ndarray | None:
    """The bitsets of the categorical splits (None if the tree has none), sized by ``n_codes``
    or else by the largest code a split sends left."""
    if not any(c is not None for c in left_sets):
        return None
    n_codes = int(n_codes or 1 + max(max(c, default=0) for c in left_sets if c is not None))
    return category_bits_from_sets(left_sets, n_codes)


def _preorder(nodes: list[dict[str, Any]]) -> list[int]:
    """The nodes the root reaches, in preorder; a child out of range or reached twice is refused."""
    order: list[int] = []
    seen: set[int] = set()
    stack = [0]
    while stack:
        i = stack.pop()
        if not isinstance(i, (int, np.integer)) or not 0 <= i < len(nodes):
            raise ModelError(f"A tree of the model points to node {i!r}, which does not exist (the tree has "
                             f"{len(nodes)} nodes): the file is damaged. Re-save the model from its library.")
        if i in seen:   # a child pointing back to an ancestor (or two parents): would loop forever
            raise ModelError(f"A tree of the model reaches node {i} twice (a cycle or a shared child): the file "
                             "is damaged. Re-save the model from its library.")
        seen.add(i)
        order.append(i)
        nd = nodes[i]
        if "left" in nd:
            stack.append(nd["right"])
            stack.append(nd["left"])
    return order


def resolve_redirects(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Node dicts for :func:`build_tree` without redirects: a node ``{"redirect": i}``
    (a split every row passes the same way, to node ``i``) is skipped by pointing its
    parent (or, for the root, node 0's place) past it."""
    def target(i: int) -> int:
        while "redirect" in nodes[i]:
            i = nodes[i]["redirect"]
        return i

    out = []
    for nd in nodes:
        nd = dict(nd)
        if "left" in nd:
            nd["left"], nd["right"] = target(nd["left"]), target(nd["right"])
        out.append(nd)
    root = target(0)
    if root != 0:                                  # the root itself was a redirect: reorder from it
        out[0] = out[root]
    return out


def drop_last_level(ens: TreeEnsemble, features: list[int], route: str) -> TreeEnsemble:
    """The ensemble without the last category level of each of ``features``:
    the missing code moves one down, into that level's place, and takes at
    every split the route ``route`` names: ``"missing"`` (its own: the dropped
    level routed otherwise) or ``"level"`` (the dropped level's: the two routed
    alike). Either way every remaining code and the missing value are predicted
    as before."""
    if not features:
        return ens
    cats = list(ens.categories)
    old: dict[int, int] = {}
    for j in features:
        levels = cats[j]
        if levels is None:
            raise ModelError(f"feature {j} is not categorical: it has no category level to drop.")
        old[j] = len(levels)                         # the old missing code; the new one is one below
        cats[j] = tuple(levels[:-1])
    one = np.uint64(1)
    trees = []
    for t in ens.trees:
        if t.category_bits is None:
            trees.append(t)
            continue
        bits = t.category_bits.copy()
        for i in np.flatnonzero(np.isin(t.feature, list(old)) & np.isnan(t.threshold) & (t.children_left >= 0)):
            k = old[int(t.feature[i])]
            bit = (bits[i, k >> 6] >> np.uint64(k & 63)) & one
            bits[i, k >> 6] &= ~(one << np.uint64(k & 63))
            if route == "missing":
                n = k - 1
                bits[i, n >> 6] = (bits[i, n >> 6] & ~(one << np.uint64(n & 63))) | (bit << np.uint64(n & 63))
        trees.append(replace(t, category_bits=bits))
    return replace(ens, trees=tuple(trees), categories=tuple(cats))
