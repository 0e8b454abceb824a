"""Benchmark: proven-optimal counterfactuals of a linear model (core.solvers.linear).

Adult (../shared/data/adult.csv, else the carried sample tests/data/adult_sample.csv):
a scikit-learn Pipeline (StandardScaler on the numerical columns, OneHotEncoder on the
categorical ones, LogisticRegression last) read as one LinearModel; for rows the model
turns down, the optimal counterfactual towards the positive class with Sex fixed, on
range-scaled features (schema ranges from the data), each point re-checked on the
pipeline itself. Figures per norm: median and p95 time per query, share proven
optimal. The reference in the same run: the tree solver's optimal counterfactual on a
RandomForest(100, depth 5) of the same columns (label-encoded), L1, with the same
schema; the ratio forest / linear is the figure to compare. Also where a linear
query's time goes: the same query without the re-check on the pipeline, and one
``predict`` of the pipeline on one row. Prints JSON.

Usage: python bench/linear.py [--queries 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.model import as_model  # noqa: E402
from core.optimal import optimal_counterfactual  # noqa: E402
from core.schema import FeatureSpec, Schema  # noqa: E402

CATS = ["MaritalStatus", "NativeCountry", "Occupation", "Relationship", "Sex", "WorkClass"]


def _data():
    import pandas as pd

    path = ROOT.parent / "shared" / "data" / "adult.csv"
    if not path.exists():
        path = ROOT / "tests" / "data" / "adult_sample.csv"
    df = pd.read_csv(path, skiprows=[1])
    return path.name, df.drop(columns="Class"), df["Class"].to_numpy()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=20)
    args = ap.parse_args()
    warnings.simplefilter("ignore", UserWarning)
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    name, df, y = _data()
    nums = [c for c in df.columns if c not in CATS]
    pipe = Pipeline([("pre", ColumnTransformer([("num", StandardScaler(), nums),
                                                ("cat", OneHotEncoder(handle_unknown="ignore"), CATS)])),
                     ("lr", LogisticRegression(max_iter=3000))]).fit(df, y)
    t = time.perf_counter()
    lin = as_model(pipe)
    read_s = time.perf_counter() - t
    X = np.column_stack([df[c].to_numpy(float) if lin.categories[j] is None else
                         np.array([list(lin.categories[j]).index(v) for v in df[c]], dtype=float)
                         for j, c in enumerate(lin.feature_names)])
    feats = [FeatureSpec(c, "categorical", 0, len(lin.categories[j]), levels=tuple(map(str, lin.categories[j])))
             if lin.categories[j] is not None else
             FeatureSpec(c, "integer" if c in ("Age", "HoursPerWeek") else "numerical", float(df[c].min()),
                         float(df[c].max())) for j, c in enumerate(lin.feature_names)]
    schema = Schema(tuple(feats))
    rows = np.flatnonzero(lin.predict(X) == 0)[:args.queries]
    out: dict = {"data": name, "rows": int(len(df)), "queries": int(len(rows)), "read_pipeline_s": round(read_s, 3)}
    for norm in ("l1", "l0", {"l0": 0.1, "l1": 1.0}, "l2"):
        times, proven = [], 0
        for r in rows:
            t = time.perf_counter()
            res = optimal_counterfactual(lin, X[r], 1, schema=schema, norm=norm, fixed=["Sex"], model=pipe)
            times.append(time.perf_counter() - t)
            assert res.found and res.valid, res.message
            proven += res.guarantee is not None and res.guarantee.kind == "proven_optimal"
        out[f"linear_{norm if isinstance(norm, str) else 'mix'}"] = {
            "median_s": round(float(np.median(times)), 4), "p95_s": round(float(np.quantile(times, 0.95)), 4),
            "proven_optimal": proven / len(rows)}
    # where the time goes: the query without the re-check on the pipeline, and one pipeline predict
    from core.model.native import model_input

    bare, one = [], []
    for r in rows:
        t = time.perf_counter()
        optimal_counterfactual(lin, X[r], 1, schema=schema, fixed=["Sex"])
        bare.append(time.perf_counter() - t)
        frame = model_input(lin, X[r:r + 1])
        t = time.perf_counter()
        pipe.predict(frame)
        one.append(time.perf_counter() - t)
    out["linear_l1_without_pipeline_check_median_s"] = round(float(np.median(bare)), 4)
    out["pipeline_predict_one_row_median_s"] = round(float(np.median(one)), 4)
    # the reference: the tree solver on a forest of the same columns (label-encoded)
    import pandas as pd

    rf = RandomForestClassifier(100, max_depth=5, random_state=0, n_jobs=1).fit(
        pd.DataFrame(X, columns=list(lin.feature_names)), y)
    ens = as_model(rf)
    tree_schema = Schema(tuple(FeatureSpec(f.name, "integer" if f.kind == "categorical" else f.kind,
                                           f.lower, max(f.upper - 1, f.lower) if f.kind == "categorical" else f.upper,
                                           actionability="fixed" if f.kind == "categorical" else "free")
                               for f in feats))
    rows_rf = np.flatnonzero(rf.predict(X) == 0)[:args.queries]
    times = []
    for r in rows_rf:
        t = time.perf_counter()
        res = optimal_counterfactual(ens, X[r], 1, schema=tree_schema, fixed=["Sex"], model=rf, X_ref=X)
        times.append(time.perf_counter() - t)
    out["forest_l1_reference"] = {"median_s": round(float(np.median(times)), 4),
                                  "p95_s": round(float(np.quantile(times, 0.95)), 4)}
    out["ratio_forest_over_linear_l1"] = round(out["forest_l1_reference"]["median_s"] /
                                               out["linear_l1"]["median_s"], 2)
    out["goal_linear_l1_median_le_0.05s"] = out["linear_l1"]["median_s"] <= 0.05
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
