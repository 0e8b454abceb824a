"""Training a tree ensemble in place, on a prepared table, scored on a held-out split.

The app's "train a model here" path, for data that comes without a model.
Every name is importable from :mod:`core.intake.io`, where it was before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from core.errors import DataError, need

__all__ = ["FAMILIES", "TrainedModel", "infer_task", "train_model"]

FAMILIES = ("random_forest", "gradient_boosting", "xgboost", "lightgbm")


@dataclass(frozen=True)
class TrainedModel:
    model: Any
    family: str
    task: str
    metric: str
    holdout_score: float
    params: dict[str, Any]


def infer_task(y: pd.Series) -> str:
    """Classification for text, boolean or few integral values; else regression."""
    if not pd.api.types.is_numeric_dtype(y) or pd.api.types.is_bool_dtype(y):
        return "classification"
    v = y.dropna().to_numpy(dtype=float)
    return "classification" if np.all(np.mod(v, 1) == 0) and np.unique(v).size <= 20 else "regression"


def train_model(X: pd.DataFrame, y: pd.Series, family: str = "random_forest", *,
                n_estimators: int = 100, max_depth: int = 5, learning_rate: float = 0.1,
                test_size: float = 0.25, random_state: int = 0) -> TrainedModel:
    """Train a tree ensemble on the data and score it on a held-out split."""
    from sklearn.model_selection import train_test_split  # scikit-learn: imported only to train

    if family not in FAMILIES:
        raise ValueError(f"Unknown model family {family!r}; choose one of {FAMILIES}.")
    if len(X) < 10:
        raise DataError(f"Only {len(X)} rows: at least 10 are needed to train and hold out a test split.")
    task = infer_task(y)
    yv = _training_target(y, task, family)
    strat = yv if task == "classification" and yv.value_counts().min() >= 2 else None
    Xtr, Xte, ytr, yte = train_test_split(X, yv, test_size=test_size, random_state=random_state, stratify=strat)
    params: dict[str, int | float] = dict(n_estimators=n_estimators, max_depth=max_depth, random_state=random_state)
    model = _new_model(family, task == "classification",
                       _Settings(n_estimators, max_depth, random_state, learning_rate))
    model.fit(Xtr, ytr)
    if task == "classification":
        score = float(np.mean(np.asarray(model.predict(Xte)) == np.asarray(yte)))
        metric = "accuracy"
    else:
        from sklearn.metrics import r2_score  # scikit-learn, as above
        score, metric = float(r2_score(yte, model.predict(Xte))), "R²"
    if family != "random_forest":
        params["learning_rate"] = learning_rate
    return TrainedModel(model, family, task, metric, score, params)


def _training_target(y: pd.Series, task: str, family: str) -> pd.Series:
    """The target as the family takes it (XGBoost takes classes as 0..k-1); a classifier's
    target must hold two classes at least."""
    if task != "classification":
        return y
    if y.nunique() < 2:
        raise DataError("The target has a single value; a classifier needs at least two classes.")
    if family in ("xgboost",):
        codes = np.unique(y.to_numpy(), return_inverse=True)[1]     # XGBoost takes classes as 0..k-1
        return pd.Series(codes, index=y.index)
    return y


@dataclass(frozen=True)
class _Settings:
    """What :func:`train_model` asks of the model it trains."""

    n_estimators: int
    max_depth: int
    random_state: int
    learning_rate: float

    def common(self) -> dict[str, int]:
        """The settings every family takes by the same names."""
        return dict(n_estimators=self.n_estimators, max_depth=self.max_depth, random_state=self.random_state)


def _new_model(family: str, classifier: bool, st: _Settings) -> Any:
    """An unfitted model of the family, a classifier or a regressor (its library imported only now)."""
    if family == "random_forest":
        from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor  # the chosen family only
        rf = RandomForestClassifier if classifier else RandomForestRegressor
        return rf(n_jobs=1, **st.common())
    if family == "gradient_boosting":
        from sklearn.ensemble import GradientBoostingClassifier, GradientBoostingRegressor  # as above
        gb = GradientBoostingClassifier if classifier else GradientBoostingRegressor
        return gb(learning_rate=st.learning_rate, **st.common())
    if family == "xgboost":
        xgb = need("xgboost", "training an XGBoost model")  # optional and heavy: the chosen family only
        cls = xgb.XGBClassifier if classifier else xgb.XGBRegressor
        return cls(learning_rate=st.learning_rate, n_jobs=1, **st.common())
    import lightgbm as lgb  # optional and heavy: the chosen family only
    lg = lgb.LGBMClassifier if classifier else lgb.LGBMRegressor
    return lg(n_estimators=st.n_estimators, max_depth=st.max_depth, random_state=st.random_state,
              learning_rate=st.learning_rate, num_leaves=min(2 ** st.max_depth, 131072), verbose=-1, n_jobs=1)
