"""Running the fairness audit: :func:`run_audit`, its settings and its stages.

What the audit measures, and how, is described in :mod:`core.audit`, which
re-exports the public names. The stages: the optimal recourse of every audited
row, the T-CREx rules, the local counterfactual rules, the group fairness and
the subgroup scan, run as tasks over the audit's processes
(:mod:`core.audit.stages`), then the statistics (:mod:`core.audit.stats`); the
result is an :class:`core.audit.result.Audit` with its provenance.
"""

from __future__ import annotations

import hashlib
import platform
import time
from dataclasses import dataclass, field
from functools import partial
from importlib import metadata
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from core.audit.constrained import in_force
from core.audit.groupfair import group_fairness
from core.audit.report import whole
from core.audit.result import Audit
from core.audit.stages import RowRecourse, first_round, second_round
from core.audit.stats import _statistics, group_labels, protected_attributes, summarise
from core.counterfactual import at_target, check_schema, make_target
from core.errors import AuditCancelled, AuditError, QueryError
from core.intake.columns import analyst_columns, recourse_frame
from core.model import Guarantee, LinearModel, TreeEnsemble, as_model, kind_of
from core.model.features import as_table, closest_names, feature_index, names_text
from core.model.missing import missing_as_states
from core.model.native import model_input
from core.optimal.batch import weakest_guarantee
from core.schema import Schema, with_missing_states
from core.settings import (
    N_JOBS,
    RANDOM_STATE,
    ROW_TIME_LIMIT,
    boolean,
    integer,
    n_jobs_setting,
    norm_setting,
    optional,
    positive,
    probability,
    scheduler_setting,
    seconds,
    validated,
)
from core.shown import label_order, outcome_text
from core.surrogate import Surrogate
from core.typing import ArrayLike, ModelLike, Norm, Rows, TargetSpec

if TYPE_CHECKING:
    from distributed import Client

    from core.constraints import Constraints

__all__ = ["run_audit", "AuditSettings", "Provenance", "package_versions", "REPORT_PACKAGES"]

REPORT_PACKAGES = ("numpy", "pandas", "scikit-learn", "xgboost-cpu", "lightgbm", "ortools", "scipy", "plotly",
                   "dask", "distributed", "streamlit")


def package_versions(names: Sequence[str] = REPORT_PACKAGES) -> dict[str, str]:
    out = {"python": platform.python_version()}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            continue
    return out


# ------------------------------------------------------------------ the audit
@dataclass(frozen=True)
class AuditSettings:
    """Every setting of an audit that changes its answer, as :func:`run_audit` received them.

    max_rows : audit at most this many unfavourable rows (a seeded random sample); None: all.
    norm, time_limit : the recourse cost and the seconds per row (core.optimal).
    n_jobs, scheduler : local processes, or a Dask scheduler address / Client.
    n_boot, n_perm, alpha : bootstrap resamples, permutations, family-wise level.
    tcrex, tcrex_rho, tcrex_tau : also fit T-CREx and report its rules per group.
    local_rules_per_group : rows per group given a local counterfactual rule (0: none).
    random_state : the seed of every sample and resample.
    scan, min_subgroup, budget : scan subgroups of at least ``min_subgroup`` audited rows for
        recourse gaps (core.audit.subgroups), with effectiveness measured within ``budget``.
    """

    max_rows: int | None
    norm: Any
    time_limit: float
    n_jobs: int
    scheduler: Any
    n_boot: int
    n_perm: int
    alpha: float
    tcrex: bool
    tcrex_rho: float
    tcrex_tau: float
    local_rules_per_group: int
    random_state: int
    scan: bool
    min_subgroup: int
    budget: float | None
    reference: dict[str, str] | None = None


@dataclass(frozen=True)
class Provenance:
    """Where the audited data and model came from (for the report)."""

    data_name: str = ""
    data_sha256: str = ""
    model_sha256: str = ""
    class_names: dict[str, str] = field(default_factory=dict)   # the analyst's names of the classes


@dataclass
class _Run:
    """One audit's inputs, resolved once, shared by its stages."""

    ens: TreeEnsemble
    A: np.ndarray
    names: list[str]
    schema: Schema
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
    answer: Callable[[np.ndarray], np.ndarray]
    surrogate: Surrogate | None = None
    recourse_guarantee: Guarantee | None = None      # what every row's recourse holds (the batch's)

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


@validated(AuditError, max_rows=optional(integer(1)), norm=norm_setting, time_limit=seconds, n_jobs=n_jobs_setting,
           scheduler=scheduler_setting, n_boot=integer(1), n_perm=integer(1), alpha=probability, tcrex=boolean,
           tcrex_rho=probability, tcrex_tau=probability, local_rules_per_group=integer(0), random_state=integer(0),
           scan=boolean, min_subgroup=integer(1), budget=optional(positive))
def run_audit(ensemble: ModelLike, X: Rows, *, schema: Schema, target: TargetSpec, protected: Sequence[str] | None = None,
              rows: Sequence[int] | None = None, model: ModelLike = None, y: ArrayLike | None = None,
              max_rows: int | None = 500, norm: Norm = "l1", time_limit: float = ROW_TIME_LIMIT,
              n_jobs: int = N_JOBS, scheduler: str | Client | None = None, n_boot: int = 1000, n_perm: int = 2000,
              alpha: float = 0.05, tcrex: bool = True, tcrex_rho: float = 0.02, tcrex_tau: float = 0.9,
              local_rules_per_group: int = 10, random_state: int = RANDOM_STATE, scan: bool = True, min_subgroup: int = 20,
              budget: float | None = None, reference: Mapping[str, str] | None = None,
              data_name: str = "", data_sha256: str = "", model_sha256: str = "",
              class_names: Mapping[str, str] | None = None,
              progress: Callable[[str, int, int], None] | None = None,
              should_stop: Callable[[], bool] | None = None, surrogate: Surrogate | None = None,
              constraints: Iterable[str] | str | Constraints | None = None) -> Audit:
    """Audit recourse across the groups of the protected attribute(s).

    Parameters
    ----------
    ensemble : TreeEnsemble or a supported model (classifier or regressor).
    X : the data (DataFrame, read by name, or array in the model's feature order). Missing
        values (NaN), when the model routes them, are one more state of their column, as in the
        app: each feature missing somewhere gets an "is missing" column after the features
        (:func:`core.model.missing.missing_as_states`; decrease-only, cost weight 0, protected
        and fixed with its feature), and the audit's rows and counterfactuals have those columns too.
    schema : core.schema.Schema (kinds, ranges, actionability, weights, protected flags).
    target : the favourable outcome: a class, or an interval (lo, hi) for a regressor.
    protected : columns (names or indices) or one-hot group names; default: the schema's protected columns.
    rows : indices of the rows to audit; default: every row whose decision misses the target.
    model : the original model, to re-check every recourse on it.
    y : the labels of the rows (for TPR, FPR, ... of the group fairness); None: decisions only.
    max_rows : int or None, default 500, audit at most this many unfavourable rows (a seeded sample).
    norm, time_limit : default "l1" and 10.0, the recourse cost and the seconds per row (core.optimal).
    n_jobs, scheduler : default 1 and None, local processes (-1: every core), or a Dask
        scheduler address / Client (:mod:`core.settings`); every stage runs on them, and the
        answers are the same however the audit runs (each recourse on one solver thread).
    n_boot, n_perm, alpha : default 1000, 2000, 0.05, bootstrap resamples, permutations,
        family-wise level.
    tcrex, tcrex_rho, tcrex_tau : default True, 0.02, 0.9, also fit T-CREx and report its rules per group.
    local_rules_per_group : int, default 10, rows per group given a local counterfactual rule (0: none).
    random_state : int, default 0, the seed of every sample and resample.
    scan, min_subgroup, budget : default True, 20, None, scan subgroups of at least ``min_subgroup``
        audited rows for recourse gaps (core.audit.subgroups), effectiveness within ``budget``.
    reference : {attribute: group}, default None: the group each attribute's gaps are measured
        against (default, and for an attribute not named or a group with no audited row: its
        largest group among the audited rows; a note says when a named group had none). Give
        another audit's :attr:`Audit.references` to test the same pairs of groups, as comparing
        two models' audits needs (each turns down other rows).
    data_name, data_sha256, model_sha256, class_names : where the data and model came from, for
        the report (the analyst's names of the classes).
    progress : progress(stage, done, total); should_stop : polled; True cancels (AuditCancelled).
    surrogate : with a model that is not read exactly (``model``, e.g. a BlackBoxModel), its
        surrogate (:func:`core.surrogate.distill`): the rows' decisions are the model's own, and
        each recourse is solved on the surrogate and checked (and repaired) on the model; only
        recourses valid on the model count. ``ensemble`` may also be a linear model, solved exactly.
    constraints : constraints between features (texts of :mod:`core.constraints`, or parsed);
        default None: the schema's own. Every recourse counted satisfies them; a row no action
        under them helps is *precluded* (:attr:`Audit.precluded`). Recorded in the parameters.

    Examples
    --------
    >>> from core import build_workspace, run_audit
    >>> from core.intake.demo import build_demo
    >>> df, target, model, _ = build_demo("credit-lightgbm")
    >>> ws = build_workspace(df, target, model, name="demo", protected=["sex"])
    >>> audit = run_audit(ws.ensemble, ws.X, schema=ws.schema, target=1, max_rows=20, n_jobs=1, random_state=0)
    >>> sorted(set(audit.groups['attribute']))
    ['sex']
    """
    t_start = time.perf_counter()
    s = AuditSettings(max_rows=max_rows, norm=norm, time_limit=time_limit, n_jobs=n_jobs, scheduler=scheduler,
                      n_boot=n_boot, n_perm=n_perm, alpha=alpha, tcrex=tcrex, tcrex_rho=tcrex_rho, tcrex_tau=tcrex_tau,
                      local_rules_per_group=local_rules_per_group, random_state=random_state, scan=scan,
                      min_subgroup=min_subgroup, budget=budget,
                      reference=None if reference is None else _references(reference))
    prov = Provenance(data_name=data_name, data_sha256=data_sha256, model_sha256=model_sha256,
                      class_names=dict(class_names or {}))
    schema = in_force(schema, constraints)          # the constraints every recourse query reads
    run = _prepare(ensemble, X, schema, target, protected, rows, y, s, model, progress, should_stop, surrogate)
    _pinned(run)                                       # a reference group asked for is known, before any work
    first = first_round(run, _fairness(run, y))        # every stage's tasks, on the audit's processes
    table, cfs = _recourse_stage(run, first.recourse)
    rules_table, gf, sub = second_round(run, table, first)
    groups, tests, summary = _statistics_stage(run, table, gf, sub)
    run.timings["total"] = time.perf_counter() - t_start
    return Audit(table, groups, tests, rules_table, summary, _meta(run, table, prov, sub), cfs,
                 fairness=gf.by_group, disparities=gf.disparities, subgroups=sub)


def _answers(ens: Any, model: Any, surrogate: Surrogate | None) -> Callable[[np.ndarray], np.ndarray]:
    """The model's own decisions on rows of the audit's view: a tree ensemble's or a linear
    model's, or a model known by its answers (never its surrogate's)."""
    if surrogate is not None:
        return lambda A: model.predict(model_input(ens, A))
    return ens.predict


def _prepare(ensemble, X, schema, target, protected, rows, y, s: AuditSettings, model, progress, should_stop,
             surrogate=None) -> _Run:
    """Check the inputs and resolve the rows, groups and fixed columns of the audit."""
    ens = _audited_model(ensemble, model, surrogate)
    if ens.task == "anomaly":
        raise AuditError("An anomaly detector makes no decision to audit; load a classifier or regressor.")
    if schema is None:
        raise AuditError("run_audit needs the schema (kinds, ranges, actionability, protected flags): "
                         "infer_schema(X) or the workspace's schema.")
    check_schema(ens, schema, AuditError)
    A = as_table(X, ens.feature_names, error=AuditError, what="The data", missing=True)
    protected = _protected(schema, protected)
    _check_labels(y, len(A))
    if isinstance(ens, TreeEnsemble) and surrogate is None:
        ens, A, _ = missing_as_states(ens, A, error=AuditError)     # missing values: one more state of a column
    answer = _answers(ens, model, surrogate)
    decided = answer(A)
    schema = with_missing_states(schema, ens)
    names = list(ens.feature_names)
    attrs = protected_attributes(schema, protected)
    if not attrs:
        raise AuditError("No protected attribute: mark one in the feature settings (or pass protected=[...]).")
    tgt = _target(ens, target)
    rows_all = _given_rows(rows, len(A)) if rows is not None else _unfavourable(ens, target, tgt, decided)
    rng = np.random.default_rng(s.random_state)
    rows_all = _sample(rows_all, s.max_rows, rng)
    fixed, immutable = _held_fixed(schema, attrs)
    labels = {a: group_labels(A, names, cols, a) for a, cols in attrs.items()}
    return _Run(ens, A, names, schema, s, tgt, target if tgt.kind == "interval" else tgt.label, decided,
                attrs, rows_all, fixed, immutable, labels, rng, model, progress, should_stop, [], {},
                surrogate=surrogate, answer=answer)


def _audited_model(ensemble: Any, model: Any, surrogate: Surrogate | None) -> Any:
    """What the audit's queries read: the surrogate's trees (for a model not read exactly),
    the tree ensemble or linear model given, or the model given read as one."""
    if surrogate is not None:
        if model is None:
            raise AuditError("A surrogate is given without the model it stands for: pass model= as well.")
        return surrogate.ensemble
    if isinstance(ensemble, (TreeEnsemble, LinearModel)):
        return ensemble
    return as_model(ensemble)


def _check_labels(y: Any, n: int) -> None:
    """The labels, when given, are one per row of the data."""
    if y is None:
        return
    y_arr = np.asarray(y)
    if y_arr.ndim != 1 or len(y_arr) != n:
        raise AuditError(f"y has shape {y_arr.shape}; the data has {n} rows: give one label per row "
                         "(or y=None).")


def _target(ens: Any, target: Any) -> Any:
    """The favourable outcome resolved for the model (its QueryError as the audit's error)."""
    try:
        return make_target(ens, target)
    except QueryError as exc:
        raise AuditError(str(exc)) from None


def _unfavourable(ens: Any, target: Any, tgt: Any, decided: np.ndarray) -> np.ndarray:
    """Every row whose decision misses the target (an AuditError when there is none)."""
    rows_all = np.flatnonzero(~at_target(ens, target, decided))
    if rows_all.size == 0:
        raise AuditError(f"Every row already gets {tgt.describe()}: there is no unfavourable decision to audit.")
    return rows_all


def _given_rows(rows: Any, n: int) -> np.ndarray:
    """The rows asked for, each once: positions (integers) of the ``n`` rows of the data."""
    try:
        given = np.asarray(rows)
        ok = given.dtype.kind in "iu" or given.size == 0
    except (TypeError, ValueError):
        ok = False
    if not ok or given.ndim != 1:
        raise AuditError(f"rows are row positions (integers in 0..{n - 1}); got {rows!r:.60}.")
    rows_all = np.unique(given.astype(int))
    if rows_all.size == 0 or rows_all.min() < 0 or rows_all.max() >= n:
        raise AuditError(f"Row indices must lie in 0..{n - 1}.")
    return rows_all


def _sample(rows: np.ndarray, max_rows: int | None, rng: np.random.Generator) -> np.ndarray:
    """A seeded sample of ``max_rows`` of the rows (all of them when they are fewer), in order."""
    if max_rows is not None and rows.size > max_rows:
        return np.sort(rng.choice(rows, int(max_rows), replace=False))
    return rows


def _held_fixed(schema: Schema, attrs: dict[str, list[int]]) -> tuple[list[int], list[int]]:
    """The columns every recourse holds: the protected ones, and with them the schema's fixed ones."""
    fixed = sorted({j for cols in attrs.values() for j in cols})                # protected: held fixed
    immutable = sorted(set(fixed) | {j for j, f in enumerate(schema.features) if f.actionability == "fixed"})
    return fixed, immutable


def _protected(schema: Schema, protected: Any) -> list[str] | None:
    """The protected columns or one-hot groups (one name stands for itself), each known
    to the schema (an AuditError names the closest)."""
    if protected is None:
        return None
    groups = [g for g, cols in schema.groups().items() if len(cols) >= 2]
    known = groups + schema.names
    items = [protected] if isinstance(protected, str) else protected
    if not isinstance(items, Iterable) or isinstance(items, Mapping):
        raise AuditError(f"protected is a list of columns or one-hot groups, e.g. {known[:1]}; got "
                         f"{type(protected).__name__}.")
    return [_protected_name(schema, item, known) for item in items]


def _protected_name(schema: Schema, item: Any, known: list[str]) -> str:
    """One protected item, a name (a column or a group) or a column index, as its name."""
    if not isinstance(item, str):
        return schema.names[feature_index(schema.names, item, error=AuditError, what="protected")]
    if item not in known:
        near = closest_names(item, known)
        hint = f" Did you mean {' or '.join(map(repr, near))}?" if near else ""
        raise AuditError(f"protected: {item!r} is neither a column nor a one-hot group of the data.{hint} "
                         f"The columns and groups are {names_text(known)}.")
    return item


def _recourse_stage(run: _Run, done: list[RowRecourse]) -> tuple[pd.DataFrame, np.ndarray]:
    """1. The optimal recourse of every audited row, protected columns held fixed (solved as
    tasks of the audit's processes, :mod:`core.audit.stages`): the per-row table."""
    t0 = time.perf_counter()
    rows = run.rows
    run.recourse_guarantee = weakest_guarantee([r for r in done if r.found] or done)   # what the recourses hold
    recs = [_row_record(run, i, res) for i, res in zip(rows, done)]
    cfs = np.array([r.x if r.found else np.full(len(run.names), np.nan) for r in done], dtype=np.float64)
    # the changes in the table's columns (a fill of a missing value, a category switch: one change each),
    # with the counterfactual's values beside them
    per_row = recourse_frame(analyst_columns(run.ens, run.schema), run.A[rows], cfs)
    table = pd.DataFrame(recs)
    table = pd.concat([table.drop(columns="elapsed"), per_row, table[["elapsed"]]], axis=1)
    run.timings["recourse"] = time.perf_counter() - t0
    return table, cfs


def _row_record(run: _Run, i: int, res: RowRecourse) -> dict[str, Any]:
    """Row ``i`` of the per-row table: its groups, decision, what its recourse query found
    (a time limit split by whether it found one) and its cost."""
    found = res.found
    status = res.status
    if status == "time_limit":
        status = "time_limit_found" if found else "time_limit"
    return {"row": int(i), **{f"group:{a}": run.labels[a][i] for a in run.attrs},
            "prediction": str(run.pred[i]), "status": status, "feasible": int(found),
            # precluded: proven that no action (under the constraints in force) gives the target
            "precluded": int(res.guarantee is not None and res.guarantee.kind == "infeasible"),
            "cost": float(res.cost) if found else np.nan,
            # how far the cost may be above the optimum: 0 when proven, > 0 at the time limit
            "gap": (0.0 if res.status == "optimal" else float(res.gap)) if found else np.nan,
            "elapsed": round(res.elapsed, 4)}


def _fairness(run: _Run, y: Any) -> Callable[[], Any]:
    """The group fairness of the decisions on every row, as a call for one of the audit's tasks."""
    s, tgt = run.s, run.tgt
    return partial(group_fairness, run.labels, run.pred, favourable=None if tgt.kind == "interval" else tgt.label,
                   y_true=None if y is None else np.asarray(y),
                   target_interval=(tgt.lo, tgt.hi) if tgt.kind == "interval" else None,
                   n_boot=min(s.n_boot, 500), random_state=s.random_state)


def _statistics_stage(run: _Run, table: pd.DataFrame, gf: Any, sub: pd.DataFrame | None):
    """4. Per-group statistics and tests and the summary (group fairness and the subgroup
    scan ran as tasks of the audit's processes, :mod:`core.audit.stages`)."""
    t0 = time.perf_counter()
    s = run.s
    run.report("statistics", 0, 1)
    pinned = run.s.reference or {}                  # checked by _pinned before any work
    groups, tests = _statistics(table, list(run.attrs), s.n_boot, s.n_perm, s.alpha, s.random_state, pinned)
    for a, g in pinned.items():
        ref = groups[(groups["attribute"] == a) & groups["reference"]]["group"]
        if len(ref) and str(ref.iloc[0]) != g:
            run.notes.append(f"No audited row is in {a} = {g}, the reference group asked for: {a}'s gaps are "
                             f"measured against its largest audited group, {ref.iloc[0]}.")
    run.notes.extend(gf.notes)
    if sub is not None and not len(sub):
        run.notes.append(f"Subgroup scan: no subgroup of at least {s.min_subgroup} audited rows "
                         "(and as many outside).")
    summary = summarise(tests, s.alpha, len(table), list(run.attrs))
    run.report("statistics", 1, 1)
    run.timings["statistics"] = run.timings.get("statistics", 0.0) + time.perf_counter() - t0
    return groups, tests, summary


def _references(reference: Any) -> dict[str, str]:
    """The reference groups asked for, as {attribute: group label}."""
    if not isinstance(reference, Mapping) or not all(isinstance(k, str) for k in reference):
        raise AuditError("reference must map a protected attribute's name to one of its groups, e.g. "
                         "{'sex': 'Male'} (an audit's own are in its .references).")
    return {k: str(v) for k, v in reference.items()}


def _pinned(run: _Run) -> None:
    """Each reference group asked for is a group of one of the audit's attributes (else an AuditError)."""
    asked = run.s.reference or {}
    unknown = [a for a in asked if a not in run.attrs]
    if unknown:
        raise AuditError(f"reference names {', '.join(map(repr, unknown))}, not a protected attribute of this "
                         f"audit ({', '.join(map(repr, run.attrs))}).")
    for a, g in asked.items():
        known = sorted({str(v) for v in run.labels[a]}, key=label_order)
        if g not in known:
            raise AuditError(f"reference: {g!r} is not a group of {a!r}; its groups are {', '.join(known)}.")


def _meta(run: _Run, table: pd.DataFrame, prov: Provenance, sub: pd.DataFrame | None) -> dict[str, Any]:
    """Provenance, every parameter, versions and timings, for the report and the history."""
    names = run.names
    return {
        "created": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "data": {"name": prov.data_name, "sha256": prov.data_sha256 or _array_sha(run.A), "rows": int(len(run.A)),
                 "columns": names},
        "model": _model_meta(run, prov),
        "recourse_guarantee": None if run.recourse_guarantee is None else run.recourse_guarantee.to_dict(),
        "class_names": dict(prov.class_names),
        "parameters": _parameters(run, table, sub),
        "schema": run.schema.to_dict(),
        "versions": package_versions(),
        "timings": {k: round(run.timings[k], 3) for k in ("recourse", "tcrex", "local_rules", "statistics", "total")},
        "notes": run.notes,
        "statuses": table["status"].value_counts().to_dict(),
    }


def _model_meta(run: _Run, prov: Provenance) -> dict[str, Any]:
    """The audited model: its fingerprint, source, kind (a tree ensemble's trees), task and surrogate."""
    return {"sha256": prov.model_sha256, "source": _source(run), "kind": _kind(run),
            "trees": getattr(run.ens, "n_trees", None) if _kind(run) == "tree_ensemble" else None,
            "task": run.ens.task, **({} if run.surrogate is None else {"surrogate": run.surrogate.summary()})}


def _parameters(run: _Run, table: pd.DataFrame, sub: pd.DataFrame | None) -> dict[str, Any]:
    """Every parameter of the audit as it ran (the report's table and a rerun read them)."""
    s, names = run.s, run.names
    return {"target": ([float(v) for v in run.target_value] if isinstance(run.target_value, tuple)
                       else outcome_text(run.target_value)),
            "protected": {a: [names[j] for j in c] for a, c in run.attrs.items()},
            "rows_audited": int(len(table)), "max_rows": s.max_rows,
            "norm": s.norm if isinstance(s.norm, str) else dict(s.norm),
            "time_limit": whole(s.time_limit),
            "n_boot": s.n_boot, "n_perm": s.n_perm, "alpha": s.alpha, "tcrex": s.tcrex,
            "tcrex_rho": s.tcrex_rho, "tcrex_tau": s.tcrex_tau,
            "local_rules_per_group": s.local_rules_per_group, "random_state": s.random_state,
            "n_jobs": s.n_jobs, "scheduler": str(s.scheduler) if s.scheduler else None,
            "held_fixed": [names[j] for j in run.fixed], "scan": s.scan, "min_subgroup": s.min_subgroup,
            "budget": None if sub is None else whole(sub.attrs.get("budget", s.budget)),
            "reference": None if s.reference is None else dict(s.reference),
            "constraints": run.schema.parsed_constraints().texts}


def _kind(run: _Run) -> str:
    return "black_box" if run.surrogate is not None else kind_of(run.ens, "tree_ensemble")


def _source(run: _Run) -> str:
    return str(getattr(run.model, "source", run.ens.source)) if run.surrogate is not None else run.ens.source


def _array_sha(A: np.ndarray) -> str:
    return "array:" + hashlib.sha256(np.ascontiguousarray(A).tobytes()).hexdigest()
