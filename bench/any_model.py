"""Benchmark: counterfactuals for a model that is not a tree ensemble, checked on the model.

The target model is T-CREx's Appendix F network: an MLPClassifier with two hidden layers
of 100 ReLU units, in a scikit-learn pipeline (scaled numbers, one-hot categories),
trained on Adult (``../shared/data/adult.csv``; the carried 2,000-row sample without it).
It is saved with skops and run in the sandboxed worker, as an upload is; the workspace
distils its surrogate.

Measured, on the same rows (the first ``--rows`` held-out rows the model turns down):

* ours: the optimal counterfactual through the surrogate, checked (and repaired) on the
  model; time per row (median, p95), share valid on the original model, cost (l1 on
  range-scaled numbers, one unit per category switch: the Atlas's cost);
* DiCE (``dice-ml``, methods ``random`` and ``genetic``, one counterfactual each, every
  feature free on both sides: the same problem), timed in the same run; its points are
  fed to the same model and priced with the same cost;
* the share of rows where our cost is at most DiCE's (goal: >= 90%, with 100% validity);
* T-CREx on the network's outputs (rho 0.02, tau 0.9): accuracy and feasibility on held-out
  rows, beside T-CREx on an XGBoost model of the paper's settings in the same run
  (Appendix F: the magnitudes are alike);
* the fairness audit of ``--audit-rows`` (300) rows the network turns down, Sex protected, as
  the Fairness audit page runs it (2 local processes, 10 s per recourse, the page's
  statistics), beside the same audit of a LogisticRegression pipeline trained the same way
  (a linear model, read exactly) in the same run: wall seconds and CPU-seconds of the whole
  process tree (the pool, the model's worker), and the ratio MLP / LogisticRegression.

Prints JSON. Goals: median <= 1 s per counterfactual; cost <= DiCE's on >= 90% of rows; the
MLP's audit in at most twice the LogisticRegression's time on 2 cores.

    .venv/bin/python bench/any_model.py [--rows 50] [--audit-rows 300] [--no-dice]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

ADULT = ROOT.parent / "shared" / "data" / "adult.csv"

SAMPLE = ROOT / "tests" / "data" / "adult_sample.csv"


def _adult() -> tuple[pd.DataFrame, str, list[str]]:
    path = ADULT if ADULT.exists() else SAMPLE
    raw = pd.read_csv(path, header=[0, 1])
    kinds = {c: k for c, k in raw.columns}
    df = raw.copy()
    df.columns = [c for c, _ in raw.columns]
    target = next(c for c, k in kinds.items() if k == "T")
    cats = [c for c, k in kinds.items() if k == "E"]
    for c in cats:
        df[c] = "v" + df[c].astype(str)            # categories as text, as an analyst's table holds them
    return df, target, cats


def _mlp(df: pd.DataFrame, target: str, cats: list[str], seed: int = 0):
    from sklearn.compose import ColumnTransformer
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    nums = [c for c in df.columns if c not in cats and c != target]
    pre = ColumnTransformer([("num", StandardScaler(), nums), ("cat", OneHotEncoder(handle_unknown="ignore"), cats)])
    mlp = MLPClassifier(hidden_layer_sizes=(100, 100), max_iter=60, early_stopping=True, random_state=seed)
    return make_pipeline(pre, mlp).fit(df.drop(columns=target), df[target])


def _logistic(df: pd.DataFrame, target: str, cats: list[str]):
    """The same pipeline with a LogisticRegression: a linear model, read exactly."""
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    nums = [c for c in df.columns if c not in cats and c != target]
    pre = ColumnTransformer([("num", StandardScaler(), nums), ("cat", OneHotEncoder(handle_unknown="ignore"), cats)])
    return make_pipeline(pre, LogisticRegression(max_iter=1000)).fit(df.drop(columns=target), df[target])


def _tree_cpu() -> float:
    """CPU-seconds of this process and every live descendant (the pool's workers, the fork
    server, the model's worker), read from /proc; this process's own elsewhere."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    if not os.path.isdir("/proc"):
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system
    parent, cpu = {}, {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(pid)] = int(fields[1])
        cpu[int(pid)] = (int(fields[11]) + int(fields[12])) / tick
    mine, grew = {os.getpid()}, True
    while grew:
        more = {p for p, pp in parent.items() if pp in mine} - mine
        grew = bool(more)
        mine |= more
    return sum(cpu.get(p, 0.0) for p in mine)


def _audit(ws, rows: int) -> dict:
    """One audit as the Fairness audit page runs it: wall and CPU-seconds (process tree)."""
    from core.audit import run_audit

    on, extra = ws.query_model()
    c0, t0 = _tree_cpu(), time.perf_counter()
    audit = run_audit(on, ws.X, schema=ws.schema, target=1, protected=["Sex"], max_rows=rows, time_limit=10.0,
                      n_jobs=2, y=ws.y, **extra)
    wall, cpu = time.perf_counter() - t0, _tree_cpu() - c0
    return {"rows": len(audit.rows), "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
            "with_recourse": round(float(audit.rows["feasible"].mean()), 3),
            "stages_s": audit.meta["timings"], "guarantee": audit.recourse_guarantee.kind}


def _audits(ws_mlp, test: pd.DataFrame, train: pd.DataFrame, target: str, cats: list[str], rows: int) -> dict:
    """The MLP's audit beside the LogisticRegression's, in the same run (a short audit first
    starts the fork server and the pool both use)."""
    from core.intake.workspace import build_workspace

    ws_lr = build_workspace(test, target, _logistic(train, target, cats), name="adult-lr")
    assert ws_lr.model_kind == "linear"
    _audit(ws_lr, 10)
    lr = _audit(ws_lr, rows)
    mlp = _audit(ws_mlp, rows)
    return {"rows": rows, "cores": os.cpu_count(), "load_avg_1min": round(os.getloadavg()[0], 1),
            "logistic_regression": lr, "mlp": mlp,
            "ratio_wall": round(mlp["wall_s"] / lr["wall_s"], 2), "ratio_cpu": round(mlp["cpu_s"] / lr["cpu_s"], 2)}


def _cost(ws, x: np.ndarray, z: np.ndarray) -> float:
    from core.counterfactual import make_cost_model

    return float(make_cost_model(ws.ensemble, "l1", None, ws.schema).cost(x, z[None, :])[0])


def _dice(pipe, train: pd.DataFrame, target: str, cats: list[str], queries: pd.DataFrame, method: str):
    import dice_ml

    data = dice_ml.Data(dataframe=train, continuous_features=[c for c in train.columns
                                                              if c not in cats and c != target],
                        outcome_name=target)
    exp = dice_ml.Dice(data, dice_ml.Model(model=pipe, backend="sklearn"), method=method)
    out, times = [], []
    for i in range(len(queries)):
        t0 = time.perf_counter()
        try:
            kw = {"random_seed": 0} if method == "random" else {}
            res = exp.generate_counterfactuals(queries.iloc[[i]], total_CFs=1, desired_class="opposite",
                                               verbose=False, **kw)
            cf = res.cf_examples_list[0].final_cfs_df
            out.append(None if cf is None or cf.empty else cf.drop(columns=target).iloc[0])
        except Exception:  # noqa: BLE001 - DiCE gives up on a row ("no counterfactuals found")
            out.append(None)
        times.append(time.perf_counter() - t0)
    return out, times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=50)
    ap.add_argument("--no-dice", action="store_true")
    ap.add_argument("--audit-rows", type=int, default=300, help="rows of each audit (0: no audits)")
    args = ap.parse_args()

    import skops.io as sio

    from core.intake.worker import ModelWorker
    from core.intake.workspace import build_workspace
    from core.optimal import optimal_counterfactual

    df, target, cats = _adult()
    rng = np.random.default_rng(0)
    order = rng.permutation(len(df))
    n_train = min(len(df) * 2 // 3, 30_000)
    train, test = df.iloc[order[:n_train]].reset_index(drop=True), df.iloc[order[n_train:]].reset_index(drop=True)
    t0 = time.perf_counter()
    pipe = _mlp(train, target, cats)
    fit_s = time.perf_counter() - t0
    worker = ModelWorker(sio.dumps(pipe), "mlp.skops")
    t0 = time.perf_counter()
    ws = build_workspace(test, target, worker.model("bench"), name="adult-mlp")
    ws_s = time.perf_counter() - t0
    X = ws.X.to_numpy(float)
    ref = X[: min(len(X), 5000)]
    rows = [i for i in range(len(X)) if ws.predictions[i] == 0][: args.rows]
    ours, times, valid = [], [], []
    for i in rows:
        t0 = time.perf_counter()
        r = optimal_counterfactual(ws.ensemble, X[i], 1, model=ws.model, surrogate=ws.surrogate, schema=ws.schema,
                                   X_ref=ref, fixed=[], time_limit=30)
        times.append(time.perf_counter() - t0)
        ok = r.found and pipe.predict(ws.to_raw(r.x[None])[list(train.columns.drop(target))])[0] == 1
        valid.append(bool(ok))
        ours.append(r.cost if ok else np.inf)
    free = {"protected": [], "fixed": [], "increase_only": [], "decrease_only": []}
    assert all(f.actionability == "free" for f in ws.schema.features)    # ours: fixed=[] and a schema of free features
    result = {"rows": len(rows), "problem": {"ours": free, "dice": free}, "model_fit_s": round(fit_s, 1),
              "workspace_s": round(ws_s, 2),
              "surrogate": ws.surrogate.to_dict(),
              "ours": {"median_s": round(float(np.median(times)), 3), "p95_s": round(float(np.quantile(times, .95)), 3),
                       "valid_share": float(np.mean(valid)), "mean_cost": round(float(np.mean(ours)), 4)}}
    if not args.no_dice:
        try:
            import dice_ml  # noqa: F401
        except ImportError:
            result["dice"] = "skipped (pip install dice-ml)"
        else:
            queries = test.drop(columns=target).iloc[rows].reset_index(drop=True)
            for method in ("random", "genetic"):
                cfs, dtimes = _dice(pipe, train, target, cats, queries, method)
                costs, dvalid = [], []
                for i, cf in zip(rows, cfs):
                    if cf is None:
                        costs.append(np.inf)
                        dvalid.append(False)
                        continue
                    cf = cf.copy()
                    for c in train.columns.drop(target):
                        if c not in cats:
                            cf[c] = float(cf[c])
                    ok = pipe.predict(pd.DataFrame([cf]))[0] == 1
                    z = _codes_of(ws, cf)
                    dvalid.append(bool(ok))
                    costs.append(_cost(ws, X[i], z) if ok else np.inf)
                costs = np.array(costs)
                mine = np.array(ours)
                result[f"dice_{method}"] = {
                    "median_s": round(float(np.median(dtimes)), 3), "valid_share": float(np.mean(dvalid)),
                    "mean_cost_valid": round(float(np.mean(costs[np.isfinite(costs)])), 4) if np.isfinite(costs).any()
                    else None,
                    "ours_at_most_theirs_share": float(np.mean(mine <= costs + 1e-9)),
                    "time_ratio_ours_over_theirs": round(float(np.median(times) / np.median(dtimes)), 3)}
    result["tcrex"] = _tcrex(ws, train, test, target, cats, pipe)
    if args.audit_rows > 0:
        result["audit"] = _audits(ws, test, train, target, cats, args.audit_rows)
    worker.stop()
    print(json.dumps(result, indent=2))


def _codes_of(ws, cf: pd.Series) -> np.ndarray:
    """A raw row (the analyst's columns) in the workspace's view."""
    one = pd.DataFrame([cf])
    z = np.zeros(ws.ensemble.n_features)
    for j, name in enumerate(ws.ensemble.feature_names):
        if "=" in name:
            col, level = name.split("=", 1)
            z[j] = float(str(one[col].iloc[0]) == level)
        else:
            z[j] = float(one[name].iloc[0])
    return z


def _tcrex(ws, train, test, target, cats, pipe) -> dict:
    """T-CREx on the network's outputs, and on an XGBoost of the paper's settings."""
    import xgboost as xgb

    from core.tcrex import TCREx

    X = ws.X.to_numpy(float)
    half = len(X) // 2
    out = {}
    f_mlp = ws.predictions.astype(int)
    booster = xgb.XGBClassifier(n_estimators=50, max_leaves=8, random_state=0).fit(X[:half], test[target][:half])
    f_xgb = booster.predict(X)
    for name, f in (("mlp", f_mlp), ("xgboost", f_xgb)):
        tc = TCREx(rho=0.02, tau=0.9, random_state=0).fit(X[:half], f[:half], 1, feature_names=ws.ensemble.feature_names)
        Xq = X[half:][f[half:] != 1]
        rules = tc.explain(Xq)
        acc, feas = [], []
        for k in rules:
            inside = tc.rules_[k].contains(X[half:])
            acc.append(float(np.mean(f[half:][inside] == 1)) if inside.any() else 0.0)
            feas.append(float(inside.mean()))
        out[name] = {"rules": len(tc.rules_), "accuracy": round(float(np.mean(acc)), 3),
                     "feasibility": round(float(np.mean(feas)), 3)}
    return out


if __name__ == "__main__":
    main()
