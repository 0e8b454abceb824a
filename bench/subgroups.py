"""Benchmark: the audit's statistics stage (group statistics, group fairness, subgroup scan).

Adult (../shared/data/adult.csv, one-hot categories) or, without it, the built-in
synthetic credit demo (20,000 applicants): RandomForest(100 trees, depth 5),
protected attribute Sex (sex), favourable class 1; one audit of ``--rows``
unfavourable rows (default 1,000: recourse, T-CREx, local rules, statistics
with the default settings: 1,000 resamples, 2,000 permutations, a scan of 1,000
permutations and 300 resamples). Then its statistics stage again, on the same
per-row table:

* as it is now (the best of ``--repeat`` runs),
* with the first version of the subgroup scan (kept below: one permutation and
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
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core import auditrun  # noqa: E402
from core.ensemble import from_model  # noqa: E402
from core.shown import label_order  # noqa: E402
from core.subgroups import LOWER_IS_WORSE, SCAN_METRICS, _metric_values, conditions  # noqa: E402
from common import ADULT, adult_with_sex_protected, best_of  # noqa: E402


# ------------------------------------------------------------------ the first version of the scan (reference)
def old_conditions(frame, groups=None, max_levels=8):
    out = []
    in_group = {c for cols in (groups or {}).values() for c in cols}
    for g, cols in (groups or {}).items():
        block = frame[cols].to_numpy(dtype=float)
        for k, c in enumerate(cols):
            level = c[len(g) + 1:] if c.startswith(g + "=") or c.startswith(g + "_") else c
            out.append((g, f"{g} = {level}", block[:, k] > 0.5))
    for c in frame.columns:
        if c in in_group:
            continue
        v = frame[c].to_numpy()
        values = pd.unique(v)
        if len(values) <= max_levels:
            for lv in sorted(values, key=label_order):
                text = np.format_float_positional(float(lv), trim="-") if isinstance(lv, (int, float, np.number)) \
                    else str(lv)
                out.append((c, f"{c} = {text}", v == lv))
            continue
        v = v.astype(float)
        edges = np.unique(np.quantile(v, [0, 0.25, 0.5, 0.75, 1]))
        for i in range(len(edges) - 1):
            a, b = edges[i], edges[i + 1]
            mask = (v > a) & (v <= b) if i else (v >= a) & (v <= b)
            out.append((c, f"{c} in {'[' if i == 0 else '('}{a:.4g}, {b:.4g}]", mask))
    return out


def old_scan_subgroups(rows, frame, *, groups=None, min_size=20, budget=None, max_order=2, n_perm=1000,
                       n_boot=300, alpha=0.05, top=20, random_state=0):
    n = len(rows)
    cond = old_conditions(frame.reset_index(drop=True), groups)
    subgroups = []
    for order in range(1, max_order + 1):
        for combo in combinations(range(len(cond)), order):
            cols = [cond[i][0] for i in combo]
            if len(set(cols)) < order:
                continue
            mask = np.logical_and.reduce([cond[i][2] for i in combo])
            k = int(mask.sum())
            if min_size <= k <= n - min_size:
                subgroups.append((" and ".join(cond[i][1] for i in combo), mask))
    columns = ["subgroup", "size", "metric", "label", "value", "rest", "gap", "gap_lo", "gap_hi", "p_value",
               "p_adjusted", "significant", "worse"]
    if not subgroups:
        return pd.DataFrame(columns=columns)
    ok_cost = rows["cost"].to_numpy(dtype=float)[rows["feasible"].to_numpy(dtype=float) > 0.5]
    budget = float(np.nanmedian(ok_cost)) if budget is None and ok_cost.size else (budget or 0.0)
    metrics = _metric_values(rows.reset_index(drop=True), budget)
    rng = np.random.default_rng(random_state)
    perms = np.argsort(rng.random((n_perm, n)), axis=1)
    boots = rng.integers(0, n, size=(n_boot, n))
    M = np.array([m for _, m in subgroups], dtype=bool)
    out, z_obs, z_null = [], [], []
    for key, (values, on) in metrics.items():
        v = values * on
        w = on.astype(float)

        def gaps(member, idx=None):
            vv, ww = (v, w) if idx is None else (v[idx], w[idx])
            with np.errstate(invalid="ignore", divide="ignore"):
                a = (member @ vv) / (member @ ww)
                b = (~member @ vv) / (~member @ ww)
            return a - b

        observed = gaps(M)
        null = np.stack([gaps(M[:, p]) for p in perms], axis=1)
        with np.errstate(invalid="ignore"):
            p = (1 + np.sum(np.abs(null) >= np.abs(observed)[:, None] - 1e-12, axis=1)) / (1 + n_perm)
            sd = np.nanstd(null, axis=1)
            sd = np.where(sd > 0, sd, np.nan)
        z_obs.append(observed / sd)
        z_null.append(null / sd[:, None])
        boot = np.stack([gaps(M[:, b], b) for b in boots], axis=1)
        with np.errstate(invalid="ignore"):
            lo, hi = np.nanquantile(boot, 0.025, axis=1), np.nanquantile(boot, 0.975, axis=1)
        for s, (text, mask) in enumerate(subgroups):
            with np.errstate(invalid="ignore", divide="ignore"):
                value = float((mask * v).sum() / (mask * w).sum())
                rest = float((~mask * v).sum() / (~mask * w).sum())
            out.append({"subgroup": text, "size": int(mask.sum()), "metric": key, "label": SCAN_METRICS[key],
                        "value": value, "rest": rest, "gap": float(observed[s]), "gap_lo": float(lo[s]),
                        "gap_hi": float(hi[s]), "p_value": float(p[s]) if np.isfinite(observed[s]) else np.nan,
                        "worse": bool(observed[s] < 0) if key in LOWER_IS_WORSE else bool(observed[s] > 0)})
    table = pd.DataFrame(out)
    zo = np.abs(np.concatenate(z_obs))
    with np.errstate(invalid="ignore"):
        zmax = np.nanmax(np.abs(np.concatenate(z_null, axis=0)), axis=0)
        adj = (1 + np.sum(zmax[None, :] >= zo[:, None] - 1e-12, axis=1)) / (1 + n_perm)
    table["p_adjusted"] = np.where(np.isfinite(zo), adj, np.nan)
    table["significant"] = table["p_adjusted"] <= alpha
    table["rank"] = np.where(table["worse"], np.abs(table["gap"]), 0.0)
    table = table.sort_values(["significant", "rank", "p_value"], ascending=[False, False, True])
    result = table.drop(columns="rank")[columns].head(top).reset_index(drop=True)
    result.attrs["budget"] = budget
    return result


# ------------------------------------------------------------------ data
def _data():
    """(name, X, y, schema, protected): Adult when present, else the built-in credit demo."""
    adult = adult_with_sex_protected()
    if adult is not None:
        X, y, schema, _ = adult
        return "adult", X, y, schema, "Sex"
    from core import demo, io
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
    out = {"dataset": name, "model": "RF(100, depth 5)", "rows_audited": int(len(table)),
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
