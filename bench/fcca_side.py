"""Side by side with the authors' package: SupervisedDiscretization 0.0.7 (FCCA), five folds.

Their package is binary-only, needs Gurobi and pandas < 3, so it runs in a
separate environment, e.g.::

    python -m venv /tmp/sdv
    /tmp/sdv/bin/pip install SupervisedDiscretization==0.0.7 gurobipy "pandas<3" scikit-learn
    python bench/fcca_side.py --their-python /tmp/sdv/bin/python [--folds 5 | --fold 1] [--markdown]

Breast cancer, 5-fold stratified CV (shuffled, seed 0), the same target model
on both sides (GradientBoosting, 100 stumps, lr 0.1, seed 0; theirs refits it
on min-max scaled rows, which gives the same stumps), p0 = 0.5, p1 = 1,
lambda0 = 0.1, lambda1 = 1, lambda2 = 0, Q in {0, 0.7, 0.8, 0.9}.

Per fold and Q, for each side: the thresholds kept, the compression and
inconsistency rates on the training rows (theirs from their package's own
methods) and the held-out accuracy of a depth-3 tree trained on the binary
columns of that side's kept thresholds, with the same learner for both
(:func:`core.compression.tree.fit_binary_tree`: CART, and GOSDT when installed),
so that what is compared is the thresholds. Their package is a discretiser
only and has no tree of its own (the authors' experiments train scikit-learn
CART and GOSDT on its columns, as here). A third column, "their
counterfactuals per split", counts their own counterfactuals the paper's way
(eqs. 10-11: one threshold per model split crossed, the pairs crossing it its
multiplicity) and keeps them with our F_Q: it separates what their
counterfactuals change from what their counting changes. Time: their fit
against ours (model fit included on both sides), as a ratio.

How their thresholds differ from the paper (all read from their code): the
threshold is x_CE itself, eps beyond the split it crosses, not the paper's
x_CE + eps * sign(x0 - x_CE), which is the split, so one split gives two
thresholds, one per direction, unless 2 eps < 0.01; thresholds closer than
0.01 in raw units are chained into one (mean value, counts summed), which
merges whole runs of splits on a feature spanning 0.3 and none on one
spanning 4000; eps is half the smallest gap but at least 1e-4 (scaled), so a
training value within 1e-4 of a split is infeasible where it stands and its
counterfactual must pay for a move it does not need (ours are exact for the
model, the paper's eps -> 0). F_Q is numpy's interpolated sample quantile of
the counts on their side and the quantile of the count distribution on ours
(:mod:`core.compression`). Prints JSON (or, with ``--markdown``, the README's
table).
"""

from __future__ import annotations

import argparse
import json
import os
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
QS = (0.0, 0.7, 0.8, 0.9)
X, y = load_breast_cancer(return_X_y=True, as_frame=True)
folds = list(StratifiedKFold(5, shuffle=True, random_state=0).split(X, y))
out = []
for fold in json.loads(sys.argv[1]):
    tr, te = folds[fold - 1]
    Xtr, ytr = X.iloc[tr], y.iloc[tr]
    gb = GradientBoostingClassifier(n_estimators=100, max_depth=1, learning_rate=0.1, random_state=0)
    # compress=False keeps the per-pair thresholds; compressing them next is what fit does with compress=True
    f = FCCA(gb, p0=0.5, p1=1, lambda0=0.1, lambda1=1, lambda2=0, compress=False, timelimit=60, verbose=False)
    t0 = time.perf_counter()
    f.fit(Xtr, ytr)
    raw = f.tao.copy()
    f.tao = f.compressThresholds(f.tao)
    secs = time.perf_counter() - t0
    lo, span = Xtr.min(), Xtr.max() - Xtr.min()
    splits = [[X.columns[e[0].tree_.feature[0]], float(lo.iloc[e[0].tree_.feature[0]]
               + e[0].tree_.threshold[0] * span.iloc[e[0].tree_.feature[0]])] for e in f.estimator.estimators_]
    per_q = {}
    for q in QS:
        sel = f.selectThresholds(q)
        per_q[str(q)] = {"kept": [[r.Feature, float(r.Threshold), int(r.Count)] for r in sel.itertuples()],
                         "compression": float(f.compression_rate(Xtr, ytr, sel)),
                         "inconsistency": float(f.inconsistency_rate(Xtr, ytr, sel))}
    out.append({"fold": fold, "seconds": secs, "per_q": per_q, "splits": splits,
                "thresholds": [[r.Feature, float(r.Threshold), int(r.Count)] for r in f.tao.itertuples()],
                "pairs": [[r.Feature, float(r.Threshold)] for r in raw.itertuples()],
                "eps": {k: float(v) for k, v in f.GetTollerance(Xtr).items()}})
print(json.dumps(out))
"""


def _data():
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import StratifiedKFold

    X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    return X, y, list(StratifiedKFold(5, shuffle=True, random_state=0).split(X, y))


def _methods():
    from core.compression import gosdt_available

    return ("cart", "gosdt") if gosdt_available() else ("cart",)


def _binary(X, kept):
    """Binary columns [x > t] for (feature, threshold) pairs, in feature order then t."""
    order = sorted(kept, key=lambda r: (list(X.columns).index(r[0]), r[1]))
    cols = [f"{f}>{t:.9g}" for f, t in order]
    B = np.column_stack([(X[f].to_numpy() > t) for f, t in order]).astype(np.int8) if order else \
        np.zeros((len(X), 0), dtype=np.int8)
    return B, cols


def _rates(B, y):
    """Compression and inconsistency rates of binary rows (the paper's eq. 15)."""
    if B.shape[1] == 0:
        cells = np.zeros(len(B), dtype=int)
    else:
        cells = np.unique(B, axis=0, return_inverse=True)[1].ravel()
    minority = sum(min(int(np.sum(y[cells == c] == 0)), int(np.sum(y[cells == c] == 1))) for c in np.unique(cells))
    return 1 - np.unique(cells).size / len(B), minority / len(B)


def _trees(kept, Xtr, ytr, Xte, yte, pred_te, Q):
    """Held-out accuracy of the depth-3 tree(s) on the columns of ``kept`` (same learner for every side)."""
    from core.compression.tree import fit_binary_tree

    Btr, cols = _binary(Xtr, kept)
    Bte, _ = _binary(Xte, kept)
    out = {}
    for method in _methods():
        tree = fit_binary_tree(Btr, ytr, cols, Q, method=method, max_depth=3, random_state=0)
        out[method] = round(tree.scored(Bte, yte, pred_te).accuracy, 4)
    return out


def _per_split(pairs, splits, span):
    """Their counterfactuals counted the paper's way: each per-pair threshold (eps beyond a split)
    given to the model split nearest it on its feature; (feature, split, pairs, farthest distance / span)."""
    levels: dict[str, np.ndarray] = {}
    for f, t in splits:
        levels.setdefault(f, np.array([]))
        levels[f] = np.unique(np.append(levels[f], t))
    counts: dict[tuple[str, float], int] = {}
    far = 0.0
    for f, t in pairs:
        s = levels[f]
        k = int(np.argmin(np.abs(s - t)))
        far = max(far, abs(s[k] - t) / span[f])
        counts[(f, float(s[k]))] = counts.get((f, float(s[k])), 0) + 1
    return [(f, t, c) for (f, t), c in counts.items()], far


def _keep(table, Q):
    """Our rule (core.compression): count >= the Q-quantile of the count distribution."""
    counts = np.array([c for _, _, c in table])
    F = np.quantile(counts, Q, method="inverted_cdf")
    return [(f, t) for f, t, c in table if c >= F]


def ours(fold, jobs):
    from sklearn.ensemble import GradientBoostingClassifier

    sys.path.insert(0, str(ROOT))
    from core.compression import fcca

    X, y, folds = _data()
    tr, te = folds[fold - 1]
    t0 = time.perf_counter()
    gb = GradientBoostingClassifier(n_estimators=100, max_depth=1, learning_rate=0.1, random_state=0)
    gb.fit(X.iloc[tr], y.iloc[tr])
    res = fcca(gb, X.iloc[tr], y.iloc[tr].to_numpy(), n_jobs=jobs)
    return res, time.perf_counter() - t0, gb


def side_by_side(fold, theirs, jobs):
    X, y, folds = _data()
    tr, te = folds[fold - 1]
    Xtr, Xte, ytr, yte = X.iloc[tr], X.iloc[te], y.iloc[tr].to_numpy(), y.iloc[te].to_numpy()
    res, secs, gb = ours(fold, jobs)
    pred_te = gb.predict(Xte)
    span = (Xtr.max() - Xtr.min()).to_dict()
    split_table, far = _per_split(theirs["pairs"], theirs["splits"], span)
    per_q = {}
    for Q in QS:
        sel = res.select(Q)
        mine = list(zip(sel.index, sel["threshold"].to_numpy(dtype=float)))
        row_ours = {"thresholds": len(mine), "compression": round(res.compression_rate(Q), 4),
                    "inconsistency": round(res.inconsistency_rate(Q), 4),
                    **_trees(mine, Xtr, ytr, Xte, yte, pred_te, Q)}
        # the shared learner on our columns is our own pipeline's CART (FCCAResult.fit_tree)
        assert row_ours["cart"] == round(res.fit_tree(Q, 3, "cart", X_test=Xte, y_test=yte).accuracy, 4)
        th = theirs["per_q"][str(Q)]
        row_theirs = {"thresholds": len(th["kept"]), "compression": round(th["compression"], 4),
                      "inconsistency": round(th["inconsistency"], 4),
                      **_trees([(f, t) for f, t, _ in th["kept"]], Xtr, ytr, Xte, yte, pred_te, Q)}
        kept_split = _keep(split_table, Q)
        comp, inc = _rates(_binary(Xtr, kept_split)[0], ytr)
        row_split = {"thresholds": len(kept_split), "compression": round(comp, 4), "inconsistency": round(inc, 4),
                     **_trees(kept_split, Xtr, ytr, Xte, yte, pred_te, Q)}
        per_q[str(Q)] = {"ours": row_ours, "theirs": row_theirs, "their_counterfactuals_per_split": row_split}
        if Q == 0.9:
            per_q[str(Q)]["kept"] = {
                "ours": [[f, round(t, 5), int(c)] for f, t, c in zip(sel.index, sel["threshold"], sel["count"])],
                "theirs": [[f, round(t, 5), c] for f, t, c in th["kept"]]}
    mine_all = res.thresholds
    matched = 0
    for feat, t, _ in theirs["thresholds"]:
        cand = mine_all["threshold"].to_numpy()[mine_all.index == feat]
        tol = theirs["eps"].get(feat, 1e-4) * span[feat] + 0.01
        matched += bool(cand.size and np.min(np.abs(cand - t)) <= tol)
    return {"fold": fold, "model_accuracy": round(float(np.mean(pred_te == yte)), 4),
            "seconds": {"theirs": round(theirs["seconds"], 2), "ours": round(secs, 2),
                        "ratio_theirs_over_ours": round(theirs["seconds"] / secs, 2)},
            "thresholds": {"theirs": len(theirs["thresholds"]), "ours": int(len(mine_all)),
                           "their_counterfactuals_per_split": len(split_table),
                           "theirs_within_eps_plus_0.01_of_ours": matched,
                           "their_pairs_farthest_from_a_split_over_span": float(f"{far:.2g}")},
            "pairs_counted": {"theirs": len(theirs["pairs"]), "ours": int(mine_all["count"].sum())},
            "per_q": per_q}


def _mean(folds):
    out = {}
    for q in map(str, QS):
        out[q] = {side: {k: round(float(np.mean([f["per_q"][q][side][k] for f in folds])), 4)
                         for k in folds[0]["per_q"][q][side]}
                  for side in ("ours", "theirs", "their_counterfactuals_per_split")}
    ratio = [f["seconds"]["ratio_theirs_over_ours"] for f in folds]
    out["seconds_ratio_theirs_over_ours"] = {"median": round(float(np.median(ratio)), 2),
                                             "min": min(ratio), "max": max(ratio)}
    return out


def markdown(report):
    methods = [m for m in ("cart", "gosdt") if m in report["folds"][0]["per_q"]["0.0"]["ours"]]
    head = ["fold", "Q", "kept ours / theirs", "compression ours / theirs", "inconsistency ours / theirs"]
    head += [f"{m.upper()} accuracy ours / theirs / their CEs per split" for m in methods]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def row(label, q, d, fmt_n):
        cells = [label, q, f"{fmt_n(d['ours']['thresholds'])} / {fmt_n(d['theirs']['thresholds'])}",
                 f"{d['ours']['compression']:.3f} / {d['theirs']['compression']:.3f}",
                 f"{d['ours']['inconsistency']:.3f} / {d['theirs']['inconsistency']:.3f}"]
        cells += [f"{d['ours'][m]:.3f} / {d['theirs'][m]:.3f} / {d['their_counterfactuals_per_split'][m]:.3f}"
                  for m in methods]
        lines.append("| " + " | ".join(cells) + " |")

    for q in map(str, QS):
        row("mean", q, report["mean"][q], lambda n: f"{n:.1f}")
    for f in report["folds"]:
        for q in map(str, QS):
            row(str(f["fold"]), q, f["per_q"][q], lambda n: str(int(n)))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--their-python", help="python of an environment with SupervisedDiscretization 0.0.7")
    ap.add_argument("--folds", type=int, default=None, help="run folds 1..N (at most 5)")
    ap.add_argument("--fold", type=int, default=1, help="run this fold only (without --folds)")
    ap.add_argument("--jobs", type=int, default=2, help="our processes for the counterfactuals")
    ap.add_argument("--markdown", action="store_true", help="print the README's table instead of JSON")
    a = ap.parse_args()
    if not a.their_python:
        print(json.dumps({"skipped": "give --their-python (see the module docstring)"}))
        return
    folds = list(range(1, min(a.folds, 5) + 1)) if a.folds else [a.fold]
    proc = subprocess.run([a.their_python, "-c", THEIRS, json.dumps(folds)], capture_output=True, text=True)
    if proc.returncode != 0:
        print(json.dumps({"error": proc.stderr[-2000:]}))
        return
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    report = {"load_average_1min": round(os.getloadavg()[0], 1),
              "folds": [side_by_side(f, t, a.jobs) for f, t in zip(folds, theirs)]}
    report["mean"] = _mean(report["folds"])
    print(markdown(report) if a.markdown else json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
