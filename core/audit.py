"""Fairness audit of recourse: is recourse equally available and equally costly across groups?

For the protected attribute(s) of the schema (a one-hot group is one
attribute; a numerical one is cut into quartiles) and the rows whose
decision is unfavourable (the model's output misses the target):

* per row, the optimal recourse (:func:`core.optimal.optimal_counterfactual`,
  OCEAN) under the schema's actionability with every protected column held
  fixed: whether one exists, its cost (the schema's cost: range-scaled, one
  unit per category switch) and the number of features it changes;
* per row, the T-CREx rule the metarule tree prescribes (:mod:`core.tcrex`):
  whether it is actionable (asks no change of a fixed feature) and how many
  features it asks to change;
* for a seeded sample of rows per group, the local counterfactual rule
  (:mod:`core.rules`) and its correctness: the share of its counterfactual
  samples the model puts in the target;
* per group, these as shares, means, medians and quantiles with bootstrap
  intervals, and for each group against the attribute's largest group the
  gap, its bootstrap interval and a two-sided permutation p-value
  (:mod:`core.fairstats`), Holm-adjusted over every test of the audit;
* a plain-language summary of the significant gaps, largest first.

``run_audit`` returns an :class:`Audit`, which serialises to JSON, to a
self-contained HTML report (:mod:`core.report`) and to per-row CSV. The rows
run on local processes or a Dask cluster (:mod:`core.batch`).

Command line (no UI)::

    python -m core.audit --data credit.csv --model model.json --protected sex \\
        --target 1 [--scheduler tcp://HOST:8786] [--rows 500] --out report.html
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from core import fairstats as fs
from core.auditmetrics import METRICS, SHARES
from core.batch import batch_counterfactuals
from core.counterfactual import describe_changes, make_target
from core.ensemble import TreeEnsemble, from_model
from core.errors import AuditCancelled, AuditError
from core.groupfair import group_fairness
from core.report import audit_html, cost_figure, extract_audit_json, group_table, metric_figure, tests_table
from core.rules import CounterfactualRules
from core.settings import with_overrides
from core.subgroups import scan_subgroups
from core.tcrex import TCREx

__all__ = ["run_audit", "AuditSettings", "Provenance", "Audit", "AuditError", "AuditCancelled",
           "protected_attributes", "group_labels", "METRICS", "package_versions"]

REPORT_PACKAGES = ("numpy", "pandas", "scikit-learn", "xgboost-cpu", "lightgbm", "ortools", "scipy", "plotly",
                   "dask", "distributed", "streamlit")


# metric key -> (label, the column of the per-row table, statistic, the rows it is measured on, higher is better)


def package_versions(names: Sequence[str] = REPORT_PACKAGES) -> dict[str, str]:
    from importlib import metadata
    import platform

    out = {"python": platform.python_version()}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            continue
    return out


# ------------------------------------------------------------------ groups
def protected_attributes(schema: Any, chosen: Sequence[str] | None = None) -> dict[str, list[int]]:
    """Attribute name -> column indices: a one-hot group is one attribute
    (named by its group), any other protected column is its own. ``chosen``
    names columns or groups; by default the schema's protected columns."""
    names = schema.names
    groups = {g: cols for g, cols in schema.groups().items() if len(cols) >= 2}
    col_group = {c: g for g, cols in groups.items() for c in cols}
    picked = list(chosen) if chosen is not None else schema.protected()
    out: dict[str, list[int]] = {}
    for item in picked:
        if item in groups:
            out[item] = list(groups[item])
        elif item in names:
            j = names.index(item)
            g = col_group.get(j)
            if g is not None:
                out[g] = list(groups[g])
            else:
                out[item] = [j]
        else:
            raise AuditError(f"{item!r} is neither a column nor a one-hot group of the data; "
                             f"columns are {names[:8]}{'…' if len(names) > 8 else ''}.")
    return out


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
    fmt = [f"{'[' if i == 0 else '('}{edges[i]:.4g}, {edges[i + 1]:.4g}]" for i in range(edges.size - 1)]
    return np.array([fmt[i] for i in k])


# ------------------------------------------------------------------ result
@dataclass(frozen=True)
class Audit:
    """The audit's tables, summary and provenance (see the module docstring).

    rows : one row per audited row (index into the data, group labels, recourse, rules).
    groups : per attribute and group, the metrics with their intervals.
    tests : per attribute, group, metric: the gap to the reference group, its
        interval, the permutation p-value and the Holm-adjusted one.
    rules : per attribute and group, the T-CREx rules most often prescribed.
    summary : sentences, largest significant gaps first.
    meta : parameters, fingerprints, schema, package versions, timings.
    counterfactuals : each audited row's optimal recourse point (NaN when none),
        kept in memory only (the saved audit has the changes as text).
    fairness, disparities : standard group fairness of the model's decisions on
        every row (:mod:`core.groupfair`, fairlearn's metrics): per group and
        intersection, and the parity differences/ratios per attribute.
    """

    rows: pd.DataFrame
    groups: pd.DataFrame
    tests: pd.DataFrame
    rules: pd.DataFrame
    summary: list[str]
    meta: dict[str, Any] = field(default_factory=dict)
    counterfactuals: np.ndarray | None = None   # (len(rows), n_features), NaN without one; not saved
    fairness: pd.DataFrame | None = None        # group fairness of the decisions (core.groupfair), all rows
    disparities: pd.DataFrame | None = None     # demographic parity / equalised odds per attribute
    subgroups: pd.DataFrame | None = None       # the subgroup scan of recourse (core.subgroups)

    def to_dict(self) -> dict[str, Any]:
        def cell(v: Any) -> Any:
            if isinstance(v, (np.bool_, bool)):
                return bool(v)
            if isinstance(v, (np.integer,)):
                return int(v)
            if isinstance(v, (float, np.floating)):
                return float(v) if np.isfinite(v) else None
            return v

        def frame(df: pd.DataFrame) -> dict[str, Any]:   # floats kept exactly (json writes repr)
            return {"columns": [str(c) for c in df.columns],
                    "data": [[cell(v) for v in row] for row in df.itertuples(index=False, name=None)]}

        out = {"format": "counterfactual-atlas-audit", "version": 1, "rows": frame(self.rows),
               "groups": frame(self.groups), "tests": frame(self.tests), "rules": frame(self.rules),
               "summary": list(self.summary), "meta": self.meta}
        for name in ("fairness", "disparities", "subgroups"):
            table = getattr(self, name)
            if table is not None:
                out[name] = frame(table)
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, default=str)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Audit":
        if d.get("format") != "counterfactual-atlas-audit":
            raise AuditError("This file is not a saved audit of Counterfactual Atlas (no audit data inside).")

        def frame(x: dict[str, Any]) -> pd.DataFrame:
            df = pd.DataFrame(x["data"], columns=x["columns"])
            return df.infer_objects()

        try:
            out = cls(frame(d["rows"]), frame(d["groups"]), frame(d["tests"]), frame(d["rules"]),
                      list(d["summary"]), dict(d["meta"]),
                      fairness=frame(d["fairness"]) if d.get("fairness") else None,   # older audits: none
                      disparities=frame(d["disparities"]) if d.get("disparities") else None,
                      subgroups=frame(d["subgroups"]) if d.get("subgroups") else None)
        except (KeyError, TypeError, ValueError) as exc:
            raise AuditError(f"The saved audit is incomplete or damaged ({type(exc).__name__}: {exc}).") from None
        need = {"row", "status", "feasible", "cost"}
        if not need <= set(out.rows.columns) or not {"attribute", "group", "reference"} <= set(out.groups.columns):
            raise AuditError("The saved audit is incomplete: its per-row or per-group table lacks columns.")
        out.validate()
        return out

    def validate(self) -> None:
        """Check that everything the page and the report read is there with the
        right types, and draw its tables and figures once: a damaged or crafted
        audit is refused here with a message instead of failing while shown."""
        def need(ok: bool, what: str) -> None:
            if not ok:
                raise AuditError(f"The saved audit is damaged: {what}. Re-save it from the app.")

        m = self.meta
        need(isinstance(m, dict), "its metadata is not an object")
        need(isinstance(self.summary, list) and all(isinstance(t, str) for t in self.summary),
             "its summary is not a list of sentences")
        for key in ("data", "model", "parameters", "timings", "versions", "schema"):
            need(isinstance(m.get(key, {}), dict), f"'{key}' is not an object")
        need(isinstance(m.get("created", ""), str), "'created' is not text")
        need(isinstance(m.get("notes", []), list) and all(isinstance(t, str) for t in m.get("notes", [])),
             "'notes' is not a list of sentences")
        need(all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in m.get("timings", {}).values()),
             "'timings' holds something other than seconds")
        need(isinstance(m.get("schema", {}).get("features", []), list)
             and all(isinstance(f, dict) for f in m.get("schema", {}).get("features", [])),
             "its schema's features are not a list of objects")
        protected = m.get("parameters", {}).get("protected", {})
        need(isinstance(protected, dict), "its protected attributes are not an object")
        for col in ("feasible", "cost"):
            need(pd.api.types.is_numeric_dtype(self.rows[col]) or self.rows[col].isna().all(),
                 f"the per-row column {col!r} is not numeric")
        for a in protected:
            need(f"group:{a}" in self.rows.columns, f"the per-row table has no groups for attribute {a!r}")
        for key in METRICS:
            for col in (key, f"{key}_lo", f"{key}_hi"):
                if col in self.groups:
                    need(pd.api.types.is_numeric_dtype(self.groups[col]) or self.groups[col].isna().all(),
                         f"the per-group column {col!r} is not numeric")
        if len(self.tests):
            need({"attribute", "group", "reference", "label", "group_value", "reference_value", "gap", "gap_lo",
                  "gap_hi", "p_value", "p_holm", "significant"} <= set(self.tests.columns),
                 "its table of gaps lacks columns")
            for col in ("group_value", "reference_value", "gap", "gap_lo", "gap_hi", "p_value", "p_holm"):
                need(pd.api.types.is_numeric_dtype(self.tests[col]) or self.tests[col].isna().all(),
                     f"the gap column {col!r} is not numeric")
            need(pd.api.types.is_bool_dtype(self.tests["significant"]), "'significant' is not true/false")
        if self.disparities is not None and len(self.disparities):
            need({"attribute", "measure", "value", "lo", "hi"} <= set(self.disparities.columns),
                 "its table of disparities lacks columns")
            for col in ("value", "lo", "hi"):
                need(pd.api.types.is_numeric_dtype(self.disparities[col]) or self.disparities[col].isna().all(),
                     f"the disparity column {col!r} is not numeric")
        if self.fairness is not None and len(self.fairness):
            need({"attribute", "group", "n"} <= set(self.fairness.columns), "its group-fairness table lacks columns")
        try:
            group_table(self), tests_table(self)
            for a in protected:
                cost_figure(self, a), metric_figure(self, a, "feasible")
        except Exception as exc:  # noqa: BLE001 - any failure to draw means a damaged file
            raise AuditError(f"The saved audit is damaged: it cannot be drawn ({type(exc).__name__}: {exc}). "
                             "Re-save it from the app.") from None

    @classmethod
    def from_file(cls, data: bytes) -> "Audit":
        """Re-open a saved audit: its JSON, or the HTML report (which embeds it)."""
        text = data.decode("utf-8", errors="replace")
        if "<html" in text[:2000].lower():
            text = extract_audit_json(text)
        try:
            d = json.loads(text)
        except json.JSONDecodeError:
            raise AuditError("The file is neither an audit JSON nor an audit report (HTML) of this app.") from None
        return cls.from_dict(d)

    def rows_csv(self) -> str:
        return self.rows.to_csv(index=False)

    def to_html(self) -> str:
        return audit_html(self)


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


def _statistics(rows: pd.DataFrame, attributes: list[str], n_boot: int, n_perm: int, alpha: float,
                seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    group_recs, test_recs = [], []
    metrics = [k for k in METRICS if METRICS[k].column in rows and rows[METRICS[k].column].notna().any()]
    for attr in attributes:
        labels = rows[f"group:{attr}"].astype(str)
        sizes = labels.value_counts()
        ref = str(sizes.index[0])   # the largest group is the reference
        values = {g: {k: _metric_values(rows[labels == g], k).to_numpy() for k in metrics} for g in sizes.index}
        for g in sorted(sizes.index, key=lambda s: (s != ref, s)):
            sub = rows[labels == g]
            rec: dict[str, Any] = {"attribute": attr, "group": g, "reference": g == ref, "rows": int(len(sub))}
            for k in metrics:
                v = values[g][k]
                stat = METRICS[k].statistic
                rec[k] = fs.STATS[stat](v) if v.size else float("nan")
                rec[f"{k}_lo"], rec[f"{k}_hi"] = fs.bootstrap_ci(v, stat, n_boot, rng=rng)
                rec[f"{k}_n"] = int(v.size)
            found = _metric_values(sub, "cost").to_numpy()
            for q in (25, 75, 90):
                rec[f"cost_q{q}"] = float(np.percentile(found, q)) if found.size else float("nan")
            group_recs.append(rec)
            if g == ref:
                continue
            for k in metrics:
                a, b = values[g][k], values[ref][k]
                if a.size < 2 or b.size < 2:
                    continue
                stat = METRICS[k].statistic
                gap = fs.STATS[stat](a) - fs.STATS[stat](b)
                lo, hi = fs.gap_ci(a, b, stat, n_boot, rng=rng)
                test_recs.append({"attribute": attr, "group": g, "reference": ref, "metric": k,
                                  "label": METRICS[k].label, "group_value": fs.STATS[stat](a),
                                  "reference_value": fs.STATS[stat](b), "gap": gap, "gap_lo": lo, "gap_hi": hi,
                                  "p_value": fs.permutation_p(a, b, stat, n_perm, rng=rng),
                                  "n_group": int(a.size), "n_reference": int(b.size)})
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
    if not out:
        largest = ""
        if len(tests):
            t = tests.iloc[int(np.nanargmin(tests["p_value"].to_numpy()))]
            largest = (f" The smallest p-value was {t['p_value']:.2g} (Holm-adjusted {t['p_holm']:.2g}), for the "
                       f"{t['label']} of {t['attribute']} = {t['group']} vs {t['reference']}.")
        out.append(f"No significant gap between the groups of {', '.join(attributes)} at α = {alpha} "
                   f"(Holm-adjusted, {len(tests)} tests, {n_rows} rows audited).{largest}")
    return out


# ------------------------------------------------------------------ the audit
def _as_frame(X: Any, names: list[str]) -> pd.DataFrame:
    if isinstance(X, pd.DataFrame):
        missing = [c for c in names if c not in X.columns]
        if missing:
            raise AuditError(f"Columns {missing[:5]} of the model are missing from the data.")
        return X[names].astype(float)
    A = np.atleast_2d(np.asarray(X, dtype=float))
    if A.shape[1] != len(names):
        raise AuditError(f"The data has {A.shape[1]} columns; the model has {len(names)} features.")
    return pd.DataFrame(A, columns=names)


@dataclass(frozen=True)
class AuditSettings:
    """Every setting of an audit that changes its answer, with its default.

    max_rows : audit at most this many unfavourable rows (a seeded random sample); None: all.
    norm, time_limit : the recourse cost and the seconds per row (core.optimal).
    n_jobs, scheduler : local processes, or a Dask scheduler address / Client.
    n_boot, n_perm, alpha : bootstrap resamples, permutations, family-wise level.
    tcrex, tcrex_rho, tcrex_tau : also fit T-CREx and report its rules per group.
    local_rules_per_group : rows per group given a local counterfactual rule (0: none).
    random_state : the seed of every sample and resample.
    scan, min_subgroup, budget : scan subgroups of at least ``min_subgroup`` audited rows for
        recourse gaps (core.subgroups), with effectiveness measured within ``budget``.
    """

    max_rows: int | None = 500
    norm: Any = "l1"
    time_limit: float = 10.0
    n_jobs: int = 1
    scheduler: Any = None
    n_boot: int = 1000
    n_perm: int = 2000
    alpha: float = 0.05
    tcrex: bool = True
    tcrex_rho: float = 0.02
    tcrex_tau: float = 0.9
    local_rules_per_group: int = 10
    random_state: int = 0
    scan: bool = True
    min_subgroup: int = 20
    budget: float | None = None


@dataclass(frozen=True)
class Provenance:
    """Where the audited data and model came from (for the report)."""

    data_name: str = ""
    data_sha256: str = ""
    model_sha256: str = ""


@dataclass
class _Run:
    """One audit's inputs, resolved once, shared by its stages."""

    ens: TreeEnsemble
    A: np.ndarray
    names: list[str]
    schema: Any
    s: AuditSettings
    tgt: Any
    target_value: Any
    pred: np.ndarray
    attrs: dict[str, list[int]]
    rows: np.ndarray
    fixed: list[int]
    immutable: list[int]
    labels: dict[str, np.ndarray]
    rng: np.random.Generator
    model: Any
    progress: Callable[[str, int, int], None] | None
    should_stop: Callable[[], bool] | None
    notes: list[str]
    timings: dict[str, float]

    def stop(self) -> bool:
        return self.should_stop is not None and bool(self.should_stop())

    def report(self, stage: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(stage, done, total)

    def check_stop(self) -> None:
        if self.stop():
            raise AuditCancelled("The audit was cancelled; nothing was kept.")

    @property
    def groups(self) -> list[list[int]]:
        return list(self.schema.groups().values())


def run_audit(ensemble: Any, X: Any, *, schema: Any, target: Any, protected: Sequence[str] | None = None,
              rows: Sequence[int] | None = None, settings: AuditSettings | None = None, model: Any = None,
              y: Any = None, provenance: Provenance | None = None,
              progress: Callable[[str, int, int], None] | None = None,
              should_stop: Callable[[], bool] | None = None, **overrides: Any) -> Audit:
    """Audit recourse across the groups of the protected attribute(s).

    Parameters
    ----------
    ensemble : TreeEnsemble or a supported model (classifier or regressor).
    X : the data (DataFrame or array in the model's feature order).
    schema : core.schema.Schema (kinds, ranges, actionability, weights, protected flags).
    target : the favourable outcome: a class, or an interval (lo, hi) for a regressor.
    protected : columns or one-hot group names; default: the schema's protected columns.
    rows : indices of the rows to audit; default: every row whose decision misses the target.
    settings : an :class:`AuditSettings`; any of its fields may also be given as a
        keyword (``max_rows=200``), which overrides it.
    model : the original model, to re-check every recourse on it.
    y : the labels of the rows (for TPR, FPR, ... of the group fairness); None: decisions only.
    provenance : a :class:`Provenance` (data name, data and model SHA-256), or its fields
        as keywords (``data_name=...``).
    progress : progress(stage, done, total); should_stop : polled; True cancels (AuditCancelled).
    """
    t_start = time.perf_counter()
    s, prov = with_overrides(overrides, AuditError, "audit", settings or AuditSettings(), provenance or Provenance())
    run = _prepare(ensemble, X, schema, target, protected, rows, s, model, progress, should_stop)
    table, cfs = _recourse_stage(run)
    rules_table = _tcrex_stage(run, table)
    _local_rules_stage(run, table)
    groups, tests, summary, gf, sub = _statistics_stage(run, table, y)
    run.timings["total"] = time.perf_counter() - t_start
    return Audit(table, groups, tests, rules_table, summary, _meta(run, table, prov, sub), cfs,
                 fairness=gf.by_group, disparities=gf.disparities, subgroups=sub)


def _prepare(ensemble, X, schema, target, protected, rows, s: AuditSettings, model, progress, should_stop) -> _Run:
    """Check the inputs and resolve the rows, groups and fixed columns of the audit."""
    ens = ensemble if isinstance(ensemble, TreeEnsemble) else from_model(ensemble)
    if ens.task == "anomaly":
        raise AuditError("An anomaly detector makes no decision to audit; load a classifier or regressor.")
    names = list(ens.feature_names)
    A = _as_frame(X, names).to_numpy(dtype=float)
    if len(A) == 0:
        raise AuditError("The data has no rows.")
    if not np.all(np.isfinite(A)):
        raise AuditError("The data holds missing or infinite values; drop or fill them first.")
    if schema.names != names:
        raise AuditError("The schema's features do not match the model's features.")
    attrs = protected_attributes(schema, protected)
    if not attrs:
        raise AuditError("No protected attribute: mark one in the feature settings (or pass protected=[...]).")
    tgt = make_target(ens, target)
    if rows is None:
        rows_all = np.flatnonzero(~tgt.holds(ens, A))
        if rows_all.size == 0:
            raise AuditError(f"Every row already gets {tgt.describe()}: there is no unfavourable decision to audit.")
    else:
        rows_all = np.unique(np.asarray(rows, dtype=int))
        if rows_all.size == 0 or rows_all.min() < 0 or rows_all.max() >= len(A):
            raise AuditError(f"Row indices must lie in 0..{len(A) - 1}.")
    rng = np.random.default_rng(s.random_state)
    if s.max_rows is not None and rows_all.size > s.max_rows:
        rows_all = np.sort(rng.choice(rows_all, int(s.max_rows), replace=False))
    fixed = sorted({j for cols in attrs.values() for j in cols})                # protected: held fixed
    immutable = sorted(set(fixed) | {j for j, f in enumerate(schema.features) if f.actionability == "fixed"})
    labels = {a: group_labels(A, names, cols, a) for a, cols in attrs.items()}
    return _Run(ens, A, names, schema, s, tgt, target if tgt.kind == "interval" else tgt.label, ens.predict(A),
                attrs, rows_all, fixed, immutable, labels, rng, model, progress, should_stop, [], {})


def _recourse_stage(run: _Run) -> tuple[pd.DataFrame, np.ndarray]:
    """1. The optimal recourse of every audited row, protected columns held fixed."""
    t0 = time.perf_counter()
    s, rows = run.s, run.rows
    results = batch_counterfactuals(
        run.ens, run.A[rows], [run.target_value] * rows.size, n_jobs=s.n_jobs, scheduler=s.scheduler,
        chunk_size="auto", progress=lambda d, t: run.report("recourse", d, t), should_stop=run.stop,
        schema=run.schema, norm=s.norm, fixed=run.fixed, time_limit=float(s.time_limit), X_ref=run.A,
        model=run.model)
    if run.stop() or any(r is None for r in results):
        raise AuditCancelled("The audit was cancelled; nothing was kept.")
    recs = []
    for i, res in zip(rows, results):
        found = res.found
        status = res.status
        if status == "time_limit":
            status = "time_limit_found" if found else "time_limit"
        recs.append({"row": int(i), **{f"group:{a}": run.labels[a][i] for a in run.attrs},
                     "prediction": str(run.pred[i]), "status": status, "feasible": int(found),
                     "cost": float(res.cost) if found else np.nan, "n_changed": len(res.changes) if found else np.nan,
                     "changes": describe_changes(res.changes),
                     "solve_time": round(res.solve_time, 4)})
    cfs = np.array([r.x if r.found else np.full(len(run.names), np.nan) for r in results], dtype=float)
    run.timings["recourse"] = time.perf_counter() - t0
    return pd.DataFrame(recs), cfs


def _tcrex_stage(run: _Run, table: pd.DataFrame) -> pd.DataFrame:
    """2. T-CREx rules: the rule each audited row is given, whether it is actionable
    (it already holds on every immutable column), and the rules most given per group."""
    rules_table = pd.DataFrame(columns=["attribute", "group", "rule", "text", "rows", "share"])
    t0 = time.perf_counter()
    s = run.s
    if s.tcrex:
        run.report("T-CREx rules", 0, 1)
        try:
            tc = TCREx(rho=s.tcrex_rho, tau=s.tcrex_tau, groups=run.groups,
                       random_state=s.random_state).fit(run.A, run.pred, run.target_value, feature_names=run.names)
            Xa, imm = run.A[run.rows], run.immutable
            assigned = tc.explain(Xa)
            L = np.array([tc.rules_[k].lower for k in assigned])
            U = np.array([tc.rules_[k].upper for k in assigned])
            ok = np.all((Xa[:, imm] > L[:, imm]) & (Xa[:, imm] <= U[:, imm]), axis=1)
            table["tcrex_rule"] = [f"R{k}" for k in assigned]
            table["tcrex_actionable"] = ok.astype(int)
            table["tcrex_changes"] = tc.changes(Xa, assigned).astype(float)
            recs = []
            for a in run.attrs:
                for g, sub in table.groupby(f"group:{a}"):
                    for rule, c in sub["tcrex_rule"].value_counts().head(5).items():
                        recs.append({"attribute": a, "group": g, "rule": rule, "text": tc.rule_text(int(rule[1:])),
                                     "rows": int(c), "share": float(c / len(sub))})
            rules_table = pd.DataFrame(recs, columns=rules_table.columns)
        except ValueError as exc:
            run.notes.append(f"T-CREx: {exc}")
        run.report("T-CREx rules", 1, 1)
    run.timings["tcrex"] = time.perf_counter() - t0
    return rules_table


def _local_rules_stage(run: _Run, table: pd.DataFrame) -> None:
    """3. Local counterfactual rules on a seeded sample of every group of every
    attribute: the share of a rule's samples the model gives the target."""
    t0 = time.perf_counter()
    k = run.s.local_rules_per_group
    if k > 0 and run.ens.is_classifier:
        picked = np.zeros(len(table), dtype=bool)   # every group of every attribute gets up to k rows
        for a in run.attrs:
            for _, sub in table.groupby(f"group:{a}"):
                idx = sub.index.to_numpy()
                need = k - int(picked[idx].sum())
                rest = idx[~picked[idx]]
                if need > 0 and rest.size:
                    picked[run.rng.choice(rest, min(need, rest.size), replace=False)] = True
        picks = np.flatnonzero(picked)
        cr = CounterfactualRules(groups=run.groups, random_state=run.s.random_state)
        cr.fit(run.A, run.pred, feature_names=run.names)
        table["local_correctness"] = np.nan
        table["local_rule"] = ""
        for n_done, p in enumerate(picks):
            run.check_stop()
            x = run.A[int(table.at[p, "row"])]
            try:
                rule = cr.local_rule(x, run.target_value, fixed=run.immutable)
                samples = cr.sample_counterfactuals(x, rule, n=5)
                table.at[p, "local_correctness"] = float(np.mean(run.tgt.holds(run.ens, samples)))
                table.at[p, "local_rule"] = rule.to_text(run.names, run.groups) + (
                    f" (below pi_C: CRP {rule.crp:.2f})" if rule.below_pi_c else "")
            except ValueError:
                table.at[p, "local_correctness"] = 0.0     # no rule: no correct counterfactual from a rule
                table.at[p, "local_rule"] = "(no rule)"
            run.report("local rules", n_done + 1, len(picks))
    run.timings["local_rules"] = time.perf_counter() - t0


def _statistics_stage(run: _Run, table: pd.DataFrame, y: Any):
    """4. Per-group statistics and tests, group fairness, the subgroup scan, the summary."""
    t0 = time.perf_counter()
    s, tgt = run.s, run.tgt
    run.report("statistics", 0, 1)
    groups, tests = _statistics(table, list(run.attrs), s.n_boot, s.n_perm, s.alpha, s.random_state)
    y_true = None if y is None else np.asarray(y)
    if y_true is not None and len(y_true) != len(run.A):
        raise AuditError(f"{len(y_true)} labels for {len(run.A)} rows.")
    gf = group_fairness(run.labels, run.pred, favourable=None if tgt.kind == "interval" else tgt.label,
                        y_true=y_true, target_interval=(tgt.lo, tgt.hi) if tgt.kind == "interval" else None,
                        n_boot=min(s.n_boot, 500), random_state=s.random_state)
    run.notes.extend(gf.notes)
    sub = None
    if s.scan:
        frame_rows = pd.DataFrame(run.A[table["row"].to_numpy(dtype=int)], columns=run.names)
        col_groups = {g: [run.names[j] for j in cols] for g, cols in run.schema.groups().items() if len(cols) >= 2}
        sub = scan_subgroups(table, frame_rows, groups=col_groups, min_size=s.min_subgroup, budget=s.budget,
                             n_perm=min(s.n_perm, 1000), n_boot=min(s.n_boot, 300), alpha=s.alpha,
                             random_state=s.random_state)
        if not len(sub):
            run.notes.append(f"Subgroup scan: no subgroup of at least {s.min_subgroup} audited rows "
                             "(and as many outside).")
    summary = summarise(tests, s.alpha, len(table), list(run.attrs))
    run.report("statistics", 1, 1)
    run.timings["statistics"] = time.perf_counter() - t0
    return groups, tests, summary, gf, sub


def _meta(run: _Run, table: pd.DataFrame, prov: Provenance, sub: pd.DataFrame | None) -> dict[str, Any]:
    """Provenance, every parameter, versions and timings, for the report and the history."""
    s, names = run.s, run.names
    return {
        "created": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "data": {"name": prov.data_name, "sha256": prov.data_sha256 or _array_sha(run.A), "rows": int(len(run.A)),
                 "columns": names},
        "model": {"sha256": prov.model_sha256, "source": run.ens.source, "trees": run.ens.n_trees,
                  "task": run.ens.task},
        "parameters": {"target": str(run.target_value),
                       "protected": {a: [names[j] for j in c] for a, c in run.attrs.items()},
                       "rows_audited": int(len(table)), "max_rows": s.max_rows,
                       "norm": s.norm if isinstance(s.norm, str) else dict(s.norm), "time_limit": s.time_limit,
                       "n_boot": s.n_boot, "n_perm": s.n_perm, "alpha": s.alpha, "tcrex": s.tcrex,
                       "tcrex_rho": s.tcrex_rho, "tcrex_tau": s.tcrex_tau,
                       "local_rules_per_group": s.local_rules_per_group, "random_state": s.random_state,
                       "n_jobs": s.n_jobs, "scheduler": str(s.scheduler) if s.scheduler else None,
                       "held_fixed": [names[j] for j in run.fixed], "scan": s.scan, "min_subgroup": s.min_subgroup,
                       "budget": None if sub is None else sub.attrs.get("budget", s.budget)},
        "schema": run.schema.to_dict(),
        "versions": package_versions(),
        "timings": {k: round(run.timings[k], 3) for k in ("recourse", "tcrex", "local_rules", "statistics", "total")},
        "notes": run.notes,
        "statuses": table["status"].value_counts().to_dict(),
    }


def _array_sha(A: np.ndarray) -> str:
    return "array:" + hashlib.sha256(np.ascontiguousarray(A).tobytes()).hexdigest()


# ------------------------------------------------------------------ command line
def main(argv: Sequence[str] | None = None) -> int:
    import argparse
    from pathlib import Path

    from core import io
    from core.schema import Schema
    from core.workspace import PositionalMatchRequired, build_workspace

    ap = argparse.ArgumentParser(prog="python -m core.audit", description="Audit recourse across protected groups.")
    ap.add_argument("--data", required=True, help="CSV or Parquet table (with the target column, if any)")
    ap.add_argument("--model", required=True, help="model file (XGBoost/LightGBM JSON or text, skops, pickle)")
    ap.add_argument("--protected", required=True, action="append",
                    help="protected column or one-hot group (repeat for several)")
    ap.add_argument("--target", help="favourable class (default: the last class, e.g. 1), or LO,HI for a regressor")
    ap.add_argument("--target-column", help="name of the label column in the data, if not detected")
    ap.add_argument("--schema", help="feature settings JSON saved from the app")
    ap.add_argument("--rows", type=int, default=500, help="audit at most this many unfavourable rows (0: all)")
    ap.add_argument("--scheduler", help="Dask scheduler address, e.g. tcp://10.0.0.5:8786")
    ap.add_argument("--jobs", type=int, default=1, help="local processes when no scheduler is given")
    ap.add_argument("--time-limit", type=float, default=10.0, help="seconds per recourse")
    ap.add_argument("--norm", default="l1", choices=["l0", "l1", "l2"])
    ap.add_argument("--permutations", type=int, default=2000)
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--local-rules", type=int, default=10, help="rows per group given a local rule")
    ap.add_argument("--no-tcrex", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-subgroup", type=int, default=20, help="smallest subgroup the scan considers (rows)")
    ap.add_argument("--budget", type=float, default=None,
                    help="recourse cost budget of the scan's effectiveness (default: the median cost)")
    ap.add_argument("--no-scan", action="store_true", help="skip the subgroup scan")
    ap.add_argument("--trust-pickle", action="store_true", help="allow loading a pickle/joblib model file")
    ap.add_argument("--by-position", action="store_true",
                    help="match a model without feature names to the data's columns by position (check the "
                         "mapping printed without this flag first)")
    ap.add_argument("--out", default="audit_report.html", help="HTML report; the per-row CSV goes beside it")
    a = ap.parse_args(argv)
    try:
        data_bytes = Path(a.data).read_bytes()
        model_bytes = Path(a.model).read_bytes()
        df = io.load_table(data_bytes, Path(a.data).name)
        target_col = a.target_column or df.attrs.get("target")
        model = io.load_model(model_bytes, Path(a.model).name, allow_pickle=a.trust_pickle)
        schema = Schema.from_json(Path(a.schema).read_bytes()) if a.schema else None
        try:
            ws = build_workspace(df, target_col, model, name=Path(a.data).name, schema=schema,
                                 confirm_positions=a.by_position, protected=a.protected)
        except PositionalMatchRequired as exc:
            print(f"error: {exc}")
            for feat, col in exc.mapping:
                print(f"  {feat} <- {col}")
            print("If this mapping is right, run again with --by-position.")
            return 2
        for note in ws.notes:
            print(f"note: {note}")
        ens, Xv, schema = ws.ensemble, ws.X, ws.schema
        if ens.is_classifier:
            classes = [str(c) for c in ens.classes]
            target = a.target if a.target is not None else classes[-1]
            target = ens.classes[classes.index(str(target))] if str(target) in classes else target
        else:
            if not a.target or "," not in a.target:
                raise AuditError("A regressor needs --target LO,HI (the favourable interval of predictions).")
            target = tuple(float(v) for v in a.target.split(","))

        def show(stage: str, done: int, total: int) -> None:
            print(f"\r{stage}: {done}/{total}", end="", flush=True)

        audit = run_audit(ens, Xv, schema=schema, target=target, protected=a.protected,
                          max_rows=a.rows or None, norm=a.norm, time_limit=a.time_limit, n_jobs=a.jobs,
                          scheduler=a.scheduler, n_boot=a.bootstrap, n_perm=a.permutations,
                          tcrex=not a.no_tcrex, local_rules_per_group=a.local_rules, random_state=a.seed,
                          model=ws.model, data_sha256=io.sha256(data_bytes), model_sha256=io.sha256(model_bytes),
                          data_name=Path(a.data).name, progress=show, y=ws.y, scan=not a.no_scan,
                          min_subgroup=a.min_subgroup, budget=a.budget)
        print()
        out = Path(a.out)
        out.write_text(audit.to_html(), encoding="utf-8")
        csv = out.with_suffix(".csv")
        csv.write_text(audit.rows_csv(), encoding="utf-8")
        for line in audit.summary:
            print(line)
        if audit.disparities is not None and len(audit.disparities):
            print("Group fairness of the decisions (95% bootstrap intervals):")
            for r in audit.disparities.itertuples():
                print(f"  {r.attribute}: {r.measure} {r.value:.3f} [{r.lo:.3f}, {r.hi:.3f}]")
        if audit.subgroups is not None and len(audit.subgroups):
            print("Subgroups where recourse differs most (adjusted over the scan):")
            for r in audit.subgroups.head(5).itertuples():
                print(f"  {r.subgroup} ({r.size} rows): {r.label} {r.value:.3g} vs {r.rest:.3g}, "
                      f"adjusted p {r.p_adjusted:.3g}{' *' if r.significant else ''}")
        print(f"Report: {out}  Rows: {csv}")
        return 0
    except (ValueError, OSError) as exc:
        print(f"\nerror: {exc}")
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
