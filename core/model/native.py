"""The source libraries' own predictions, for verification, re-checks and tests.

Codes view and model input
--------------------------
The analyses give a ``TreeEnsemble`` rows of floats in feature order, a
categorical feature as its code (``0..K-1``, ``K`` = missing or unseen; see
:mod:`core.model`). :func:`model_input` turns such rows into what the
source model itself takes, as its parser recorded in ``ens.meta["input"]``:

``"array"`` (the default)
    the float64 array itself (models fitted on arrays or whose wrappers accept
    arrays); a categorical feature, whose categories are then numbers, gets its
    category value, NaN for the missing code;
``"frame"``
    a DataFrame with ``ens.feature_names``; numerical columns float64,
    categorical columns pandas ``Categorical`` with exactly the model's
    categories ``ens.categories[j]`` (LightGBM on pandas ``category`` columns,
    XGBoost ``enable_categorical``); the missing code becomes NaN;
``"expanded"``
    one-hot rows of an ensemble rewritten by :func:`core.model.categorical.expand`:
    decoded to the original codes, then given as the original input kind;
``"missing"``
    rows of an ensemble rewritten by :func:`core.model.missing.expand`: NaN where an
    "is missing" column is 1, those columns dropped, then given as the
    original input kind;
``"codes"``
    the codes view itself (a :class:`core.model.blackbox.BlackBoxModel` takes its
    rows so, and turns them into its own input in its worker); with ``frame=True``
    the rows as ``"frame-object"`` gives them (category values), for showing;
``"frame-object"``
    a DataFrame whose categorical columns hold the category values themselves
    (object dtype; the missing code becomes NaN) and numerical columns
    float64 (scikit-learn pipelines with encoders, ONNX graphs taking one input
    per column); columns the model requires but does not use
    (``meta["extra_columns"]``) are added empty.

An ONNX model (:class:`core.intake.parsing.onnx_runner.OnnxModel`, recognised by its
class name, as CatBoost's JSON export is) takes ``"array"`` rows as its one
``[rows, n]`` tensor and ``"frame-object"`` rows one input per column; onnxruntime
casts them to the graph's input types. :func:`native_outputs` compares its scores
(``meta["onnx"]["scores"]``: probabilities, or raw class scores when the graph
outputs them untransformed) or a regressor's values.

:func:`model_input` with ``frame=True`` always returns a DataFrame: the rows
in the raw columns the model takes, which is what exports show.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol

import numpy as np
import pandas as pd

from core.errors import need
from core.model.categorical import OTHER_CODE, decode
from core.model.features import ModelShape
from core.model.missing import to_native
from core.model.threads import predict_threads
from core.model.xgbmargin import dense_margin
from core.typing import ModelLike

if TYPE_CHECKING:
    from core.model import TreeEnsemble

INPUT_KINDS = ("array", "frame", "frame-object", "expanded", "missing", "codes")
UNSEEN = "__atlas_unseen__"


class CodesView(Protocol):
    """What :func:`model_input` reads of a model whose rows are in the codes view: a
    :class:`core.model.TreeEnsemble`, a :class:`core.model.linear.LinearModel`, or the
    source view of a rewritten one (:class:`_Source`)."""

    @property
    def feature_names(self) -> tuple[str, ...]: ...

    @property
    def categories(self) -> tuple[tuple[Any, ...] | None, ...]: ...

    @property
    def meta(self) -> dict[str, Any]: ...

    @property
    def categorical_features(self) -> list[int]: ...


@dataclass(frozen=True)
class _Source:
    """The model a rewritten one (``"missing"``, ``"expanded"``) was made from, as
    :func:`model_input` reads it."""

    feature_names: tuple[str, ...]
    categories: tuple[tuple[Any, ...] | None, ...]
    meta: dict[str, Any]
    categorical_features: list[int]


def model_input(ens: CodesView, X: np.ndarray, *, frame: bool = False) -> Any:
    """The source model's own input for codes-view rows ``X`` (n, n_features)."""
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    kind = ens.meta.get("input", "array")
    if kind not in INPUT_KINDS:
        raise ValueError(f"Unknown model input kind {kind!r}; expected one of {INPUT_KINDS}.")
    if kind in _REWRITTEN:
        native, rows = _REWRITTEN[kind](ens, X)
        return model_input(native, rows, frame=frame)
    if kind == "codes":
        if not frame:
            return X.copy()
        kind = "frame-object"
    open_codes = {int(j): code for j, code in ens.meta.get("open_codes", ())}
    if kind == "array" and not frame:
        return _number_rows(ens, X, open_codes)
    table = pd.DataFrame({name: _input_column(ens, j, X[:, j], kind, open_codes)
                          for j, name in enumerate(ens.feature_names)}, columns=list(ens.feature_names))
    for extra in ens.meta.get("extra_columns", ()):   # columns the model requires but does not use
        table[extra] = np.nan
    return table


def _source(ens: CodesView, key: str, names: tuple[str, ...], cats: tuple[tuple[Any, ...] | None, ...]) -> _Source:
    """The model a rewritten one was made from: its features, and its meta without the
    rewrite's ``key``, taking the input the source took."""
    return _Source(feature_names=names, categories=cats,
                   meta={**{k: v for k, v in ens.meta.items() if k != key}, "input": ens.meta[key]["input"]},
                   categorical_features=[j for j, c in enumerate(cats) if c is not None])


def _from_missing(ens: CodesView, X: np.ndarray) -> tuple[_Source, np.ndarray]:
    """Rows of :func:`core.model.missing.expand` as its source's: NaN where missing."""
    d = int(ens.meta["missing"]["n_features"])
    source_cats = tuple(ens.categories[:d]) if ens.categories else (None,) * d
    return _source(ens, "missing", tuple(ens.feature_names[:d]), source_cats), to_native(ens.meta, X)


def _from_expanded(ens: CodesView, X: np.ndarray) -> tuple[_Source, np.ndarray]:
    """One-hot rows of :func:`core.model.categorical.expand` as its source's: back to codes."""
    info = ens.meta["expanded"]
    source_cats = tuple(None if c is None else tuple(c) for c in info["categories"])
    return _source(ens, "expanded", tuple(info["names"]), source_cats), decode(ens.meta, X)


#: the input kinds of a rewritten ensemble: its source model and rows in that model's view
_REWRITTEN: dict[str, Callable[[CodesView, np.ndarray], tuple[_Source, np.ndarray]]] = {
    "missing": _from_missing, "expanded": _from_expanded}


def _number_rows(ens: CodesView, X: np.ndarray, open_codes: dict[int, Any]) -> np.ndarray:
    """The ``"array"`` input: numeric categories as the value itself, NaN when missing."""
    out = X.copy()
    for j in ens.categorical_features:
        numbers = np.asarray(_levels(ens, j, open_codes) + [np.nan], dtype=np.float64)
        out[:, j] = numbers[np.clip(X[:, j].astype(np.int64), 0, len(numbers) - 1)]
    return out


def _input_column(ens: CodesView, j: int, x: np.ndarray, kind: str, open_codes: dict[int, Any]) -> Any:
    """Column ``j`` of a table input: numbers as they are, a categorical feature as a pandas
    ``Categorical`` (``"frame"``) or as its values."""
    cats = ens.categories[j]
    if cats is None:
        return x
    codes = x.astype(np.int64)
    if kind == "frame":
        return pd.Categorical.from_codes(np.where(codes >= len(cats), -1, codes), categories=pd.Index(list(cats)))
    values = _category_values(ens, j, codes, open_codes)
    if kind == "array":                                   # numeric categories: a number column
        values = values.astype(np.float64)
    return values


def _category_values(ens: CodesView, j: int, codes: np.ndarray, open_codes: dict[int, Any]) -> np.ndarray:
    """The category values of codes of feature ``j`` (objects), the missing code as the model takes it."""
    name = ens.feature_names[j]
    cats = _categories(ens, j)
    values = np.empty(len(codes), dtype=object)
    known = codes < len(cats)
    levels = _levels(ens, j, open_codes)
    values[known] = [levels[k] for k in codes[known]]
    # the missing code: NaN, or a category nobody knows where missing values are imputed
    values[~known] = UNSEEN if name in ens.meta.get("impute", {}) else np.nan
    if name in ens.meta.get("category_hashes", {}):      # CatBoost: "any other value" as a real one
        other = ens.meta.get("other_level", "(any other value)")
        stand_in = ens.meta.get("other_example", {}).get(name, other)
        values[~known | (values == other)] = stand_in
    return values


def _categories(ens: CodesView, j: int) -> tuple[Any, ...]:
    """The categories of categorical feature ``j`` (a ValueError for a numerical one)."""
    cats = ens.categories[j]
    if cats is None:
        raise ValueError(f"Feature {ens.feature_names[j]!r} is numerical, not categorical: it has no categories.")
    return cats


def _levels(ens: CodesView, j: int, open_codes: dict[int, Any]) -> list[Any]:
    """Feature ``j``'s categories as the model takes them: XGBoost's "any other
    code" level (:data:`core.model.categorical.OTHER_CODE`) as its stand-in code."""
    cats = list(_categories(ens, j))
    if j in open_codes and cats[-1] == OTHER_CODE:
        cats[-1] = open_codes[j]
    return cats


def native_input(ens: CodesView, model: ModelLike, X: np.ndarray) -> Any:
    """Codes-view rows as the source ``model`` takes them (named columns when it was
    fitted on a DataFrame)."""
    if ens.meta.get("input", "array") == "array":
        return _named(model, model_input(ens, X))
    return model_input(ens, X)


def native_outputs(ens: TreeEnsemble, model: ModelLike, X: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, str]:
    """Return (ours, theirs, what) on codes-view rows X; ``theirs`` is None when
    the model gives no comparable output."""
    module = type(model).__module__.split(".")[0]
    if isinstance(model, ModelShape) and not model.exact:     # a surrogate's model: only its answers compare
        return ens.predict(X), None, "answers"
    if type(model).__name__ == "CatBoostJSON":
        return _catboost_outputs(ens, model, X)
    if type(model).__name__ == "OnnxModel":
        return _onnx_outputs(ens, model, X)
    Xn = native_input(ens, model, X)
    if ens.task == "anomaly":
        return ens.score_samples(X), model.score_samples(Xn), "anomaly scores"
    if module in _LIBRARY_OUTPUTS:
        return _LIBRARY_OUTPUTS[module](ens, model, X, Xn)
    if ens.task == "classification":
        return ens.predict_proba(X), np.asarray(_forest_proba(model, Xn), dtype=np.float64), "probabilities"
    return ens.predict(X), np.asarray(model.predict(Xn), dtype=np.float64).ravel(), "predictions"


def _xgboost_outputs(ens: TreeEnsemble, model: ModelLike, X: np.ndarray, Xn: Any) -> tuple[np.ndarray,
                                                                                         np.ndarray | None, str]:
    """XGBoost's margins on the rows ``Xn`` (the codes-view rows ``X`` as it takes them)."""
    xgb = need("xgboost", "checking an XGBoost model")  # optional and heavy: the model is an XGBoost one

    booster = model.get_booster() if hasattr(model, "get_booster") else model
    kw = {}
    it = ens.meta.get("iteration_range")
    if it is not None:
        kw["iteration_range"] = it
    if isinstance(Xn, pd.DataFrame) or "c" in (booster.feature_types or ()):
        dm = (xgb.DMatrix(Xn, enable_categorical=True) if isinstance(Xn, pd.DataFrame) else
              xgb.DMatrix(Xn, feature_names=booster.feature_names, feature_types=booster.feature_types))
        margin = booster.predict(dm, output_margin=True, **kw)
    else:        # numbers only: without a DMatrix (its construction costs ~15 ms of CPU a call), nor a new proxy
        margin = dense_margin(booster, Xn, **kw)     # (as C-contiguous float32)
    margin = np.asarray(margin, dtype=np.float64).reshape(X.shape[0], -1)
    return ens.predict_raw(X), margin, "margins"


def _lightgbm_outputs(ens: TreeEnsemble, model: ModelLike, X: np.ndarray, Xn: Any) -> tuple[np.ndarray,
                                                                                           np.ndarray | None, str]:
    """LightGBM's raw scores on the rows ``Xn``; its predictions for a random forest."""
    booster = model.booster_ if hasattr(model, "booster_") else model
    kw = predict_threads(model, X.shape[0])
    if booster.dump_model(num_iteration=1).get("average_output"):
        # boosting="rf": LightGBM's raw_score is not averaged, its predict is
        out = np.asarray(booster.predict(Xn, **kw), dtype=np.float64).reshape(X.shape[0], -1)
        ours = ens.predict_proba(X)[:, 1:] if ens.link == "sigmoid" else (
            ens.predict_proba(X) if ens.is_classifier else ens.predict_raw(X))
        return ours, out, "predictions"
    raw = np.asarray(booster.predict(Xn, raw_score=True, **kw), dtype=np.float64).reshape(X.shape[0], -1)
    return ens.predict_raw(X), raw, "raw scores"


#: the libraries whose models compare by their own raw outputs, by top-level module
_LIBRARY_OUTPUTS: dict[str, Callable[[TreeEnsemble, ModelLike, np.ndarray, Any],
                                     tuple[np.ndarray, np.ndarray | None, str]]] = {
    "xgboost": _xgboost_outputs, "lightgbm": _lightgbm_outputs}


def _forest_proba(model: ModelLike, Xn: Any) -> np.ndarray:
    """``model.predict_proba(Xn)``; for a scikit-learn forest classifier (one output) its trees'
    own predictions averaged as its ``predict_proba`` does, in the same order, without the
    thread pool and the checks around them (tens of ms for one row of 100 trees, the trees' own
    work a fraction of a millisecond)."""
    from sklearn.ensemble._forest import ForestClassifier

    if (not isinstance(model, ForestClassifier) or type(model).predict_proba is not ForestClassifier.predict_proba
            or getattr(model, "n_outputs_", 1) != 1 or not hasattr(model, "estimators_")):
        return model.predict_proba(Xn)
    X32 = np.ascontiguousarray(np.asarray(Xn, dtype=np.float32))
    if X32.ndim != 2 or X32.shape[1] != model.n_features_in_:
        return model.predict_proba(Xn)
    k = len(model.classes_)
    out = np.zeros((X32.shape[0], k), dtype=np.float64)
    for est in model.estimators_:               # a tree's predict_proba is its leaf's values as stored (no
        out += est.tree_.predict(X32)[:, :k]    # normalising since scikit-learn 1.4): an edited leaf shows
    return out / len(model.estimators_)


def _catboost_outputs(ens: TreeEnsemble, model: ModelLike, X: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, str]:
    """CatBoost's raw formula values (its own model when the ``catboost`` package is
    installed, else the JSON document applied as CatBoost's Python export does). Rows
    holding a level known only by its hash (``"#<hash>"``, no text to give CatBoost)
    are left out of both sides."""
    ours = ens.predict_raw(X)
    keep = np.ones(len(X), dtype=bool)
    for j in ens.categorical_features:
        placeholder = np.array([str(c).startswith("#") for c in _categories(ens, j)] + [False])
        keep &= ~placeholder[np.clip(X[:, j].astype(np.int64), 0, len(placeholder) - 1)]
    if not keep.any():
        return ours[:0], np.zeros((0, ours.shape[1])), "raw scores"
    return ours[keep], model.raw_scores(model_input(ens, X[keep], frame=True)), "raw scores"


def _onnx_outputs(ens: TreeEnsemble, model: ModelLike, X: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, str]:
    """onnxruntime's scores on the rows (:class:`core.intake.parsing.onnx_runner.OnnxModel`),
    beside the ensemble's (:func:`onnx_compared`)."""
    _, scores = model.run(model_input(ens, X))
    return onnx_compared(ens, ens.predict_raw(X), scores)


def onnx_compared(ens: TreeEnsemble, raw: np.ndarray, scores: np.ndarray | None) -> tuple[np.ndarray,
                                                                                          np.ndarray | None, str]:
    """(ours, theirs, what) of an ONNX graph's scores ``scores`` and the ensemble's raw outputs
    ``raw`` on the same rows: probabilities, the raw class scores when the graph outputs them
    untransformed (``meta["onnx"]["scores"] == "raw"``), or a regressor's values."""
    kind = ens.meta.get("onnx", {}).get("scores", "proba")
    if scores is None:
        return raw, None, "scores"
    if ens.task == "regression":
        return ens.predict_from_raw(raw), scores[:, 0], "predictions"
    if kind == "raw":
        return raw, scores, "scores"
    return ens.proba_from_raw(raw), scores, "probabilities"


def _named(model: ModelLike, X: np.ndarray) -> Any:
    """X as a DataFrame with the model's feature names when it was fitted with them."""
    names = getattr(model, "feature_names_in_", None)
    if names is None:
        return X
    return pd.DataFrame(X, columns=list(names))
