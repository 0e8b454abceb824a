"""scikit-learn's HistGradientBoostingClassifier and HistGradientBoostingRegressor.

A fitted model keeps, per iteration, one ``TreePredictor`` per output
(``_predictors[i][k]``: one for a regressor or a binary classifier, one per
class otherwise) and the constant ``_baseline_prediction`` (shape ``(1, K)``)
its raw score starts from; the raw score is that constant plus the sum of the
trees' leaf values (already multiplied by the learning rate), then the loss's
link: sigmoid (binary, ``predict`` gives the positive class iff ``raw > 0``),
softmax (multiclass) or identity (squared, absolute and quantile losses).
Regressors with a log link (``poisson``, ``gamma``) are refused.

Prediction (``_predict_one_from_raw_data`` in scikit-learn's
``ensemble/_hist_gradient_boosting/_predictor.pyx``), per node of the
predictor's ``nodes`` record array:

* numerical split: left iff ``x <= num_threshold``, ``x`` as float64: our
  rule, the threshold taken as it is. A split whose threshold is ``+inf``
  (a "split on NaN": every number left, NaN right) keeps that meaning with
  the threshold :data:`core.tree.MISSING_ONLY`. NaN itself goes to the side
  ``missing_go_to_left`` names (``Tree.missing_left``).
* categorical split: the model's own ``OrdinalEncoder`` (``_preprocessor``,
  categorical columns first, then the numerical ones: ``feature_idx`` counts
  in that order) maps a category to its rank ``0..K-1`` among the categories
  seen in training, a missing or unseen value to NaN; a rank goes left iff
  its bit is set in ``raw_left_cat_bitsets[bitset_idx]``, NaN to the side
  ``missing_go_to_left`` names. Our codes of the feature are those ranks and
  ``K`` (the missing code) is routed as NaN, so the split is exact on every
  code, missing and unseen values included.

The model's input (``meta["input"]``, see :mod:`core.parsing.native`): the
float array (or a DataFrame with the same columns) when it has no categorical
feature or only numeric categories, a DataFrame of pandas ``category``
columns for ``categorical_features="from_dtype"``, otherwise a DataFrame whose
categorical columns hold the category values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from core.errors import UnsupportedModelError
from core.jsonable import plain
from core.parsing.common import build_tree
from core.tree import MISSING_ONLY
from core.treeensemble import TreeEnsemble

__all__ = ["parse_hgb"]

_CLASS_LOSSES = ("HalfBinomialLoss", "HalfMultinomialLoss")


def _is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, (float, np.floating)) and np.isnan(v))


def _layout(model: Any) -> tuple[np.ndarray, list]:
    """The original column of each predictor feature, and each original column's
    categories (None: numerical)."""
    d = int(model.n_features_in_)
    is_cat = getattr(model, "is_categorical_", None)
    if is_cat is None:
        return np.arange(d), [None] * d
    is_cat = np.asarray(is_cat, dtype=bool)
    pre = getattr(model, "_preprocessor", None)
    if pre is None or is_cat.shape != (d,):
        raise UnsupportedModelError(
            f"This {type(model).__name__} has categorical features but not the category encoder scikit-learn "
            "1.4 and later keep with the model; re-fit and save it with a current scikit-learn.")
    order = np.r_[np.flatnonzero(is_cat), np.flatnonzero(~is_cat)]    # the encoder's columns come first
    enc = pre.named_transformers_["encoder"]
    cats: list = [None] * d
    for j, values in zip(np.flatnonzero(is_cat), enc.categories_):
        values = list(values)
        while values and _is_missing(values[-1]):     # a missing value seen in training: not a category
            values.pop()
        if not values:
            raise UnsupportedModelError(f"The categorical feature {j} of this {type(model).__name__} has no "
                                        "category.")
        cats[j] = tuple(plain(v) for v in values)
    return order, cats


def _input_kind(model: Any, cats: list) -> str:
    if all(c is None for c in cats):
        return "array"
    if isinstance(model.categorical_features, str) and model.categorical_features == "from_dtype":
        return "frame"
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for c in cats if c is not None for v in c)
    return "array" if numeric else "frame-object"


def _tree(pred: Any, k: int, n_out: int, order: np.ndarray, cats: list, n_codes: int | None) -> Any:
    """One TreePredictor as a Tree, its leaf values on output ``k``."""
    nodes = pred.nodes
    bitsets = np.asarray(pred.raw_left_cat_bitsets, dtype=np.uint32)
    out: list[dict] = []
    for i, nd in enumerate(nodes):
        if nd["is_leaf"]:
            v = np.zeros(n_out)
            v[k] = float(nd["value"])
            out.append({"value": v})
            continue
        left, right, f = int(nd["left"]), int(nd["right"]), int(nd["feature_idx"])
        j = int(order[f])
        if nd["is_categorical"]:
            b = int(nd["bitset_idx"])
            if cats[j] is None or not 0 <= b < len(bitsets):
                raise UnsupportedModelError(f"A categorical split of this model (node {i}) has no category set "
                                            "the parser can read; re-fit and save the model.")
            K = len(cats[j])
            words = bitsets[b]
            go = [c for c in range(K) if c < 32 * len(words) and (int(words[c >> 5]) >> (c & 31)) & 1]
            out.append({"feature": j, "categories_left": go + ([K] if nd["missing_go_to_left"] else []),
                        "left": left, "right": right})
            continue
        t = float(nd["num_threshold"])
        if np.isnan(t) or t == -np.inf:
            raise UnsupportedModelError(f"A split of this model (node {i}) has the threshold {t}; re-fit and "
                                        "save the model.")
        out.append({"feature": j, "threshold": MISSING_ONLY if t == np.inf else t,   # inf: a split on NaN
                    "left": left, "right": right, "missing_left": bool(nd["missing_go_to_left"])})
    return build_tree(out, n_out, n_codes, routes_missing=True)


def parse_hgb(model: Any, common: dict) -> TreeEnsemble:
    """A fitted HistGradientBoosting model as a TreeEnsemble (``common``: n_features,
    feature_names, source, as :func:`core.parsing.sklearn.parse_sklearn` gives them)."""
    name = type(model).__name__
    if not hasattr(model, "_predictors") or not hasattr(model, "_baseline_prediction"):
        raise UnsupportedModelError(f"The {name} is not fitted; fit it before loading.")
    loss = type(getattr(model, "_loss", None)).__name__
    link = type(getattr(getattr(model, "_loss", None), "link", None)).__name__
    K = int(model.n_trees_per_iteration_)
    base = np.asarray(model._baseline_prediction, dtype=np.float64).ravel()
    if base.shape != (K,):
        raise UnsupportedModelError(f"This {name}'s baseline has shape {base.shape}, not ({K},); re-fit and save "
                                    "the model.")
    if hasattr(model, "classes_"):
        if loss not in _CLASS_LOSSES:
            raise UnsupportedModelError(f"{name} with the loss {loss} is not supported; only log_loss.")
        kind = dict(task="classification", link="sigmoid" if K == 1 else "softmax",
                    classes=np.asarray(model.classes_))
    else:
        if link != "IdentityLink" or K != 1:
            raise UnsupportedModelError(
                f"{name} with loss={model.loss!r} predicts a transform ({link}) of the trees' sum, which the "
                "analyses cannot read exactly yet; supported losses: squared_error, absolute_error, quantile.")
        kind = dict(task="regression", link="identity")
    order, cats = _layout(model)
    n_codes = max((len(c) + 1 for c in cats if c is not None), default=None)
    trees = []
    for it, per_class in enumerate(model._predictors):
        if len(per_class) != K:
            raise UnsupportedModelError(f"Iteration {it} of this {name} has {len(per_class)} trees, not {K}; "
                                        "re-fit and save the model.")
        trees.extend(_tree(p, k, K, order, cats, n_codes) for k, p in enumerate(per_class))
    if not trees:
        raise UnsupportedModelError(f"This {name} has no trees (max_iter=0 or stopped before the first).")
    meta: dict[str, Any] = {}
    if any(c is not None for c in cats):
        meta["input"] = _input_kind(model, cats)
    return TreeEnsemble(tuple(trees), aggregation="sum", base_score=base, meta=meta,
                        categories=tuple(cats) if meta else (), **kind, **common)
