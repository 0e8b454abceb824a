"""Benchmark: counterfactual rules (paper 000), time and the paper's metrics.

Protocol of the paper's experiments: 75/25 split; the audited model is a
LightGBM with 50 estimators of 8 leaves; the surrogate a random forest of 20
trees of depth 10 fitted on the model's outputs on the training part; pi =
pi_c = 0.9, top_k = 10. For held-out rows the target is the other class; one
counterfactual sample per local rule (simulated annealing). Metrics per class
of the model's output (Pos = 1, Neg = 0): correctness, plausibility, sparsity
(mean changed columns), coverage (share of rows that received a rule), the
share of rows whose rule reaches pi_c (the others are flagged "below pi_c"),
and the correctness on the flagged rows alone.

Reference in the same process: one CDP evaluation by brute force (per tree,
the intersection of the reached leaves' boxes, then a scan of the training
rows), against the vectorised search evaluating every subset of one size at
once: the ratio is the figure. Goals: <= 0.2 s per local rule after fit on
breast cancer and Adult; fit <= 5 s on Adult. Prints JSON.

    python bench/rules.py [--rows 100]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.rules import CounterfactualRules, engines  # noqa: E402
from core.schema import infer_schema  # noqa: E402


def _datasets():
    from sklearn.datasets import load_breast_cancer

    from core.intake import io

    b = load_breast_cancer()
    yield "breast_cancer", b.data, b.target, []
    for name in ("compas", "adult"):
        p = ROOT.parent / "shared" / "data" / f"{name}.csv"
        if not p.exists():
            print(json.dumps({"skipped": f"{p} is absent"}), file=sys.stderr)
            continue
        df = io.load_table(p.read_bytes(), p.name)
        prep = io.prepare_data(df, df.attrs["target"])
        schema = infer_schema(prep.X, kinds=prep.kinds, groups=prep.groups)
        yield name, prep.X.to_numpy(float), prep.y.to_numpy().astype(int), list(schema.groups().values())


def brute_cdp(cr: CounterfactualRules, x: np.ndarray, S: list[int], target) -> float:
    """CDP by the definition, one tree and one training scan at a time."""
    X, y = cr.X_, cr.y_
    d = X.shape[1]
    rest = [j for j in range(d) if j not in set(S)]
    vals = []
    for tree in cr.ensemble_.trees:
        _, lo, hi = tree.leaf_boxes(d)
        reach = np.all((lo[:, rest] < x[rest]) & (x[rest] <= hi[:, rest]), axis=1)
        clo, chi = lo[reach][:, rest].max(axis=0), hi[reach][:, rest].min(axis=0)
        inside = np.all((X[:, rest] > clo) & (X[:, rest] <= chi), axis=1)
        if inside.any():
            vals.append(float(np.mean(y[inside] == target)))
    return float(np.mean(vals)) if vals else 0.0


def main() -> None:
    from lightgbm import LGBMClassifier
    from sklearn.model_selection import train_test_split

    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100, help="held-out rows explained per dataset")
    args = ap.parse_args()
    out = []
    for name, X, y, groups in _datasets():
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
        model = LGBMClassifier(n_estimators=50, num_leaves=8, verbose=-1, random_state=0).fit(Xtr, ytr)
        t0 = time.perf_counter()
        cr = CounterfactualRules(random_state=0, groups=groups).fit(Xtr, model.predict(Xtr))
        fit = time.perf_counter() - t0
        rows = Xte[: args.rows]
        t0 = time.perf_counter()
        metrics, records = cr.evaluate(rows, model.predict, lambda v: 1 - v)
        wall = time.perf_counter() - t0
        f = model.predict(rows)
        per_class = {}
        for c, label in ((1, "pos"), (0, "neg")):
            idx = np.flatnonzero(f == c)
            if len(idx):
                sub, _ = _subset(cr, rows, records, idx)
                per_class[label] = sub
        times = np.array([r["time"] for r in records if "time" in r])
        # reference: every subset of one or two of the top-k features, CDP by
        # brute force vs the batched evaluation of the same subsets
        x, tgt = rows[0], 1 - int(f[0])
        cand = cr.candidate_units()
        t0 = time.perf_counter()
        for s in (1, 2):
            for cmb in itertools.combinations(cand, s):
                brute_cdp(cr, x, list(cr.state_.columns(cmb)), tgt)
        t_brute = time.perf_counter() - t0
        _, ybits, _ = cr.state_.target(tgt)
        t0 = time.perf_counter()
        for s in (1, 2):
            combos = list(itertools.combinations(range(len(cand)), s))
            sub = np.zeros((len(combos), len(cand)), dtype=bool)
            for i, cmb in enumerate(combos):
                sub[i, list(cmb)] = True
            engines.cdp_from_cells(cr.state_, engines.cells(cr.state_, x, cand, sub, s), ybits, len(sub))
        t_batch = time.perf_counter() - t0
        out.append({
            "dataset": name, "n_train": int(len(Xtr)), "n_features": int(X.shape[1]), "fit_s": round(fit, 3),
            "surrogate_fidelity": round(cr.fidelity_, 4), "rows": int(len(rows)),
            "rule_time_median_s": round(float(np.median(times)), 4) if len(times) else None,
            "rule_time_p95_s": round(float(np.quantile(times, 0.95)), 4) if len(times) else None,
            "wall_per_row_s": round(wall / len(rows), 4),
            "metrics": {k: (round(v, 3) if isinstance(v, float) else v) for k, v in metrics.items()},
            "per_class": per_class,
            "cdp_subsets_size_le2_brute_s": round(t_brute, 4), "cdp_subsets_size_le2_batched_s": round(t_batch, 4),
            "cdp_speedup_ratio": round(t_brute / t_batch, 1),
        })
        print(json.dumps(out[-1]), flush=True)


def _subset(cr, rows, records, idx):
    rec = [records[i] for i in idx]
    ok = [r for r in rec if "correct" in r]
    if not ok:
        return {"n": len(idx), "coverage": 0.0}, ok
    below = [r for r in ok if r["below_pi_c"]]
    return {"n": len(idx), "coverage": round(len(ok) / len(idx), 3),
            "reach_pi_c": round(1 - len(below) / len(ok), 3),
            "correctness_below_pi_c": round(float(np.mean([r["correct"] for r in below])), 3) if below else None,
            "correctness": round(float(np.mean([r["correct"] for r in ok])), 3),
            "plausibility": round(float(np.mean([r["inlier"] for r in ok])), 3),
            "sparsity": round(float(np.mean([r["changed"] for r in ok])), 2)}, ok


if __name__ == "__main__":
    main()
