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
  the threshold :data:`core.model.tree.MISSING_ONLY`. NaN itself goes to the side
  ``missing_go_to_left`` names (``Tree.missing_left``).
* categorical split: the model's own ``OrdinalEncoder`` (``_preprocessor``,
  categorical columns first, then the numerical ones: ``feature_idx`` counts
  in that order) maps a category to its rank ``0..K-1`` among the categories
  seen in training, a missing or unseen value to NaN; a rank goes left iff
  its bit is set in ``raw_left_cat_bitsets[bitset_idx]``, NaN to the side
  ``missing_go_to_left`` names. Our codes of the feature are those ranks and
  ``K`` (the missing code) is routed as NaN, so the split is exact on every
  code, missing and unseen values included.

The model's input (``meta["input"]``, see :mod:`core.model.native`): the
float array (or a DataFrame with the same columns) when it has no categorical
feature or only numeric categories, a DataFrame of pandas ``category``
columns for ``categorical_features="from_dtype"``, otherwise a DataFrame whose
categorical columns hold the category values.

What the model's prediction depends on is checked before it is read, so that a
damaged or edited file is refused with a message rather than read differently
from scikit-learn: the classes, the trees per iteration, the loss and its link
agree; the encoder holds each feature's categories once, numbers in increasing
order (its lookup assumes it), at most 255; the trees know exactly those
categories (``_bin_mapper``: a category they do not know would be routed as
missing); and scikit-learn's own encoder, given the rows this parser describes
(every category, a missing and an unseen one, numbers that float32 would round),
gives each category its rank, a missing or unseen one NaN, and every number as
it is, in the order the trees count features, and the model predicts from them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from core.errors import AtlasError, UnsupportedModelError
from core.intake.parsing.common import EnsembleHeader, build_tree
from core.jsonable import plain
from core.model.ensemble import Link, Task, TreeEnsemble
from core.model.native import native_input
from core.model.tree import MISSING_ONLY, Tree
from core.typing import ModelLike

__all__ = ["parse_hgb"]

_CLASS_LOSSES = ("HalfBinomialLoss", "HalfMultinomialLoss")


def _is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, (float, np.floating)) and np.isnan(v))


def _layout(model: ModelLike) -> tuple[np.ndarray, list[Any]]:
    """The original column of each predictor feature, and each original column's
    categories (None: numerical)."""
    name = type(model).__name__
    d = int(model.n_features_in_)
    is_cat = getattr(model, "is_categorical_", None)
    pre = model._preprocessor
    if pre is None and (is_cat is None or not np.any(is_cat)):
        return np.arange(d), [None] * d
    if pre is None or is_cat is None or np.shape(is_cat) != (d,):
        raise UnsupportedModelError(
            f"This {name} has categorical features but not the category encoder scikit-learn "
            "1.4 and later keep with the model; re-fit and save it with a current scikit-learn.")
    is_cat = np.asarray(is_cat, dtype=bool)
    order = np.r_[np.flatnonzero(is_cat), np.flatnonzero(~is_cat)]    # the encoder's columns come first
    categories = _encoder_categories(pre, name, int(is_cat.sum()))
    cats: list[Any] = [None] * d
    for j, values in zip(np.flatnonzero(is_cat).tolist(), categories):
        cats[j] = _levels(name, j, values)
    return order, cats


def _encoder_categories(pre: Any, name: str, n_cat: int) -> list[Any]:
    """The category encoder's categories, one array per categorical feature."""
    try:
        categories = list(pre.named_transformers_["encoder"].categories_)
    except (AttributeError, KeyError, TypeError):
        categories = None
    if categories is None or len(categories) != n_cat:
        raise UnsupportedModelError(f"This {name}'s category encoder does not hold the categories of its "
                                    f"{n_cat} categorical features; re-fit and save the model.")
    return categories


def _levels(name: str, j: int, values: Any) -> tuple[Any, ...]:
    """Feature ``j``'s categories as the encoder holds them, a trailing missing value dropped (checked)."""
    values = list(np.asarray(values, dtype=object).ravel())
    while values and _is_missing(values[-1]):     # a missing value seen in training: not a category
        values.pop()
    if not values:
        raise UnsupportedModelError(f"The categorical feature {j} of this {name} has no category.")
    _check_levels(name, j, values)
    return tuple(plain(v) for v in values)


def _check_levels(name: str, j: int, values: list[Any]) -> None:
    """Categories as scikit-learn's encoder keeps them: each once, none missing, numbers
    in increasing order (it looks numbers up by bisection), at most 255."""
    where = f"This {name}'s categorical feature {j}"
    if any(_is_missing(v) for v in values) or len({str(v) for v in values}) != len(values):
        raise UnsupportedModelError(f"{where} lists a category twice or a missing value among its categories; "
                                    "the file is damaged or was edited: re-fit and save the model.")
    if all(isinstance(v, (int, float, np.integer, np.floating)) for v in values) and \
            np.any(np.diff(np.asarray(values, dtype=np.float64)) <= 0):
        raise UnsupportedModelError(f"{where} has numeric categories out of increasing order; the file is damaged "
                                    "or was edited: re-fit and save the model.")
    if len(values) > 255:
        raise UnsupportedModelError(f"{where} has {len(values)} categories; scikit-learn's trees hold at most 255. "
                                    "The file is damaged or was edited: re-fit and save the model.")


def _check_known(model: ModelLike, order: np.ndarray, cats: list[Any]) -> None:
    """The categories the trees know (``_bin_mapper``): scikit-learn routes a category its
    trees do not know as missing; a fitted model's trees know every category of its encoder."""
    if all(c is None for c in cats):
        return
    name = type(model).__name__
    flags, known = _known_bins(model, name, order, cats)
    if flags.shape != order.shape or np.any(flags != np.array([cats[j] is not None for j in order])):
        raise UnsupportedModelError(f"This {name}'s trees take other features as categorical than its encoder; "
                                    "the file is damaged or was edited: re-fit and save the model.")
    for f, j in enumerate(order):
        if cats[j] is not None and not np.array_equal(known[f], np.arange(len(cats[j]))):
            raise UnsupportedModelError(
                f"This {name}'s trees know other categories of feature {j} than the {len(cats[j])} its encoder "
                "holds; the file is damaged or was edited: re-fit and save the model.")


def _known_bins(model: ModelLike, name: str, order: np.ndarray,
                cats: list[Any]) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """The bin mapper's categorical flags per tree feature, and the categories each categorical one knows."""
    try:
        mapper = model._bin_mapper
        flags = np.asarray(mapper.is_categorical_, dtype=bool)
        known = {f: np.asarray(mapper.bin_thresholds_[f], dtype=np.float64)
                 for f, j in enumerate(order) if cats[j] is not None}
    except (AttributeError, TypeError, IndexError, KeyError, ValueError):
        raise UnsupportedModelError(f"This {name}'s trees do not say which categories they know; the file is "
                                    "damaged or was edited: re-fit and save the model.") from None
    return flags, known


# numbers for the check of the encoder: float32 would round or overflow most of them
_NUMBERS = np.array([0.1, -2.5, 16777217.0, 1e300, -1e-310, 3.0, 1 / 3, np.nan, -7.25e12])


def _check_reading(model: ModelLike, ens: TreeEnsemble, order: np.ndarray) -> None:
    """scikit-learn reads rows as this parser describes them: its encoder gives each
    category its rank (a missing or unseen one NaN, or a negative code, which the
    trees route alike) and every number as it is, in the order the trees count
    features; and the model's trees run on such a row (one, on one thread: the
    verification that follows predicts on many)."""
    name = type(model).__name__
    cats = list(ens.categories) if ens.categories else [None] * ens.n_features
    X = _probe_rows(cats, ens.n_features)
    given = native_input(ens, model, X)
    unseen = _unseen_row(native_input(ens, model, X[:1]), cats)
    pre = model._preprocessor
    got = _run_library(model, name, given, unseen)
    if pre is None:
        return
    _check_encoded(name, ens, order, cats, X, got)


def _probe_rows(cats: list[Any], d: int) -> np.ndarray:
    """Rows holding every code of each category (the missing one too) and, per number column, :data:`_NUMBERS`
    in turn."""
    n = max([len(c) + 1 for c in cats if c is not None] + [len(_NUMBERS)])
    X, k = np.empty((n, d)), np.arange(n)
    for j, levels in enumerate(cats):
        X[:, j] = k % (len(levels) + 1) if levels is not None else np.roll(_NUMBERS, j)[k % len(_NUMBERS)]
    return X


def _unseen_row(unseen: Any, cats: list[Any]) -> Any:
    """The model's one-row input with a category the model never saw in each categorical column."""
    for j, levels in enumerate(cats):
        if levels is None:
            continue
        numeric = all(isinstance(v, (int, float)) for v in levels)    # a category the model never saw
        value = max(levels) + 0.5 if numeric else "__atlas_never_seen__"
        if isinstance(unseen, pd.DataFrame):
            col = unseen.columns[j]
            keep = numeric and not isinstance(unseen[col].dtype, pd.CategoricalDtype)
            unseen[col] = [value] if keep else pd.Series([value], dtype=object, index=unseen.index)
        else:
            unseen[0, j] = value
    return unseen


def _run_library(model: ModelLike, name: str, given: Any, unseen: Any) -> np.ndarray | None:
    """The model's own encoding of the probe rows and the unseen row (None without an encoder), after
    its trees ran on the unseen row; any failure of scikit-learn is refused with a message."""
    pre = model._preprocessor
    got = None
    try:
        if pre is not None:
            both = pd.concat([given, unseen], ignore_index=True) if isinstance(given, pd.DataFrame) else \
                np.vstack([given, unseen])
            got = np.asarray(pre.transform(both), dtype=np.float64)
        if not np.all(np.isfinite(model._raw_predict(unseen, n_threads=1))):   # one row: its trees run
            raise UnsupportedModelError(f"This {name} predicts a non-finite score; the file is damaged or was "
                                        "edited: re-fit and save the model.")
    except AtlasError:
        raise
    except Exception as exc:  # noqa: BLE001 - the library fails on the rows it was described by
        text = " ".join(str(exc).split())[:200]
        raise UnsupportedModelError(f"scikit-learn cannot predict with this {name} as it was read ({text}); the "
                                    "file is damaged or was edited: re-fit and save the model.") from None
    return got


def _check_encoded(name: str, ens: TreeEnsemble, order: np.ndarray, cats: list[Any], X: np.ndarray,
                   got: Any) -> None:
    """The encoder's output ``got`` for the probe rows and the unseen row against the ranks and numbers
    the trees take, column by column in the trees' order."""
    rows = np.vstack([X, X[:1]])
    want = np.column_stack([rows[:, j] if cats[j] is None else np.where(rows[:, j] < len(cats[j]), rows[:, j],
                                                                        np.nan) for j in order])
    want[-1, [f for f, j in enumerate(order) if cats[j] is not None]] = np.nan     # the unseen row
    if got.shape != want.shape:
        width = got.shape[1] if got.ndim == 2 else got.size
        raise UnsupportedModelError(f"This {name}'s encoder gives {width} columns, not {ens.n_features}; the file "
                                    "is damaged or was edited: re-fit and save the model.")
    categorical = np.array([cats[j] is not None for j in order])[None, :]
    ok = np.where(np.isnan(want), np.isnan(got) | (categorical & (got < 0)), got == want)
    if not ok.all():
        j = int(order[np.flatnonzero(~ok.all(axis=0))[0]])
        raise UnsupportedModelError(f"This {name}'s own encoder reads feature {j} ({ens.feature_names[j]!r}) "
                                    "otherwise than its trees take it; the file is damaged or was edited: re-fit "
                                    "and save the model.")


def _input_kind(model: ModelLike, cats: list[Any]) -> str:
    if all(c is None for c in cats):
        return "array"
    if isinstance(model.categorical_features, str) and model.categorical_features == "from_dtype":
        return "frame"
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for c in cats if c is not None for v in c)
    return "array" if numeric else "frame-object"


def _tree(pred: Any, k: int, n_out: int, order: np.ndarray, cats: list[Any], n_codes: int | None) -> Tree:
    """One TreePredictor as a Tree, its leaf values on output ``k``."""
    nodes = pred.nodes
    bitsets = np.asarray(pred.raw_left_cat_bitsets, dtype=np.uint32)
    out: list[dict[str, Any]] = []
    for i, nd in enumerate(nodes):
        if nd["is_leaf"]:
            v = np.zeros(n_out)
            v[k] = float(nd["value"])
            out.append({"value": v})
        elif nd["is_categorical"]:
            out.append(_categorical_node(nd, i, int(order[int(nd["feature_idx"])]), cats, bitsets))
        else:
            out.append(_threshold_node(nd, i, int(order[int(nd["feature_idx"])])))
    return build_tree(out, n_out, n_codes, routes_missing=True)


def _categorical_node(nd: Any, i: int, j: int, cats: list[Any], bitsets: np.ndarray) -> dict[str, Any]:
    """A categorical split on feature ``j``: the ranks its bitset sends left, and the missing code
    with them if missing values go left."""
    b = int(nd["bitset_idx"])
    if cats[j] is None or not 0 <= b < len(bitsets):
        raise UnsupportedModelError(f"A categorical split of this model (node {i}) has no category set "
                                    "the parser can read; re-fit and save the model.")
    K = len(cats[j])
    words = bitsets[b]
    go = [c for c in range(K) if c < 32 * len(words) and (int(words[c >> 5]) >> (c & 31)) & 1]
    return {"feature": j, "categories_left": go + ([K] if nd["missing_go_to_left"] else []),
            "left": int(nd["left"]), "right": int(nd["right"])}


def _threshold_node(nd: Any, i: int, j: int) -> dict[str, Any]:
    """A numerical split on feature ``j``; a threshold of +inf is a split on NaN."""
    t = float(nd["num_threshold"])
    if np.isnan(t) or t == -np.inf:
        raise UnsupportedModelError(f"A split of this model (node {i}) has the threshold {t}; re-fit and "
                                    "save the model.")
    return {"feature": j, "threshold": MISSING_ONLY if t == np.inf else t,   # inf: a split on NaN
            "left": int(nd["left"]), "right": int(nd["right"]), "missing_left": bool(nd["missing_go_to_left"])}


def parse_hgb(model: ModelLike, common: EnsembleHeader) -> TreeEnsemble:
    """A fitted HistGradientBoosting model as a TreeEnsemble (``common``: n_features,
    feature_names, source, as :func:`core.intake.parsing.sklearn.parse_sklearn` gives them)."""
    name = type(model).__name__
    _check_fitted(model, name)
    K = _trees_per_iteration(model, name)
    base = np.asarray(model._baseline_prediction, dtype=np.float64).ravel()
    if base.shape != (K,):
        raise UnsupportedModelError(f"This {name}'s baseline has shape {base.shape}, not ({K},); re-fit and save "
                                    "the model.")
    task, out_link, out_classes = _outputs(model, name, K)
    order, cats = _layout(model)
    _check_known(model, order, cats)
    trees = _read_trees(model, name, K, order, cats)
    meta: dict[str, Any] = {}
    if any(c is not None for c in cats):
        meta["input"] = _input_kind(model, cats)
    ens = TreeEnsemble(tuple(trees), aggregation="sum", base_score=base, meta=meta,
                       categories=tuple(cats) if meta else (), task=task, link=out_link, classes=out_classes,
                       **common)
    _check_reading(model, ens, order)
    return ens


def _check_fitted(model: ModelLike, name: str) -> None:
    """The model holds what a fitted one keeps."""
    if not hasattr(model, "_predictors") or not hasattr(model, "_baseline_prediction"):
        raise UnsupportedModelError(f"The {name} is not fitted; fit it before loading.")
    missing = [a for a in ("_loss", "n_trees_per_iteration_", "_preprocessor", "_bin_mapper") if not hasattr(model, a)]
    if missing:
        raise UnsupportedModelError(f"This {name} lacks part of what a fitted model keeps ({', '.join(missing)}); "
                                    "the file is damaged or was edited: re-fit and save the model.")


def _trees_per_iteration(model: ModelLike, name: str) -> int:
    K = model.n_trees_per_iteration_
    if not isinstance(K, (int, np.integer)) or isinstance(K, bool) or K < 1:
        raise UnsupportedModelError(f"This {name} has {K!r} trees per iteration; re-fit and save the model.")
    return int(K)


def _outputs(model: ModelLike, name: str, K: int) -> tuple[Task, Link, np.ndarray | None]:
    """The task, link and classes, the loss and its link checked against the trees per iteration."""
    from sklearn.ensemble import HistGradientBoostingClassifier  # scikit-learn: the model is one of its own

    loss = type(getattr(model, "_loss", None)).__name__
    link = type(getattr(getattr(model, "_loss", None), "link", None)).__name__
    if isinstance(model, HistGradientBoostingClassifier):
        return _classifier_outputs(model, name, K, loss, link)
    if link != "IdentityLink" or K != 1:
        raise UnsupportedModelError(
            f"{name} with loss={model.loss!r} predicts a transform ({link}) of the trees' sum, which the "
            "analyses cannot read exactly yet; supported losses: squared_error, absolute_error, quantile.")
    return "regression", "identity", None


def _classifier_outputs(model: ModelLike, name: str, K: int, loss: str,
                        link: str) -> tuple[Task, Link, np.ndarray | None]:
    """A classifier's classes, one tree per iteration for two and one per class otherwise, log loss."""
    if loss not in _CLASS_LOSSES:
        raise UnsupportedModelError(f"{name} with the loss {loss} is not supported; only log_loss.")
    classes = _classes(model, name, K)
    n = len(classes)
    expected = ("HalfBinomialLoss", "LogitLink") if K == 1 else ("HalfMultinomialLoss", "MultinomialLogit")
    if (loss, link) != expected:
        raise UnsupportedModelError(f"This {name} of {n} classes has the loss {loss} with the link {link}; the "
                                    "file is damaged or was edited: re-fit and save the model.")
    return "classification", ("sigmoid" if K == 1 else "softmax"), classes


def _classes(model: ModelLike, name: str, K: int) -> np.ndarray:
    """The classifier's classes: at least two, distinct, as many as its trees per iteration say."""
    classes = np.asarray(getattr(model, "classes_", None))
    n = len(classes) if classes.ndim == 1 else 0
    if n < 2 or len({str(c) for c in classes.tolist()}) != n or K != (1 if n == 2 else n):
        raise UnsupportedModelError(f"This {name} has {K} trees per iteration for the classes "
                                    f"{str(classes.tolist())[:80]}; the file is damaged or was edited: re-fit "
                                    "and save the model.")
    return classes


def _read_trees(model: ModelLike, name: str, K: int, order: np.ndarray, cats: list[Any]) -> list[Tree]:
    """Every iteration's ``K`` predictors as trees; at least one."""
    n_codes = max((len(c) + 1 for c in cats if c is not None), default=None)
    trees: list[Tree] = []
    for it, per_class in enumerate(model._predictors):
        if len(per_class) != K:
            raise UnsupportedModelError(f"Iteration {it} of this {name} has {len(per_class)} trees, not {K}; "
                                        "re-fit and save the model.")
        trees.extend(_tree(p, k, K, order, cats, n_codes) for k, p in enumerate(per_class))
    if not trees:
        raise UnsupportedModelError(f"This {name} has no trees (max_iter=0 or stopped before the first).")
    return trees
