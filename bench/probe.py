"""Benchmark: the box search probed first on a sum of costs (core/solvers/race.py).

On an ensemble of at most ``race.PROBE_LEAVES`` leaves, a sum of feature costs
goes to the box search alone first, for a bounded number of boxes, then to
CP-SAT. The reference in the same process is CP-SAT alone (the probe off:
``PROBE_LEAVES = 0``), query by query in turn, so a busy machine slows both
alike. Figures per case: total and median time of the queries with and without
the probe, their ratio, how many the probe proved, and whether every optimal
cost is the same (it must be).

Cases (the app's call: reference rows, warm start, proven optimal):

* wine, RandomForestClassifier(30, depth 3), 3 classes, FCCA's cost
  (0.1 per changed feature plus L1), one CP-SAT worker as in FCCA's pool;
* breast cancer, XGBClassifier(100, depth 4), L1, two workers (the app's demo);
* breast cancer, RandomForestClassifier(30, depth 4), L1, two workers: 30
  correlated features, where the probe rarely proves (its cost shows here).

Breast cancer's RF(100, depth 5) has more leaves than PROBE_LEAVES and is
unchanged (``bench/optimal.py``). Prints JSON.

    python bench/probe.py [--queries 20]
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

from core.intake.models import from_model  # noqa: E402
from core.optimal import optimal_counterfactual  # noqa: E402
from core.schema import infer_schema  # noqa: E402
from core.solvers import race  # noqa: E402


def _cases():
    import xgboost
    from sklearn.datasets import load_breast_cancer, load_wine
    from sklearn.ensemble import RandomForestClassifier

    w = load_wine(as_frame=True)
    rf = RandomForestClassifier(n_estimators=30, max_depth=3, random_state=0).fit(w.data.iloc[::2], w.target.iloc[::2])
    yield "wine_rf30_d3_fcca_cost", rf, w.data, None, {"l0": 0.1, "l1": 1.0}, 1
    b = load_breast_cancer(as_frame=True)
    xgb = xgboost.XGBClassifier(n_estimators=100, max_depth=4, learning_rate=0.1, random_state=0).fit(b.data, b.target)
    yield "breast_cancer_xgb100_d4_l1", xgb, b.data, infer_schema(b.data), "l1", 2
    rf = RandomForestClassifier(n_estimators=30, max_depth=4, random_state=0).fit(b.data, b.target)
    yield "breast_cancer_rf30_d4_l1", rf, b.data, infer_schema(b.data), "l1", 2


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--time-limit", type=float, default=60.0)
    args = ap.parse_args()
    leaves = race.PROBE_LEAVES
    out = {}
    for name, model, X, schema, norm, workers in _cases():
        ens = from_model(model)
        A = X.to_numpy(float)
        pred = ens.predict(A)
        times: dict[str, list[float]] = {"probe": [], "cpsat_alone": []}
        costs: dict[str, list[float]] = {"probe": [], "cpsat_alone": []}
        proved = 0
        for i in np.linspace(0, len(A) - 1, args.queries).astype(int):
            target = next(c for c in ens.classes if c != pred[i])
            for arm, lv in (("cpsat_alone", 0), ("probe", leaves)):
                race.PROBE_LEAVES = lv
                t = time.perf_counter()
                res = optimal_counterfactual(ens, A[i], target, norm=norm, schema=schema, X_ref=A, n_workers=workers,
                                             time_limit=args.time_limit, model=model)
                times[arm].append(time.perf_counter() - t)
                assert res.status == "optimal", (name, i, arm, res.status)
                assert res.x is not None and model.predict(X.iloc[:1].assign(**dict(zip(X.columns, res.x))))[0] == target
                costs[arm].append(res.cost)
                proved += arm == "probe" and res.backend == "boxsearch"
        race.PROBE_LEAVES = leaves
        same = bool(np.allclose(costs["probe"], costs["cpsat_alone"], rtol=1e-6, atol=1e-9))
        tp, tc = np.array(times["probe"]), np.array(times["cpsat_alone"])
        out[name] = {"queries": len(tp), "leaves_limit": leaves, "probe_proved": proved,
                     "probe_total_s": round(float(tp.sum()), 3), "cpsat_alone_total_s": round(float(tc.sum()), 3),
                     "probe_median_s": round(float(np.median(tp)), 3),
                     "cpsat_alone_median_s": round(float(np.median(tc)), 3),
                     "ratio_total_probe_over_alone": round(float(tp.sum() / tc.sum()), 3),
                     "same_optimal_costs": same}
        print(json.dumps({name: out[name]}), flush=True)
        assert same, name
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
