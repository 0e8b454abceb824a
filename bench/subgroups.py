"""Benchmark: the audit's statistics stage (group statistics, group fairness, subgroup scan).

Adult (../shared/data/adult.csv, one-hot categories) or, without it, the built-in
synthetic credit demo (20,000 applicants): RandomForest(100 trees, depth 5),
protected attribute Sex (sex), favourable class 1; one audit of ``--rows``
unfavourable rows (default 1,000: recourse, T-CREx, local rules, statistics
with the default settings: 1,000 resamples, 2,000 permutations, a scan of 1,000
permutations and 300 resamples). Then its statistics stage again, on the same
per-row table:

* as it is now (the best of ``--repeat`` runs),
* with the first version of the subgroup scan (``tests/subgroups_v1.py``: one permutation and
  one resample at a time, and its conditions, a bin of every row included), the
  reference measured in the same process, once;

and the ratio of the two. Also: how many of the 15 first lines of each scan
repeat the rows of a simpler line (or hold every row), and whether the
p-values and intervals of the subgroups both list are the same. Prints JSON.

    python bench/subgroups.py [--rows 1000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from common import adult_with_sex_protected, best_of, problem  # noqa: E402
from subgroups_v1 import old_conditions, old_scan_subgroups  # noqa: E402

from core.audit import run as auditrun  # noqa: E402
from core.audit.subgroups import conditions  # noqa: E402
from core.intake.models import from_model  # noqa: E402


# ------------------------------------------------------------------ data
def _data():
    """(name, X, y, schema, protected): Adult when present, else the built-in credit demo."""
    adult = adult_with_sex_protected()
    if adult is not None:
        X, y, schema, _ = adult
        return "adult", X, y, schema, "Sex"
    from core.intake import demo, io
    from core.schema import infer_schema

    df, target = demo.synthetic_credit(20000, seed=0)
    prep = io.prepare_data(df, target)
    schema = infer_schema(prep.X, kinds=prep.kinds, groups=prep.groups, protected=["sex"])
    return "synthetic credit demo (no adult.csv)", prep.X, prep.y.to_numpy().astype(int), schema, "sex"


def _echoes(sub: pd.DataFrame, frame: pd.DataFrame, cond: list, lines: int = 15) -> int:
    """Lines among the first ``lines`` whose rows are those of fewer conditions, or every row."""
    single = {text: mask for _, text, mask in cond}
    simpler = {np.packbits(m).tobytes() for m in single.values()} | {np.packbits(np.ones(len(frame), bool)).tobytes()}
    count = 0
    for s in sub["subgroup"].head(lines):
        parts = s.split(" and ")
        mask = np.logical_and.reduce([single[p] for p in parts])
        count += bool(mask.all()) or (len(parts) > 1 and np.packbits(mask).tobytes() in simpler)
    return count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    from sklearn.ensemble import RandomForestClassifier

    name, X, y, schema, protected = _data()
    model = RandomForestClassifier(n_estimators=100, max_depth=5, random_state=0, n_jobs=2).fit(X, y)
    ens = from_model(model, feature_names=list(X.columns))
    stage = auditrun._statistics_stage
    seen = {}

    def capture(run, table, y_):
        seen.update(run=run, table=table.copy(), y=y_)
        return stage(run, table, y_)

    auditrun._statistics_stage = capture
    try:
        t0 = time.perf_counter()
        audit = auditrun.run_audit(ens, X, schema=schema, target=1, protected=[protected], max_rows=a.rows,
                                   n_jobs=2, y=y)
        t_audit = time.perf_counter() - t0
    finally:
        auditrun._statistics_stage = stage
    run, table = seen["run"], seen["table"]
    out = {"dataset": name, "model": "RF(100, depth 5)", "problem": problem(schema, protected=[protected]),
           "rows_audited": int(len(table)),
           "audit_s": round(t_audit, 2), "audit_timings": audit.meta["timings"]}

    def now():
        return stage(run, table, seen["y"])

    def before():
        auditrun.scan_subgroups = old_scan_subgroups
        try:
            return stage(run, table, seen["y"])
        finally:
            auditrun.scan_subgroups = scan_new

    scan_new = auditrun.scan_subgroups
    t_new = best_of(now, a.repeat)
    new = now()
    t0 = time.perf_counter()
    old = before()
    t_old = time.perf_counter() - t0
    frame = pd.DataFrame(run.A[table["row"].to_numpy(dtype=int)], columns=run.names)
    groups = {g: [run.names[j] for j in cols] for g, cols in run.schema.groups().items() if len(cols) >= 2}
    sub_new, sub_old = new[4], old[4]
    both = sub_new.merge(sub_old, on=["subgroup", "metric"], suffixes=("", "_old"))
    same = bool(len(both)) and all(
        np.allclose(both[c], both[f"{c}_old"], rtol=1e-12, atol=1e-14, equal_nan=True)
        for c in ("value", "rest", "gap", "gap_lo", "gap_hi", "p_value"))
    out.update({
        "statistics_stage_s": round(t_new, 2), "statistics_stage_first_version_s": round(t_old, 2),
        "speedup": round(t_old / t_new, 1), "goal_s": 10.0,
        "group_tests_and_fairness_equal": bool(new[0].equals(old[0]) and new[1].equals(old[1])
                                               and new[3].by_group.equals(old[3].by_group)),
        "scan_lines_in_both_top20": int(len(both)),
        "same_p_values_and_intervals_on_those": same,
        "same_adjusted_p_on_those": bool(np.array_equal(both["p_adjusted"], both["p_adjusted_old"])),
        "echo_lines_in_top15": {"now": _echoes(sub_new, frame, conditions(frame, groups)),
                                "first_version": _echoes(sub_old, frame, old_conditions(frame, groups))},
        "top5_now": list(sub_new["subgroup"].head(5) + " · " + sub_new["metric"].head(5)),
    })
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
