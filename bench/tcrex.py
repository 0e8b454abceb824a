"""Benchmark: T-CREx fit time, explanation throughput and the paper's desiderata.

Datasets: Adult and COMPAS (../shared/data, when present) and breast cancer;
model: XGBoost with 50 estimators of at most 8 leaves (the paper's); rho = 0.02,
tau in {0.9, 0.99}, one surrogate tree; 70/30 split; desiderata measured on the
held-out 30% for inputs whose model output is not the target. Goals: fit <= 1 s
on Adult; >= 1M explanations/s. Prints JSON.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.schema import infer_schema  # noqa: E402
from core.tcrex import TCREx  # noqa: E402


def _datasets():
    from sklearn.datasets import load_breast_cancer

    from core import io

    for name in ("adult", "compas"):
        p = ROOT.parent / "shared" / "data" / f"{name}.csv"
        if p.exists():
            df = io.load_table(p.read_bytes(), p.name)
            prep = io.prepare_data(df, df.attrs["target"])
            yield name, prep.X, prep.y.to_numpy().astype(int), infer_schema(prep.X, kinds=prep.kinds,
                                                                             groups=prep.groups)
    b = load_breast_cancer(as_frame=True)
    yield "breast_cancer", b.data, b.target.to_numpy(), infer_schema(b.data)


def desiderata(tc: TCREx, X_test: np.ndarray, f_test: np.ndarray, target) -> dict:
    sel = f_test != target
    Xq = X_test[sel]
    rules = tc.explain(Xq)
    acc, feas = [], []
    for k in np.unique(rules):
        inside = tc.rules_[k].contains(X_test)
        w = int(np.sum(rules == k))
        acc += [float(np.mean(f_test[inside] == target)) if inside.any() else 0.0] * w
        feas += [float(inside.mean())] * w
    return {"accuracy": round(float(np.mean(acc)), 3), "feasibility": round(float(np.mean(feas)), 3),
            "sparsity": round(float(tc.changes(Xq, rules).mean()), 3),
            "complexity": round(float(np.mean([tc.rules_[k].complexity for k in rules])), 3),
            "consistency": round(len(np.unique(rules)) / max(1, len(rules)), 4), "inputs": int(len(rules))}


def main() -> None:
    import xgboost as xgb
    from sklearn.model_selection import train_test_split

    out = {"model": "XGBoost(50 estimators, 8 leaves)", "rho": 0.02, "cases": []}
    for name, Xdf, y, schema in _datasets():
        X = Xdf.to_numpy(float)
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
        f = xgb.XGBClassifier(n_estimators=50, max_leaves=8, grow_policy="lossguide", tree_method="hist", n_jobs=2)
        f.fit(Xtr, ytr)
        ftr, fte = f.predict(Xtr), f.predict(Xte)
        groups = list(schema.groups().values())
        for tau in (0.9, 0.99):
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                tc = TCREx(rho=0.02, tau=tau, groups=groups, random_state=0).fit(Xtr, ftr, 1,
                                                                                 feature_names=list(Xdf.columns))
                times.append(time.perf_counter() - t0)
            big = np.tile(Xte, (max(1, 1_000_000 // len(Xte)), 1))
            t0 = time.perf_counter()
            tc.explain(big)
            t_exp = time.perf_counter() - t0
            case = {"data": name, "tau": tau, "rows": len(X), "features": X.shape[1], "rules": len(tc.rules_),
                    "metarules": len(tc.metarules_), "fit_s": round(min(times), 4),
                    "explanations_per_s": int(len(big) / t_exp), **desiderata(tc, Xte, fte, 1)}
            out["cases"].append(case)
            print(json.dumps(case), file=sys.stderr, flush=True)
    out["goals"] = {"fit_s_adult": 1.0, "explanations_per_s": 1_000_000}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
