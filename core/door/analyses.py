"""Every analysis run from a workspace, under the analyses' own keywords.

A :class:`~core.intake.workspace.Workspace` knows what its model is and how each
analysis must be handed it (:meth:`~core.intake.workspace.Workspace.query_model`):
a tree ensemble as itself, with the original model for the re-checks; a linear model
exactly, with its surrogate where an analysis needs trees; any other model through
its surrogate, every answer checked (and repaired) on the model in its worker. The
functions here, which the methods of :class:`core.door.AnalysisWorkspace` call
(``ws.optimal_counterfactual(row, target)``, ``ws.audit(protected=[...])``, ...), pass
all of that, with the workspace's
schema, its rows (the warm start's reference rows, the rules' fitting rows) and the
model's own predictions, so that the caller gives only what the analysis asks: a row
(its index in the workspace, or a row of the codes view), a target (by default the
one :func:`core.counterfactual.default_target` proposes), and the analysis's own
settings under the names its function takes (:func:`core.optimal.optimal_counterfactual`,
:func:`core.optimal.batch.batch_counterfactuals`, :func:`core.regions.exact_counterfactual`,
:class:`core.rules.CounterfactualRules`, :class:`core.tcrex.TCREx`,
:func:`core.compression.fcca`, :func:`core.audit.run_audit`,
:func:`core.audit.story.case_story`, :func:`core.audit.compare.compare_models`).
A keyword given wins over the workspace's default for it.

Each answer is the one the app's pages and the audit's command line get for the same
workspace and settings: they pass the same arguments. This module stands above every
analysis and the audit (the workspace of :mod:`core.intake` knows none of them), and
imports each when it is first run, so that opening a workspace loads no solver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from core.errors import AuditError, QueryError
from core.typing import ArrayLike, Label, Row, TargetSpec

if TYPE_CHECKING:
    from core.audit import Audit
    from core.audit.compare import ModelComparison
    from core.audit.story import CaseStory
    from core.compression.result import FCCAResult
    from core.counterfactual import CounterfactualResult
    from core.intake.workspace import Workspace
    from core.optimal.batch import BatchResult
    from core.rules import CounterfactualRules
    from core.rules.onmodel import OnModel
    from core.tcrex import TCREx

__all__ = ["optimal_counterfactual", "batch_counterfactuals", "exact_counterfactual", "rules", "tcrex", "fcca",
           "audit", "story", "compare"]

#: T-CREx's settings that belong to its fit (the rest are the estimator's)
_TCREX_FIT = ("fixed", "increase_only", "decrease_only")


# ------------------------------------------------------------------ rows and targets
def row_of(ws: Workspace, row: int | Row) -> tuple[np.ndarray, Any]:
    """(the row in the codes view, the model's own answer on it) for ``row``: the index of a
    row of the workspace, or a row of its codes view (``n_features`` numbers)."""
    n, d = ws.X.shape
    if isinstance(row, (int, np.integer)) and not isinstance(row, (bool, np.bool_)):
        if not -n <= int(row) < n:
            raise QueryError(f"Row {int(row)} is not a row of this workspace: it has {n:,} rows (0 to {n - 1:,}).")
        i = int(row) % n
        return ws.X.to_numpy(dtype=float)[i], ws.predictions[i]
    try:
        x = np.asarray(row, dtype=float)
    except (TypeError, ValueError):
        raise QueryError(f"A row is the index of one of this workspace's rows or {d} numbers in its codes view "
                         f"(a row of ws.X); got {type(row).__name__}.") from None
    if x.shape != (d,):
        raise QueryError(f"A row of this workspace has {d} numbers (a row of ws.X, in the model's features "
                         f"{', '.join(map(str, ws.X.columns[:4]))}{', …' if d > 4 else ''}); got shape {x.shape}. "
                         "Give the row's index, or ws.X.iloc[i] changed as you wish.")
    return x, ws.predict(x[None, :])[0]


def target_of(ws: Workspace, target: TargetSpec | None, prediction: Label | None = None) -> TargetSpec:
    """``target`` as given, or the default an analyst starts from
    (:func:`core.counterfactual.default_target`): for a row, an outcome other than its
    ``prediction``; for many rows (``prediction`` None), the favourable class, or a
    regressor's upper quartile of predictions."""
    if target is not None:
        return target
    from core.counterfactual import default_target

    return default_target(ws.ensemble, ws.predictions, prediction)


def _rows(ws: Workspace, rows: Sequence[int] | None) -> np.ndarray:
    n = len(ws.X)
    if rows is None:
        return np.arange(n)
    try:
        idx = np.asarray(rows, dtype=np.int64).reshape(-1)
    except (TypeError, ValueError):
        raise QueryError(f"rows are indices of this workspace's rows (0 to {n - 1:,}); got "
                         f"{type(rows).__name__}.") from None
    bad = idx[(idx < 0) | (idx >= n)]
    if bad.size:
        raise QueryError(f"Row {int(bad[0])} is not a row of this workspace: it has {n:,} rows (0 to {n - 1:,}).")
    return idx


def _solve_kwargs(ws: Workspace, kwargs: dict[str, object]) -> tuple[Any, dict[str, Any]]:
    """What a counterfactual query solves for this workspace, and its keywords: the
    workspace's schema and rows (the warm start's reference) and the model extras of
    :meth:`~core.intake.workspace.Workspace.query_model`, then the caller's own."""
    on, extra = ws.query_model()
    return on, {"schema": ws.schema, "X_ref": ws.X.to_numpy(dtype=float), **extra, **kwargs}


def checked_on(ws: Workspace) -> OnModel:
    """The model a rule or a counterfactual is checked on (:func:`core.rules.onmodel.on_model`)."""
    from core.rules.onmodel import on_model

    on, extra = ws.query_model()
    return on_model(on, **extra)


# ------------------------------------------------------------------ counterfactuals
def optimal_counterfactual(ws: Workspace, row: int | Row, target: TargetSpec | None = None,
                           **kwargs: object) -> CounterfactualResult:
    """:func:`core.optimal.optimal_counterfactual` of ``row`` on this workspace's model."""
    from core.optimal import optimal_counterfactual as solve

    x, pred = row_of(ws, row)
    on, kw = _solve_kwargs(ws, kwargs)
    return solve(on, x, target_of(ws, target, pred), **kw)


def batch_counterfactuals(ws: Workspace, rows: Sequence[int] | None = None, targets: TargetSpec | Sequence[TargetSpec] | None = None,
                          **kwargs: object) -> BatchResult:
    """:func:`core.optimal.batch.batch_counterfactuals` of the workspace's ``rows`` (indices;
    default every row), each for its target (default: an outcome other than its own)."""
    from core.optimal.batch import batch_counterfactuals as solve

    idx = _rows(ws, rows)
    if targets is None:
        targets = [target_of(ws, None, p) for p in ws.predictions[idx]]
    on, kw = _solve_kwargs(ws, kwargs)
    return solve(on, ws.X.to_numpy(dtype=float)[idx], targets, **kw)


def exact_counterfactual(ws: Workspace, row: int | Row, target: TargetSpec | None = None,
                         **kwargs: object) -> CounterfactualResult:
    """:func:`core.regions.exact_counterfactual` of ``row``: the nearest region giving ``target``."""
    from core.regions import exact_counterfactual as search

    x, pred = row_of(ws, row)
    on, kw = _solve_kwargs(ws, kwargs)
    return search(on, x, target_of(ws, target, pred), **kw)


# ------------------------------------------------------------------ rules
def rules(ws: Workspace, **kwargs: object) -> CounterfactualRules:
    """:class:`core.rules.CounterfactualRules` (its settings as keywords) fitted on the
    workspace's rows and the model's own predictions, every rule checked on the model."""
    from core.rules import CounterfactualRules

    settings: dict[str, Any] = {"groups": list(ws.schema.groups().values()), **kwargs}
    return CounterfactualRules(**settings).fit(ws.X.to_numpy(dtype=float), ws.predictions,
                                               feature_names=list(ws.ensemble.feature_names),
                                               model=checked_on(ws), schema=ws.schema)


def tcrex(ws: Workspace, target: TargetSpec | None = None, **kwargs: object) -> TCREx:
    """:class:`core.tcrex.TCREx` fitted for ``target`` (default: the favourable outcome) on the
    workspace's rows and the model's own predictions, each rule checked on the model;
    ``fixed``, ``increase_only`` and ``decrease_only`` go to its fit, the rest to the estimator."""
    from core.tcrex import TCREx

    fit: dict[str, Any] = {k: kwargs.pop(k) for k in _TCREX_FIT if k in kwargs}
    settings: dict[str, Any] = {"groups": list(ws.schema.groups().values()), **kwargs}
    return TCREx(**settings).fit(ws.X.to_numpy(dtype=float), ws.predictions, target_of(ws, target),
                                 feature_names=list(ws.ensemble.feature_names), model=checked_on(ws),
                                 schema=ws.schema, **fit)


def fcca(ws: Workspace, y: ArrayLike | None = None, **kwargs: object) -> FCCAResult:
    """:func:`core.compression.fcca` on the workspace's rows with labels ``y`` (default: the
    table's target column when it has one, else the model's own predictions); for a model
    that is not a tree ensemble, on its surrogate, every counterfactual checked on the model."""
    from core.compression import fcca as run

    if y is None:
        y = ws.y.to_numpy() if ws.y is not None else ws.predictions
    on: dict[str, Any] = {}
    if ws.model_kind != "tree_ensemble":
        on = {"model": checked_on(ws), "surrogate": ws.surrogate}
    return run(ws.ensemble, ws.X.to_numpy(dtype=float), y, **{"schema": ws.schema, **on, **kwargs})


# ------------------------------------------------------------------ the audit
def audit(ws: Workspace, target: TargetSpec | None = None, **kwargs: object) -> Audit:
    """:func:`core.audit.run_audit` of the workspace (default target: the favourable
    outcome; protected columns: the schema's unless ``protected`` names them), with its
    labels, names of classes and fingerprints for the report."""
    from core.audit import run_audit

    on, extra = ws.query_model()
    kw = {"schema": ws.schema, "y": ws.y, "data_name": ws.name, "data_sha256": ws.data_sha256,
          "model_sha256": ws.model_sha256, "class_names": ws.class_names, **extra, **kwargs}
    return run_audit(on, ws.X.to_numpy(dtype=float), target=target_of(ws, target), **kw)


def story(ws: Workspace, row: int, target: TargetSpec | None = None, **kwargs: object) -> CaseStory:
    """:func:`core.audit.story.case_story` of the workspace's row ``row`` (an index)."""
    from core.audit.story import case_story

    if isinstance(row, (bool, np.bool_)) or not isinstance(row, (int, np.integer)):
        raise QueryError(f"A story is told of one of the workspace's rows: give its index; got {type(row).__name__}.")
    _, pred = row_of(ws, row)
    settings: dict[str, Any] = dict(kwargs)
    return case_story(ws, int(row) % len(ws.X), target_of(ws, target, pred), **settings)


def compare(ws: Workspace, other: Workspace, target: TargetSpec | None = None, **kwargs: object) -> ModelComparison:
    """:func:`core.audit.compare.compare_models` of this workspace's model (A) with ``other``'s
    (B), a workspace of the same table read the same way; any kind of model on either side."""
    from core.audit.compare import compare_models
    from core.intake.workspace import Workspace

    if not isinstance(other, Workspace):
        raise AuditError(f"compare takes the workspace of the other model (core.open_workspace(model_b, data, "
                         f"target)); got {type(other).__name__}.")
    if list(other.X.columns) != list(ws.X.columns) or other.X.shape != ws.X.shape or \
            not np.array_equal(other.X.to_numpy(dtype=float), ws.X.to_numpy(dtype=float), equal_nan=True):
        raise AuditError("The second model reads the data differently (other columns, rows or category codes); "
                         "give a model trained on the same columns, opened with the same table.")
    on_a, extra_a = ws.query_model()
    on_b, extra_b = other.query_model()
    sides = {"model_a": extra_a["model"], "surrogate_a": ws.surrogate,
             "model_b": extra_b["model"], "surrogate_b": other.surrogate}
    return compare_models(on_a, on_b, ws.X, target=target_of(ws, target),
                          **{"schema": ws.schema, **sides, **kwargs})
