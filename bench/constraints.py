"""Benchmark: optimal counterfactuals under constraints between features, against the same
queries without them, and the preclusion check against the optimisation.

Cases (issue #61): breast cancer RF(100, depth 5) on the raw features, and Adult
XGBoost(100, depth 4) as the app prepares it, each with three links between features.
Per case, on the first ``--rows`` rows the model declines (target: the other class):
the CPU seconds of one ``optimal_counterfactual`` without and with the constraints
(the reference and the measure, in turn, in this process), the share of answers proven
optimal (or proven precluded), which solver answered, and the CPU seconds of one
``verify_recourse`` (a feasibility question) against the constrained optimisation.
CPU seconds, since these machines are shared. Prints JSON.

Usage: python bench/constraints.py [--rows 10] [--time-limit 30] [--only adult]
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
sys.path.insert(0, str(ROOT / "bench"))

LINKS = {
    "breast_cancer": ["delta(`mean radius`) >= 0",
                      "delta(`worst radius`) >= delta(`mean radius`)",
                      "if delta(`mean texture`) > 0 then delta(`worst texture`) >= delta(`mean texture`)"],
    "adult": ["delta(Age) >= 0",
              "if delta(EducationNumber) > 0 then delta(Age) >= 2 * delta(EducationNumber)",
              "delta(HoursPerWeek) <= 10"],
}


def _cases(only: str | None):
    import pandas as pd
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import RandomForestClassifier

    from core.schema import infer_schema

    if only in (None, "breast_cancer"):
        b = load_breast_cancer(as_frame=True)
        rf = RandomForestClassifier(100, max_depth=5, random_state=0).fit(b.data, b.target)
        yield "breast_cancer", rf, b.data, infer_schema(b.data), 1
    if only in (None, "adult"):
        import xgboost as xgb
        from common import adult_with_sex_protected

        got = adult_with_sex_protected()
        if got is None:
            return
        X, y, schema, _ = got
        m = xgb.XGBClassifier(n_estimators=100, max_depth=4, n_jobs=1, random_state=0).fit(X, y)
        yield "adult", m, pd.DataFrame(X), schema, 1


def _cpu(fn):
    t0 = time.process_time()
    out = fn()
    return out, time.process_time() - t0


def run(rows: int, time_limit: float, only: str | None) -> dict:
    from core.intake.models import from_model
    from core.optimal import optimal_counterfactual, verify_recourse

    out = {}
    for name, model, X, schema, target in _cases(only):
        ens = from_model(model)
        Xn = X.to_numpy(float)
        picked = np.flatnonzero(model.predict(X) != target)[:rows]
        texts = LINKS[name]
        free_s, cons_s, check_s, proven, answered = [], [], [], 0, {}
        for r in picked:
            kw = dict(schema=schema, time_limit=time_limit, model=model, X_ref=Xn)
            free, t_free = _cpu(lambda: optimal_counterfactual(ens, Xn[r], target, **kw))
            res, t_cons = _cpu(lambda: optimal_counterfactual(ens, Xn[r], target, constraints=texts, **kw))
            chk, t_chk = _cpu(lambda: verify_recourse(ens, Xn[r], target, schema=schema, constraints=texts,
                                                      time_limit=time_limit, explain=False))
            free_s.append(t_free)
            cons_s.append(t_cons)
            check_s.append(t_chk)
            proven += res.guarantee.kind in ("proven_optimal", "infeasible")
            answered[res.backend] = answered.get(res.backend, 0) + 1
            assert (chk.status == "precluded") == (res.status == "infeasible") or chk.status == "unknown" \
                or res.status == "time_limit", (r, chk.status, res.status)
        med = lambda v: float(np.median(v))
        out[name] = {
            "rows": len(picked), "links": texts,
            "cpu_s_median_without": round(med(free_s), 4), "cpu_s_median_with": round(med(cons_s), 4),
            "ratio_with_over_without": round(med(cons_s) / max(med(free_s), 1e-9), 3),
            "cpu_s_p95_with": round(float(np.quantile(cons_s, 0.95)), 4),
            "proven_share": round(proven / max(len(picked), 1), 3), "answered_by": answered,
            "cpu_s_median_preclusion_check": round(med(check_s), 4),
            "ratio_check_over_optimisation": round(med(check_s) / max(med(cons_s), 1e-9), 3),
        }
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=10)
    p.add_argument("--time-limit", type=float, default=30.0)
    p.add_argument("--only", choices=sorted(LINKS), default=None)
    a = p.parse_args()
    print(json.dumps(run(a.rows, a.time_limit, a.only), indent=2))


if __name__ == "__main__":
    main()
