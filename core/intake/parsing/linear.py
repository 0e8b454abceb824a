"""scikit-learn's linear estimators as a :class:`core.model.linear.LinearModel`.

Each supported estimator predicts from ``decision_function(X) = X @ coef_.T +
intercept_`` (``LinearClassifierMixin`` / ``LinearModel`` of scikit-learn): the
parser copies ``coef_`` and ``intercept_`` (densified, float64), the classes and
the link its ``predict_proba`` uses (logistic regression: sigmoid for two classes,
softmax for more; SGDClassifier's log loss: sigmoid, or one-vs-rest normalised
sigmoids; no probability otherwise). A pipeline ending in one of these is read by
:func:`core.intake.parsing.pipeline.parse_linear_pipeline`.

:func:`verify_linear` compares the result with the library's own
``decision_function`` / ``predict`` / ``predict_proba`` on random points and on
data-like points (each numerical column around where its scaler centres it, every
category of a categorical column in turn): labels must be equal and scores
within 1e-9 relative, else the model is refused rather than approximated.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

import numpy as np

from core.errors import UnsupportedModelError
from core.model.linear import LinearLink, LinearModel
from core.model.native import native_input
from core.typing import ModelLike

__all__ = ["LINEAR_CLASSIFIERS", "LINEAR_REGRESSORS", "is_linear", "parse_linear_estimator", "verify_linear",
           "linear_probe_points"]

LINEAR_CLASSIFIERS = ("LogisticRegression", "LogisticRegressionCV", "LinearSVC", "SGDClassifier", "RidgeClassifier",
                      "RidgeClassifierCV", "Perceptron", "PassiveAggressiveClassifier")
LINEAR_REGRESSORS = ("LinearRegression", "Ridge", "RidgeCV", "Lasso", "LassoCV", "ElasticNet", "ElasticNetCV",
                     "SGDRegressor", "HuberRegressor", "LinearSVR", "BayesianRidge", "Lars", "LassoLars")

#: a score may differ from the library's by this much, relative to max(1, |score|)
SCORE_RTOL = 1e-9


def _is_linear_estimator(model: ModelLike) -> bool:
    name = type(model).__name__
    return type(model).__module__.startswith("sklearn.") and name in LINEAR_CLASSIFIERS + LINEAR_REGRESSORS


def is_linear(model: ModelLike) -> bool:
    """Is ``model`` a supported linear estimator, or a Pipeline whose last step is one?"""
    if type(model).__name__ == "Pipeline" and type(model).__module__.startswith("sklearn") \
            and getattr(model, "steps", None):
        return _is_linear_estimator(model.steps[-1][1])
    return _is_linear_estimator(model)


def _dense(a: Any) -> np.ndarray:
    if hasattr(a, "toarray"):
        a = a.toarray()
    return np.asarray(a, dtype=np.float64)


def _link(est: ModelLike, n_classes: int) -> LinearLink:
    name = type(est).__name__
    if name in ("LogisticRegression", "LogisticRegressionCV"):
        return "sigmoid" if n_classes == 2 else "softmax"
    if name == "SGDClassifier" and getattr(est, "loss", None) == "log_loss":
        return "sigmoid" if n_classes == 2 else "ovr"
    return "decision"


def linear_arrays(est: ModelLike) -> tuple[np.ndarray, np.ndarray, Literal["classification", "regression"], LinearLink,
                                     np.ndarray | None]:
    """``(coef (n_outputs, d), intercept (n_outputs,), task, link, classes)`` of a fitted
    supported linear estimator, refused with a message when it does not fit the form."""
    name = type(est).__name__
    if not hasattr(est, "coef_"):
        raise UnsupportedModelError(f"The {name} is not fitted (it has no coef_); fit it before loading it.")
    coef = np.atleast_2d(_dense(est.coef_))
    intercept = np.atleast_1d(_dense(getattr(est, "intercept_", 0.0))).ravel()
    if name in LINEAR_CLASSIFIERS:
        classes = np.asarray(est.classes_)
        if classes.ndim != 1 or len(classes) < 2:
            raise UnsupportedModelError(f"The {name} has {len(classes)} class(es); a classifier needs at least two "
                                        "(a multilabel model is not supported).")
        want = 1 if len(classes) == 2 else len(classes)
        if coef.shape[0] != want:
            raise UnsupportedModelError(f"The {name} has {coef.shape[0]} rows of coefficients for {len(classes)} "
                                        "classes; only one score per class (or one for two classes) is supported.")
        task: Literal["classification", "regression"] = "classification"
        link = _link(est, len(classes))
    else:
        if coef.shape[0] != 1:
            raise UnsupportedModelError(f"The {name} predicts {coef.shape[0]} targets at once; only single-target "
                                        "regressors are supported.")
        classes, task, link = None, "regression", "identity"
    if intercept.size == 1 and coef.shape[0] > 1:
        intercept = np.repeat(intercept, coef.shape[0])
    return coef, intercept, task, link, classes


def parse_linear_estimator(est: ModelLike) -> LinearModel:
    """A fitted linear estimator (no pipeline) as a LinearModel over its input columns."""
    coef, intercept, task, link, classes = linear_arrays(est)
    d = coef.shape[1]
    names = getattr(est, "feature_names_in_", None)
    names = [str(n) for n in names] if names is not None else [f"x{j}" for j in range(d)]
    return LinearModel(coef, intercept, feature_names=tuple(names), task=task,
                       link=link, classes=classes, source=f"sklearn.{type(est).__name__}",
                       meta={"input": "array"})


def linear_probe_points(lin: LinearModel, n: int = 64, seed: int = 0) -> np.ndarray:
    """Random points (uniform in [-1000, 1000]) and data-like points (each numerical
    column at ``centre + spread * N(0, 1)`` from ``meta["scale"]``, recorded by the
    pipeline parser where a scaler centres it; N(0, 1) elsewhere), every category of a
    categorical column in turn (the missing code where the model takes it)."""
    rng = np.random.default_rng(seed)
    d = lin.n_features
    centre = np.zeros(d)
    spread = np.ones(d)
    for name, (c, s) in lin.meta.get("scale", {}).items():
        j = lin.feature_names.index(name)
        centre[j], spread[j] = float(c), float(s)
    wide = rng.uniform(-1000.0, 1000.0, size=(n, d))
    like = centre + spread * rng.standard_normal(size=(n, d))
    for j in lin.categorical_features:
        codes = [k for k in range(lin.n_codes(j)) if lin.code_allowed(j, k)]
        wide[:, j] = rng.choice(codes, size=n)
        like[:, j] = np.asarray(codes)[np.arange(n) % len(codes)]
    return np.vstack([wide, like])


def verify_linear(lin: LinearModel, model: ModelLike, n: int = 64, seed: int = 0, X: np.ndarray | None = None) -> None:
    """Compare the LinearModel with the library's own outputs (see the module doc);
    ``X``: further rows (codes view) to compare on. Raises UnsupportedModelError."""
    P = linear_probe_points(lin, n, seed)
    if X is not None:
        P = np.vstack([P, np.asarray(X, dtype=np.float64)])
    imputed = [j for j, name in enumerate(lin.feature_names)
               if name in lin.meta.get("impute", {}) and lin.categories[j] is None]
    if imputed:                              # missing numbers, read as the imputer's fill value by both
        gaps = P[:n].copy()
        gaps[:, imputed] = np.where(np.arange(n)[:, None] % 2 == 0, np.nan, gaps[:, imputed])
        P = np.vstack([P, gaps])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)     # the probes hold unknown categories on purpose
        _compare(lin, model, P)


def _library_scores(model: ModelLike, Xn: object, n: int) -> np.ndarray:
    """The library's scores: its decision function, else its predictions, one row per point."""
    if hasattr(model, "decision_function"):
        return np.asarray(model.decision_function(Xn), dtype=np.float64).reshape(n, -1)
    return np.asarray(model.predict(Xn), dtype=np.float64).reshape(n, -1)


def _same_predictions(lin: LinearModel, labels: np.ndarray, mine: np.ndarray) -> np.ndarray:
    """Per point, whether the library's prediction is ours: the same label, or a value within
    :data:`SCORE_RTOL`."""
    if lin.task == "classification":
        return np.asarray(labels == mine)
    return np.asarray(np.abs(labels.astype(float) - mine) <= SCORE_RTOL * np.maximum(1.0, np.abs(mine)))


def _compare(lin: LinearModel, model: ModelLike, P: np.ndarray) -> None:
    Xn = native_input(lin, model, P)   # type: ignore[arg-type]   # duck-typed: names, categories, meta
    what = f"This {lin.source} model was read as a linear model but its"
    ours = lin.scores(P)
    theirs = _library_scores(model, Xn, len(P))
    if theirs.shape != ours.shape:
        raise UnsupportedModelError(f"{what} scores have shape {theirs.shape}, ours {ours.shape}.")
    err = np.abs(ours - theirs) / np.maximum(1.0, np.abs(theirs))
    if not np.all(np.isfinite(theirs)) or float(err.max()) > SCORE_RTOL:
        raise UnsupportedModelError(f"{what} scores differ from the library's (largest relative difference "
                                    f"{float(np.nanmax(err)):.3g}); it is not reproduced exactly and is refused.")
    same = _same_predictions(lin, np.asarray(model.predict(Xn)), lin.predict(P))
    if not np.all(same):
        raise UnsupportedModelError(f"{what} predictions differ from the library's on {int((~same).sum())} of "
                                    f"{len(P)} points; it is refused.")
    if lin.has_proba and hasattr(model, "predict_proba"):
        p = np.asarray(model.predict_proba(Xn), dtype=np.float64)
        if p.shape != (len(P), lin.n_classes) or float(np.abs(p - lin.predict_proba(P)).max()) > 1e-9:
            raise UnsupportedModelError(f"{what} probabilities differ from the library's; it is refused.")
