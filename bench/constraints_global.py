"""Benchmark: what constraints between features cost the global analyses (issue #61).

On the built-in credit demo (3,000 rows, LightGBM of 100 trees of depth 3, as the app
builds it) with three links between its features (:data:`LINKS`: a comparison of two
features' changes, a one-way feature, an implication), each analysis runs without the
constraints and with them, in the same process, alternating, best of ``--repeat``:

* T-CREx fit (rho 0.02, tau 0.9, checked on the model), the page's setting;
* the counterfactual rules: a local rule for each of the first ``--rows`` rows the model
  rejects (the surrogate forest fitted once, outside the timing);
* a batch of optimal counterfactuals for the same rows (one process);
* FCCA on ``--fcca`` rows of M.

CPU seconds of this process (the batch and FCCA run in it: n_jobs 1) and the ratio with
over without; also how many rules T-CREx drops as unreachable, how many rows the batch
finds precluded, and that every prescription or counterfactual keeps the constraints.
Prints JSON.

    .venv/bin/python bench/constraints_global.py [--rows 20] [--fcca 60] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from core.compression import fcca  # noqa: E402
from core.intake import demo  # noqa: E402
from core.intake.workspace import build_workspace  # noqa: E402
from core.optimal.batch import batch_counterfactuals  # noqa: E402
from core.rules import CounterfactualRules  # noqa: E402
from core.rules.onmodel import on_model  # noqa: E402
from core.tcrex import TCREx  # noqa: E402

LINKS = ["delta(credit_history_years) <= delta(age)", "delta(late_payments) >= 0",
         "if delta(income) > 0 then delta(debt_ratio) >= 0"]


def _cpu(fn) -> tuple[float, object]:
    t0 = time.process_time()
    out = fn()
    return time.process_time() - t0, out


def _paired(free, linked, repeat: int) -> dict:
    """Best CPU seconds of each, alternating; the results of the last runs."""
    a, b = [], []
    ra = rb = None
    for _ in range(repeat):
        t, ra = _cpu(free)
        a.append(t)
        t, rb = _cpu(linked)
        b.append(t)
    return {"without_s": round(min(a), 4), "with_s": round(min(b), 4), "ratio": round(min(b) / max(min(a), 1e-9), 2),
            "_free": ra, "_linked": rb}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20)
    ap.add_argument("--fcca", type=int, default=60)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    df, target, model, _ = demo.build_demo("credit-lightgbm")
    ws = build_workspace(df, target, model, name="credit", protected=["sex"])
    schema = ws.schema
    linked = schema.with_constraints(LINKS)
    cons = linked.parsed_constraints()
    X = ws.X.to_numpy(float)
    names = list(ws.X.columns)
    pred = ws.predictions
    solve_on, extra = ws.query_model()
    check = on_model(solve_on, **extra)
    groups = list(schema.groups().values())
    rejected = np.flatnonzero(pred == 0)[: args.rows]
    out: dict = {"data": "synthetic credit demo, 3,000 rows", "links": LINKS, "rows": len(rejected)}

    def tcrex(s):
        return lambda: TCREx(rho=0.02, tau=0.9, groups=groups, random_state=0).fit(
            X, pred, 1, feature_names=names, model=check, schema=s)
    t = _paired(tcrex(schema), tcrex(linked), args.repeat)
    tc = t.pop("_linked")
    t.pop("_free")
    moved = tc.moves(X)
    rules = tc.explain(X)
    t.update(rules=len(tc.rules_), dropped=tc.result_.params.get("unreachable_rules"),
             rows_out_of_reach=int(sum(r.unreachable_rows for r in tc.rules_)),
             prescriptions_keeping_links=bool(all(not cons.violated(X[i], moved[i]) for i in np.flatnonzero(rules >= 0))))
    out["tcrex_fit"] = t

    cr = CounterfactualRules(n_estimators=20, max_depth=10, groups=groups, random_state=0).fit(
        X, pred, feature_names=names, model=check, schema=schema)

    def local(texts):
        def run():
            got = []
            for i in rejected:
                try:
                    got.append(cr.local_rule(X[i], 1, constraints=texts))
                except ValueError:
                    got.append(None)
            return got
        return run
    t = _paired(local(()), local(LINKS), args.repeat)
    found = t.pop("_linked")
    t.pop("_free")
    t.update(rules_found=sum(r is not None for r in found),
             regions_dropped=int(sum(r.unreachable_cells for r in found if r is not None)))
    out["local_rules"] = t

    def batch(s):
        return lambda: batch_counterfactuals(solve_on, X[rejected], 1, schema=s, n_jobs=1, X_ref=X, time_limit=30)
    t = _paired(batch(schema), batch(linked), 1)
    b = t.pop("_linked")
    t.pop("_free")
    t.update(precluded=b.params.get("precluded"), proven=sum(r.status in ("optimal", "infeasible") for r in b),
             keeping_links=bool(all(not cons.violated(X[i], r.x) for i, r in zip(rejected, b) if r.found)))
    out["batch"] = t

    def thresholds(s):
        return lambda: fcca(solve_on, X, ws.y.to_numpy(), schema=s, max_points=args.fcca, n_jobs=1)
    t = _paired(thresholds(schema), thresholds(linked), 1)
    f = t.pop("_linked")
    t.pop("_free")
    t.update(statuses=f.statuses, keeping_links=bool(all(not cons.violated(a, c) for a, c in zip(f.x0, f.x_ce))))
    out["fcca"] = t
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
