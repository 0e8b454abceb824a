"""Subgroup scan of recourse: where is recourse least available or most costly?

Pre-chosen groups can hide the worst-off subgroup. In the spirit of the
recourse-fairness scans of the literature (FACTS, Kavouras et al., NeurIPS
2023, in AIF360 as ``FACTS_bias_scan``; AReS; GLOBE-CE), the scan searches
**subgroups** — conjunctions of up to two conditions on the protected and
other columns (a category or level; a quartile bin of a numerical column) —
among the rows the audit gave an unfavourable decision, and for each subgroup
of at least ``min_size`` rows (its complement too) measures against its
complement:

* **feasibility**: the share with a recourse;
* **cost**: the mean optimal recourse cost of the rows with one;
* **burden**: the mean cost over *all* the subgroup's unfavourably decided rows,
  a row without recourse counting as the largest cost any row needed (so an
  unreachable row weighs, and the scale stays that of the costs);
* **effectiveness within a budget**: the share whose recourse costs at most
  ``budget`` (default: the median cost of the rows with one).

Each gap gets a two-sided permutation p-value (subgroup membership shuffled,
the same permutations for every subgroup and metric) and a bootstrap interval.
The scan tests hundreds of overlapping subgroups, so the p-values are adjusted
by the Westfall-Young single-step max-T method over every subgroup and metric
(each gap standardised by its permutation spread and compared with the
permutation distribution of the largest standardised gap): the scan as a whole
keeps the family-wise error rate at ``alpha`` (checked on shuffled labels),
and, unlike Holm on permutation p-values, it can still find a gap with a few
hundred permutations. It reuses the audit's per-row recourse: no new solve.

How it differs from FACTS: FACTS mines frequent itemsets, searches its own
action sets per subgroup and compares groups of a protected attribute within
each subgroup; here the recourse of each row is the optimal one of the audit
(OCEAN, protected attributes fixed) and a subgroup is compared with the rest.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from core.shown import label_order

__all__ = ["scan_subgroups", "conditions", "SCAN_METRICS"]

SCAN_METRICS = {"feasible": "share with a recourse", "cost": "mean recourse cost", "burden": "recourse burden",
                "effective": "share with a recourse within budget"}
LOWER_IS_WORSE = {"feasible", "effective"}


def conditions(frame: pd.DataFrame, groups: dict[str, list[str]] | None = None, max_levels: int = 8
               ) -> list[tuple[str, str, np.ndarray]]:
    """(column, text, row mask) of every single condition: a one-hot group's level,
    a value of a column with few values, a quartile bin of a numerical column."""
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


def _metric_values(rows: pd.DataFrame, budget: float) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per metric (values, rows it is measured on)."""
    feasible = rows["feasible"].to_numpy(dtype=float)
    cost = rows["cost"].to_numpy(dtype=float)
    ok = (feasible > 0.5) & np.isfinite(cost)
    worst = float(np.nanmax(cost[ok])) if ok.any() else 1.0
    every = np.ones(len(rows), dtype=bool)
    return {"feasible": (feasible, every), "cost": (np.where(ok, cost, 0.0), ok),
            "burden": (np.where(ok, cost, worst), every),
            "effective": ((ok & (cost <= budget)).astype(float), every)}


def scan_subgroups(rows: pd.DataFrame, frame: pd.DataFrame, *, groups: dict[str, list[str]] | None = None,
                   min_size: int = 20, budget: float | None = None, max_order: int = 2, n_perm: int = 1000,
                   n_boot: int = 300, alpha: float = 0.05, top: int = 20, random_state: int = 0) -> pd.DataFrame:
    """The subgroups with the largest recourse gaps (see the module docstring).

    rows : the audit's per-row table (``feasible``, ``cost``), aligned with ``frame``.
    frame : the audited rows' feature values (columns as in the model), aligned with ``rows``.
    Returns one row per (subgroup, metric) tested, the significant ones first, then by
    the size of the gap on the worse side: subgroup, size, metric, value, rest, gap,
    gap_lo, gap_hi, p_value, p_adjusted (max-T), significant, worse (the subgroup is worse off).
    """
    n = len(rows)
    cond = conditions(frame.reset_index(drop=True), groups)
    subgroups: list[tuple[str, np.ndarray]] = []
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
    perms = np.argsort(rng.random((n_perm, n)), axis=1)                  # the same shuffles for every subgroup
    boots = rng.integers(0, n, size=(n_boot, n))
    M = np.array([m for _, m in subgroups], dtype=bool)                  # (S, n)
    out, z_obs, z_null = [], [], []
    for key, (values, on) in metrics.items():
        v = values * on
        w = on.astype(float)

        def gaps(member: np.ndarray, idx: np.ndarray | None = None) -> np.ndarray:
            """Subgroup minus rest, per row of ``member`` (S, n); ``idx``: the rows resampled."""
            vv, ww = (v, w) if idx is None else (v[idx], w[idx])
            with np.errstate(invalid="ignore", divide="ignore"):
                a = (member @ vv) / (member @ ww)
                b = (~member @ vv) / (~member @ ww)
            return a - b

        observed = gaps(M)
        null = np.stack([gaps(M[:, p]) for p in perms], axis=1)          # (S, n_perm)
        with np.errstate(invalid="ignore"):
            p = (1 + np.sum(np.abs(null) >= np.abs(observed)[:, None] - 1e-12, axis=1)) / (1 + n_perm)
            sd = np.nanstd(null, axis=1)
            sd = np.where(sd > 0, sd, np.nan)
        z_obs.append(observed / sd)
        z_null.append(null / sd[:, None])
        boot = np.stack([gaps(M[:, b], b) for b in boots], axis=1)    # (S, n_boot): rows resampled
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
    # Westfall-Young single-step max-T over every subgroup and metric: each gap standardised by
    # its permutation spread, compared with the permutation distribution of the largest one
    zo = np.abs(np.concatenate(z_obs))
    with np.errstate(invalid="ignore"):
        zmax = np.nanmax(np.abs(np.concatenate(z_null, axis=0)), axis=0)          # (n_perm,)
        adj = (1 + np.sum(zmax[None, :] >= zo[:, None] - 1e-12, axis=1)) / (1 + n_perm)
    table["p_adjusted"] = np.where(np.isfinite(zo), adj, np.nan)
    table["significant"] = table["p_adjusted"] <= alpha
    table["rank"] = np.where(table["worse"], np.abs(table["gap"]), 0.0)
    table = table.sort_values(["significant", "rank", "p_value"], ascending=[False, False, True])
    result = table.drop(columns="rank")[columns].head(top).reset_index(drop=True)
    result.attrs["budget"] = budget
    return result
