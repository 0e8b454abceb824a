"""Native categorical splits as exact one-hot trees, for the analyses.

A model with native categorical splits (LightGBM ``category`` columns, see
:mod:`core.intake.parsing.lightgbm`) tests ``code in S`` at a node. Every analysis
of the app already treats one-hot groups exactly and natively: OCEAN's
categorical constraint (one column of a group hot, switching category costs
the feature's weight once: OCEAN eq. 29; the cell problem of
:mod:`core.optimal`), T-CREx's one-hot/multi-cold rules (appendix A), the
counterfactual rules' groups moved as one, FCCA's binary thresholds, the
audit's fixed protected groups. :func:`expand` therefore rewrites the
ensemble, exactly, over one 0/1 column per category (``"col=level"``):

* a categorical feature ``j`` with categories ``c_0..c_{K-1}`` becomes the
  columns ``j=c_0 .. j=c_{K-1}``; a missing or unseen value is the row with
  all of them 0;
* a node ``code in S -> left, else right`` becomes a chain of tests
  ``x[j=c] > 0.5`` over the codes of the side the missing code does *not*
  take: the first hit sends the row to that side's subtree (a copy per code),
  no hit sends it to the other side, where the missing code goes. The chain
  runs over the smaller eligible side; a split that sends every category and
  the missing code the same way is dropped.

The rewritten ensemble gives the same output as the original on every row
(tests: every code of every categorical feature, missing included). Its
``meta["input"] = "expanded"`` lets :func:`core.model.native.model_input`
turn one-hot rows back into the source model's own input, so every
counterfactual is still checked on the original model. Copies of subtrees can
grow a deep tree with large category sets; past ``MAX_NODES`` the expansion
is refused with a message instead of taking memory without bound.
"""

from __future__ import annotations

import sys
from typing import Any, overload

import numpy as np

from core.errors import ModelError, UnsupportedModelError
from core.model.ensemble import TreeEnsemble, _replace
from core.model.linear import LinearModel
from core.model.tree import Tree

__all__ = ["expand", "decode", "MAX_NODES", "level_name", "OTHER_CODE"]

MAX_NODES = 3_000_000

#: the last category of a feature whose model names only codes (XGBoost without saved
#: categories, :mod:`core.intake.parsing.xgboost`): every code no split lists, routed alike
OTHER_CODE = "(any other code)"


def level_name(feature: str, category: object) -> str:
    return f"{feature}={category}"


def _layout(ens: TreeEnsemble | LinearModel) -> tuple[list[list[int]], list[str]]:
    """Per original feature its new column indices, and the new names."""
    cols: list[list[int]] = []
    names: list[str] = []
    for j, name in enumerate(ens.feature_names):
        cats = ens.categories[j]
        if cats is None:
            cols.append([len(names)])
            names.append(name)
        else:
            cols.append(list(range(len(names), len(names) + len(cats))))
            names.extend(level_name(name, c) for c in cats)
    return cols, names


def _sides(tree: Tree, i: int, k: int) -> tuple[list[int], int, int]:
    """(codes to chain, node they lead to, node the rest and missing lead to)."""
    go = tree.left_codes(i, k + 1)              # k categories + the missing code
    left, right = int(tree.children_left[i]), int(tree.children_right[i])
    if go[k]:                                   # missing goes left: chain the codes going right
        return [c for c in range(k) if not go[c]], right, left
    return [c for c in range(k) if go[c]], left, right


@overload
def expand(ens: TreeEnsemble, max_nodes: int = ...) -> TreeEnsemble: ...
@overload
def expand(ens: LinearModel, max_nodes: int = ...) -> LinearModel: ...
@overload
def expand(ens: TreeEnsemble | LinearModel, max_nodes: int = ...) -> TreeEnsemble | LinearModel: ...
def expand(ens: TreeEnsemble | LinearModel, max_nodes: int = MAX_NODES) -> TreeEnsemble | LinearModel:
    """The same model over one-hot columns (see the module docstring); ``ens`` itself
    when it has no categorical feature. A :class:`core.model.linear.LinearModel` is
    rewritten too (:func:`expand_linear`)."""
    if isinstance(ens, LinearModel):
        return expand_linear(ens)
    if not ens.categorical_features:
        return ens
    cols, names = _layout(ens)
    n_codes = {j: len(c) for j, c in enumerate(ens.categories) if c is not None}   # the categorical features
    out_trees, total = [], 0
    for tree in ens.trees:
        size = _sizes(tree, n_codes)
        total += int(size[0])
        if total > max_nodes:
            raise UnsupportedModelError(
                f"This model's categorical splits cannot be analysed exactly: written over one column per "
                f"category its trees would hold more than {max_nodes:,} nodes (categories with many levels in "
                "deep trees). Limit max_cat_threshold / tree depth, or one-hot encode those columns and retrain.")
        out_trees.append(_rewrite(tree, n_codes, cols, int(size[0])))
    meta = {**ens.meta, "input": "expanded",
            "expanded": {"names": list(ens.feature_names), "columns": cols,
                         "categories": [None if c is None else list(c) for c in ens.categories],
                         "input": ens.meta.get("input", "array")}}
    return _replace(ens, trees=tuple(out_trees), n_features=len(names), feature_names=tuple(names),
                    categories=(), meta=meta)


def expand_linear(lm: LinearModel) -> LinearModel:
    """A linear model over one 0/1 column per category, exactly: a categorical feature's
    score table ``t`` becomes the weights ``t[k] - t[K]`` of its columns and ``t[K]``
    (the missing or unseen value, the row with every column 0) joins the intercept, so
    ``s`` is the same on every row of codes and its one-hot image. ``meta["input"] =
    "expanded"``, as for a tree ensemble: :func:`core.model.native.model_input` gives the
    source model its own input back."""
    if not lm.categorical_features:
        return lm
    cols, names = _layout(lm)
    coef = np.zeros((lm.n_outputs, len(names)))
    intercept = lm.intercept.copy()
    for j in range(lm.n_features):
        table = lm.category_scores[j] if lm.category_scores else None
        if table is None:
            coef[:, cols[j][0]] = lm.coef[:, j]
            continue
        base = table[-1] if np.all(np.isfinite(table[-1])) else np.zeros(lm.n_outputs)
        if not np.all(np.isfinite(table[:-1])):
            raise ModelError(f"The linear model refuses some categories of {lm.feature_names[j]!r}; it cannot be "
                             "written over one column per category.")
        coef[:, cols[j]] = (table[:-1] - base).T
        intercept = intercept + base
    meta = {**lm.meta, "input": "expanded",
            "expanded": {"names": list(lm.feature_names), "columns": cols,
                         "categories": [None if c is None else list(c) for c in lm.categories],
                         "input": lm.meta.get("input", "array")}}
    return LinearModel(coef=coef, intercept=intercept, feature_names=tuple(names), task=lm.task, link=lm.link,
                       classes=lm.classes, source=lm.source, meta=meta)


def _sizes(tree: Tree, n_codes: dict[int, int]) -> np.ndarray:
    """Nodes each subtree takes once rewritten (children have larger indices)."""
    n = tree.n_nodes
    size = np.ones(n, dtype=np.float64)
    for i in range(n - 1, -1, -1):
        left = tree.children_left[i]
        if left < 0:
            continue
        j = int(tree.feature[i])
        if j in n_codes and np.isnan(tree.threshold[i]):
            chain, hit, rest = _sides(tree, i, n_codes[j])
            size[i] = len(chain) * (1 + size[hit]) + size[rest]
        else:
            size[i] = 1 + size[left] + size[tree.children_right[i]]
    return size


def _rewrite(tree: Tree, n_codes: dict[int, int], cols: list[list[int]], n_new: int) -> Tree:
    cl = np.full(n_new, -1, dtype=np.int32)
    cr = np.full(n_new, -1, dtype=np.int32)
    ft = np.full(n_new, -1, dtype=np.int32)
    th = np.full(n_new, np.nan)
    val = np.zeros((n_new, tree.value.shape[1]))
    src_miss = tree.missing_left
    miss = np.zeros(n_new, dtype=bool)                        # read only when src_miss is not None
    nxt = 0

    def emit(i: int) -> int:          # preorder: every child gets a larger index than its parent
        nonlocal nxt
        me = nxt
        nxt += 1
        left = int(tree.children_left[i])
        if left < 0:
            val[me] = tree.value[i]
            return me
        j = int(tree.feature[i])
        if j in n_codes and np.isnan(tree.threshold[i]):
            chain, hit, rest = _sides(tree, i, n_codes[j])
            if not chain:             # every category goes where the missing code goes
                nxt -= 1
                return emit(rest)
            node = me
            for n_done, c in enumerate(chain):
                if n_done:
                    node = nxt
                    nxt += 1
                ft[node], th[node] = cols[j][c], 0.5          # x[j=c] <= 0.5: not this category
                cr[node] = emit(hit)
                if n_done == len(chain) - 1:
                    cl[node] = emit(rest)
                else:
                    cl[node] = nxt
            return me
        ft[me], th[me] = cols[j][0], tree.threshold[i]
        if src_miss is not None:                              # a number's split keeps its NaN route
            miss[me] = src_miss[i]
        cl[me] = emit(left)
        cr[me] = emit(int(tree.children_right[i]))
        return me

    depth = sys.getrecursionlimit()
    sys.setrecursionlimit(max(depth, 10_000))
    try:
        emit(0)
    finally:
        sys.setrecursionlimit(depth)
    return Tree(cl[:nxt], cr[:nxt], ft[:nxt], th[:nxt], val[:nxt],
                missing_left=None if src_miss is None else miss[:nxt])


def decode(meta: dict[str, Any], X: np.ndarray) -> np.ndarray:
    """One-hot rows of an expanded ensemble back to the original codes view
    (a group with no column hot is the missing code)."""
    info = meta["expanded"]
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    out = np.empty((X.shape[0], len(info["names"])))
    for j, idx in enumerate(info["columns"]):
        if info["categories"][j] is None:
            out[:, j] = X[:, idx[0]]
        else:
            block = X[:, idx] > 0.5
            out[:, j] = np.where(block.any(axis=1), block.argmax(axis=1), len(idx))
    return out
