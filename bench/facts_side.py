"""Side by side with AIF360's FACTS_bias_scan (FACTS, NeurIPS 2023) on the credit demo.

AIF360 0.6.1 runs in a separate environment (it is not a dependency), e.g.::

    python -m venv /tmp/aifenv
    /tmp/aifenv/bin/pip install aif360==0.6.1 "aif360[FACTS]" lightgbm pandas scikit-learn
    python bench/facts_side.py --their-python /tmp/aifenv/bin/python

Same data (the built-in synthetic credit table, bias planted on sex) and the same
model (LightGBM, 100 trees of depth 3). FACTS mines frequent itemsets of the
non-protected features (numbers binned in quartiles, as its paper does; min
support 0.05), takes "if-then" actions between them, and ranks subgroups by the
difference between the sexes inside them; ours (core.audit.subgroups, inside
core.audit) scans conjunctions of up to two conditions, the protected attribute
included, against the rest of the audited rows, with optimal counterfactuals for
recourse and Westfall-Young adjusted p-values. Prints JSON: the problem each side
poses, the top subgroups of each, and the time of each. Without --their-python: ours
only, theirs "skipped".

The problem, as alike as the two methods allow: sex is the protected attribute and
never changes on either side (FACTS: ``prot_attr`` and ``feats_not_allowed_to_change``;
ours: ``protected=["sex"]``, named here, never read from the column's name); age may
only grow on both sides (AIF360 0.6.1's ``recIsValid`` hard-codes that for a column
named "age", so ours sets age increase-only explicitly); every other feature is free.
One difference remains: FACTS moves age by at most two quartile bins
(``drop_two_above``), ours by any amount within its range.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

THEIRS = r"""
import json, sys, time, warnings
import pandas as pd
warnings.filterwarnings("ignore")
from lightgbm import LGBMClassifier
from aif360.sklearn.detectors import FACTS_bias_scan

df = pd.read_csv(sys.argv[1])
emp = [c for c in df.columns if c.startswith("employment=")]
X = df.drop(columns="approved")
B = X.drop(columns=emp).copy()
B["employment"] = X[emp].idxmax(axis=1).str.split("=").str[1]
NUM = ["age", "income", "debt_ratio", "credit_history_years"]
for c in NUM:                          # FACTS reads "age" as pandas Intervals (it may only grow)
    B[c] = pd.qcut(X[c], 4, duplicates="drop").astype(object)
for c in ["late_payments", "owns_home", "sex"]:
    B[c] = X[c].astype(str)
model = LGBMClassifier(n_estimators=100, max_depth=3, verbose=-1, random_state=0).fit(X, df["approved"])

class OnBins:
    # the model on FACTS's binned rows: a bin reads as its midpoint
    def predict(self, Z):
        Z = Z.copy()
        for c in NUM:
            Z[c] = [v.mid for v in Z[c]]
        for c in ["late_payments", "owns_home", "sex"]:
            Z[c] = Z[c].astype(float)
        for c in emp:
            Z[c] = (Z["employment"] == c.split("=")[1]).astype(float)
        return model.predict(Z[list(X.columns)])

out = {}
for metric in ("equal-choice-for-recourse", "equal-cost-of-effectiveness"):
    t = time.time()
    top = FACTS_bias_scan(B, OnBins(), prot_attr="sex", metric=metric, categorical_features=list(B.columns),
                          freq_itemset_min_supp=0.05, feats_not_allowed_to_change=["sex"], top_count=3,
                          verbose=False)
    out[metric] = {"seconds": round(time.time() - t, 1),
                   "top": [[{k: str(v) for k, v in g.items()}, None if s != s else float(s)] for g, s in top]}
print(json.dumps(out))
"""


def ours() -> dict:
    from common import problem

    from core.audit import run_audit
    from core.intake import demo
    from core.intake.io import prepare_data
    from core.intake.models import from_model
    from core.schema import infer_schema

    df, target, model, _ = demo.build_demo("credit-lightgbm")
    prep = prepare_data(df, target)
    ens = from_model(model)
    X = prep.X[list(ens.feature_names)].astype(float)
    schema = infer_schema(X, kinds=prep.kinds, groups=prep.groups, protected=["sex"])
    schema = schema.with_updates("age", actionability="increase")        # as FACTS does (see the docstring)
    t = time.time()
    audit = run_audit(ens, X, schema=schema, target=1, protected=["sex"], max_rows=300, n_jobs=2, model=model,
                      n_perm=300, n_boot=200, local_rules_per_group=1, y=df[target])
    top = audit.subgroups.head(3) if audit.subgroups is not None else None
    return {"seconds": round(time.time() - t, 1), "rows": len(df), "problem": problem(schema),
            "top": [] if top is None else top.to_dict(orient="records")}, df


#: FACTS's problem as AIF360 0.6.1 poses it (THEIRS above): sex held, age one way, the rest free
THEIR_PROBLEM = {"protected": ["sex"], "fixed": ["sex"], "increase_only": ["age"], "decrease_only": [],
                 "not_the_same": "age moves by at most two quartile bins (AIF360's drop_two_above)"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--their-python", default=None)
    args = ap.parse_args()
    mine, df = ours()
    same = {k: v for k, v in THEIR_PROBLEM.items() if k != "not_the_same"}
    if mine["problem"] != same:
        raise SystemExit(f"not the same problem on both sides: ours {mine['problem']}, theirs {same}")
    result = {"problem": {"ours": mine.pop("problem"), "theirs": THEIR_PROBLEM}, "ours": mine,
              "theirs": "skipped (no --their-python)"}
    if args.their_python:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "credit.csv"
            df.to_csv(path, index=False)
            run = subprocess.run([args.their_python, "-c", THEIRS, str(path)], capture_output=True, text=True,
                                 timeout=3600)
        result["theirs"] = json.loads(run.stdout.strip().splitlines()[-1]) if run.returncode == 0 else \
            f"failed: {run.stderr.strip().splitlines()[-1] if run.stderr.strip() else run.returncode}"
    print(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
