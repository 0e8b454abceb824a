"""The source libraries' own predictions, for verification and tests."""

from __future__ import annotations

from typing import Any

import numpy as np


def native_outputs(ens: Any, model: Any, X: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, str]:
    """Return (ours, theirs, what) on X; ``theirs`` is None when the model
    gives no comparable output."""
    module = type(model).__module__.split(".")[0]
    Xn = _named(model, X)
    if ens.task == "anomaly":
        return ens.score_samples(X), model.score_samples(Xn), "anomaly scores"
    if module == "xgboost":
        import xgboost as xgb

        booster = model.get_booster() if hasattr(model, "get_booster") else model
        kw = {}
        it = ens.meta.get("iteration_range")
        if it is not None:
            kw["iteration_range"] = it
        dm = xgb.DMatrix(X, feature_names=booster.feature_names, feature_types=booster.feature_types)
        margin = booster.predict(dm, output_margin=True, **kw)
        margin = np.asarray(margin, dtype=np.float64).reshape(X.shape[0], -1)
        return ens.predict_raw(X), margin, "margins"
    if module == "lightgbm":
        booster = model.booster_ if hasattr(model, "booster_") else model
        if booster.dump_model(num_iteration=1).get("average_output"):
            # boosting="rf": LightGBM's raw_score is not averaged, its predict is
            out = np.asarray(booster.predict(X), dtype=np.float64).reshape(X.shape[0], -1)
            ours = ens.predict_proba(X)[:, 1:] if ens.link == "sigmoid" else (
                ens.predict_proba(X) if ens.is_classifier else ens.predict_raw(X))
            return ours, out, "predictions"
        raw = np.asarray(booster.predict(X, raw_score=True), dtype=np.float64).reshape(X.shape[0], -1)
        return ens.predict_raw(X), raw, "raw scores"
    if ens.task == "classification":
        return ens.predict_proba(X), np.asarray(model.predict_proba(Xn), dtype=np.float64), "probabilities"
    return ens.predict(X), np.asarray(model.predict(Xn), dtype=np.float64).ravel(), "predictions"


def _named(model: Any, X: np.ndarray) -> Any:
    """X as a DataFrame with the model's feature names when it was fitted with them."""
    names = getattr(model, "feature_names_in_", None)
    if names is None:
        return X
    import pandas as pd

    return pd.DataFrame(X, columns=list(names))
