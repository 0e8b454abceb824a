"""The subgroup scan as first written (one permutation and one resample at a time,
a quartile bin of every row included): the oracle the faster scan of
:mod:`core.audit.subgroups` is checked against (``tests/audit/test_subgroups_echoes.py``) and
the reference ``bench/subgroups.py`` times it against."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from core.audit.subgroups import LOWER_IS_WORSE, SCAN_METRICS
from core.shown import label_order

__all__ = ["old_conditions", "old_scan_subgroups"]


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


def old_metric_values(rows, budget):
    feasible = rows["feasible"].to_numpy(dtype=float)
    cost = rows["cost"].to_numpy(dtype=float)
    ok = (feasible > 0.5) & np.isfinite(cost)
    worst = float(np.nanmax(cost[ok])) if ok.any() else 1.0
    every = np.ones(len(rows), dtype=bool)
    return {"feasible": (feasible, every), "cost": (np.where(ok, cost, 0.0), ok),
            "burden": (np.where(ok, cost, worst), every),
            "effective": ((ok & (cost <= budget)).astype(float), every)}


def old_scan_subgroups(rows, frame, *, groups=None, min_size=20, budget=None, max_order=2, n_perm=1000,
                       n_boot=300, alpha=0.05, top=20, random_state=0, conditions_of=old_conditions):
    """The scan as first written (one permutation, one resample at a time); ``conditions_of``
    lets the oracle run on the new conditions too."""
    n = len(rows)
    cond = conditions_of(frame.reset_index(drop=True), groups)
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
    metrics = old_metric_values(rows.reset_index(drop=True), budget)
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
