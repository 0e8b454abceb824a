"""Two versions of a model on the same data: where they disagree, and whether
the recourse promised under the first survives the second.

* **Agreement**: the share of rows both models decide alike, overall and per
  group of each protected attribute; the rows whose decision flips, and a
  shallow tree (depth 3, fitted on the data's columns) describing where they are.
* **Recourse invalidation** (the harm studied as recourse invalidation under
  model multiplicity and retraining): for a seeded sample of the rows the first
  model decides unfavourably, the optimal recourse under model A
  (:func:`core.optimal.optimal_counterfactual`, protected columns held fixed)
  is given to model B; it is *invalidated* when B does not give the target
  there. The cheapest recourse valid under both (``also_valid_for``, the same
  cell problem on the union of both models' split levels) measures what a
  recourse that survives the update costs extra: 0 where B honours A's recourse
  (A's optimum, or, for a model not read exactly, the recourse A gives). With a
  model that is not a tree ensemble the problem is solved on the trees that
  stand for the models (their surrogates), checked on both models themselves and,
  where one refuses, repaired on both; a row where nothing both accept is found
  says ``not_found``, never an error. Per group: the share
  invalidated with a 95% Wilson score interval, and a two-sided
  permutation test of its gap to the largest group (Holm-adjusted), as in
  :mod:`core.audit.stats`.
* **Preclusion** under constraints between features (``constraints=``, default the
  schema's own; every recourse above keeps them): a studied row is *precluded* under a
  model when no action under them gets it the target (Kothari, Kulynych & Ustun, ICLR
  2024). Under A it is the proof of A's own query; under B, rows with a known point
  valid under B are not, and the others are verified on B
  (:func:`core.optimal.verify_recourse`) when B is read exactly; a model known by its
  answers proves nothing. :attr:`ModelComparison.precluded` counts them under A, under
  B and under both, overall and per group.

Each stage runs over every studied row at once (:func:`core.optimal.batch.batch_counterfactuals`
and :func:`core.optimal.batch.map_rows`: local processes or a Dask cluster, progress
counting each row once per stage, cancel), a model in its worker asked for many rows per
call. Nothing here imports the UI.
"""

from __future__ import annotations

import hashlib
import html
import json
import time
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Mapping, Sequence, cast

import numpy as np
import pandas as pd

from core.audit.constrained import in_force, lines_words, recorded
from core.audit.fairstats import holm, permutation_p, share_ci
from core.audit.report import REPORT_CSS, constraints_html, model_text, parameters_table, table_html, whole
from core.audit.result import saved_guarantee
from core.audit.stats import group_labels, protected_attributes
from core.cells.problem import check_same_features
from core.counterfactual import at_target, make_cost_model, make_target
from core.errors import AuditCancelled, AuditError
from core.figures import interval_chart_svg
from core.intake.columns import analyst_columns, recourse_frame
from core.intake.csvsafe import to_csv
from core.intake.models import from_model
from core.model import Guarantee, LinearModel, ModelShape, TreeEnsemble, kind_of
from core.model.guarantee import GUARANTEE_KINDS, MODEL_KINDS, ModelKind, guarantee_line, with_guarantee
from core.model.native import model_input
from core.model.result import (
    MetaResult,
    Reader,
    Writer,
    frame_from_dict,
    frame_to_dict,
    to_json_value,
)
from core.optimal import optimal_counterfactual, verify_recourse
from core.optimal.batch import RowThreads, batch_counterfactuals, map_rows, weakest_guarantee
from core.ruletext import conditions, missing_condition
from core.settings import (
    N_JOBS,
    RANDOM_STATE,
    ROW_TIME_LIMIT,
    boolean,
    integer,
    n_jobs_setting,
    norm_setting,
    optional,
    probability,
    scheduler_setting,
    seconds,
    validated,
)
from core.shown import NOT_KNOWN, approx_text, label_order, number_text, outcome_text, percent_text
from core.surrogate.repair import polish_on_model

if TYPE_CHECKING:
    from distributed import Client

    from core.constraints import Constraints
    from core.surrogate import Surrogate
from core.schema import INTEGRAL_KINDS, Schema
from core.typing import ModelLike, Norm, Rows, TargetSpec

__all__ = ["ModelComparison", "compare_models", "decision_agreement", "disagreement_rules", "agreement_shown", "groups_shown",
           "precluded_shown"]


@dataclass(frozen=True, eq=False)
class ModelComparison(MetaResult):
    """What :func:`compare_models` found (tables in the data's columns and groups); a
    :class:`core.model.result.Result`: ``params`` (``meta``'s ``parameters``), ``elapsed``
    (its total seconds) and ``guarantee`` (``estimated``: the shares are estimates on the
    rows studied, with intervals)."""

    kind: ClassVar[str] = "model_comparison"
    what: ClassVar[str] = "model comparison"

    agreement: pd.DataFrame        # attribute, group, rows, agree (share), flips
    flips: pd.DataFrame            # row, decision A, decision B, group labels
    rules: list[str]               # where the decisions differ (a shallow tree's leaves)
    rows: pd.DataFrame             # per audited row: recourse under A, valid under B?, cost under both
    groups: pd.DataFrame           # per group: invalidated share and interval, extra cost
    tests: pd.DataFrame            # per group vs the reference group: gap, p, adjusted p, significant
    meta: dict[str, Any] = field(default_factory=dict)
    points_a: np.ndarray | None = None      # per studied row, its recourse under A (NaN: none), full precision
    points_both: np.ndarray | None = None   # per studied row, the cheapest recourse valid under both

    @property
    def precluded(self) -> pd.DataFrame:
        """The studied rows precluded (proven: no action under the constraints in force gives
        the target) under model A, under model B and under both, overall and per group of each
        protected attribute; columns ``attribute``, ``group``, ``rows``, ``precluded_a``,
        ``precluded_b``, ``precluded_both``. A count is of the rows proven so; a model known by
        its answers proves nothing (its count is NaN)."""
        cols = ["attribute", "group", "rows", "precluded_a", "precluded_b", "precluded_both"]
        r = self.rows
        if not len(r) or "precluded_a" not in r:
            return pd.DataFrame(columns=cols)
        a, b = (pd.to_numeric(r[c], errors="coerce") for c in ("precluded_a", "precluded_b"))
        parts = [("(all rows)", "", np.ones(len(r), dtype=bool))]
        parts += [(str(c)[len("group:"):], str(g), (r[c].astype(str) == str(g)).to_numpy())
                  for c in r.columns if str(c).startswith("group:")
                  for g in sorted(r[c].astype(str).unique(), key=label_order)]

        def count(v: pd.Series) -> float:
            return float((v == 1).sum()) if v.notna().any() else np.nan
        return pd.DataFrame([{"attribute": at, "group": g, "rows": int(m.sum()), "precluded_a": count(a[m]),
                              "precluded_b": count(b[m]), "precluded_both": count(a[m] * b[m])}
                             for at, g, m in parts], columns=cols)

    @property
    def invalidated(self) -> float:
        """Share of the audited rows with a recourse under A that B does not honour."""
        found = self.rows[self.rows["found_a"] == 1]
        return float(found["invalidated"].mean()) if len(found) else float("nan")

    def recourse_guarantee(self, which: str = "a") -> Guarantee:
        """What the studied rows' recourses hold: model A's (``"a"``), or those valid under both
        models (``"both"``); a comparison saved before it recorded them: from the models'
        kinds (a model not read exactly: checked, never proven optimal) and the rows' statuses."""
        saved = saved_guarantee(self.meta.get(f"guarantee_{which}"))
        if saved is not None:
            return saved
        kinds = [(self.meta.get(side) or {}).get("kind") for side in ("model_a", "model_b")]
        if "black_box" in kinds or (which == "both" and "linear" in kinds):
            return Guarantee("valid_on_model", "black_box" if "black_box" in kinds else "linear")
        kind = cast(ModelKind, kinds[0] if kinds[0] in MODEL_KINDS else "tree_ensemble")
        return _statuses_guarantee(kind, self._statuses(which))

    def _statuses(self, which: str) -> set[str]:
        """The statuses of the rows with a recourse (model A's: ``"a"``; valid under both:
        ``"both"``), as the per-row table has them (none in a table without them)."""
        col = "status_a" if which == "a" else "status_both"
        found = self.rows[self.rows["found_a" if which == "a" else "found_both"] == 1] if col in self.rows else self.rows
        return set(found[col].astype(str)) if col in found else set()

    def rows_csv(self) -> str:
        """The per-row table, with what its recourses guarantee in its last two columns (the
        weaker of model A's and those valid under both)."""
        a, both = self.recourse_guarantee("a"), self.recourse_guarantee("both")
        weaker = max((a, both), key=lambda g: GUARANTEE_KINDS.index(g.kind))
        return to_csv(with_guarantee(self.rows, weaker))

    @property
    def guarantee(self) -> Guarantee:  # type: ignore[override]
        kinds = {(self.meta.get(side) or {}).get("kind") for side in ("model_a", "model_b")}
        kind = "black_box" if "black_box" in kinds else next((k for k in kinds if k in MODEL_KINDS), "tree_ensemble")
        return Guarantee("estimated", cast(ModelKind, kind), note=(
            "The shares of decisions and of recourse honoured are estimates on the rows studied, with "
            "Wilson score intervals and permutation tests; each recourse is checked on both models."))

    def to_dict(self) -> dict[str, Any]:
        """The export: the shape's header, each table as a list of records (numbers as
        numbers, None where missing), the rules and the metadata, and the result itself
        under ``"result"`` (:func:`core.model.result.export`), which :meth:`from_dict` reads."""
        def records(df: pd.DataFrame) -> list[dict[str, Any]]:
            return [{str(k): None if v is pd.NA or v is pd.NaT else to_json_value(v) for k, v in rec.items()}
                    for rec in df.to_dict(orient="records")]

        view = {"meta": to_json_value(self.meta), "rules": list(self.rules),
                **{name: records(getattr(self, name)) for name in _TABLES}}
        return {**self.header(), **view, "result": {**self.header(), **self._body()}}

    def _body(self) -> dict[str, Any]:
        """The tables with their column types (numbers exact, None where missing), the
        rules, the metadata and each row's recourse points."""
        w = Writer().value("meta", self.meta).value("rules", list(self.rules))
        for name in _TABLES:
            w.value(name, frame_to_dict(getattr(self, name)))
        return w.array("points_a", self.points_a).array("points_both", self.points_both).done()

    @classmethod
    def _from_body(cls, r: Reader) -> "ModelComparison":
        def frame(name: str) -> pd.DataFrame:
            d = r.get(name)
            if not isinstance(d, Mapping):
                raise ValueError(f"the table {name!r} is not an object")
            return frame_from_dict(d)

        return cls(frame("agreement"), frame("flips"), [str(t) for t in r.get("rules")], frame("rows"),
                   frame("groups"), frame("tests"), dict(r.get("meta")), r.array("points_a", default=None),
                   r.array("points_both", default=None))

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=str)

    def to_html(self) -> str:
        return comparison_html(self)


_TABLES = ("agreement", "flips", "rows", "groups", "tests")


def _statuses_guarantee(kind: ModelKind, statuses: set[str]) -> Guarantee:
    """What recourses of a model of ``kind`` with these statuses hold: proven optimal when
    every one is, otherwise checked (a linear model) or limited by the time allowed."""
    if kind == "linear" or statuses <= {"optimal"}:
        return Guarantee("proven_optimal" if statuses <= {"optimal"} else "valid_on_model", kind)
    return Guarantee("time_limited" if "time_limit" in statuses else "valid_on_model", kind)


# ------------------------------------------------------------------ agreement
def decision_agreement(pred_a: np.ndarray, pred_b: np.ndarray, labels: dict[str, np.ndarray]) -> pd.DataFrame:
    """Share of rows decided alike, overall and per group."""
    same = np.asarray(pred_a) == np.asarray(pred_b)
    out = [{"attribute": "(all rows)", "group": "", "rows": int(same.size), "agree": float(same.mean()),
            "flips": int((~same).sum())}]
    for attr, lab in labels.items():
        for g in sorted(np.unique(lab), key=label_order):
            m = lab == g
            out.append({"attribute": attr, "group": str(g), "rows": int(m.sum()), "agree": float(same[m].mean()),
                        "flips": int((~same[m]).sum())})
    return pd.DataFrame(out)


def _leaf_columns(columns: Sequence[Any] | None) -> tuple[list[list[int]], dict[int, Any]]:
    """The analyst's columns a leaf reads: the one-hot groups' features, and each categorical
    feature's column by its feature (its codes stand for its categories)."""
    groups = [list(c.features) for c in columns or () if c.one_hot and len(c.features) > 1]
    coded = {c.features[0]: c for c in columns or () if not c.one_hot and c.categories is not None}
    return groups, coded


def disagreement_rules(X: np.ndarray, names: Sequence[str], flipped: np.ndarray, max_depth: int = 3,
                       random_state: int = RANDOM_STATE, columns: Sequence[Any] | None = None,
                       kinds: Sequence[str] | None = None) -> list[str]:
    """The leaves of a shallow tree separating flipped rows from the rest where
    flips concentrate (at least twice the overall share, and 5 rows), the most
    concentrated first: "if a <= 1 and b > 2: 45 of 90 rows flip (50%)".

    With ``columns`` (:func:`core.intake.columns.analyst_columns`) a leaf reads in the
    analyst's columns: a one-hot group as ``job = cook`` or ``job not in {...}``,
    a categorical feature's codes as ``job in {cook, nurse}``; with the schema's
    ``kinds``, a 0/1 feature as ``sex = 0`` and an integer one in whole numbers."""
    from sklearn.tree import DecisionTreeClassifier

    flipped = np.asarray(flipped, dtype=bool)
    if flipped.sum() == 0 or flipped.all():
        return []
    tree = DecisionTreeClassifier(max_depth=max_depth, min_samples_leaf=max(5, len(X) // 200),
                                  random_state=random_state).fit(X, flipped)
    t = tree.tree_
    leaf_of = tree.apply(X)
    base = float(flipped.mean())
    d = len(names)
    groups, coded = _leaf_columns(columns)
    out: list[tuple[float, str]] = []

    def leaf_text(lower: np.ndarray, upper: np.ndarray) -> str:
        conds, _ = conditions(lower, upper, names, groups)
        parts = []
        for feats, text in conds:
            c = coded.get(feats[0]) if len(feats) == 1 else None
            j = feats[0]
            kind = kinds[j] if kinds is not None and len(feats) == 1 else None
            if c is not None:      # codes lower < code <= upper: the categories they stand for
                inside = [v for k, v in enumerate(c.categories) if lower[j] < k <= upper[j]]
                text = f"{c.name} in {{{', '.join(inside)}}}" if inside else text
            elif kind == "binary" and missing_condition(str(names[j]), lower[j], upper[j]) is None:
                text = f"{names[j]} = {0 if upper[j] < 1 else 1}"
            elif kind in ("integer", "ordinal"):   # whole numbers a..b with lower < x <= upper
                a = int(np.floor(lower[j])) + 1 if np.isfinite(lower[j]) else None
                b = int(np.floor(upper[j])) if np.isfinite(upper[j]) else None
                text = (f"{names[j]} = {a}" if a is not None and a == b else
                        f"{a} <= {names[j]} <= {b}" if a is not None and b is not None else
                        f"{names[j]} >= {a}" if a is not None else f"{names[j]} <= {b}")
            parts.append(text)
        return " and ".join(parts) or "any row"

    def walk(node: int, lower: np.ndarray, upper: np.ndarray) -> None:
        if t.children_left[node] < 0:
            here = leaf_of == node
            n, k = int(here.sum()), int(flipped[here].sum())
            if n and k >= 5 and k / n >= 2 * base:
                out.append((k / n, f"if {leaf_text(lower, upper)}: {k} of {n} rows flip ({k / n:.0%})"))
            return
        f, thr = int(t.feature[node]), float(t.threshold[node])
        up, lo = upper.copy(), lower.copy()
        up[f], lo[f] = min(upper[f], thr), max(lower[f], thr)
        walk(t.children_left[node], lower, up)
        walk(t.children_right[node], lo, upper)

    walk(0, np.full(d, -np.inf), np.full(d, np.inf))
    return [text for _, text in sorted(out, key=lambda kv: -kv[0])]


# ------------------------------------------------------------------ any kind of model
@dataclass(frozen=True)
class _Side:
    """One model of the comparison: what its recourse query solves (a tree ensemble, a
    linear model exactly, or its surrogate's view with the model), the tree ensemble a
    query valid for both models reads (the model, or its surrogate), and its own answers."""

    solve_on: Any
    extra: dict[str, Any]
    joint: TreeEnsemble
    exact: bool

    def answer(self, X: np.ndarray) -> np.ndarray:
        model = self.extra.get("model")
        if "surrogate" in self.extra:
            if model is None:          # a surrogate's answers are never taken for the model's
                raise AuditError("A surrogate is given without the model it stands for: pass the model as well.")
            return model.predict(model_input(self.joint, X))
        return self.solve_on.predict(X)


def _side(ens: Any, model: Any, surrogate: Surrogate | None) -> _Side:
    if surrogate is not None and isinstance(model, ModelShape) and not model.exact:
        return _Side(surrogate.ensemble, {"model": model, "surrogate": surrogate}, surrogate.ensemble, False)
    if isinstance(ens, LinearModel):
        if surrogate is None:
            raise AuditError("A linear model is compared with its surrogate (for the recourse valid for both "
                             "models): give surrogate_a / surrogate_b, as the workspace has it.")
        return _Side(ens, {"model": model}, surrogate.ensemble, False)
    ens = ens if isinstance(ens, TreeEnsemble) else from_model(ens)
    return _Side(ens, {"model": model}, ens, True)


# ------------------------------------------------------------------ invalidation
#: how far along the segment from the row through a candidate the models are asked (1: the candidate)
_ALONG = (1.0, 1.05, 1.15, 1.3, 1.6, 2.0, 3.0)


@dataclass(frozen=True)
class _Compute:
    """How the study runs its rows: processes or a cluster, progress per stage, cancel."""

    n_jobs: int
    scheduler: Any
    progress: Callable[[str, int, int], None] | None
    should_stop: Callable[[], bool] | None

    @property
    def chunk(self) -> int | str:
        return "auto" if (self.n_jobs != 1 or self.scheduler) else 1

    def stage(self, name: str) -> Callable[[int, int], None] | None:
        progress = self.progress
        return None if progress is None else (lambda done, total: progress(name, done, total))

    def check(self, results: Sequence[Any]) -> None:
        if (self.should_stop is not None and self.should_stop()) or any(r is None for r in results):
            raise AuditCancelled("The comparison was cancelled; nothing was kept.")


def _solve(item: tuple[np.ndarray, Any], ensemble: TreeEnsemble, extra: dict[str, Any],
           kwargs: dict[str, Any]) -> Any:
    x, target = item
    return optimal_counterfactual(ensemble, x, target, **extra, **kwargs)


def _status(res: Any) -> str:
    """A result's status as the table says it: a search that found nothing (and proved
    nothing) is ``not_found``, never an error."""
    return "not_found" if not res.found and res.guarantee.kind == "not_found" else str(res.status)


_Both = tuple[np.ndarray | None, float, str]    # a recourse valid under both: point (None: none), cost, status


@dataclass(frozen=True)
class _UnderA:
    """Model A's recourse of each studied row (its result, its point, NaN where none was
    found) and whether model B honours it."""

    results: list[Any]
    points: np.ndarray
    found: np.ndarray
    honoured: np.ndarray

    def kept(self, exact: bool) -> np.ndarray:
        """The rows whose recourse under A, which B honours, is a recourse valid under both at
        no extra cost: A's optimum (nothing valid under both is cheaper), or the recourse A
        gives when a model is not read exactly (what a surrogate finds is not proven the
        cheapest, and the row has one valid under both already)."""
        optimal = np.array([r.status == "optimal" or not exact for r in self.results], dtype=bool)
        kept: np.ndarray = self.found & self.honoured & optimal
        return kept


def _under_a(side_a: _Side, side_b: _Side, X: np.ndarray, target: Any, kwargs: dict[str, Any],
             run: _Compute) -> _UnderA:
    """A's recourse of every row (for A's kind, all rows at once), each asked of model B."""
    n, d = X.shape
    res_a: list[Any] = list(batch_counterfactuals(side_a.solve_on, X, target, n_jobs=run.n_jobs, scheduler=run.scheduler,
                                                  chunk_size=run.chunk, progress=run.stage("recourse under A"),
                                                  should_stop=run.should_stop, **side_a.extra, **kwargs))
    run.check(res_a)
    nan = np.full(d, np.nan)
    points = np.array([r.x if r.found else nan for r in res_a], dtype=float).reshape(n, d)
    found = np.array([r.found for r in res_a], dtype=bool)
    honoured = np.zeros(n, dtype=bool)
    if found.any():
        honoured[found] = at_target(side_b.joint, target, side_b.answer(points[found]))
    return _UnderA(res_a, points, found, honoured)


def _rest_both(side_a: _Side, side_b: _Side, X: np.ndarray, res_a: list[Any], target: Any, kwargs: dict[str, Any],
               run: _Compute) -> tuple[list[_Both], list[Any]]:
    """The cheapest recourse valid under both for rows ``X`` (A's results ``res_a``): one
    exact problem on two tree ensembles (and its results), or found through the trees that
    stand for the models and checked on both (no results of an exact problem)."""
    if side_a.exact and side_b.exact:
        joint = _both_exact(side_a, side_b, X, target, kwargs, run)
        return [(r.x if r.found else None, float(r.cost) if r.found else np.nan, _status(r)) for r in joint], joint
    return _both_checked(side_a, side_b, X, res_a, target, kwargs, run), []


def _under_both(side_a: _Side, side_b: _Side, X: np.ndarray, a: _UnderA, target: Any, kwargs: dict[str, Any],
                run: _Compute) -> tuple[list[_Both], Guarantee]:
    """Per row, the cheapest recourse found valid under both (A's own where it is one at no
    extra cost, :meth:`_UnderA.kept`; searched for the others), and what these hold."""
    exact = side_a.exact and side_b.exact
    keep = a.kept(exact)
    both: list[_Both] = [(a.points[k], float(r.cost), _status(r)) if keep[k] else (None, np.nan, "")
                         for k, r in enumerate(a.results)]
    rest = np.flatnonzero(~keep)
    joint: list[Any] = []
    if rest.size:
        got, joint = _rest_both(side_a, side_b, X[rest], [a.results[k] for k in rest], target, kwargs, run)
        for at, g in zip(rest, got):
            both[int(at)] = g
    if exact:
        return both, _held([a.results[k] for k in np.flatnonzero(keep)] + joint)
    return both, _checked_on_both(side_a, side_b, bool(keep.all()))


def _record(r: Any, honoured: bool, both: _Both, precluded_b: float) -> dict[str, Any]:
    """One studied row of the table: A's recourse, whether B honours it, the recourse valid
    under both and its extra cost, and whether each model precludes the row."""
    x_both, cost_both, status_both = both
    cost_a = float(r.cost) if r.found else np.nan
    return {"found_a": int(r.found), "cost_a": cost_a, "status_a": _status(r),
            "invalidated": int(not honoured) if r.found else np.nan, "found_both": int(x_both is not None),
            "cost_both": cost_both, "status_both": status_both,
            "extra_cost": cost_both - cost_a if r.found and x_both is not None else np.nan,
            "precluded_a": _precluded_a(r), "precluded_b": precluded_b}


def _study(side_a: _Side, side_b: _Side, X: np.ndarray, target: Any, kwargs: dict[str, Any], run: _Compute
           ) -> tuple[list[dict[str, Any]], np.ndarray, np.ndarray, dict[str, Guarantee]]:
    """Per studied row: A's recourse (for A's kind), whether B honours it, and the cheapest
    recourse found valid under both; each stage over every row at once (a pool, and the
    models in their workers asked for many rows per call). With them, what A's recourses
    and the recourses valid under both guarantee (``"a"``, ``"both"``)."""
    n, d = X.shape
    a = _under_a(side_a, side_b, X, target, kwargs, run)
    both, held_both = _under_both(side_a, side_b, X, a, target, kwargs, run)
    reached = np.array([x_both is not None for x_both, _, _ in both], dtype=bool)
    pre_b = _precluded_b(side_b, X, target, kwargs, run, (a.found & a.honoured) | reached)
    recs = [_record(r, bool(a.honoured[k]), both[k], pre_b[k]) for k, r in enumerate(a.results)]
    nan = np.full(d, np.nan)
    points_both = np.array([nan if x_both is None else x_both for x_both, _, _ in both], dtype=float).reshape(n, d)
    return recs, a.points, points_both, {"a": _held(a.results), "both": held_both}


def _precluded_a(res: Any) -> float:
    """1 when model A's query proved that no action (under the constraints in force) gives the
    target, 0 when it found one, NaN when neither (time limit, a surrogate's search)."""
    if res.found:
        return 0.0
    return 1.0 if res.guarantee is not None and res.guarantee.kind == "infeasible" else np.nan


def _verify(item: tuple[np.ndarray, Any], model: Any, kwargs: dict[str, Any]) -> Any:
    x, target = item
    return verify_recourse(model, x, target, explain=False, **kwargs)


def _precluded_b(side_b: _Side, X: np.ndarray, target: Any, kwargs: dict[str, Any], run: _Compute,
                 reached: np.ndarray) -> np.ndarray:
    """Per studied row, whether model B precludes it: 0 where a point valid under B that keeps
    the constraints is known already (``reached``: A's recourse that B honours, or one valid
    under both); elsewhere, for a model read exactly, its recourse verified
    (:func:`core.optimal.verify_recourse`: 1 proven precluded, 0 reachable, NaN not settled
    in time); NaN for a model known by its answers (nothing is proven of it)."""
    out = np.where(reached, 0.0, np.nan)
    rest = np.flatnonzero(~reached)
    if not rest.size or "surrogate" in side_b.extra:
        return out
    kw: dict[str, Any] = {k: kwargs[k] for k in ("schema", "fixed", "time_limit") if k in kwargs}
    checks = map_rows(partial(_verify, model=side_b.solve_on, kwargs=kw), [(x, target) for x in X[rest]],
                      n_jobs=run.n_jobs, scheduler=run.scheduler, chunk_size=run.chunk,
                      progress=run.stage("precluded under B"), should_stop=run.should_stop)
    run.check(checks)
    out[rest] = [{"precluded": 1.0, "reachable": 0.0}.get(c.status, np.nan) for c in checks]
    return out


def _held(results: Sequence[Any]) -> Guarantee:
    """What the recourses found hold (the weakest of those rows'; of every row when none was found)."""
    return weakest_guarantee([r for r in results if r.found] or list(results))


def _checked_on_both(side_a: _Side, side_b: _Side, own: bool) -> Guarantee:
    """What a recourse valid under both holds when a model is not read exactly: checked on both."""
    kind: ModelKind = "black_box" if any("surrogate" in s.extra for s in (side_a, side_b)) else "linear"
    how = ("model A's own recourse, which model B honours" if own else
           "model A's own recourse where model B honours it, else found through the models' surrogates and "
           "repaired on both models")
    return Guarantee("valid_on_model", kind, note=f"Checked on both models: {how}.")


def _both_exact(side_a: _Side, side_b: _Side, X: np.ndarray, target: Any, kwargs: dict[str, Any], run: _Compute
                ) -> list[Any]:
    """The cheapest recourse valid under two tree ensembles: one exact problem on both."""
    extra = {"also_valid_for": [(side_b.joint, side_b.extra["model"])], **side_a.extra}
    kw = {**kwargs, "n_workers": 1 if (run.n_jobs != 1 or run.scheduler) else 2}
    out = map_rows(partial(_solve, ensemble=side_a.joint, extra=extra, kwargs=kw), [(x, target) for x in X],
                   n_jobs=run.n_jobs, scheduler=run.scheduler, chunk_size=run.chunk,
                   progress=run.stage("valid under both"), should_stop=run.should_stop)
    run.check(out)
    return out


class _BothModels:
    """Both models' own answers on rows of the comparison's view (one call per model):
    a row is valid when both give the target."""

    def __init__(self, sides: Sequence[_Side], target: Any):
        self.sides, self.target = sides, target

    def valid(self, C: np.ndarray) -> np.ndarray:
        C = np.atleast_2d(np.asarray(C, dtype=np.float64))
        ok = np.ones(len(C), dtype=bool)
        for s in self.sides:
            ok &= at_target(s.joint, self.target, s.answer(C))
        return ok


@dataclass(frozen=True)
class _Shape:
    """What a repair on both models keeps of the query: the schema's kinds, ranges and groups."""

    kinds: list[str]
    groups: list[list[int]]
    categorical: np.ndarray
    discrete: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    @classmethod
    def of(cls, ens: TreeEnsemble, schema: Schema | None) -> "_Shape":
        d = ens.n_features
        kinds = [f.kind for f in schema.features] if schema is not None else ["numerical"] * d
        groups = _moved_together(schema, d)
        categorical = np.array([c is not None for c in ens.categories], dtype=bool)
        discrete = categorical | np.array([k in ("binary", "categorical", "one-hot") for k in kinds], dtype=bool)
        arr = schema.arrays() if schema is not None else {"lower": np.full(d, -np.inf), "upper": np.full(d, np.inf)}
        return cls(kinds, groups, categorical, discrete, np.asarray(arr["lower"], dtype=float),
                   np.asarray(arr["upper"], dtype=float))

    def along(self, x: np.ndarray, c: np.ndarray) -> np.ndarray:
        """Points on the segment from ``x`` through ``c`` and past it (:data:`_ALONG`): the
        categories at ``c``'s, within the ranges, whole numbers rounded away from ``x``. A
        feature ``c`` keeps (fixed) stays, one ``c`` moves up (down) moves further up (down)."""
        t = np.asarray(_ALONG)[:, None]
        P = x + t * (c - x)
        P[:, self.discrete] = c[self.discrete]
        P = np.clip(P, self.lower, self.upper)
        whole = np.array([k in INTEGRAL_KINDS for k in self.kinds], dtype=bool) & ~self.discrete
        P[:, whole] = np.where(P[:, whole] >= x[whole], np.ceil(P[:, whole]), np.floor(P[:, whole]))
        return P


def _moved_together(schema: Schema | None, d: int) -> list[list[int]]:
    """The features a repair moves together: each one-hot group, and every other feature alone."""
    groups = [[int(j) for j in cols] for cols in schema.groups().values()] if schema is not None else []
    grouped = {j for g in groups for j in g}
    return groups + [[j] for j in range(d) if j not in grouped]


def _first_accepted(segments: list[np.ndarray], ok: np.ndarray) -> list[np.ndarray]:
    """Each segment's first point accepted (``ok``: over the segments' points one after another)."""
    starts, at = [], 0
    for P in segments:
        hit = np.flatnonzero(ok[at:at + len(P)])
        at += len(P)
        if hit.size:
            starts.append(P[int(hit[0])])
    return starts


def _repair(oracle: _BothModels, x: np.ndarray, candidates: list[np.ndarray], cost: Callable[[np.ndarray], np.ndarray],
            shape: _Shape, cons: Constraints | None = None) -> np.ndarray | None:
    """A point both models accept, from candidates one or both refused: on each segment from
    the row through a candidate, the first point both accept and that keeps the constraints
    between features ``cons`` (one call per model for all), each made minimal and brought
    back towards the row on both models (:func:`core.surrogate.repair.polish_on_model`; a
    polished point that breaks a constraint gives way to its start); the cheapest, or None."""
    if not candidates:
        return None
    segments = [shape.along(x, c) for c in candidates]
    every = np.concatenate(segments)
    ok = oracle.valid(every)
    if cons:
        ok &= cons.holds(x, every).all(axis=1)
    starts = _first_accepted(segments, ok)
    if not starts:
        return None
    polished = [polish_on_model(oracle, x, z, cost, kinds=shape.kinds, groups=shape.groups,  # type: ignore[arg-type]
                                categorical=shape.categorical) for z in starts]
    if cons:
        polished = [p if not cons.violated(x, p) else z for p, z in zip(polished, starts)]
    return polished[int(np.argmin(cost(np.array(polished))))]


def _both_checked(side_a: _Side, side_b: _Side, X: np.ndarray, res_a: list[Any], target: Any,
                  kwargs: dict[str, Any], run: _Compute) -> list[tuple[np.ndarray | None, float, str]]:
    """The cheapest recourse valid under both when one model is not read exactly: solved on the
    two trees that stand for them (a surrogate, or the model), then checked on both models
    themselves; a point one of them refuses is repaired on both (:func:`_repair`, from it and
    from A's own recourse). Rows are repaired together as their solves arrive, their calls to
    the models going together (:class:`core.optimal.batch.RowThreads`)."""
    kw = {**kwargs, "n_workers": 1 if (run.n_jobs != 1 or run.scheduler) else 2}
    schema = kwargs.get("schema")
    shape = _Shape.of(side_a.joint, schema)
    cons = schema.parsed_constraints() if schema is not None else None
    cm = make_cost_model(side_a.joint, kwargs.get("norm", "l1"), None, schema)
    rows = RowThreads(len(X), run.stage("valid under both"), run.should_stop)
    sides = [replace(s, extra={**s.extra, "model": rows.hub.wrap(s.extra.get("model"))}) for s in (side_a, side_b)]
    oracle = _BothModels(sides, target)

    def one(k: int, joint: Any) -> tuple[np.ndarray | None, float, str]:
        x = X[k]
        cands = [z for z in (joint.x if joint.found else None, res_a[k].x if res_a[k].found else None)
                 if z is not None]
        z = _repair(oracle, x, cands, lambda C: cm.cost(x, np.atleast_2d(C)), shape, cons)
        return (None, np.nan, "not_found") if z is None else (z, float(cm.cost(x, z[None, :])[0]), "feasible")

    def solved(start: int, results: list[Any]) -> None:
        for i, r in enumerate(results):
            if r is not None:
                rows.add(start + i, partial(one, start + i, r))

    try:
        map_rows(partial(_solve, ensemble=side_a.joint, extra={"also_valid_for": [(side_b.joint, None)]}, kwargs=kw),
                 [(x, target) for x in X], n_jobs=run.n_jobs, scheduler=run.scheduler, chunk_size=run.chunk,
                 should_stop=rows.stop, on_chunk=solved)
    except BaseException:
        rows.close()
        raise
    out = rows.results()
    run.check(out)
    return out


@validated(AuditError, max_rows=optional(integer(1)), time_limit=seconds, norm=norm_setting, n_jobs=n_jobs_setting,
           scheduler=scheduler_setting, random_state=integer(0), n_boot=integer(1), n_perm=integer(1),
           alpha=probability, invalidation=boolean)
def compare_models(ens_a: ModelLike, ens_b: ModelLike, X: Rows, *, schema: Schema | None, target: TargetSpec, protected: Sequence[str] | None = None,
                   rows: Sequence[int] | None = None, max_rows: int | None = 200, time_limit: float = ROW_TIME_LIMIT,
                   norm: Norm = "l1", n_jobs: int = N_JOBS, scheduler: str | Client | None = None,
                   model_a: ModelLike = None,
                   model_b: ModelLike = None, random_state: int = RANDOM_STATE, n_boot: int = 1000, n_perm: int = 2000,
                   alpha: float = 0.05, invalidation: bool = True,
                   progress: Callable[[str, int, int], None] | None = None,
                   should_stop: Callable[[], bool] | None = None, provenance: dict[str, Any] | None = None,
                   surrogate_a: Surrogate | None = None, surrogate_b: Surrogate | None = None,
                   constraints: Iterable[str] | str | Constraints | None = None) -> ModelComparison:
    """Compare model A (``ens_a``) with model B (``ens_b``) on the rows ``X`` (the
    data's codes view, in A's feature order); see the module docstring.

    ``target``: the favourable outcome; ``rows``: the rows to study (default:
    those A decides unfavourably, a seeded sample of ``max_rows``); protected
    columns (the schema's, or ``protected``) are held fixed in every recourse
    and define the groups. ``invalidation=False`` compares decisions only. ``n_boot`` is
    no longer used (a share's interval is Wilson's, drawn from no resample): it is
    accepted so that earlier calls still run.
    Raises AuditError (or QueryError) saying what to fix for models that read
    other columns, do another task or decide between other classes.

    Either model may be of any kind: a linear model (``ens_x`` a LinearModel, with its
    surrogate ``surrogate_x``) or a model known by its answers (``model_x`` a
    BlackBoxModel, ``ens_x`` its surrogate's view, ``surrogate_x`` its surrogate). The
    decisions are then the models' own, A's recourse is solved for A's kind (exactly, or
    through its surrogate and checked on it) and checked on B itself, and the cheapest
    recourse valid for both is found through the surrogates and checked on both models.

    ``constraints``: constraints between features (texts of :mod:`core.constraints`, or
    parsed; default None: the schema's own). Every recourse, under A and valid under both,
    keeps them; a studied row no action under them helps is *precluded*, under A (its
    query's proof) and under B (verified where B is read exactly):
    :attr:`ModelComparison.precluded` counts them per group.
    """
    t0 = time.perf_counter()
    schema = in_force(schema, constraints)
    side_a, side_b = _side(ens_a, model_a, surrogate_a), _side(ens_b, model_b, surrogate_b)
    ens_a, ens_b = side_a.joint, side_b.joint
    check_same_features(ens_a, ens_b, "model B", "model A")
    data = _Data.of(X, list(ens_a.feature_names), schema, protected)
    pred_a, pred_b = side_a.answer(data.A), side_b.answer(data.A)
    agreement = decision_agreement(pred_a, pred_b, data.labels)
    flipped = pred_a != pred_b
    rules = disagreement_rules(data.A, data.names, flipped, random_state=random_state,
                               columns=analyst_columns(ens_a, schema), kinds=_kinds(schema))
    tgt = make_target(ens_a, target)
    target_value = tgt.label if tgt.kind == "class" else (tgt.lo, tgt.hi)
    pool = np.flatnonzero(~at_target(ens_a, target_value, pred_a)) if rows is None else data.given(rows)
    rng = np.random.default_rng(random_state)
    pool = _sample(pool, max_rows, rng)
    fixed = data.protected_columns()
    study = _Study(pd.DataFrame(columns=["row", "found_a", "cost_a", "invalidated", "found_both", "cost_both",
                                         "extra_cost"]), np.empty((0, len(data.names))), np.empty((0, len(data.names))))
    timings = {"decisions": time.perf_counter() - t0}
    if invalidation and pool.size:
        kwargs = dict(schema=schema, norm=norm, fixed=_held_fixed(data.names, fixed, schema),
                      time_limit=float(time_limit))
        t1 = time.perf_counter()
        study = _studied((side_a, side_b), data, pool, target_value, kwargs,
                         _Compute(n_jobs, scheduler, progress, should_stop), analyst_columns(ens_a, schema))
        timings["recourse"] = time.perf_counter() - t1
    groups, tests = _invalidation_stats(study.table, list(data.attrs), n_perm, alpha, rng)
    timings["total"] = time.perf_counter() - t0
    parameters = {"max_rows": max_rows, "rows_studied": int(pool.size if invalidation else 0),
                  "time_limit": whole(time_limit), "norm": norm if isinstance(norm, str) else dict(norm),
                  "protected": data.protected_names(), "held_fixed": [data.names[j] for j in fixed],
                  "random_state": random_state, "n_perm": n_perm, "alpha": alpha, "n_jobs": n_jobs}
    meta = {**_meta((side_a, side_b), data, target_value, study.holds, parameters, schema, timings),
            **(provenance or {})}
    return ModelComparison(agreement, flips=data.flips(pred_a, pred_b), rules=rules, rows=study.table, groups=groups,
                           tests=tests, meta=meta, points_a=study.points_a, points_both=study.points_both)


@dataclass(frozen=True)
class _Data:
    """The rows compared (the data's codes view, in A's feature order) and their groups:
    the protected attributes' columns (``attrs``) and each row's group label of each."""

    A: np.ndarray
    names: list[str]
    attrs: dict[str, list[int]]
    labels: dict[str, np.ndarray]

    @classmethod
    def of(cls, X: Rows, names: list[str], schema: Schema | None, protected: Sequence[str] | None) -> "_Data":
        """Check the rows (every one complete, in the models' features) and label their groups."""
        A = np.asarray(X.to_numpy(dtype=float) if isinstance(X, pd.DataFrame) else X, dtype=float)
        if A.ndim != 2 or A.shape[1] != len(names) or len(A) == 0:
            raise AuditError(f"The data must have rows of {len(names)} features in the models' order.")
        if not np.all(np.isfinite(A)):
            raise AuditError("The data holds missing or infinite values; drop or fill them first.")
        attrs = protected_attributes(schema, protected)
        return cls(A, names, attrs, {a: group_labels(A, names, cols, a) for a, cols in attrs.items()})

    def given(self, rows: Sequence[int]) -> np.ndarray:
        """The rows asked for, each once, checked to be rows of the data."""
        pool = np.unique(np.asarray(rows, dtype=int))
        if pool.size and (pool.min() < 0 or pool.max() >= len(self.A)):
            raise AuditError(f"Row indices must lie in 0..{len(self.A) - 1}.")
        return pool

    def protected_columns(self) -> list[int]:
        """Every protected attribute's columns (held fixed in every recourse)."""
        return sorted({j for cols in self.attrs.values() for j in cols})

    def protected_names(self) -> dict[str, list[str]]:
        return {a: [self.names[j] for j in c] for a, c in self.attrs.items()}

    def flips(self, pred_a: np.ndarray, pred_b: np.ndarray) -> pd.DataFrame:
        """The rows whose decision differs: both decisions and the row's groups."""
        flipped = pred_a != pred_b
        return pd.DataFrame({"row": np.flatnonzero(flipped), "decision A": pred_a[flipped].astype(str),
                             "decision B": pred_b[flipped].astype(str),
                             **{f"group:{a}": lab[flipped] for a, lab in self.labels.items()}})


@dataclass(frozen=True)
class _Study:
    """The recourse study of the rows: the per-row table, each row's recourse under A and
    the cheapest valid under both, and what they guarantee (``"a"``, ``"both"``; none
    without a study)."""

    table: pd.DataFrame
    points_a: np.ndarray
    points_both: np.ndarray
    holds: dict[str, Guarantee] = field(default_factory=dict)


def _sample(pool: np.ndarray, max_rows: int | None, rng: np.random.Generator) -> np.ndarray:
    """A seeded sample of ``max_rows`` of the rows (all of them when they are fewer), in order."""
    if max_rows is not None and pool.size > max_rows:
        return np.sort(rng.choice(pool, int(max_rows), replace=False))
    return pool


def _kinds(schema: Schema | None) -> list[str] | None:
    return [f.kind for f in schema.features] if schema is not None else None


def _held_fixed(names: list[str], fixed: list[int], schema: Schema | None) -> list[str]:
    """The features no recourse may change: the protected ones and the schema's fixed ones
    (a list of features to hold replaces the schema's fixed ones in a query)."""
    held = set(fixed) | ({j for j, f in enumerate(schema.features) if f.actionability == "fixed"}
                         if schema is not None else set())
    return [names[j] for j in sorted(held)]


def _studied(sides: tuple[_Side, _Side], data: _Data, pool: np.ndarray, target: Any, kwargs: dict[str, Any],
             run: _Compute, columns: list[Any]) -> _Study:
    """The study of the rows ``pool`` (:func:`_study`) as the per-row table: each row, its
    groups, what was found and the changes in the analyst's ``columns``."""
    recs, points_a, points_both, holds = _study(*sides, data.A[pool], target, kwargs, run)
    table = pd.DataFrame(recs)
    table.insert(0, "row", pool.astype(int))
    table = _with_changes(table, columns, data.A[pool], points_a, points_both)
    for a, lab in data.labels.items():
        table.insert(1, f"group:{a}", lab[table["row"].to_numpy()])
    return _Study(table, points_a, points_both, holds)


def _meta(sides: tuple[_Side, _Side], data: _Data, target: Any, holds: dict[str, Guarantee],
          parameters: dict[str, Any], schema: Schema | None, timings: dict[str, float]) -> dict[str, Any]:
    """The comparison's record: both models' and the data's fingerprints, what the
    recourses guarantee, every parameter (with the constraints in force) and the timings."""
    return {"created": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "target": str(target),
            "model_a": _facts(sides[0]), "model_b": _facts(sides[1]), "rows": int(len(data.A)),
            "data_sha256": "array:" + hashlib.sha256(np.ascontiguousarray(data.A).tobytes()).hexdigest(),
            **{f"guarantee_{k}": g.to_dict() for k, g in holds.items()},
            "parameters": {**parameters, "constraints": [] if schema is None else schema.parsed_constraints().texts},
            "constraint_lines": [] if schema is None else list(schema.constraints),
            "timings": {k: round(v, 3) for k, v in timings.items()}}


def _with_changes(table: pd.DataFrame, columns: list, X: np.ndarray, points_a: np.ndarray,
                  points_both: np.ndarray) -> pd.DataFrame:
    """The per-row table with each recourse's changes in the analyst's columns
    (``changes_a``, ``changes_both``: one change per column, a fill of a missing value
    or a category switch included) and, beside them, each recourse's value of every
    column at full precision (``cf_a:<column>``, ``cf_both:<column>``; None where
    missing or without a recourse)."""
    fa = recourse_frame(columns, X, points_a, prefix="cf_a:")
    fb = recourse_frame(columns, X, points_both, prefix="cf_both:")
    at = list(table.columns).index("status_both") + 1
    table.insert(at, "changes_a", fa["changes"].to_numpy())
    table.insert(at + 1, "changes_both", fb["changes"].to_numpy())
    return pd.concat([table, fa.drop(columns=["n_changed", "changes"]), fb.drop(columns=["n_changed", "changes"])],
                     axis=1)


def _facts(side: _Side) -> dict[str, Any]:
    if side.exact:
        ens = side.joint
        return {"kind": "tree_ensemble", "source": ens.source, "trees": ens.n_trees, "task": ens.task,
                "content_sha256": ens.content_hash()}
    model = side.extra["model"]
    linear = kind_of(side.solve_on) == "linear"
    return {"kind": "linear" if linear else "black_box",      # (a model known by its answers: solved on its surrogate)
            "source": side.solve_on.source if linear else getattr(model, "source", "model"),
            "task": side.joint.task, "content_sha256": side.solve_on.content_hash() if linear
            else getattr(model, "identity", ""),
            "surrogate": side.extra["surrogate"].summary() if "surrogate" in side.extra else None}


def _invalidation_stats(table: pd.DataFrame, attrs: list[str], n_perm: int, alpha: float,
                        rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per group: rows, rows with a recourse under A, share invalidated (interval), mean
    extra cost of surviving recourse; per group vs the largest: gap, p, Holm-adjusted p."""
    g_rows: list[dict[str, Any]] = []
    t_rows: list[dict[str, Any]] = []
    if "invalidated" not in table or not len(table):
        return pd.DataFrame(g_rows), pd.DataFrame(t_rows)
    found = table[table["found_a"] == 1]
    for a in attrs:
        col = f"group:{a}"
        sizes = found[col].value_counts()
        if sizes.empty:
            continue
        ref = sizes.index[0]
        for g in sorted(sizes.index, key=lambda s: (s != ref, label_order(s))):
            v = found.loc[found[col] == g, "invalidated"].to_numpy(dtype=float)
            g_rows.append(_invalidation_group(table, found, a, g, v))
            if g != ref:
                r = found.loc[found[col] == ref, "invalidated"].to_numpy(dtype=float)
                t_rows.append({"attribute": a, "group": str(g), "reference": str(ref),
                               "gap": float(v.mean() - r.mean()) if v.size and r.size else np.nan,
                               "p_value": permutation_p(v, r, n_perm=n_perm, rng=rng)})
    tests = pd.DataFrame(t_rows)
    if len(tests):
        tests["p_adjusted"] = holm(tests["p_value"].to_numpy(dtype=float))
        tests["significant"] = tests["p_adjusted"] <= alpha
    return pd.DataFrame(g_rows), tests


def _invalidation_group(table: pd.DataFrame, found: pd.DataFrame, a: str, g: Any, v: np.ndarray) -> dict[str, Any]:
    """Group ``g`` of attribute ``a``: its rows, those with a recourse under A (``found``;
    ``v``: whether each is invalidated), the share invalidated with its Wilson score interval,
    and the mean extra cost of a recourse valid under both."""
    col = f"group:{a}"
    extra = found.loc[found[col] == g, "extra_cost"].dropna().to_numpy(dtype=float)
    lo, hi = share_ci(v)
    return {"attribute": a, "group": str(g), "rows": int((table[col] == g).sum()),
            "with recourse": int(v.size), "invalidated": float(v.mean()) if v.size else np.nan,
            "ci_low": lo, "ci_high": hi, "extra cost": float(extra.mean()) if extra.size else np.nan}


# ------------------------------------------------------------------ the report
def _table(df: pd.DataFrame) -> str:
    return table_html(df) if len(df) else "<p>–</p>"


def _target_words(c: ModelComparison) -> str:
    """The favourable outcome as the analyst named its class."""
    return outcome_text(c.meta.get("target", ""), c.meta.get("class_names") or None)


def comparison_summary(c: ModelComparison) -> tuple[str, list[str]]:
    """The comparison for a reader outside the field: a headline and a few sentences
    (what was compared, how often the models agree, how much promised recourse the
    second model undoes, for which group significantly more, at what extra cost)."""
    m, target = c.meta, _target_words(c)
    a, b = m.get("model_a", {}), m.get("model_b", {})
    agree = float(c.agreement.iloc[0]["agree"]) if len(c.agreement) else float("nan")
    flips = int(c.agreement.iloc[0]["flips"]) if len(c.agreement) else 0
    body = [f"What was compared: model A ({_model_words(a)}) and model B ({_model_words(b)}) on the same "
            f"{number_text(m.get('rows', 0))} cases. They decide {percent_text(agree)} of them alike; {number_text(flips)} "
            "get a different decision."]
    if not np.isfinite(c.invalidated):
        body.append("Whether model B honours the recourse model A gives was not studied.")
        return f"The models decide {percent_text(agree)} of the cases alike.", body
    lead, studied = _invalidation_words(c, target)
    return lead, body + studied


def _worse_words(c: ModelComparison) -> list[str]:
    """Each significant gap in plain words: which group's changes fail under model B more
    often than the other's, how often each, and the adjusted p."""
    sig = c.tests[c.tests["significant"].astype(bool)] if len(c.tests) else c.tests
    worse = []
    for _, t in sig.iterrows():
        group_worse = t["gap"] > 0
        w, o = (t["group"], t["reference"]) if group_worse else (t["reference"], t["group"])
        gw = c.groups[(c.groups["attribute"] == t["attribute"]) & (c.groups["group"] == w)]["invalidated"]
        go_ = c.groups[(c.groups["attribute"] == t["attribute"]) & (c.groups["group"] == o)]["invalidated"]
        worse.append(f"The change model A asks of {t['attribute']} = {w} fails under model B more often than for "
                     f"{t['attribute']} = {o}: {percent_text(gw.iloc[0])} against {percent_text(go_.iloc[0])} of their cases "
                     f"(Holm-adjusted p = {approx_text(t['p_adjusted'], 2)}).")
    return worse


def _no_gap_words(c: ModelComparison) -> str:
    """That no group's changes fail significantly more often (or that there was no group to compare)."""
    if not len(c.tests):
        return "There was no second group to compare with."
    return ("No group sees its changes fail under model B significantly more often than another "
            f"({number_text(len(c.tests))} comparison{'s' * (len(c.tests) != 1)}, Holm-adjusted).")


def _extra_cost_words(c: ModelComparison) -> list[str]:
    """The mean extra cost of a change that works under both models (nothing without one)."""
    extra = c.rows["extra_cost"].dropna() if "extra_cost" in c.rows else pd.Series(dtype=float)
    if not len(extra):
        return []
    return [f"A change that works under both models costs on average {approx_text(extra.mean(), 3)} more "
            "than the one model A asks for (cost: each change measured against its feature's range)."]


def _invalidation_words(c: ModelComparison, target: str) -> tuple[str, list[str]]:
    """The summary of a comparison that studied recourse: its headline (the first significant
    gap, or the share invalidated) and its sentences (how much model B undoes, the other gaps,
    the extra cost, the rows precluded, what the recourses guarantee)."""
    inv = c.invalidated
    n_found = int((c.rows["found_a"] == 1).sum()) if "found_a" in c.rows and len(c.rows) else 0
    g_a = c.recourse_guarantee("a")
    asked = ("the change model A's search found (through its surrogate, checked on model A; not proven the cheapest)"
             if g_a.model_kind == "black_box" or g_a.via_surrogate else "the smallest change model A asks for")
    worse = _worse_words(c)
    studied = (f"For {number_text(n_found)} cases model A turns down, {asked} was tried on model B: "
               f"{percent_text(inv)} of these changes would not get {target} from model B.")
    lead = worse[0] if worse else f"{percent_text(inv)} of the changes model A asks for would not get {target} from model B."
    body = [studied, *(worse[1:] if worse else [_no_gap_words(c)]), *_extra_cost_words(c),
            *_precluded_words(c, target),
            guarantee_line(replace(g_a, note=""), "each of model A's recourses"),   # the counts are per row
            guarantee_line(c.recourse_guarantee("both"), "each recourse valid under both")]
    return lead, body


def _precluded_words(c: ModelComparison, target: str) -> list[str]:
    """The constraints the recourses kept and the rows precluded under each model, in plain words."""
    cons = recorded(c.meta)
    out = [f"Every change counted keeps the {number_text(len(cons))} constraint{'s' * (len(cons) != 1)} between "
           f"features: {lines_words(cons)}."] if cons else []
    p = c.precluded
    if not len(p):
        return out
    every = p.iloc[0]
    said = [f"{number_text(int(v))} under model {side}" if np.isfinite(v) else f"none proven under model {side} (a "
            "model known by its answers proves nothing)" for side, v in (("A", every["precluded_a"]),
                                                                        ("B", every["precluded_b"]))]
    if np.nansum([every["precluded_a"], every["precluded_b"]]) > 0:
        both = every["precluded_both"]
        out.append(f"Cases precluded (proven: no change {'within the constraints ' if cons else ''}gets {target}): "
                   f"{said[0]}, {said[1]}" + (f", {number_text(int(both))} under both." if np.isfinite(both) else "."))
    return out


def _model_words(m: Mapping[str, Any]) -> str:
    """One model of the comparison in a few words: its source and kind (a tree ensemble's trees)."""
    kind = m.get("kind", "tree_ensemble")
    what = {"linear": "a linear model", "black_box": "any other model, analysed through a surrogate"}.get(
        str(kind), f"{m.get('trees', '?')} trees")
    return f"{m.get('source', '?')}, {what}"


def comparison_figures(c: ModelComparison) -> tuple[str, str]:
    """The comparison's figures as inline SVG: the key one (the share of recourse
    invalidated per group, with its interval) and the others (agreement of the
    decisions per group; extra cost of a recourse valid under both, per group)."""
    return _key_figure(c), "".join(_other_figures(c))


def _key_figure(c: ModelComparison) -> str:
    """The share of A's recourse B does not honour per group, with its interval, the groups
    significantly worse off in red ("" without groups)."""
    g = c.groups
    if not len(g):
        return ""
    sig = c.tests[c.tests["significant"].astype(bool)] if len(c.tests) else c.tests
    hit = {(str(t["attribute"]), str(t["group"] if t["gap"] > 0 else t["reference"])) for _, t in sig.iterrows()}
    return interval_chart_svg(
        [f"{a} = {v} (n = {number_text(int(n))})" for a, v, n in zip(g["attribute"], g["group"], g["with recourse"])],
        g["invalidated"], g["ci_low"], g["ci_high"], share=True,
        highlight=[(str(a), str(v)) in hit for a, v in zip(g["attribute"], g["group"])],
        title="Share of model A's recourse that model B does not honour, per group, with 95% intervals; red: "
              "significantly more often than another group",
        axis="recourse invalidated by model B")


def _other_figures(c: ModelComparison) -> list[str]:
    """The agreement of the decisions per group, and the extra cost of a recourse valid
    under both per group (each when there is something to show)."""
    other = []
    g, ag = c.groups, c.agreement
    if len(ag):
        other.append(interval_chart_svg(
            [f"{a} = {v}" if v != "" else str(a) for a, v in zip(ag["attribute"], ag["group"])], ag["agree"],
            np.full(len(ag), np.nan), np.full(len(ag), np.nan), share=True,
            title="Cases both models decide alike, overall and per group", axis="decided alike"))
    if len(g) and "extra cost" in g and g["extra cost"].notna().any():
        other.append(interval_chart_svg(
            [f"{a} = {v}" for a, v in zip(g["attribute"], g["group"])], g["extra cost"], np.full(len(g), np.nan),
            np.full(len(g), np.nan), title="Mean extra cost of a recourse valid under both models, per group",
            axis="extra cost (each change measured against its feature's range)"))
    return other


def agreement_shown(agreement: pd.DataFrame) -> pd.DataFrame:
    """:attr:`ModelComparison.agreement` for a reader, on the page and in the report alike: each
    share of decisions alike as a percentage."""
    return agreement.assign(agree=[percent_text(v) for v in agreement["agree"]]) if len(agreement) else agreement


def groups_shown(g: pd.DataFrame) -> pd.DataFrame:
    """:attr:`ModelComparison.groups` for a reader, on the page and in the report alike: each
    share with its 95% interval as percentages, :data:`core.shown.NOT_KNOWN` where one cannot be
    computed."""
    if not len(g):
        return g
    out = g[["attribute", "group", "rows", "with recourse"]].copy()
    out["invalidated [95% CI]"] = [f"{percent_text(v)} [{percent_text(lo)}, {percent_text(hi)}]"
                                   for v, lo, hi in zip(g["invalidated"], g["ci_low"], g["ci_high"])]
    out["mean extra cost"] = [approx_text(v) if np.isfinite(v) else NOT_KNOWN for v in g["extra cost"].astype(float)]
    return out


def precluded_shown(c: ModelComparison) -> pd.DataFrame:
    """:attr:`ModelComparison.precluded` for a reader: counts, "–" where nothing is proven."""
    p = c.precluded
    if not len(p):
        return p

    def n(v: Any) -> str:
        return number_text(int(v)) if np.isfinite(v) else "–"
    return pd.DataFrame({"attribute": p["attribute"], "group": p["group"], "rows studied": p["rows"],
                         "precluded under A": [n(v) for v in p["precluded_a"]],
                         "precluded under B": [n(v) for v in p["precluded_b"]],
                         "precluded under both": [n(v) for v in p["precluded_both"]]})


def _tests_shown(t: pd.DataFrame) -> pd.DataFrame:
    if not len(t):
        return t
    return pd.DataFrame({"attribute": t["attribute"], "group vs reference": t["group"] + " vs " + t["reference"],
                         "gap in share invalidated": [f"{100 * v:+.1f} points" for v in t["gap"]],
                         "p": [approx_text(p, 3) for p in t["p_value"]],
                         "Holm p": [approx_text(p, 3) for p in t["p_adjusted"]],
                         "significant": np.where(t["significant"], "yes", "no")})


def comparison_html(c: ModelComparison) -> str:
    """One self-contained HTML report, printable: a one-screen summary in plain words with
    its key figure (invalidation per group), then the figures, agreement, where the
    decisions differ, invalidation per group and its tests, the per-row table, and the
    fingerprints of both models and the data with every parameter."""
    m = c.meta
    esc = html.escape
    a, b = m.get("model_a", {}), m.get("model_b", {})
    lead, body = comparison_summary(c)
    key, other = comparison_figures(c)
    agreement = agreement_shown(c.agreement)
    payload = c.to_json().replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Model comparison</title><style>{REPORT_CSS}</style></head><body>
<h1>Model comparison</h1>
<p class="muted">Counterfactual Atlas · {esc(m.get('created', ''))} · favourable outcome {esc(_target_words(c))}</p>
<section class="summary"><h2>In one minute</h2><p class="lead">{esc(lead)}</p>
<ul>{''.join(f'<li>{esc(s)}</li>' for s in body)}</ul>{key}</section>
<p class="muted">{esc(guarantee_line(c.guarantee, "the shares of this comparison"))}</p>
<h2>Figures</h2><div class="figures">{other or '<p>–</p>'}</div>
<h2>Agreement of decisions</h2>{_table(agreement)}
<h2>Where the decisions differ</h2>{''.join(f'<p>{esc(r)}</p>' for r in c.rules) or '<p>–</p>'}
<h2>Recourse invalidation per group</h2>{_table(groups_shown(c.groups))}
<p class="muted">Share of rows whose optimal recourse under model A does not get the outcome from model B, with
95% Wilson score intervals; extra cost: the cheapest recourse valid under both, minus the one under A.</p>
<h2>Gaps to the reference group</h2>{_table(_tests_shown(c.tests))}
<p class="muted">Two-sided permutation tests, Holm-adjusted.</p>
<h2>Constraints between features</h2>{constraints_html(m)}
<h2>Rows precluded under A and under B</h2>{_table(precluded_shown(c))}
<p class="muted">A studied row is precluded under a model when it is proven that no action keeping the constraints
between features (and the features' own settings) gets it the favourable outcome from that model; "both": under
each of the two. A model known by its answers proves nothing: its count is "–".</p>
<h2>Per row</h2><div class="wide">{_table(c.rows)}</div>
<h2>Provenance</h2>
<p>Model A: {esc(model_text(a))}<br>Model B: {esc(model_text(b))}<br>
Data: <code>{esc(str(m.get('data_sha256', '')))}</code></p>
<p class="muted">Model A: <code>{esc(json.dumps(a))}</code><br>Model B: <code>{esc(json.dumps(b))}</code></p>
<h3>Parameters</h3>{_table(parameters_table(m.get('parameters', {})))}
<script type="application/json" id="atlas-comparison">{payload}</script>
</body></html>"""
