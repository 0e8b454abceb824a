"""The audit's groups and their statistics: who is in which group, and how the groups compare.

Used by :func:`core.audit.run_audit`. The protected attributes of a schema and
a group label per row; per group, the recourse metrics of
:mod:`core.audit.metrics` with intervals (a share of rows: Wilson's; any other figure: the
bootstrap's); for each group against its
attribute's largest group, the gap, its interval and a permutation p-value,
Holm-adjusted over every test (:mod:`core.audit.fairstats`); and the plain-language
summary of the significant gaps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, NamedTuple, Sequence

import numpy as np
import pandas as pd

from core.audit import fairstats as fs
from core.audit.metrics import METRICS, SHARES
from core.errors import AuditError
from core.model.features import closest_names, feature_index, names_text
from core.shown import bound_text, label_order

if TYPE_CHECKING:
    from core.schema import Schema

__all__ = ["protected_attributes", "group_labels", "summarise"]


# ------------------------------------------------------------------ groups
def protected_attributes(schema: Schema | None, chosen: Sequence[str] | None = None) -> dict[str, list[int]]:
    """Attribute name -> column indices: a one-hot group is one attribute
    (named by its group), any other protected column is its own. ``chosen``
    names columns or groups; by default the schema's protected columns."""
    if schema is None:
        raise AuditError("The protected attributes are read from the data's schema (its one-hot groups and protected "
                         "columns); give schema=core.infer_schema(df, protected=[...]) or the workspace's schema.")
    names = schema.names
    groups = {g: cols for g, cols in schema.groups().items() if len(cols) >= 2}
    col_group = {c: g for g, cols in groups.items() for c in cols}
    picked = ([chosen] if isinstance(chosen, str) else list(chosen)) if chosen is not None else schema.protected()
    out: dict[str, list[int]] = {}
    for item in picked:
        attr, cols = _attribute(item, names, groups, col_group)
        out[attr] = cols
    return out


def _attribute(item: Any, names: list[str], groups: dict[str, list[int]],
               col_group: dict[int, str]) -> tuple[str, list[int]]:
    """One protected item (a column by name or index, or a one-hot group) as its attribute
    and columns: a column of a one-hot group stands for its group."""
    if not isinstance(item, str):                  # a column index: the one resolver
        item = names[feature_index(names, item, error=AuditError, what="protected")]
    if item in groups:
        return item, list(groups[item])
    if item in names:
        j = names.index(item)
        g = col_group.get(j)
        return (g, list(groups[g])) if g is not None else (item, [j])
    known = list(groups) + list(names)
    near = closest_names(item, known)
    hint = f" Did you mean {' or '.join(map(repr, near))}?" if near else ""
    raise AuditError(f"protected: {item!r} is neither a column nor a one-hot group of the data.{hint} "
                     f"The columns and groups are {names_text(known)}.")


def _level_name(col: str, group: str) -> str:
    for sep in ("=", "_"):
        if col.startswith(group + sep):
            return col[len(group) + 1:]
    return col


def group_labels(X: np.ndarray, names: Sequence[str], cols: Sequence[int], attribute: str,
                 max_levels: int = 8) -> np.ndarray:
    """A group label per row: the hot column's level of a one-hot group, the
    value of a column with few values, or its quartile bin."""
    X = np.asarray(X, dtype=float)
    if len(cols) >= 2:
        block = X[:, cols]
        hot = np.argmax(block, axis=1)
        labels = np.array([_level_name(names[cols[k]], attribute) for k in hot], dtype=object)
        labels[block.max(axis=1) <= 0.5] = "(none)"
        return labels.astype(str)
    v = X[:, cols[0]]
    values = np.unique(v)
    if values.size <= max_levels:
        return np.array([np.format_float_positional(float(a), trim="-") for a in v])
    edges = np.unique(np.quantile(v, [0, 0.25, 0.5, 0.75, 1]))
    k = np.clip(np.searchsorted(edges, v, side="left") - 1, 0, edges.size - 2)   # bins (a, b], the first [a, b]
    fmt = [f"{'[' if i == 0 else '('}{bound_text(edges[i], False)}, {bound_text(edges[i + 1], False)}]"
           for i in range(edges.size - 1)]
    return np.array([fmt[i] for i in k])


# ------------------------------------------------------------------ statistics
def _metric_values(rows: pd.DataFrame, key: str) -> pd.Series:
    col, on = METRICS[key].column, METRICS[key].rows
    if col not in rows:
        return pd.Series(dtype=float)
    if on == "decided":
        sub = rows[rows["status"].isin(["optimal", "feasible", "time_limit_found", "infeasible"])]
        return sub[col].astype(float)
    if on == "found":
        return rows.loc[rows["feasible"] == 1, col].astype(float)
    return rows[col].dropna().astype(float)


class _Resampling(NamedTuple):
    """How the intervals and tests resample: bootstrap resamples, permutations, and the
    one generator every draw comes from (in a fixed order, so an audit is reproducible)."""

    n_boot: int
    n_perm: int
    rng: np.random.Generator


def _tested_metrics(rows: pd.DataFrame) -> list[str]:
    """The metrics the audited rows have values for (precluded only when a row is)."""
    return [k for k in METRICS if METRICS[k].column in rows and rows[METRICS[k].column].notna().any()
            and (k != "precluded" or bool(rows["precluded"].any()))]   # none precluded: no gap to test


def _group_record(attr: str, g: str, ref: str, sub: pd.DataFrame, values: dict[str, np.ndarray],
                  rs: _Resampling) -> dict[str, Any]:
    """One group's row of the per-group table: each metric (``values``: its rows' values per
    metric) with its interval (Wilson's for a share of rows, else the bootstrap's) and count, and
    the quartiles of its recourse costs."""
    rec: dict[str, Any] = {"attribute": attr, "group": g, "reference": g == ref, "rows": int(len(sub))}
    for k, v in values.items():
        stat = METRICS[k].statistic
        rec[k] = fs.STATS[stat](v) if v.size else float("nan")
        rec[f"{k}_lo"], rec[f"{k}_hi"] = (fs.share_ci(v) if k in SHARES and fs.is_share(v) else
                                          fs.bootstrap_ci(v, stat, rs.n_boot, rng=rs.rng))
        rec[f"{k}_n"] = int(v.size)
    found = _metric_values(sub, "cost").to_numpy()
    for q in (25, 75, 90):
        rec[f"cost_q{q}"] = float(np.percentile(found, q)) if found.size else float("nan")
    return rec


def _gap_records(attr: str, g: str, ref: str, mine: dict[str, np.ndarray], theirs: dict[str, np.ndarray],
                 rs: _Resampling) -> list[dict[str, Any]]:
    """The tests of group ``g`` against the reference ``ref``, one per metric with at least
    two values on each side: the gap, its interval and its permutation p-value."""
    out = []
    for k in mine:
        a, b = mine[k], theirs[k]
        if a.size < 2 or b.size < 2:
            continue
        stat = METRICS[k].statistic
        gap = fs.STATS[stat](a) - fs.STATS[stat](b)
        lo, hi = fs.gap_ci(a, b, stat, rs.n_boot, rng=rs.rng)
        out.append({"attribute": attr, "group": g, "reference": ref, "metric": k,
                    "label": METRICS[k].label, "group_value": fs.STATS[stat](a),
                    "reference_value": fs.STATS[stat](b), "gap": gap, "gap_lo": lo, "gap_hi": hi,
                    "p_value": fs.permutation_p(a, b, stat, rs.n_perm, rng=rs.rng),
                    "n_group": int(a.size), "n_reference": int(b.size)})
    return out


def _statistics(rows: pd.DataFrame, attributes: list[str], n_boot: int, n_perm: int, alpha: float,
                seed: int, reference: Mapping[str, str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    rs = _Resampling(n_boot, n_perm, np.random.default_rng(seed))
    group_recs, test_recs = [], []
    metrics = _tested_metrics(rows)
    for attr in attributes:
        labels = rows[f"group:{attr}"].astype(str)
        sizes = labels.value_counts()
        asked = (reference or {}).get(attr)
        # the group asked for, when it has audited rows; else the largest group
        ref = asked if asked is not None and asked in sizes.index else str(sizes.index[0])
        values = {g: {k: _metric_values(rows[labels == g], k).to_numpy() for k in metrics} for g in sizes.index}
        for g in sorted(sizes.index, key=lambda s: (s != ref, label_order(s))):
            group_recs.append(_group_record(attr, g, ref, rows[labels == g], values[g], rs))
            if g != ref:
                test_recs += _gap_records(attr, g, ref, values[g], values[ref], rs)
    groups = pd.DataFrame(group_recs)
    tests = pd.DataFrame(test_recs, columns=["attribute", "group", "reference", "metric", "label", "group_value",
                                             "reference_value", "gap", "gap_lo", "gap_hi", "p_value", "n_group",
                                             "n_reference"])
    tests["p_holm"] = fs.holm(tests["p_value"].to_numpy()) if len(tests) else []
    tests["significant"] = tests["p_holm"] < alpha
    return groups, tests


def _fmt(v: float, key: str) -> str:
    if key in SHARES:
        return f"{v:.0%}"
    return f"{v:.3g}"


def summarise(tests: pd.DataFrame, alpha: float, n_rows: int, attributes: list[str]) -> list[str]:
    """Plain-language sentences on the significant gaps, largest relative gap first."""
    out = []
    if len(tests):
        sig = tests[tests["significant"]].copy()
        sig["rel"] = (sig["gap"].abs() / sig["reference_value"].abs().clip(lower=1e-12)).fillna(np.inf)
        for _, t in sig.sort_values("rel", ascending=False).iterrows():
            k = t["metric"]
            better = METRICS[k].higher_is_better
            group_worse = (t["gap"] < 0) if better else (t["gap"] > 0)
            # the worse-off group first: its value, the other's, and the gap from its side
            (wg, wv), (bg, bv) = ((t["group"], t["group_value"]), (t["reference"], t["reference_value"]))
            gap, lo, hi = t["gap"], t["gap_lo"], t["gap_hi"]
            if not group_worse:
                (wg, wv), (bg, bv) = (bg, bv), (wg, wv)
                gap, lo, hi = -gap, -hi, -lo
            if k in SHARES:
                how = f"{gap * 100:+.1f} points, 95% CI {lo * 100:+.1f} to {hi * 100:+.1f}"
            else:
                how = f"{gap:+.3g}, 95% CI {lo:+.3g} to {hi:+.3g}"
            out.append(f"{t['attribute']} = {wg} is worse off than {t['attribute']} = {bg} on the {t['label']}: "
                       f"{_fmt(wv, k)} vs {_fmt(bv, k)} ({how}; permutation p = {t['p_value']:.2g}, "
                       f"Holm-adjusted {t['p_holm']:.2g}).")
    if not len(tests):
        return [f"No gap could be tested between the groups of {', '.join(attributes)}: the {n_rows} rows audited "
                "hold fewer than two groups of it large enough to compare (a column with one value, say), so this "
                "audit says nothing of a gap. Choose another protected attribute, or audit more rows."]
    if not out:
        largest = ""
        if len(tests):
            t = tests.iloc[int(np.nanargmin(tests["p_value"].to_numpy()))]
            largest = (f" The smallest p-value was {t['p_value']:.2g} (Holm-adjusted {t['p_holm']:.2g}), for the "
                       f"{t['label']} of {t['attribute']} = {t['group']} vs {t['reference']}.")
        out.append(f"No significant gap between the groups of {', '.join(attributes)} at α = {alpha} "
                   f"(Holm-adjusted, {len(tests)} tests, {n_rows} rows audited).{largest}")
    return out
