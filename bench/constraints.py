"""Benchmark: optimal counterfactuals under constraints between features, against the same
queries without them; the preclusion check against the optimisation; an audit with and
without them (issue #61).

Cases: breast cancer RF(100, depth 5) on the raw features, and Adult XGBoost(100,
depth 4) as the app prepares it, each with three links between features. Per case, on
the first ``--rows`` rows the model declines (target: the other class), in this process:

* the CPU seconds of one ``optimal_counterfactual`` without the constraints (the
  reference) and with them (the measure), their medians and ratio, the share of answers
  proven (optimal, or precluded), which solver answered, and how many rows are precluded;
* the CPU seconds of one ``verify_recourse`` (a feasibility question, no blocking set)
  against the constrained optimisation of the same row: the ratio of the medians and the
  largest ratio of a row; its verdict must agree with the optimisation's.

Then the recourse audit (``core.audit.run_audit``, every stage) of ``--audit-rows`` Adult
rows the XGBoost model declines, with the same three links in the schema and without them,
CPU seconds of this process and its worker processes (``n_jobs=1``: the audit runs here).

The acceptance figures of the issue are checked at the end (``acceptance``): each
case's median at most 1.5x, every answer proven, the check at most half the optimisation,
the audit within 1.5x. CPU seconds, since the machines are shared. Prints JSON.

Usage: python bench/constraints.py [--rows 20] [--time-limit 30] [--audit-rows 500] [--only adult]
"""

from __future__ import annotations

import argparse
import json
import resource
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
#: the issue's bounds: the median with the links over the median without, the check over the optimisation,
#: the audit with the links over the audit without
BOUNDS = {"ratio_with_over_without": 1.5, "ratio_check_over_optimisation": 0.5, "audit_ratio": 1.5}


def _adult():
    import xgboost as xgb
    from common import adult_with_sex_protected

    got = adult_with_sex_protected()
    if got is None:
        return None
    X, y, schema, _ = got
    m = xgb.XGBClassifier(n_estimators=100, max_depth=4, n_jobs=1, random_state=0).fit(X, y)
    return m, X, y, schema


def _cases(only: str | None):
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import RandomForestClassifier

    from core.schema import infer_schema

    if only in (None, "breast_cancer"):
        b = load_breast_cancer(as_frame=True)
        rf = RandomForestClassifier(100, max_depth=5, random_state=0).fit(b.data, b.target)
        yield "breast_cancer", "RF(100, depth 5)", rf, b.data, infer_schema(b.data), 1
    if only in (None, "adult"):
        got = _adult()
        if got is not None:
            m, X, _, schema = got
            yield "adult", "XGBoost(100, depth 4)", m, X, schema, 1


def _cpu(fn):
    t0 = time.process_time()
    out = fn()
    return out, time.process_time() - t0


def _cpu_with_children(fn):
    """CPU seconds of this process and of the worker processes it waited for."""
    def total():
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    t0 = total()
    out = fn()
    return out, total() - t0


def _med(v) -> float:
    return float(np.median(v)) if len(v) else float("nan")


def run_case(name: str, label: str, model, X, schema, target, rows: int, time_limit: float) -> dict:
    from core.intake.models import from_model
    from core.optimal import optimal_counterfactual, verify_recourse

    ens = from_model(model)
    Xn = X.to_numpy(float)
    picked = np.flatnonzero(model.predict(X) != target)[:rows]
    texts = LINKS[name]
    free_s, cons_s, check_s, proven, precluded, agree, answered = [], [], [], 0, 0, 0, {}
    for r in picked:
        kw = dict(schema=schema, time_limit=time_limit, model=model, X_ref=Xn)
        _, t_free = _cpu(lambda: optimal_counterfactual(ens, Xn[r], target, **kw))
        res, t_cons = _cpu(lambda: optimal_counterfactual(ens, Xn[r], target, constraints=texts, **kw))
        chk, t_chk = _cpu(lambda: verify_recourse(ens, Xn[r], target, schema=schema, constraints=texts,
                                                  time_limit=time_limit, explain=False))
        free_s.append(t_free)
        cons_s.append(t_cons)
        check_s.append(t_chk)
        proven += res.guarantee.kind in ("proven_optimal", "infeasible")
        precluded += res.status == "infeasible"
        agree += (chk.status == "precluded") == (res.status == "infeasible") and chk.status != "unknown"
        answered[res.backend] = answered.get(res.backend, 0) + 1
    n = max(len(picked), 1)
    return {
        "model": label, "rows": len(picked), "links": texts,
        "cpu_s_median_without": round(_med(free_s), 4), "cpu_s_median_with": round(_med(cons_s), 4),
        "ratio_with_over_without": round(_med(cons_s) / max(_med(free_s), 1e-9), 3),
        "cpu_s_p95_with": round(float(np.quantile(cons_s, 0.95)), 4) if cons_s else None,
        "proven_share": round(proven / n, 3), "precluded_rows": precluded, "answered_by": answered,
        "cpu_s_median_preclusion_check": round(_med(check_s), 4),
        "ratio_check_over_optimisation": round(_med(check_s) / max(_med(cons_s), 1e-9), 3),
        "max_row_ratio_check_over_optimisation": round(max((c / max(o, 1e-9) for c, o in zip(check_s, cons_s)),
                                                           default=float("nan")), 3),
        "check_agrees_with_optimisation": round(agree / n, 3),
    }


def run_audit_pair(rows: int, time_limit: float) -> dict:
    """The audit of ``rows`` declined Adult rows without the links and with them in the schema."""
    from core.audit import run_audit

    got = _adult()
    if got is None:
        return {"skipped": "../shared/data/adult.csv is absent"}
    model, X, y, schema = got
    declined = np.flatnonzero(model.predict(X) != 1)[:rows]
    out: dict = {"model": "XGBoost(100, depth 4)", "rows": int(declined.size), "links": LINKS["adult"]}
    for which, sch in (("without", schema), ("with", schema.with_constraints(LINKS["adult"]))):
        audit, cpu = _cpu_with_children(lambda: run_audit(model, X, schema=sch, target=1, rows=declined, y=y,
                                                          max_rows=None, time_limit=time_limit, n_jobs=1))
        t = audit.rows
        out[f"cpu_s_{which}"] = round(cpu, 3)
        out[f"precluded_{which}"] = int(t["precluded"].sum())
        out[f"proven_share_{which}"] = round(float(((t["gap"] == 0) | (t["precluded"] == 1)).mean()), 3)
    out["audit_ratio"] = round(out["cpu_s_with"] / max(out["cpu_s_without"], 1e-9), 3)
    return out


def acceptance(out: dict) -> dict:
    """The issue's figures against its bounds."""
    ok: dict = {}
    for name in LINKS:
        c = out.get(name)
        if c:
            ok[f"{name}: median ratio <= 1.5"] = c["ratio_with_over_without"] <= BOUNDS["ratio_with_over_without"]
            ok[f"{name}: 100% proven"] = c["proven_share"] == 1.0
            ok[f"{name}: check <= 0.5 of the optimisation"] = \
                c["ratio_check_over_optimisation"] <= BOUNDS["ratio_check_over_optimisation"]
    a = out.get("adult_audit")
    if a and "audit_ratio" in a:
        ok["adult audit: within 1.5x"] = a["audit_ratio"] <= BOUNDS["audit_ratio"]
    return ok


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=20)
    p.add_argument("--time-limit", type=float, default=30.0)
    p.add_argument("--audit-rows", type=int, default=500, help="0: no audit")
    p.add_argument("--only", choices=sorted(LINKS), default=None)
    a = p.parse_args()
    out: dict = {"cores": __import__("os").cpu_count()}
    for name, label, model, X, schema, target in _cases(a.only):
        out[name] = run_case(name, label, model, X, schema, target, a.rows, a.time_limit)
    if a.audit_rows > 0 and a.only in (None, "adult"):
        out["adult_audit"] = run_audit_pair(a.audit_rows, a.time_limit)
    out["acceptance"] = acceptance(out)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
