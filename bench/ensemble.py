"""Benchmark: TreeEnsemble parsing and prediction against the native libraries.

Prints JSON. Figures are ratios measured in the same process (the machines are
shared and noisy): our time / native time, or native / ours for throughput.
Goals (issue 3): parse a 500-tree depth-8 XGBoost model in <= 1 s; our
vectorised predict_proba at >= 0.5x the native throughput on 100k rows.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import best_of  # noqa: E402

from core.intake.models import from_model  # noqa: E402


def main() -> None:
    import lightgbm as lgb
    import xgboost as xgb
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(0)
    n_train, d = 20_000, 20
    X = rng.normal(size=(n_train, d))
    y = (X[:, :5].sum(axis=1) + 0.5 * rng.normal(size=n_train) > 0).astype(int)
    Xq = rng.normal(size=(100_000, d))
    out = {"n_rows": len(Xq), "n_features": d}

    xgbm = xgb.XGBClassifier(n_estimators=500, max_depth=8, learning_rate=0.05, n_jobs=2, tree_method="hist")
    xgbm.fit(X, y)
    out["xgb_parse_s"] = round(best_of(lambda: from_model(xgbm, verify=False)), 4)
    out["xgb_parse_verified_s"] = round(best_of(lambda: from_model(xgbm)), 4)
    ens = from_model(xgbm, verify=False)
    out["xgb_trees"], out["xgb_leaves"] = ens.n_trees, ens.n_leaves
    t_native = best_of(lambda: xgbm.predict_proba(Xq))
    t_ours = best_of(lambda: ens.predict_proba(Xq))
    out["xgb_predict_native_s"], out["xgb_predict_ours_s"] = round(t_native, 4), round(t_ours, 4)
    out["xgb_throughput_ratio"] = round(t_native / t_ours, 3)

    for name, model in {
        "rf100_d8": RandomForestClassifier(100, max_depth=8, n_jobs=2, random_state=0),
        "lgb200_l64": lgb.LGBMClassifier(n_estimators=200, num_leaves=64, verbose=-1, n_jobs=2),
    }.items():
        model.fit(X, y)
        e = from_model(model)
        tn = best_of(lambda: model.predict_proba(Xq))
        to = best_of(lambda: e.predict_proba(Xq))
        out[f"{name}_throughput_ratio"] = round(tn / to, 3)
        out[f"{name}_predict_ours_s"] = round(to, 4)
    out["goal_parse_s"] = 1.0
    out["goal_throughput_ratio"] = 0.5
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
