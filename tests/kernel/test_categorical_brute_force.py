"""Optimal counterfactuals on native categorical models agree with brute force.

Small LightGBM and XGBoost models on pandas ``category`` columns and a small
CatBoost model with one-hot categoricals, loaded through the workspace (so the
categorical feature is its 0/1 columns): the solver's optimal cost equals the
minimum over every combination of candidate values (each numerical column at
its own value, a split level or just above one; the categorical column at each
of its levels), costed by the same cost model, and every counterfactual gets
the target from the original model on its raw row.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from oracles import categorical_brute_force, returned_cost

from core.intake.workspace import build_workspace
from core.optimal import optimal_counterfactual


def _table(n=600, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"x": rng.normal(size=n).round(2), "job": rng.choice(["a", "b", "c", "d"], n),
                       "z": rng.normal(size=n).round(2)})
    df["y"] = ((df.x > 0.2) ^ df.job.isin(["b", "d"]) | (df.z > 1.0)).astype(int)
    return df


def _lightgbm(df):
    import lightgbm as lgb

    X = df.drop(columns="y").astype({"job": "category"})
    return lgb.LGBMClassifier(n_estimators=4, num_leaves=4, min_data_per_group=5, cat_smooth=1, verbose=-1,
                              n_jobs=1).fit(X, df.y)


def _xgboost(df):
    import xgboost as xgb

    X = df.drop(columns="y").astype({"job": "category"})
    return xgb.XGBClassifier(n_estimators=4, max_depth=2, enable_categorical=True, max_cat_to_onehot=1,
                             n_jobs=1).fit(X, df.y)


def _catboost(df):
    cb = pytest.importorskip("catboost")
    from core.intake.parsing.catboost import CatBoostJSON

    model = cb.CatBoostClassifier(iterations=4, depth=2, verbose=0, one_hot_max_size=10, cat_features=["job"],
                                  allow_writing_files=False, thread_count=1).fit(df.drop(columns="y"), df.y)
    from core.intake.parsing.catboost import _exported

    return CatBoostJSON(document=_exported(model).document, native=model)


def _says(model, raw):
    if hasattr(model, "raw_scores"):
        return int(model.raw_scores(raw)[0, 0] > 0)
    return int(model.predict(raw)[0])


@pytest.mark.parametrize("make", [_lightgbm, _xgboost, _catboost], ids=["lightgbm", "xgboost", "catboost"])
def test_optimal_equals_brute_force_on_categorical_models(make):
    df = _table()
    model = make(df)
    ws = build_workspace(df, "y", model, name="tiny")
    ens, X = ws.ensemble, ws.X.to_numpy(float)
    assert any(len(g) >= 2 for g in ws.schema.groups().values())
    rows = np.flatnonzero(ws.predictions == 0)[:6]
    assert len(rows) == 6
    for r in rows:
        res = optimal_counterfactual(ens, X[r], 1, schema=ws.schema, norm="l1", X_ref=X, model=model)
        assert res.found and res.status == "optimal", res.message
        assert returned_cost(res, ens, X[r], "l1", ws.schema) == pytest.approx(
            categorical_brute_force(ens, ws.schema, X[r], 1), rel=1e-6, abs=1e-9)
        raw = ws.to_raw(np.asarray(res.x, dtype=float)[None, :])
        assert raw["job"].iloc[0] in ("a", "b", "c", "d")
        assert _says(model, raw) == 1
