"""One parser per source library, one dispatcher.

``parse(model)`` finds the parser for the model's library by its module name in
:data:`PARSERS`, a table of module paths: a parser module (and its library:
xgboost, lightgbm, catboost, onnx) is imported only when such a model first
arrives, as gurobi-machinelearning registers its model converters. It raises
``UnsupportedModelError`` listing what is supported otherwise.
``parse_any(model)`` reads linear models too (:mod:`core.intake.parsing.linear`,
a pipeline ending in one by :func:`~core.intake.parsing.pipeline.parse_linear_pipeline`),
returning a :class:`core.model.linear.LinearModel`; ``parse`` refuses them, naming
the analyses that run on them. What the parsers share (that list, :func:`build_tree`) is in :mod:`core.intake.parsing.common`;
``build_tree`` is importable from here too.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

import numpy as np

from core.errors import AtlasError, ModelError, UnsupportedModelError
from core.intake.parsing.common import SUPPORTED_MODELS, build_tree, describe_unsupported
from core.intake.parsing.filecheck import MAX_LEAF_VALUE, PROBABILITY_SLACK
from core.model.cover import Cover, covering_rows, reached_leaves
from core.model.ensemble import TreeEnsemble
from core.model.linear import LINEAR_ANALYSES, LinearModel
from core.model.native import model_input, native_input, native_outputs
from core.model.tree import MISSING_ONLY
from core.typing import ModelLike

__all__ = ["parse", "parse_any", "is_linear", "verify_against_source", "verify_linear", "build_tree", "PARSERS",
           "covered_probe_points", "check_leaf_sums"]

#: what reads each kind of model: "module:function", imported the first time it is needed
PARSERS: dict[str, str] = {
    "sklearn": "core.intake.parsing.sklearn:parse_sklearn",
    "pipeline": "core.intake.parsing.pipeline:parse_pipeline",
    "xgboost": "core.intake.parsing.xgboost:parse_xgboost",
    "lightgbm": "core.intake.parsing.lightgbm:parse_lightgbm",
    "catboost": "core.intake.parsing.catboost:parse_catboost",
    "onnx": "core.intake.parsing.onnx:parse_onnx",
    "onnx_labels": "core.intake.parsing.onnx:check_labels",
    "onnx_run": "core.intake.parsing.onnx:run_probes",
    "is_linear": "core.intake.parsing.linear:is_linear",
    "linear": "core.intake.parsing.linear:parse_linear_estimator",
    "verify_linear": "core.intake.parsing.linear:verify_linear",
    "linear_pipeline": "core.intake.parsing.pipeline:parse_linear_pipeline",
}
_loaded: dict[str, Callable[..., Any]] = {}


def _get(name: str) -> Callable[..., Any]:
    """The function :data:`PARSERS` names, its module imported on first use."""
    fn = _loaded.get(name)
    if fn is None:
        module, _, attr = PARSERS[name].partition(":")
        fn = _loaded[name] = getattr(importlib.import_module(module), attr)
    return fn


def is_linear(model: ModelLike) -> bool:
    """Is ``model`` a supported linear model (or a pipeline ending in one)? (:mod:`core.intake.parsing.linear`)"""
    return bool(_get("is_linear")(model))


def verify_linear(lin: LinearModel, model: ModelLike, *args: object, **kw: object) -> None:
    """:func:`core.intake.parsing.linear.verify_linear`: the LinearModel against the model's own outputs."""
    _get("verify_linear")(lin, model, *args, **kw)


def _library(model: ModelLike) -> str | None:
    """The :data:`PARSERS` entry that reads a tree ensemble ``model`` (None: no parser does)."""
    module = type(model).__module__.split(".")[0]
    if module == "sklearn":
        return "pipeline" if type(model).__name__ == "Pipeline" else "sklearn"
    if module in ("xgboost", "lightgbm"):
        return module
    if type(model).__name__ == "CatBoostJSON" or module == "catboost":
        return "catboost"
    if type(model).__name__ == "OnnxModel":
        return "onnx"
    return None


def _parser_for(model: ModelLike) -> Callable[[Any], TreeEnsemble]:
    if is_linear(model):
        raise UnsupportedModelError(f"This {type(model).__name__} is a linear model, not a tree ensemble. It is read "
                                    f"exactly by core.model.as_model for {LINEAR_ANALYSES}; the other analyses "
                                    f"need a tree ensemble. Supported tree ensembles: {SUPPORTED_MODELS}.")
    library = _library(model)
    if library is None:
        raise describe_unsupported(model)
    if library == "pipeline":
        return _parse_pipeline
    return _get(library)


def parse(model: ModelLike) -> TreeEnsemble:
    """Convert a fitted model into a ``TreeEnsemble`` (no verification of its
    predictions; its leaf values checked by :func:`check_leaf_sums`)."""
    ens = _parser_for(model)(model)
    check_leaf_sums(ens)
    return ens


def check_leaf_sums(ens: TreeEnsemble) -> None:
    """Refuse an ensemble whose leaf values can add up beyond
    :data:`~core.intake.parsing.filecheck.MAX_LEAF_VALUE` in size on some output
    (the largest leaf of every tree, plus the base score): the library adds them in
    float64 as the ensemble does, and near the float64 limit the sum overflows to
    infinity or keeps none of the smaller trees' digits, so no reading of it is the
    model's. Trained models stay many orders of magnitude below."""
    fl = ens._flat                                  # every tree's nodes stacked
    leaf = fl["feature_raw"] < 0
    tops = np.maximum.reduceat(np.where(leaf[:, None], np.abs(fl["value"]), 0.0), fl["offsets"], axis=0)
    over = np.flatnonzero(np.any(tops > MAX_LEAF_VALUE, axis=1))
    if over.size:
        k = int(over[0])
        raise ModelError(f"Tree {k} of this {ens.source or 'model'} holds a leaf value of {float(tops[k].max()):.3g}: "
                         f"beyond the {MAX_LEAF_VALUE:.0e} in size that a sum of leaves can hold. The file was "
                         "edited or is damaged; re-save the model from its library.")
    total = np.cumsum(np.vstack([np.abs(ens.base_score).astype(np.float64), tops]), axis=0)[-1]   # tree by tree
    if np.any(total > MAX_LEAF_VALUE):
        raise ModelError(f"The leaf values of this {ens.source or 'model'} add up to {float(total.max()):.3g} in size: "
                         f"beyond the {MAX_LEAF_VALUE:.0e} that a sum of leaves can hold. The file was edited or is "
                         "damaged; re-save the model from its library.")


def parse_any(model: ModelLike) -> TreeEnsemble | LinearModel:
    """A linear model (or a pipeline ending in one) as a LinearModel, any other
    supported model as a TreeEnsemble (no verification)."""
    if is_linear(model):
        if type(model).__name__ == "Pipeline":
            return _get("linear_pipeline")(model)
        return _get("linear")(model)
    return parse(model)


def _parse_pipeline(pipe: ModelLike) -> TreeEnsemble:
    """A Pipeline, its final estimator parsed by :func:`parse` like any model."""
    return _get("pipeline")(pipe, parse_final=parse)


def verify_against_source(ens: TreeEnsemble, model: ModelLike, n_random: int = 64, seed: int = 0) -> None:
    """Compare the ensemble's predictions with the source model's.

    Points: random points spanning the split levels, points placed exactly on
    thresholds, and rows that reach every leaf those miss (:func:`covered_probe_points`,
    within a bound on the work: a forest grown in full gets part of its leaves).
    Raises ``UnsupportedModelError`` when they disagree, so a model whose semantics
    we do not reproduce is refused, never approximated: a leaf read wrongly is a leaf
    some probe row reaches.
    """
    X, raw, _ = covered_probe_points(ens, n_random, seed)
    ours, theirs, what, run = _library_outputs(ens, model, X, raw)
    if theirs is None:
        return
    # outputs compared to their size (margins, values); scikit-learn's probabilities as they are:
    # scaled by the library's largest "probability", a forest giving 1e299 was let through at any
    # difference (ONNX graphs: see core.intake.parsing.onnx)
    probabilities = what == "probabilities" and not ens.source.startswith("onnx")
    if probabilities:
        _check_probabilities(ens, np.asarray(theirs, dtype=np.float64))
    err = float(np.max(np.abs(ours - theirs))) if ours.size else 0.0
    if not np.isfinite(err) or err > _tolerance(ens, theirs, probabilities):
        raise UnsupportedModelError(
            f"This {ens.source} model was parsed but its {what} differ from the library's own "
            f"(max difference {err:.3g}); it uses a feature the parser does not reproduce "
            "(for example categorical splits, missing-value routing or a custom link). "
            "Please report it, or retrain the model without that feature."
        )
    _verify_final_outputs(ens, model, X, theirs, run)


def _library_outputs(ens: TreeEnsemble, model: ModelLike, X: np.ndarray,
                     raw: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, str, Any]:
    """:func:`_outputs`, a failure of the library's own predict refused with a message."""
    try:
        return _outputs(ens, model, X, raw)
    except AtlasError:
        raise
    except Exception as exc:  # noqa: BLE001 - the library's own predict fails on points it should take
        raise ModelError(f"This {ens.source} model was parsed, but its library fails to predict with it on points "
                         "within its thresholds: the file is damaged or was edited (a setting its predict reads, or "
                         "a part no check covers). Re-save the model from its library.") from exc


def _tolerance(ens: TreeEnsemble, theirs: np.ndarray, probabilities: bool) -> float:
    """The largest difference allowed between the ensemble's outputs and the library's."""
    scale = 1.0 if probabilities else max(1.0, float(np.max(np.abs(theirs))) if theirs.size else 1.0)
    # XGBoost accumulates margins in float32: allow its rounding, nothing more; so does
    # onnxruntime, one float32 addition per tree
    tol = (2e-5 if ens.source.startswith("xgboost") else 1e-6) * scale
    if ens.source.startswith("onnx"):
        tol = (2e-5 + 1.2e-7 * ens.n_trees) * scale
    return tol


def _verify_final_outputs(ens: TreeEnsemble, model: ModelLike, X: np.ndarray, theirs: np.ndarray,
                          run: Any) -> None:
    """The checks past the raw outputs: an ONNX graph's labels, LightGBM's outputs after its
    link, CatBoost's probabilities."""
    if run is not None:
        _get("onnx_labels")(ens, model, X, theirs, run)
    if type(model).__module__.split(".")[0] == "lightgbm":
        _verify_lightgbm_outputs(ens, model, X)
    if type(model).__name__ == "CatBoostJSON" and ens.is_classifier:
        _verify_catboost_probabilities(ens, model, X)


def _outputs(ens: TreeEnsemble, model: ModelLike, X: np.ndarray,
             raw: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, str, Any]:
    """(ours, theirs, what) of :func:`core.model.native.native_outputs`, and for an ONNX graph its
    run on ``X`` (labels too: the graph is run once for both checks; ``raw``: the ensemble's raw
    outputs on ``X``), else None."""
    if type(model).__name__ == "OnnxModel":
        run = _get("onnx_run")(ens, model, X, raw)
        return (*run.compared, run)
    return (*native_outputs(ens, model, X), None)


def _verify_catboost_probabilities(ens: TreeEnsemble, model: ModelLike, X: np.ndarray) -> None:
    """CatBoost's own probabilities against the ensemble's. The raw values alone can agree
    while CatBoost maps them to classes otherwise: its ``class_to_label`` (edited to
    [2, 1, 0], it reversed the three probabilities) or its loss. Rows holding a level known
    only by its hash are left out, as in :func:`core.model.native.native_outputs`."""
    keep = np.ones(len(X), dtype=bool)
    for j in ens.categorical_features:
        hashed = np.array([str(c).startswith("#") for c in ens.categories[j] or ()] + [False], dtype=bool)
        keep &= ~hashed[np.clip(X[:, j].astype(np.int64), 0, len(hashed) - 1)]
    if not keep.any():
        return
    theirs = model.probabilities(model_input(ens, X[keep], frame=True))
    if theirs is None:
        return
    ours = ens.predict_proba(X[keep])
    if theirs.shape != ours.shape or not np.allclose(ours, theirs, rtol=0, atol=1e-7):
        raise UnsupportedModelError(
            f"This {ens.source} model was parsed but CatBoost's own probabilities differ from the ensemble's "
            f"(shape {theirs.shape} for {ours.shape}): its loss or class parameters (class_to_label) map its "
            "values to classes otherwise. Export the model again with model.save_model(path, format='json').")


def _check_probabilities(ens: TreeEnsemble, theirs: np.ndarray) -> None:
    """The library's own ``predict_proba`` on the probe points must be probabilities (each
    in 0..1, each row summing to 1); a model whose are not (an edited leaf: up to 1e299)
    predicts no class the analyses can read."""
    if not theirs.size:
        return
    sums = theirs.sum(axis=1) if theirs.ndim == 2 else np.ones(1)
    if not np.all(np.isfinite(theirs)) or np.any((theirs < -PROBABILITY_SLACK) | (theirs > 1 + PROBABILITY_SLACK)) \
            or np.any(np.abs(sums - 1) > PROBABILITY_SLACK):
        raise ModelError(f"This {ens.source} model's own predict_proba gives values from {np.nanmin(theirs):.3g} to "
                         f"{np.nanmax(theirs):.3g}, rows summing to {np.nanmin(sums):.3g} to {np.nanmax(sums):.3g}: no "
                         "probabilities. The file was edited or is damaged; re-fit the model and save it again.")


def _verify_lightgbm_outputs(ens: TreeEnsemble, model: ModelLike, X: np.ndarray) -> None:
    """LightGBM's final outputs (``predict``: probabilities or values after the
    objective's link; an ``LGBMClassifier``'s ``predict_proba`` and labels) against the
    ensemble's. The raw scores alone can agree while the link disagrees: a header
    saying one class and an objective saying three gave raw scores equal to a
    one-class reading, every probability 1.0 against LightGBM's 0.19 to 0.71."""
    Xn = native_input(ens, model, X)
    booster = model.booster_ if hasattr(model, "booster_") else model
    if not ens.is_classifier:
        _same_lightgbm_outputs(ens, "predictions", ens.predict(X)[:, None], booster.predict(Xn))
        return
    proba = ens.predict_proba(X)
    ours = proba[:, 1:] if ens.link == "sigmoid" else proba
    raw = booster.predict(Xn)
    raw_proba = model.predict_proba(Xn) if booster is not model else None
    _same_lightgbm_outputs(ens, "predictions", ours, raw)
    if raw_proba is None:
        return
    _same_lightgbm_outputs(ens, "probabilities", proba, raw_proba)
    top = np.sort(proba, axis=1)
    clear = top[:, -1] - top[:, -2] > 1e-9
    labels = np.asarray(model.predict(Xn))
    if labels.shape != (len(X),) or not np.array_equal(labels[clear], ens.predict(X)[clear]):
        raise UnsupportedModelError(f"This {ens.source} model was parsed but its labels differ from the "
                                    "ensemble's; re-save the model from LightGBM.")


def _same_lightgbm_outputs(ens: TreeEnsemble, what: str, mine: np.ndarray, raw: Any) -> None:
    """LightGBM's ``what`` (``raw``) equal to the ensemble's (``mine``), in the same shape."""
    theirs = np.asarray(raw, dtype=np.float64)
    if theirs.size == mine.size:
        theirs = theirs.reshape(mine.shape)
    if theirs.shape != mine.shape or not np.allclose(mine, theirs, rtol=1e-6, atol=1e-9):
        raise UnsupportedModelError(
            f"This {ens.source} model was parsed but LightGBM's own {what} differ from the ensemble's "
            f"(shape {theirs.shape} for {mine.shape}); its header, objective and trees disagree. Re-save the "
            "model from LightGBM.")


FLOAT32_MAX = float(np.finfo(np.float32).max)


def _reads_float32(ens: TreeEnsemble) -> bool:
    """Does the model's library read rows as float32 (scikit-learn's trees and forests,
    XGBoost, CatBoost)? A threshold near the float32 limit then has no number above it
    that the library takes (a larger one is infinite to it, and refused)."""
    source = ens.source
    return source.startswith(("xgboost", "catboost")) or (source.startswith("sklearn")
                                                           and "HistGradientBoosting" not in source)


def _top(ens: TreeEnsemble) -> float:
    """The largest number a probe row holds: the libraries that read rows as float32 refuse a
    number float32 cannot hold (as infinite)."""
    return FLOAT32_MAX if _reads_float32(ens) else 1e307


def probe_points(ens: TreeEnsemble, n_random: int = 64, seed: int = 0) -> np.ndarray:
    """Random points over the split range plus points exactly on thresholds;
    a categorical feature gets codes, each code (the missing one included) in turn.
    When the model routes missing values, more blocks: the random points and the
    points on thresholds with about a third of their numbers missing (NaN), each
    numerical column missing in turn on points otherwise on thresholds, and a
    point with every number missing."""
    rng = np.random.default_rng(seed)
    d = ens.n_features
    top = _top(ens)
    levels, lo, hi = _probe_ranges(ens, top)
    X = rng.uniform(lo, hi, size=(n_random, d))
    on = X.copy()
    for j in range(d):
        if ens.categories[j] is not None:  # every code, the missing one included (if the model takes it)
            k = ens.n_codes(j) - (ens.feature_names[j] in ens.meta.get("no_missing", ()))
            X[:, j] = rng.integers(0, k, size=n_random)
            on[:, j] = np.arange(n_random) % k
        elif levels[j].size:                # rng.choice's own draw (the same numbers), without its checks
            on[:, j] = levels[j][rng.integers(0, levels[j].size, size=n_random)]
    if not getattr(ens, "routes_missing", False):
        return np.vstack([X, on])
    return np.vstack([X, on, *_missing_blocks(ens, X, on, rng)])


def covered_probe_points(ens: TreeEnsemble, n_random: int = 64, seed: int = 0) -> tuple[np.ndarray, np.ndarray,
                                                                                       Cover]:
    """:func:`probe_points`, then rows that reach every leaf none of them reaches, within
    the bounds of :func:`core.model.cover.covering_rows` (their free values from the random points):
    the rows, the ensemble's raw outputs on them (one walk finds both the outputs and the
    leaves reached), and what the covering did."""
    X = probe_points(ens, n_random, seed)
    raw, seen = reached_leaves(ens, X)
    top = _top(ens)
    more, cover = covering_rows(ens, seen, X[:n_random], top)
    if not len(more):
        return X, raw, cover
    return np.vstack([X, more]), np.vstack([raw, ens.predict_raw(more)]), cover


def _probe_ranges(ens: TreeEnsemble, top: float) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """Per feature its split levels (numbers only, within ``top``), and the range random points
    span: the levels with a tenth of their span either side, within ``top``; -1..1 for a feature
    without one."""
    d = ens.n_features
    lo, hi = np.full(d, -1.0), np.full(d, 1.0)
    levels = []
    for j in range(d):
        lv = ens.split_levels(j)
        lv = lv[lv < MISSING_ONLY]                       # a split on NaN only: no number to probe
        beyond = lv.size and (lv[0] < -top or lv[-1] > top)   # a threshold beyond what the library takes:
        levels.append(np.clip(lv, -top, top) if beyond else lv)   # points on it at its limit
        if lv.size:
            a, b = (min(max(float(v), -1e300), 1e300) for v in (lv[0], lv[-1]))   # no overflow near the float limit
            span = max(b - a, 1e-9)
            lo[j], hi[j] = max(a - 0.1 * span, -top), min(b + 0.1 * span, top)
    return levels, lo, hi


def _missing_blocks(ens: TreeEnsemble, X: np.ndarray, on: np.ndarray,
                    rng: np.random.Generator) -> list[np.ndarray]:
    """The blocks of :func:`probe_points` with missing numbers: ``X`` and ``on`` with about a
    third missing, each numerical column missing in turn on points on thresholds, all missing."""
    d = ens.n_features
    nan = X.copy()
    numeric = np.array([c is None for c in ens.categories], dtype=bool)
    nan[(rng.random(nan.shape) < 0.35) & numeric[None, :]] = np.nan
    nan_on = on.copy()
    nan_on[(rng.random(on.shape) < 0.35) & numeric[None, :]] = np.nan
    cols = np.flatnonzero(numeric)
    base = on if len(on) else np.zeros((1, d))
    each = base[np.arange(cols.size + 1) % len(base)].copy()   # column j missing, the others on thresholds
    each[np.arange(cols.size), cols] = np.nan
    each[cols.size, cols] = np.nan                            # and every number missing at once
    return [nan, nan_on, each]
