"""The audit's stages as tasks over the run's processes (local ones, or a Dask cluster).

:func:`core.audit.run_audit` ran its stages one after another in the calling
process, but for the recourse: on a 100-row audit of 20,000 Adult rows the local
rules (12.6 of 22 s) and the group fairness of the decisions never used a
second process, so two processes gave no speed-up. Here every stage is cut into
tasks that one map over the run's processes (:func:`core.optimal.batch.map_rows`)
runs, in two rounds:

1. what needs no recourse, then the recourse: the local rules' surrogate forest
   (:class:`core.rules.CounterfactualRules`, fitted on every row), T-CREx (fitted on
   every row; the rule of each audited row, the rules most given per group), the group
   fairness of the decisions (:mod:`core.audit.groupfair`, every row), and the optimal
   recourse of the audited rows, a chunk of rows a task;
2. what needs those: the local rule of each sampled row with its counterfactual
   samples, a task each, and the subgroup scan (:mod:`core.audit.subgroups`), which
   reads the recourse.

The calling process keeps what must stay there or is cheap: the model's answers on the
rules' samples (a model in its worker answers from there), the per-group statistics and
tests (:func:`core.audit.stats._statistics`: one seeded stream of resamples over the
audited rows) and the summary. With a surrogate, each recourse is checked on the model
there too (:func:`core.optimal.batch.batch_counterfactuals`), after the first round.

Every task is a function of its inputs alone: seeded, and each row solved on one solver
thread (:data:`SOLVER_THREADS`), so an audit gives the same answers with one process,
several, or a cluster; only its timings differ. Memory: each row's recourse comes back
as the few figures the audit keeps (:class:`RowRecourse`), never the solver's whole
result, and the group fairness draws its bootstrap a block at a time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Protocol

import numpy as np
import pandas as pd

from core.audit.subgroups import scan_subgroups
from core.counterfactual import CounterfactualResult, at_target
from core.errors import AuditCancelled
from core.model import Guarantee
from core.optimal.batch import batch_counterfactuals, map_rows, row_queries
from core.rules import CounterfactualRules
from core.tcrex import TCREx

if TYPE_CHECKING:
    from core.audit.groupfair import GroupFairness
    from core.schema import Schema
    from core.surrogate import Surrogate

__all__ = ["RowRecourse", "Stages", "FirstRound", "first_round", "second_round", "SOLVER_THREADS"]


class _Run(Protocol):
    """What the stages read of an audit's resolved inputs (``core.audit.run._Run``): its
    settings ``s`` (``core.audit.run.AuditSettings``), data, decisions and groups."""

    s: Any
    ens: Any
    A: np.ndarray
    names: list[str]
    schema: Schema
    target_value: Any
    pred: np.ndarray
    attrs: dict[str, list[int]]
    rows: np.ndarray
    immutable: list[int]
    labels: dict[str, np.ndarray]
    rng: np.random.Generator
    model: Any
    notes: list[str]
    timings: dict[str, float]
    surrogate: Surrogate | None
    recourse_guarantee: Guarantee | None

    @property
    def groups(self) -> list[list[int]]: ...

    def answer(self, A: np.ndarray, /) -> np.ndarray: ...

    def stop(self) -> bool: ...

    def report(self, stage: str, done: int, total: int) -> None: ...

#: solver threads of each row's recourse, however the audit runs: with two, the solvers race
#: and which of two equally cheap points comes first depends on the machine's load
SOLVER_THREADS = 1
#: at most this many audited rows' recourses in one task
CHUNK_ROWS = 16
#: the kinds of task
KINDS = ("recourse", "rules", "tcrex", "fairness", "rule", "scan")


@dataclass(frozen=True)
class RowRecourse:
    """One audited row's recourse as the audit keeps it: what its per-row table, its
    statistics and the recourses' guarantee read (the solver's whole result is not kept)."""

    found: bool
    status: str
    cost: float
    gap: float
    elapsed: float
    guarantee: Guarantee | None
    x: np.ndarray | None

    @classmethod
    def of(cls, res: CounterfactualResult) -> RowRecourse:
        """What the audit keeps of a row's recourse (a task sends it back, not the whole result)."""
        return cls(bool(res.found), str(res.status), float(res.cost), float(res.gap), float(res.elapsed),
                   res.guarantee, None if res.x is None else np.asarray(res.x, dtype=np.float64))


@dataclass(frozen=True, eq=False)
class Stages:
    """What the tasks of an audit read: sent to each process once per round.

    A, pred, names, groups : the audit's view of the data, the decisions, the columns and
        their one-hot groups; rows : the audited rows; target : the favourable outcome;
    immutable : the columns no recourse or rule may change; labels : per attribute, the
        group of each audited row; fairness : the group fairness to compute (a picklable
        call with its settings), or None; tcrex : T-CREx's (rho, tau), or None; rules :
        fit the local rules' surrogate; random_state : the seed of every fit;
    solve, items : the function of one row's recourse and its rows' items
        (:func:`core.optimal.batch.row_queries`), None when the recourse is checked on a
        model in this process (a surrogate's);
    fitted, scan : in the second round (which reads the audited rows alone), the local
        rules' fitted surrogate and the subgroup scan to run (a picklable call), or None.
    """

    A: np.ndarray
    pred: np.ndarray
    names: list[str]
    groups: list[list[int]]
    rows: np.ndarray
    target: Any
    immutable: list[int]
    labels: dict[str, np.ndarray]
    random_state: int
    fairness: Callable[[], GroupFairness] | None = None
    tcrex: tuple[float, float] | None = None
    rules: bool = False
    solve: Callable[[Any], Any] | None = None
    items: list[Any] | None = None
    fitted: CounterfactualRules | None = None
    scan: Callable[[], pd.DataFrame] | None = None


def _task(st: Stages, item: tuple[Any, ...]) -> tuple[str, Any, float]:
    """One task, ``(kind, ...)``: (kind, its answer, its seconds)."""
    t0 = time.perf_counter()
    kind = item[0]
    if kind == "recourse":                           # (its first row, the rows' recourses)
        assert st.solve is not None and st.items is not None
        out: Any = (item[1], [RowRecourse.of(st.solve(st.items[k])) for k in range(item[1], item[2])])
    elif kind == "rules":
        out = CounterfactualRules(groups=st.groups, random_state=st.random_state).fit(st.A, st.pred,
                                                                                     feature_names=st.names)
    elif kind == "tcrex":
        out = _tcrex(st)
    elif kind == "fairness":
        assert st.fairness is not None
        out = st.fairness()
    elif kind == "rule":                             # (the row's position, its rule, its samples)
        out = (int(item[1]), *_local_rule(st, int(item[1])))
    else:                                              # "scan"
        assert st.scan is not None
        out = st.scan()
    return kind, out, time.perf_counter() - t0


def _tcrex(st: Stages) -> tuple[dict[str, np.ndarray], pd.DataFrame] | str:
    """T-CREx (rho, tau) on every row: the rule of each audited row, whether it is
    actionable (it already holds on every immutable column) and the changes it asks, and per
    attribute and group the rules most given; or the reason it could not be fitted."""
    assert st.tcrex is not None
    rho, tau = st.tcrex
    try:
        tc = TCREx(rho=rho, tau=tau, groups=st.groups, random_state=st.random_state).fit(
            st.A, st.pred, st.target, feature_names=st.names)
        Xa, imm = st.A[st.rows], st.immutable
        assigned = tc.explain(Xa)
        L = np.array([tc.rules_[k].lower for k in assigned])
        U = np.array([tc.rules_[k].upper for k in assigned])
        ok = np.all((Xa[:, imm] > L[:, imm]) & (Xa[:, imm] <= U[:, imm]), axis=1)
        cols = {"tcrex_rule": np.array([f"R{k}" for k in assigned], dtype=object),
                "tcrex_actionable": ok.astype(int), "tcrex_changes": tc.changes(Xa, assigned).astype(float)}
        recs = []
        for a, labels in st.labels.items():
            frame = pd.DataFrame({"group": labels, "rule": cols["tcrex_rule"]})
            for g, sub in frame.groupby("group"):
                for rule, c in sub["rule"].value_counts().head(5).items():
                    recs.append({"attribute": a, "group": g, "rule": rule, "text": tc.rule_text(int(str(rule)[1:])),
                                 "rows": int(c), "share": float(c / len(sub))})
        return cols, pd.DataFrame(recs, columns=RULE_COLUMNS)
    except ValueError as exc:
        return f"T-CREx: {exc}"


RULE_COLUMNS = ["attribute", "group", "rule", "text", "rows", "share"]


def _local_rule(st: Stages, p: int) -> tuple[str, np.ndarray | None]:
    """The local rule of audited row ``p`` (its text) and five counterfactual samples from
    it; ("(no rule)", None) when there is none."""
    assert st.fitted is not None
    x = st.A[int(st.rows[p])]
    try:
        rule = st.fitted.local_rule(x, st.target, fixed=st.immutable)
        samples = st.fitted.sample_counterfactuals(x, rule, n=5)
    except ValueError:
        return "(no rule)", None
    text = rule.to_text(st.names, st.groups) + (f" (below pi_C: CRP {rule.crp:.2f})" if rule.below_pi_c else "")
    return text, samples


def _map(run: _Run, st: Stages, items: list[tuple[Any, ...]],
         on_result: Callable[[tuple[str, Any, float]], None]) -> None:
    """The tasks ``items`` on the run's processes (or cluster), each answer handed to
    ``on_result`` in the calling process as it comes (in any order; the answer says which
    rows it is of); a stopped run raises AuditCancelled."""
    if not items:
        return

    def arrived(_start: int, results: list[Any]) -> None:
        for r in results:
            on_result(r)

    out = map_rows(partial(_task, st), items, n_jobs=run.s.n_jobs, scheduler=run.s.scheduler, chunk_size=1,
                   should_stop=run.stop, on_chunk=arrived)
    if run.stop() or any(r is None for r in out):
        raise AuditCancelled("The audit was cancelled; nothing was kept.")


def _picks(run: _Run) -> np.ndarray:
    """The audited rows (positions) given a local rule: a seeded sample of up to k rows of
    every group of every attribute (the groups in order, a row counting for each of its groups)."""
    k = run.s.local_rules_per_group
    if k <= 0 or not run.ens.is_classifier:
        return np.zeros(0, dtype=int)
    picked = np.zeros(run.rows.size, dtype=bool)
    for a in run.attrs:
        for _, sub in pd.Series(run.labels[a][run.rows]).groupby(run.labels[a][run.rows]):
            idx = sub.index.to_numpy()
            need = k - int(picked[idx].sum())
            rest = idx[~picked[idx]]
            if need > 0 and rest.size:
                picked[run.rng.choice(rest, min(need, rest.size), replace=False)] = True
    return np.flatnonzero(picked)


def _recourse_items(run: _Run) -> tuple[Callable[[Any], Any] | None, list[Any] | None, list[tuple[Any, ...]]]:
    """The function of one row's recourse, its items and the round's recourse tasks (chunks of
    rows: about 8 per process, at most :data:`CHUNK_ROWS` rows each); none with a surrogate."""
    if run.surrogate is not None:
        return None, None, []
    s, n = run.s, run.rows.size
    solve, items = row_queries(run.ens, run.A[run.rows], [run.target_value] * n, parallel=True,
                               **_solve_settings(run))
    workers = max(1, s.n_jobs) if not s.scheduler else 2
    size = int(np.clip(n // (8 * workers), 1, CHUNK_ROWS))
    return solve, items, [("recourse", a, min(a + size, n)) for a in range(0, n, size)]


def _solve_settings(run: _Run) -> dict[str, Any]:
    s = run.s
    return dict(schema=run.schema, norm=s.norm, fixed=run.immutable, time_limit=float(s.time_limit), X_ref=run.A,
                model=run.model, n_workers=SOLVER_THREADS)


@dataclass
class FirstRound:
    """What the first round gave: each audited row's recourse (in order), the audited rows
    given a local rule (``picks``) and every audited row's group per attribute; in ``got``,
    by kind of task, the local rules' fitted surrogate, T-CREx's columns and rules (or its
    note) and the group fairness; and each kind of task's seconds of work."""

    recourse: list[RowRecourse]
    picks: np.ndarray
    labels: dict[str, np.ndarray]
    got: dict[str, Any]
    seconds: dict[str, float]


def first_round(run: _Run, fairness: Callable[[], GroupFairness] | None) -> FirstRound:
    """The tasks that need no recourse, and the recourse (module docstring): the local rules'
    surrogate, T-CREx and the group fairness (``fairness()``) first, then the audited rows'
    recourse in chunks; with a surrogate, the recourse checked on the model afterwards."""
    s, n = run.s, run.rows.size
    picks = _picks(run)
    solve, items, recourse = _recourse_items(run)
    labels = {a: run.labels[a][run.rows] for a in run.attrs}
    st = Stages(run.A, run.pred, run.names, run.groups, run.rows, run.target_value, run.immutable, labels,
                s.random_state, fairness=fairness, tcrex=(s.tcrex_rho, s.tcrex_tau) if s.tcrex else None,
                rules=picks.size > 0, solve=solve, items=items)
    # the longest single tasks first: the processes take the rows' chunks as they come free
    first = [(k,) for k, on in (("rules", st.rules), ("fairness", fairness is not None), ("tcrex", s.tcrex)) if on]
    out = FirstRound([None] * n, picks, labels, {}, dict.fromkeys(KINDS, 0.0))   # type: ignore[list-item]
    counted = [0]

    def take(r: tuple[str, Any, float]) -> None:
        kind, got, sec = r
        out.seconds[kind] += sec
        if kind == "recourse":
            out.recourse[got[0]:got[0] + len(got[1])] = got[1]
            counted[0] += len(got[1])
            run.report("recourse", counted[0], n)
        else:
            out.got[kind] = got

    _map(run, st, first + recourse, take)
    if run.surrogate is not None:
        t0 = time.perf_counter()
        out.recourse = _checked_recourse(run)
        out.seconds["recourse"] += time.perf_counter() - t0
    return out


def second_round(run: _Run, table: pd.DataFrame, first: FirstRound) -> tuple[pd.DataFrame, Any, pd.DataFrame | None]:
    """T-CREx's and the local rules' columns of the per-row ``table`` (the recourse's), the
    tasks that read the recourse (each sampled row's local rule, the subgroup scan), and each
    stage's seconds of work (summed over its tasks) added to ``run.timings``: (T-CREx's rules
    per group, the group fairness, the scan or None). Notes go to ``run.notes``."""
    s, n, picks, seconds = run.s, run.rows.size, first.picks, first.seconds
    rules_table = _tcrex_columns(run, table, first.got.get("tcrex")) if s.tcrex else pd.DataFrame(columns=RULE_COLUMNS)
    # the second round reads the audited rows alone
    st = Stages(run.A[run.rows], run.pred[run.rows], run.names, run.groups, np.arange(n), run.target_value,
                run.immutable, first.labels, s.random_state, fitted=first.got.get("rules"), scan=_scan(run, table))
    rules: dict[int, tuple[str, np.ndarray | None]] = {}
    sub: list[pd.DataFrame] = []

    def take(r: tuple[str, Any, float]) -> None:
        kind, got, sec = r
        seconds[kind] += sec
        if kind == "rule":
            rules[got[0]] = got[1:]
            run.report("local rules", len(rules), picks.size)
        else:
            sub.append(got)

    _map(run, st, [("scan",)] * (st.scan is not None) + [("rule", int(p)) for p in picks], take)
    _local_rules(run, table, picks, [rules[int(p)] for p in picks])
    for k, v in (("recourse", seconds["recourse"]), ("tcrex", seconds["tcrex"]),
                 ("local_rules", seconds["rules"] + seconds["rule"]),
                 ("statistics", seconds["fairness"] + seconds["scan"])):
        run.timings[k] = run.timings.get(k, 0.0) + v
    return rules_table, first.got.get("fairness"), sub[0] if sub else None


def _checked_recourse(run: _Run) -> list[RowRecourse]:
    """Each row's recourse solved on the surrogate and checked (and repaired) on the model,
    which answers in this process (:func:`core.optimal.batch.batch_counterfactuals`)."""
    s, rows = run.s, run.rows
    results = batch_counterfactuals(
        run.ens, run.A[rows], [run.target_value] * rows.size, n_jobs=s.n_jobs, scheduler=s.scheduler,
        chunk_size="auto", progress=lambda d, t: run.report("recourse", d, t), should_stop=run.stop,
        surrogate=run.surrogate, **_solve_settings(run))
    done = [r for r in results if r is not None]
    if run.stop() or len(done) < len(results):
        raise AuditCancelled("The audit was cancelled; nothing was kept.")
    return [RowRecourse.of(r) for r in done]


def _tcrex_columns(run: _Run, table: pd.DataFrame, got: Any) -> pd.DataFrame:
    """T-CREx's columns of the per-row table and its rules per group (or its note)."""
    run.report("T-CREx rules", 0, 1)
    rules_table = pd.DataFrame(columns=RULE_COLUMNS)
    if isinstance(got, str):
        run.notes.append(got)
    elif got is not None:
        cols, rules_table = got
        for c, v in cols.items():
            table[c] = v
    run.report("T-CREx rules", 1, 1)
    return rules_table


def _local_rules(run: _Run, table: pd.DataFrame, picks: np.ndarray,
                 rules: list[tuple[str, np.ndarray | None]]) -> None:
    """The local rules' columns: each sampled row's rule and its correctness, the share of
    its samples the model gives the target, asked of the model in one call for every rule
    (a model in its worker answers many rows at the cost of one)."""
    if not (run.s.local_rules_per_group > 0 and run.ens.is_classifier):
        return
    table["local_correctness"] = np.nan
    table["local_rule"] = ""
    sampled = [(int(p), smp) for p, (_, smp) in zip(picks, rules) if smp is not None]
    for p, (text, smp) in zip(picks, rules):
        table.at[p, "local_rule"] = text
        if smp is None:
            table.at[p, "local_correctness"] = 0.0     # no rule: no correct counterfactual from a rule
    if not sampled:
        return
    ok = at_target(run.ens, run.target_value, run.answer(np.concatenate([smp for _, smp in sampled])))
    at = 0
    for p, smp in sampled:
        table.at[p, "local_correctness"] = float(np.mean(ok[at:at + len(smp)]))
        at += len(smp)


def _scan_table(*args: Any, **kwargs: Any) -> pd.DataFrame:
    """The subgroup scan's table (:class:`core.audit.subgroups.SubgroupScan`'s ``table``): what the
    audit keeps of it, computed where the task runs."""
    return scan_subgroups(*args, **kwargs).table


def _scan(run: _Run, table: pd.DataFrame) -> Callable[[], pd.DataFrame] | None:
    """The subgroup scan of the audited rows' recourse (:mod:`core.audit.subgroups`), as a
    call for a task (it reads each row's ``feasible`` and ``cost``); None without a scan."""
    s = run.s
    if not s.scan:
        return None
    frame_rows = pd.DataFrame(run.A[table["row"].to_numpy(dtype=int)], columns=run.names)
    col_groups = {g: [run.names[j] for j in cols] for g, cols in run.schema.groups().items() if len(cols) >= 2}
    return partial(_scan_table, table[["feasible", "cost"]].copy(), frame_rows, groups=col_groups,
                   min_size=s.min_subgroup, budget=s.budget, n_perm=min(s.n_perm, 1000), n_boot=min(s.n_boot, 300),
                   alpha=s.alpha, random_state=s.random_state)
