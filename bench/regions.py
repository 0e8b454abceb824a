"""Benchmark: exact decision regions (Blanchart).

* 2-D slice time through 10 rows for RF(100, depth 5) and XGBoost(200, depth 6)
  on breast cancer (goal <= 1 s per slice);
* exact counterfactual (branch and bound) vs the MILP backend (CP-SAT) on the
  same queries, squared L2 on range-scaled features: median times and their
  ratio, share proven, and whether the optimal costs agree (relative 1e-6).
Prints JSON.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.intake.models import from_model  # noqa: E402
from core.optimal import optimal_counterfactual  # noqa: E402
from core.regions import exact_counterfactual, slice_regions  # noqa: E402
from core.schema import infer_schema  # noqa: E402


def _top2(ens):
    counts = np.zeros(ens.n_features)
    for t in ens.trees:
        np.add.at(counts, t.feature[t.feature >= 0], 1)
    return tuple(int(j) for j in np.argsort(-counts)[:2])


def main() -> None:
    import xgboost as xgb
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import RandomForestClassifier

    b = load_breast_cancer(as_frame=True)
    Xdf, y = b.data, b.target
    X = Xdf.to_numpy(float)
    schema = infer_schema(Xdf)
    out = {"data": "breast_cancer (30 features)", "slices": {}, "counterfactuals": {}}
    models = {"RF(100, depth 5)": RandomForestClassifier(100, max_depth=5, random_state=0, n_jobs=2).fit(Xdf, y),
              "XGBoost(200, depth 6)": xgb.XGBClassifier(n_estimators=200, max_depth=6, n_jobs=2).fit(Xdf, y)}
    rows = np.random.default_rng(0).choice(len(X), 10, replace=False)
    for name, model in models.items():
        ens = from_model(model)
        feats = _top2(ens)
        lo, hi = X.min(axis=0), X.max(axis=0)
        times, counts = [], []
        for r in rows:
            t0 = time.perf_counter()
            rs = slice_regions(ens, X[r], feats, bounds={feats[0]: (lo[feats[0]], hi[feats[0]]),
                                                       feats[1]: (lo[feats[1]], hi[feats[1]])})
            times.append(time.perf_counter() - t0)
            counts.append(len(rs.regions))
        out["slices"][name] = {"median_s": round(float(np.median(times)), 3), "max_s": round(float(max(times)), 3),
                               "median_regions": int(np.median(counts)), "goal_s": 1.0}
        bnb_t, milp_t, agree, proven = [], [], [], 0
        for r in rows[:5]:
            target = 1 - int(ens.predict(X[r:r + 1])[0])
            a = exact_counterfactual(ens, X[r], target, norm="l2", schema=schema, X_ref=X, time_limit=20)
            m = optimal_counterfactual(ens, X[r], target, norm="l2", schema=schema, X_ref=X, time_limit=20)
            bnb_t.append(a.elapsed)
            milp_t.append(m.elapsed)
            proven += a.status == "optimal"
            if a.status == m.status == "optimal":
                agree.append(abs(a.cost - m.cost) <= 1e-6 * max(1e-12, abs(m.cost)))
        out["counterfactuals"][name] = {
            "queries": 5, "bnb_median_s": round(float(np.median(bnb_t)), 3),
            "milp_median_s": round(float(np.median(milp_t)), 3),
            "ratio_bnb_over_milp": round(float(np.median(bnb_t) / max(np.median(milp_t), 1e-9)), 2),
            "bnb_proven": f"{proven}/5", "costs_agree_where_both_proven": all(agree) if agree else None}
        print(json.dumps({name: [out["slices"][name], out["counterfactuals"][name]]}), file=sys.stderr, flush=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
