"""Subgroup scan of recourse: where is recourse least available or most costly?

Pre-chosen groups can hide the worst-off subgroup. In the spirit of the
recourse-fairness scans of the literature (FACTS, Kavouras et al., NeurIPS
2023, in AIF360 as ``FACTS_bias_scan``; AReS; GLOBE-CE), the scan searches
**subgroups** — conjunctions of up to two conditions on the protected and
other columns (a category or level; a quartile bin of a numerical column, a
value holding most rows, as a capital gain of 0, being a condition of its own) —
among the rows the audit gave an unfavourable decision, and for each subgroup
of at least ``min_size`` rows (its complement too) measures against its
complement. No condition holds on every row, and a subgroup whose rows are those
of a simpler one ("capital gain in [0, max] and sex = 1" is "sex = 1") is left
out, so no line of the scan repeats another's rows with more words:

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
hundred permutations. It reuses the audit's per-row recourse: no new solve. The
permutations and resamples are matrix products over every subgroup at once, with
the figures of one permutation at a time (``bench/subgroups.py``: the audit's
statistics stage on 1,000 rows of Adult in 2 s instead of 60 s).

How it differs from FACTS: FACTS mines frequent itemsets, searches its own
action sets per subgroup and compares groups of a protected attribute within
each subgroup; here the recourse of each row is the optimal one of the audit
(OCEAN, protected attributes fixed) and a subgroup is compared with the rest.

:func:`scan_subgroups` returns a :class:`SubgroupScan`, a result (kind
``"subgroup_scan"``: ``params``, ``elapsed``, ``guarantee``, ``to_json`` /
``from_json``) holding the table in ``table``; the audit keeps that table as its
``subgroups``.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from core.model.guarantee import Guarantee
from core.model.result import Reader, Result, frame_from_dict, frame_to_dict, settings
from core.shown import label_order

__all__ = ["scan_subgroups", "SubgroupScan", "conditions", "SCAN_METRICS"]

SCAN_METRICS = {"feasible": "share with a recourse", "cost": "mean recourse cost", "burden": "recourse burden",
                "effective": "share with a recourse within budget"}
LOWER_IS_WORSE = {"feasible", "effective"}


def _value_text(v) -> str:
    return np.format_float_positional(float(v), trim="-") if isinstance(v, (int, float, np.number)) else str(v)


def _quartile_bins(c: str, v: np.ndarray, keep: np.ndarray) -> list[tuple[str, str, np.ndarray]]:
    """Quartile bins of ``v[keep]``: [a, b] then (a, b]; a bin of one value reads ``c = a``."""
    w = v[keep]
    edges = np.unique(np.quantile(w, [0, 0.25, 0.5, 0.75, 1]))
    if edges.size == 1:
        return [(c, f"{c} = {_value_text(edges[0])}", keep & (v == edges[0]))]
    out = []
    for i in range(len(edges) - 1):
        a, b = edges[i], edges[i + 1]
        mask = keep & ((v > a) & (v <= b) if i else (v >= a) & (v <= b))
        out.append((c, f"{c} in {'[' if i == 0 else '('}{a:.4g}, {b:.4g}]", mask))
    return out


def _bins(c: str, v: np.ndarray) -> list[tuple[str, str, np.ndarray]]:
    """Quartile bins of a numerical column, none covering every row: when the quartiles
    collapse onto the minimum or the maximum (a heavy mass at one value, as a capital gain
    of 0), that value is a condition of its own and the other values get their quartile bins."""
    everywhere = np.ones(v.size, dtype=bool)
    edges = np.unique(np.quantile(v, [0, 0.25, 0.5, 0.75, 1]))
    if edges.size != 2:                          # > 2: the first bin holds the minimum, the last the maximum
        return _quartile_bins(c, v, everywhere) if edges.size > 2 else []
    heavy = float(np.quantile(v, 0.5))           # the minimum or the maximum, holding at least half the rows
    return [(c, f"{c} = {_value_text(heavy)}", v == heavy)] + _quartile_bins(c, v, v != heavy)


def _level_conditions(frame: pd.DataFrame, g: str, cols: list[str]) -> list[tuple[str, str, np.ndarray]]:
    """A one-hot group's conditions, one per level: its column is hot."""
    block = frame[cols].to_numpy(dtype=float)
    out = []
    for k, c in enumerate(cols):
        level = c[len(g) + 1:] if c.startswith(g + "=") or c.startswith(g + "_") else c
        out.append((g, f"{g} = {level}", block[:, k] > 0.5))
    return out


def _column_conditions(c: str, v: np.ndarray, max_levels: int) -> list[tuple[str, str, np.ndarray]]:
    """A column's conditions: each of its values when it has few, else its quartile bins."""
    values = pd.unique(v)
    if len(values) <= max_levels:
        return [(c, f"{c} = {_value_text(lv)}", v == lv) for lv in sorted(values, key=label_order)]
    return _bins(c, v.astype(float))


def conditions(frame: pd.DataFrame, groups: dict[str, list[str]] | None = None, max_levels: int = 8
               ) -> list[tuple[str, str, np.ndarray]]:
    """(column, text, row mask) of every single condition: a one-hot group's level,
    a value of a column with few values, a quartile bin of a numerical column.
    A condition that holds on every row (or on none) is left out: conjoined with
    another it would only repeat that one (a column with a single level gives none)."""
    out = []
    in_group = {c for cols in (groups or {}).values() for c in cols}
    for g, cols in (groups or {}).items():
        out += _level_conditions(frame, g, cols)
    for c in frame.columns:
        if c not in in_group:
            out += _column_conditions(c, frame[c].to_numpy(), max_levels)
    n = len(frame)
    return [(c, text, mask) for c, text, mask in out if 0 < int(mask.sum()) < n]


def _subgroups(cond: list[tuple[str, str, np.ndarray]], n: int, min_size: int, max_order: int
               ) -> list[tuple[str, np.ndarray]]:
    """The conjunctions of up to ``max_order`` conditions on distinct columns with at least
    ``min_size`` rows in and out, each row set once: a conjunction whose rows are those
    of one with fewer conditions (or every row) is an echo of it and is left out."""
    simpler = {np.packbits(np.ones(n, dtype=bool)).tobytes()}     # the row sets of fewer conditions
    subgroups: list[tuple[str, np.ndarray]] = []
    for order in range(1, max_order + 1):
        this_order = set()
        for combo in combinations(range(len(cond)), order):
            cols = [cond[i][0] for i in combo]
            if len(set(cols)) < order:
                continue
            mask = np.logical_and.reduce([cond[i][2] for i in combo])
            k = int(mask.sum())
            if k == 0:
                continue
            key = np.packbits(mask).tobytes()
            if key in simpler:
                continue
            this_order.add(key)
            if min_size <= k <= n - min_size:
                subgroups.append((" and ".join(cond[i][1] for i in combo), mask))
        simpler |= this_order
    return subgroups


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


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, NaN where den is 0 (den counts rows: an exact integer)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def _row_quantiles(a: np.ndarray, qs: tuple[float, ...]) -> list[np.ndarray]:
    """np.nanquantile(a, q, axis=1) for each q, the rows without NaN in one batch."""
    out = [np.full(a.shape[0], np.nan) for _ in qs]
    clean = ~np.isnan(a).any(axis=1)
    if clean.any():
        got = np.quantile(a[clean], qs, axis=1)
        for o, g in zip(out, got):
            o[clean] = g
    for i in np.flatnonzero(~clean):
        row = a[i][~np.isnan(a[i])]
        if row.size:
            for o, g in zip(out, np.quantile(row, qs)):
                o[i] = g
    return out


def _gap_table(subgroups: list[tuple[str, np.ndarray]], rows: pd.DataFrame, budget: float, n_perm: int,
               n_boot: int, random_state: int) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Per (metric, subgroup): the gap, its bootstrap interval and permutation p-value;
    with the standardised observed gaps and, per permutation, the largest standardised gap.

    The permutations and resamples are drawn as the first version of the scan drew them
    and give the same figures, in matrix products: permuting the membership columns,
    ``M[:, p] @ v``, is ``M @ u`` with ``u[p] = v``, so every permutation is one column of
    a matrix of permuted values; resampling the rows ``b``, ``M[:, b] @ v[b]``, is
    ``M @ (c * v)`` with ``c`` the number of times each row is drawn."""
    n = len(rows)
    metrics = _metric_values(rows.reset_index(drop=True), budget)
    rng = np.random.default_rng(random_state)
    perms = np.argsort(rng.random((n_perm, n)), axis=1)                  # the same shuffles for every subgroup
    boots = rng.integers(0, n, size=(n_boot, n))
    member = np.array([m for _, m in subgroups], dtype=bool)             # (S, n)
    M = member.astype(float)
    counts = np.bincount((np.arange(n_boot)[:, None] * n + boots).ravel(),
                         minlength=n_boot * n).reshape(n_boot, n).T.astype(float)   # (n, n_boot)
    perm_cols = np.arange(n_perm)[:, None]
    products: dict[bytes, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def product(x: np.ndarray):
        """M @ x permuted (S, n_perm), M @ x resampled (S, n_boot) and the resamples' totals."""
        key = x.tobytes()
        if key not in products:
            shuffled = np.empty((n_perm, n))
            shuffled[perm_cols, perms] = x
            products[key] = (M @ shuffled.T, M @ (counts * x[:, None]), x @ counts)
        return products[key]

    size = member.sum(axis=1)
    cols: dict[str, list] = {k: [] for k in ("metric", "value", "rest", "gap", "gap_lo", "gap_hi", "p_value")}
    z_obs, z_null = [], []
    for key, (values, on) in metrics.items():
        v = values * on
        w = on.astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            value = (member * v).sum(axis=1) / (member * w).sum(axis=1)
            rest = (~member * v).sum(axis=1) / (~member * w).sum(axis=1)
            observed = (member @ v) / (member @ w) - (~member @ v) / (~member @ w)
        (pv, bv, tv), (pw, bw, tw) = product(v), product(w)
        null = _ratio(pv, pw) - _ratio(v.sum() - pv, w.sum() - pw)       # (S, n_perm)
        with np.errstate(invalid="ignore"):
            p = (1 + np.sum(np.abs(null) >= np.abs(observed)[:, None] - 1e-12, axis=1)) / (1 + n_perm)
            sd = np.nanstd(null, axis=1)
            sd = np.where(sd > 0, sd, np.nan)
        z_obs.append(observed / sd)
        z_null.append(null / sd[:, None])
        boot = _ratio(bv, bw) - _ratio(tv - bv, tw - bw)                  # (S, n_boot): rows resampled
        lo, hi = _row_quantiles(boot, (0.025, 0.975))
        cols["metric"] += [key] * len(subgroups)
        for name, a in (("value", value), ("rest", rest), ("gap", observed), ("gap_lo", lo), ("gap_hi", hi),
                        ("p_value", np.where(np.isfinite(observed), p, np.nan))):
            cols[name].append(a)
    table = pd.DataFrame({"subgroup": [t for t, _ in subgroups] * len(metrics), "size": np.tile(size, len(metrics)),
                          "metric": cols["metric"], "label": [SCAN_METRICS[k] for k in cols["metric"]],
                          **{k: np.concatenate(cols[k]).astype(float) for k in cols if k != "metric"}})
    lower = table["metric"].isin(list(LOWER_IS_WORSE)).to_numpy()
    table["worse"] = np.where(lower, table["gap"].to_numpy() < 0, table["gap"].to_numpy() > 0)
    zo = np.abs(np.concatenate(z_obs))
    with np.errstate(invalid="ignore"):
        zmax = np.nanmax(np.abs(np.concatenate(z_null, axis=0)), axis=0)          # (n_perm,)
    return table, zo, zmax


@dataclass(frozen=True, eq=False)
class SubgroupScan(Result):
    """The subgroup scan's answer (see the module docstring).

    table : one row per (subgroup, metric) tested, the significant ones first, then by the
        size of the gap on the worse side: subgroup, size, metric, label, value, rest, gap,
        gap_lo, gap_hi, p_value, p_adjusted (max-T), significant, worse (the subgroup is
        worse off); ``table.attrs["budget"]`` the budget of ``effective``.
    budget : the cost the ``effective`` metric counts within (NaN: no subgroup to scan).
    params, elapsed : the scan's settings and seconds; guarantee : ``estimated`` (gaps with
        bootstrap intervals and permutation p-values adjusted over the whole scan).

    It still reads as its table for a while (``len(scan)``, ``scan["gap"]``, ``scan.head()``),
    as :func:`scan_subgroups` returned the table before: each such read warns
    (``DeprecationWarning``); read ``scan.table``.
    """

    kind: ClassVar[str] = "subgroup_scan"
    what: ClassVar[str] = "subgroup scan"

    table: pd.DataFrame
    budget: float = math.nan
    params: dict[str, Any] = field(default_factory=dict)
    elapsed: float = 0.0
    guarantee: Guarantee = field(default_factory=lambda: Guarantee("estimated", note=(
        "Each gap is measured on the audited rows, with a bootstrap interval and a permutation p-value "
        "adjusted over every subgroup and metric scanned (Westfall-Young max-T).")))

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", settings(self.params))
        if math.isfinite(self.budget):                 # as the table said it before (none: no subgroup)
            self.table.attrs["budget"] = self.budget

    def _body(self) -> dict[str, Any]:
        b = float(self.budget)
        return {"budget": b if math.isfinite(b) else None, "table": frame_to_dict(self.table)}

    @classmethod
    def _from_body(cls, r: Reader) -> "SubgroupScan":
        b = r.get("budget")
        return cls(table=frame_from_dict(r.get("table")), budget=math.nan if b is None else float(b),
                   params=dict(r.get("params")), elapsed=r.number("elapsed"),
                   guarantee=Guarantee.from_dict(r.get("guarantee")))

    # -- read as the table it was (deprecated)
    def _as_table(self) -> pd.DataFrame:
        warnings.warn("scan_subgroups returns a SubgroupScan (a result) and its table is .table; reading the "
                      "scan as the table is deprecated and will be removed.", DeprecationWarning, stacklevel=3)
        return self.table

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name in ("table", "budget", "params", "elapsed", "guarantee"):
            raise AttributeError(name)
        return getattr(self._as_table(), name)

    def __getitem__(self, key: Any) -> Any:
        return self._as_table()[key]

    def __len__(self) -> int:
        return len(self._as_table())


def scan_subgroups(rows: pd.DataFrame, frame: pd.DataFrame, *, groups: dict[str, list[str]] | None = None,
                   min_size: int = 20, budget: float | None = None, max_order: int = 2, n_perm: int = 1000,
                   n_boot: int = 300, alpha: float = 0.05, top: int = 20, random_state: int = 0) -> SubgroupScan:
    """The subgroups with the largest recourse gaps (see the module docstring).

    rows : the audit's per-row table (``feasible``, ``cost``), aligned with ``frame``.
    frame : the audited rows' feature values (columns as in the model), aligned with ``rows``.
    Returns a :class:`SubgroupScan` whose ``table`` has one row per (subgroup, metric)
    tested, the significant ones first, then by the size of the gap on the worse side:
    subgroup, size, metric, value, rest, gap, gap_lo, gap_hi, p_value, p_adjusted (max-T),
    significant, worse (the subgroup is worse off). A subgroup whose rows are those of a
    simpler one is not listed again.
    """
    t0 = time.perf_counter()
    params = {"groups": groups or {}, "min_size": min_size, "budget": budget, "max_order": max_order,
              "n_perm": n_perm, "n_boot": n_boot, "alpha": alpha, "top": top, "random_state": random_state,
              "n_rows": len(rows)}
    table, used = _scan(rows, frame, groups, min_size, budget, max_order, n_perm, n_boot, alpha, top, random_state)
    return SubgroupScan(table, used, params, time.perf_counter() - t0)


def _scan(rows: pd.DataFrame, frame: pd.DataFrame, groups: dict[str, list[str]] | None, min_size: int,
          budget: float | None, max_order: int, n_perm: int, n_boot: int, alpha: float, top: int,
          random_state: int) -> tuple[pd.DataFrame, float]:
    """The scan's table and the budget it used (see :func:`scan_subgroups`)."""
    n = len(rows)
    subgroups = _subgroups(conditions(frame.reset_index(drop=True), groups), n, min_size, max_order)
    columns = ["subgroup", "size", "metric", "label", "value", "rest", "gap", "gap_lo", "gap_hi", "p_value",
               "p_adjusted", "significant", "worse"]
    if not subgroups:
        return pd.DataFrame(columns=columns), math.nan
    ok_cost = rows["cost"].to_numpy(dtype=float)[rows["feasible"].to_numpy(dtype=float) > 0.5]
    budget = float(np.nanmedian(ok_cost)) if budget is None and ok_cost.size else (budget or 0.0)
    table, zo, zmax = _gap_table(subgroups, rows, budget, n_perm, n_boot, random_state)
    # Westfall-Young single-step max-T over every subgroup and metric: each gap standardised by
    # its permutation spread, compared with the permutation distribution of the largest one
    with np.errstate(invalid="ignore"):
        adj = (1 + np.sum(zmax[None, :] >= zo[:, None] - 1e-12, axis=1)) / (1 + n_perm)
    table["p_adjusted"] = np.where(np.isfinite(zo), adj, np.nan)
    table["significant"] = table["p_adjusted"] <= alpha
    table["rank"] = np.where(table["worse"], np.abs(table["gap"]), 0.0)
    table = table.sort_values(["significant", "rank", "p_value"], ascending=[False, False, True])
    return table.drop(columns="rank")[columns].head(top).reset_index(drop=True), budget
