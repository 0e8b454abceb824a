"""Side by side with the authors' package: SupervisedDiscretization 0.0.7 (FCCA).

Their package is binary-only, needs Gurobi and pandas < 3, so it runs in a
separate environment, e.g.::

    python -m venv /tmp/sdv
    /tmp/sdv/bin/pip install SupervisedDiscretization==0.0.7 gurobipy "pandas<3" scikit-learn
    python bench/fcca_side.py --their-python /tmp/sdv/bin/python [--fold 1]

Same fold of breast cancer (5-fold stratified, shuffled, seed 0), same target
model (GradientBoosting, 100 stumps, lr 0.1, seed 0), p0 = 0.5, p1 = 1,
lambda0 = 0.1, lambda1 = 1, lambda2 = 0. Their FCCA refits the model on
min-max scaled data (the same splits, scaled), puts each counterfactual eps
beyond the split it crosses (eps = half the smallest gap, scaled) and merges
thresholds closer than 0.01 (raw units); ours takes the crossed split itself.
Compared: time (ratio), the thresholds (each of theirs matched to ours on the
same feature within their eps + 0.01) and their counts, and the thresholds
kept at Q in {0, 0.7, 0.8, 0.9}. Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
QS = (0.0, 0.7, 0.8, 0.9)

THEIRS = r"""
import json, sys, time, warnings
import numpy as np, pandas as pd
warnings.filterwarnings("ignore")
from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.model_selection import StratifiedKFold
from SupervisedDiscretization.discretizer import FCCA
fold = int(sys.argv[1])
X, y = load_breast_cancer(return_X_y=True, as_frame=True)
tr, te = list(StratifiedKFold(5, shuffle=True, random_state=0).split(X, y))[fold - 1]
gb = GradientBoostingClassifier(n_estimators=100, max_depth=1, learning_rate=0.1, random_state=0)
f = FCCA(gb, p0=0.5, p1=1, lambda0=0.1, lambda1=1, lambda2=0, compress=True, timelimit=60, verbose=False)
t0 = time.perf_counter()
f.fit(X.iloc[tr], y.iloc[tr])
secs = time.perf_counter() - t0
tao = f.tao
sel = {str(q): len(f.selectThresholds(q)) for q in (0.0, 0.7, 0.8, 0.9)}
print(json.dumps({"seconds": secs, "thresholds": [[r.Feature, float(r.Threshold), int(r.Count)] for r in tao.itertuples()],
                  "kept": sel, "eps": {k: float(v) for k, v in f.GetTollerance(X.iloc[tr]).items()}}))
"""


def ours(fold: int):
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import GradientBoostingClassifier
    from sklearn.model_selection import StratifiedKFold

    sys.path.insert(0, str(ROOT))
    from core.compression import fcca

    X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    tr, te = list(StratifiedKFold(5, shuffle=True, random_state=0).split(X, y))[fold - 1]
    t0 = time.perf_counter()
    gb = GradientBoostingClassifier(n_estimators=100, max_depth=1, learning_rate=0.1, random_state=0)
    gb.fit(X.iloc[tr], y.iloc[tr])
    res = fcca(gb, X.iloc[tr], y.iloc[tr].to_numpy(), n_jobs=2)
    return res, time.perf_counter() - t0, X.iloc[tr]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--their-python", help="python of an environment with SupervisedDiscretization 0.0.7")
    ap.add_argument("--fold", type=int, default=1)
    a = ap.parse_args()
    if not a.their_python:
        print(json.dumps({"skipped": "give --their-python (see the module docstring)"}))
        return
    proc = subprocess.run([a.their_python, "-c", THEIRS, str(a.fold)], capture_output=True, text=True)
    if proc.returncode != 0:
        print(json.dumps({"error": proc.stderr[-2000:]}))
        return
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    res, secs, Xtr = ours(a.fold)
    span = (Xtr.max() - Xtr.min()).to_dict()
    mine = res.thresholds
    matched, unmatched, count_pairs, diffs = 0, [], [], []
    for feat, t, c in theirs["thresholds"]:
        cand = mine[mine.index == feat]
        tol = theirs["eps"].get(feat, 1e-4) * span[feat] + 0.01
        if len(cand):
            k = int(np.argmin(np.abs(cand["threshold"].to_numpy() - t)))
            if abs(cand["threshold"].iloc[k] - t) <= tol:
                matched += 1
                count_pairs.append((c, int(cand["count"].iloc[k])))
                if c != int(cand["count"].iloc[k]):
                    diffs.append([feat, round(t, 6), c, round(float(cand["threshold"].iloc[k]), 6),
                                  int(cand["count"].iloc[k])])
                continue
        unmatched.append([feat, t, c])
    theirs_total = sum(c for _, _, c in theirs["thresholds"])
    out = {
        "fold": a.fold,
        "theirs": {"seconds": round(theirs["seconds"], 2), "thresholds": len(theirs["thresholds"]),
                   "pairs_counted": theirs_total, "kept_at_Q": theirs["kept"]},
        "ours": {"seconds": round(secs, 2), "thresholds": int(len(mine)), "pairs_counted": int(mine["count"].sum()),
                 "kept_at_Q": {str(q): int(len(res.select(q))) for q in QS}},
        "ratio_theirs_over_ours": round(theirs["seconds"] / secs, 1),
        "their_thresholds_matched_to_ours": matched, "unmatched": unmatched[:10],
        "same_count_when_matched": sum(1 for p, q in count_pairs if p == q),
        "count_differences (feature, theirs t, n, ours t, n)": diffs[:12],
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
