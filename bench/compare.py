"""Benchmark: counterfactuals valid for two models, and a recourse-invalidation study.

Adult (../shared/data/adult.csv, one-hot categories), model A = RandomForest(100
trees, depth 5) on one half of the rows, model B = XGBoost(100 trees, depth 4)
on the other half; protected attribute Sex held fixed; favourable class 1.

* ``--queries`` rows decided unfavourably by both: the cheapest point valid for
  both (``also_valid_for``, L1 on range-scaled features), median and p95
  seconds, every one proven optimal; the reference in the same run is the
  same query on model A alone (ratio both / A alone);
* the invalidation study (``core.audit.compare.compare_models``) of ``--rows`` rows
  with 2 local processes: seconds, and the share invalidated per group.

Prints JSON.

    python bench/compare.py [--queries 20] [--rows 500]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common import ADULT, adult_with_sex_protected, problem  # noqa: E402

from core.audit.compare import compare_models  # noqa: E402
from core.intake.models import from_model  # noqa: E402
from core.optimal import optimal_counterfactual  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--rows", type=int, default=500)
    a = ap.parse_args()
    data = adult_with_sex_protected()
    if data is None:
        print(json.dumps({"skipped": f"{ADULT} is absent"}))
        return
    import xgboost as xgb
    from sklearn.ensemble import RandomForestClassifier

    X, y, schema, _ = data
    half = np.random.default_rng(0).permutation(len(X))
    ia, ib = half[: len(X) // 2], half[len(X) // 2:]
    rf = RandomForestClassifier(n_estimators=100, max_depth=5, random_state=0, n_jobs=2).fit(X.iloc[ia], y[ia])
    xg = xgb.XGBClassifier(n_estimators=100, max_depth=4, n_jobs=2, random_state=0).fit(X.iloc[ib], y[ib])
    ea, eb = from_model(rf, feature_names=list(X.columns)), from_model(xg, feature_names=list(X.columns))
    A = X.to_numpy(float)
    both_down = np.flatnonzero((ea.predict(A) != 1) & (eb.predict(A) != 1))
    rows = np.random.default_rng(1).choice(both_down, a.queries, replace=False)
    kw = dict(schema=schema, norm="l1", fixed=["Sex"], time_limit=60.0, X_ref=A)
    t_both, t_alone, statuses, extra = [], [], [], []
    for r in rows:
        t0 = time.perf_counter()
        res = optimal_counterfactual(ea, A[r], 1, also_valid_for=[eb], **kw)
        t_both.append(time.perf_counter() - t0)
        statuses.append(res.status)
        assert res.found and ea.predict(res.x[None])[0] == 1 and eb.predict(res.x[None])[0] == 1
        t0 = time.perf_counter()
        alone = optimal_counterfactual(ea, A[r], 1, **kw)
        t_alone.append(time.perf_counter() - t0)
        extra.append(res.cost - alone.cost)
    t0 = time.perf_counter()
    c = compare_models(ea, eb, A, schema=schema, target=1, protected=["Sex"], max_rows=a.rows, time_limit=30.0,
                       n_jobs=2, n_boot=500, n_perm=1000)
    t_study = time.perf_counter() - t0
    out = {
        "dataset": "adult", "model_a": "RF(100, depth 5), half A", "model_b": "XGBoost(100, depth 4), half B",
        "problem": problem(schema, fixed=kw["fixed"], protected=["Sex"]),     # the same for every query and the study
        "queries": len(rows), "valid_for_both_median_s": round(float(np.median(t_both)), 3),
        "valid_for_both_p95_s": round(float(np.quantile(t_both, 0.95)), 3),
        "a_alone_median_s": round(float(np.median(t_alone)), 3),
        "ratio_both_over_alone_median": round(float(np.median(t_both) / max(np.median(t_alone), 1e-9)), 2),
        "all_optimal": all(s == "optimal" for s in statuses),
        "extra_cost_median": round(float(np.median(extra)), 4),
        "study_rows": int(len(c.rows)), "study_seconds_2_processes": round(t_study, 1),
        "invalidated": round(c.invalidated, 3),
        "invalidated_by_group": {f"{g.attribute}={g.group}": round(g.invalidated, 3) for g in c.groups.itertuples()},
        "decisions_alike": round(float(c.agreement.iloc[0]["agree"]), 4),
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
