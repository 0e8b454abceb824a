"""Side by side with the OCEAN authors' package (oceanpy 2.0.7): same forest, same
queries, same cost; do the optimal costs agree, and how long does each take?

oceanpy needs Python >= 3.12 (and gurobipy for its MIP explainer, whose pip
licence is size-limited), so it is not part of the test environment. Run this
from a venv where ``import ocean`` works and this repository is importable:

    python3.12 -m venv /tmp/ocv && /tmp/ocv/bin/pip install oceanpy==2.0.7 -e .
    /tmp/ocv/bin/python bench/oceanpy_side.py --data breast_cancer --trees 100 --depth 5 --explainer cp

Data are parsed by oceanpy's own ``parse_features``:

* ``breast_cancer``: every feature scaled to [-0.5, 0.5], so oceanpy's ``norm=p``
  is ``core.optimal`` with the same norm and no schema on the same array;
* ``adult`` (``../shared/data/adult.csv``, oceanpy's file format with a type row:
  D = discrete, E = one-hot, B = binary, T = target): raw units, one-hot
  categories. Ours gets a schema with the same kinds and groups and weights
  ``span**p`` so its range-scaled cost equals oceanpy's raw-unit cost (``p``=1, 2;
  no weights for l0). A category switch costs 1 on both sides.

The same problem on both sides: oceanpy's explainer is given no immutable or
one-way feature, so ours holds none either (no column is protected or fixed for
its name: an earlier version held Adult's Sex fixed on our side only). The JSON
states each side's problem and refuses to compare different ones.

Prints JSON: the problem, per query both costs, statuses and times, and the
largest relative cost difference.
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


def _breast_cancer(parse_features):
    from sklearn.datasets import load_breast_cancer

    b = load_breast_cancer(as_frame=True)
    data, mapper = parse_features(b.data, scale=True)
    return data, b.target, mapper, None, list(map(str, data.columns))


def _adult(parse_features):
    import pandas as pd

    from core.schema import infer_schema

    raw = pd.read_csv(ROOT.parent / "shared" / "data" / "adult.csv", header=[0, 1])
    types = raw.columns.get_level_values(1)
    raw.columns = raw.columns.get_level_values(0)
    y = raw[raw.columns[types == "T"][0]].astype(int)
    disc, enc = tuple(raw.columns[types == "D"]), tuple(raw.columns[types == "E"])
    data, mapper = parse_features(raw.drop(columns=list(raw.columns[types == "T"])), discretes=disc,
                                  encoded=enc, scale=False)
    names, kinds, groups = [], {}, {}
    for col in data.columns:
        base, code = (col, "") if isinstance(col, str) else col
        name = f"{base}={code}" if code != "" else base
        names.append(name)
        if base in enc:
            groups.setdefault(base, []).append(name)
        elif base in disc:
            kinds[name] = "integer"
        elif data[col].nunique() > 2:
            kinds[name] = "numerical"
    schema = infer_schema(pd.DataFrame(data.to_numpy(float), columns=names), kinds=kinds, groups=groups,
                          protected=[])      # oceanpy's explainer holds no feature fixed: neither do we
    return data, y, mapper, schema, names


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", choices=("breast_cancer", "adult"), default="breast_cancer")
    ap.add_argument("--trees", type=int, default=10)
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--queries", type=int, default=5)
    ap.add_argument("--norm", type=int, choices=(0, 1, 2), default=1)
    ap.add_argument("--explainer", choices=("cp", "mip", "maxsat"), default="cp")
    ap.add_argument("--time-limit", type=int, default=60)
    ap.add_argument("--out", help="also write the JSON here (Gurobi prints its parameters on stdout)")
    args = ap.parse_args()
    try:
        import ocean
        from ocean.feature import parse_features
    except ImportError as exc:
        print(json.dumps({"skipped": f"oceanpy is not importable here ({exc}); see this file's docstring"}))
        return
    if args.data == "adult" and not (ROOT.parent / "shared" / "data" / "adult.csv").exists():
        print(json.dumps({"skipped": "../shared/data/adult.csv is absent"}))
        return
    import pandas as pd
    from common import problem
    from sklearn.ensemble import RandomForestClassifier

    from core.intake.models import from_model
    from core.optimal import optimal_counterfactual

    data, y, mapper, schema, names = (_adult if args.data == "adult" else _breast_cancer)(parse_features)
    posed = {"ours": problem(schema), "oceanpy": problem(None)}   # oceanpy: explain(x, y, norm), no constraints
    if posed["ours"] != posed["oceanpy"]:
        raise SystemExit(f"not the same problem on both sides: {posed}")
    rf = RandomForestClassifier(args.trees, max_depth=args.depth, random_state=0).fit(data, y)
    X = data.to_numpy(float)
    # the same forest again on flat column names, for our schema (oceanpy's one-hot columns are pairs)
    ours_model = RandomForestClassifier(args.trees, max_depth=args.depth, random_state=0).fit(
        pd.DataFrame(X, columns=names), y)
    assert np.array_equal(rf.predict(data), ours_model.predict(pd.DataFrame(X, columns=names)))
    ens = from_model(ours_model)
    weights = None
    if schema is not None and args.norm > 0:
        weights = schema.arrays()["span"] ** args.norm   # range-scaled cost x span^p = raw-unit cost
    rows = np.random.default_rng(1).choice(len(X), args.queries, replace=False)
    cls = {"cp": ocean.ConstraintProgrammingExplainer, "mip": ocean.MixedIntegerProgramExplainer,
           "maxsat": ocean.MaxSATExplainer}[args.explainer]
    kw = {"mip": {}, "cp": {"max_time": args.time_limit, "num_workers": 2},
          "maxsat": {"max_time": args.time_limit}}[args.explainer]
    out = []
    for r in rows:
        x, t = X[r], 1 - int(rf.predict(data.iloc[[r]])[0])
        t0 = time.perf_counter()
        ex = cls(rf, mapper=mapper)
        e = ex.explain(x, y=t, norm=args.norm, **kw)
        theirs_s = time.perf_counter() - t0
        theirs = float(ex.get_objective_value()) if e is not None else float("inf")
        x_theirs = np.asarray(e.to_numpy(), float).ravel() if e is not None else None
        ok = x_theirs is not None and int(rf.predict(pd.DataFrame([x_theirs], columns=data.columns))[0]) == t
        ours = optimal_counterfactual(ens, x, t, schema=schema, norm=f"l{args.norm}", weights=weights,
                                      model=ours_model, time_limit=args.time_limit, X_ref=X)
        out.append({"row": int(r), "oceanpy_cost": theirs, "oceanpy_valid": bool(ok),
                    "oceanpy_s": round(theirs_s, 2), "ours_cost": ours.cost, "ours_status": ours.status,
                    "ours_s": round(ours.elapsed, 2)})
        print(json.dumps(out[-1]), file=sys.stderr, flush=True)
    both = [(o["ours_cost"], o["oceanpy_cost"]) for o in out if np.isfinite(o["oceanpy_cost"])]
    rel = max((abs(a - b) / max(abs(b), 1e-12) for a, b in both), default=None)
    report = json.dumps({"data": args.data, "explainer": args.explainer, "norm": args.norm,
                         "forest": f"RF({args.trees}, depth {args.depth})", "problem": posed, "queries": out,
                         "max_relative_cost_difference": rel,
                         "median_ratio_oceanpy_over_ours": round(float(np.median(
                             [o["oceanpy_s"] / max(o["ours_s"], 1e-9) for o in out])), 2)}, indent=2)
    print(report)
    if args.out:
        Path(args.out).write_text(report)


if __name__ == "__main__":
    main()
