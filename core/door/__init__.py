"""The one door: a model and a table in, a workspace every analysis runs from.

``core.open_workspace(model, data, target)`` (:func:`open_workspace`) is the one call a
library user needs: a model file (a path, its bytes, an open file) or a fitted object, of
any kind, and a table become an :class:`AnalysisWorkspace`. Tree ensembles and linear
models are read exactly; any other model runs in a sandboxed worker the workspace owns
(``with core.open_workspace(...) as ws:`` stops it). Every analysis then runs from the
workspace under the analysis's own keywords: :meth:`~AnalysisWorkspace.optimal_counterfactual`,
:meth:`~AnalysisWorkspace.batch_counterfactuals`, :meth:`~AnalysisWorkspace.exact_counterfactual`,
:meth:`~AnalysisWorkspace.rules`, :meth:`~AnalysisWorkspace.tcrex`,
:meth:`~AnalysisWorkspace.fcca`, :meth:`~AnalysisWorkspace.audit`,
:meth:`~AnalysisWorkspace.story` and :meth:`~AnalysisWorkspace.compare`, each passing what
the analysis needs of the model (:mod:`core.door.analyses`).

This package is the top of ``core``: it imports the intake (which reads the model and the
table, :func:`core.intake.door.read_workspace`) and runs the analyses and the audit, which
know nothing of it; the workspace of :mod:`core.intake.workspace` stays the data and the
model, below them. The lower-level calls (``load_model``, ``build_workspace``,
``Workspace.query_model``, ``ModelWorker``) stay, for those who need them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import fields
from typing import TYPE_CHECKING

import pandas as pd

from core.door import analyses
from core.intake.door import read_workspace
from core.intake.workspace import Workspace
from core.typing import ArrayLike, ModelLike, Row, TargetSpec

if TYPE_CHECKING:
    from core.audit import Audit
    from core.audit.compare import ModelComparison
    from core.audit.story import CaseStory
    from core.compression.result import FCCAResult
    from core.counterfactual import CounterfactualResult
    from core.optimal.batch import BatchResult
    from core.rules import CounterfactualRules
    from core.schema import Schema
    from core.tcrex import TCREx

__all__ = ["open_workspace", "AnalysisWorkspace"]


class AnalysisWorkspace(Workspace):
    """A :class:`core.intake.workspace.Workspace` from which every analysis runs, under the
    analysis's own keywords (see the module docstring); what :func:`open_workspace` gives.
    A row is its index in the table (or a row of ``ws.X``, the codes view); a target left
    out is the one the app proposes. Workspaces made from it (``with_schema``,
    ``with_protected``, ...) are analysis workspaces too, sharing its worker."""

    @classmethod
    def of(cls, ws: Workspace) -> AnalysisWorkspace:
        """The analysis workspace of ``ws`` (its fields, its worker)."""
        return cls(**{f.name: getattr(ws, f.name) for f in fields(ws)})

    def optimal_counterfactual(self, row: int | Row, target: TargetSpec | None = None,
                               **kwargs: object) -> "CounterfactualResult":
        """The cheapest change of ``row`` (an index, or a codes-view row) that gives ``target``
        (default: an outcome other than the row's): :func:`core.optimal.optimal_counterfactual`
        on this model, whatever its kind, with its keywords."""
        return analyses.optimal_counterfactual(self, row, target, **kwargs)

    def batch_counterfactuals(self, rows: Sequence[int] | None = None, targets: TargetSpec | Sequence[TargetSpec] | None = None,
                              **kwargs: object) -> "BatchResult":
        """Optimal counterfactuals of ``rows`` (indices; default every row), each for its target
        (default: an outcome other than its own): :func:`core.optimal.batch.batch_counterfactuals`."""
        return analyses.batch_counterfactuals(self, rows, targets, **kwargs)

    def exact_counterfactual(self, row: int | Row, target: TargetSpec | None = None,
                             **kwargs: object) -> "CounterfactualResult":
        """The nearest region of ``row`` giving ``target``: :func:`core.regions.exact_counterfactual`."""
        return analyses.exact_counterfactual(self, row, target, **kwargs)

    def rules(self, **kwargs: object) -> "CounterfactualRules":
        """Counterfactual rules fitted on these rows and the model's answers, checked on the
        model: :class:`core.rules.CounterfactualRules` with its settings as keywords."""
        return analyses.rules(self, **kwargs)

    def tcrex(self, target: TargetSpec | None = None, **kwargs: object) -> "TCREx":
        """T-CREx's rules and metarules for ``target`` (default: the favourable outcome), checked
        on the model: :class:`core.tcrex.TCREx` with its settings and its fit's as keywords."""
        return analyses.tcrex(self, target, **kwargs)

    def fcca(self, y: ArrayLike | None = None, **kwargs: object) -> "FCCAResult":
        """FCCA's thresholds from counterfactuals of these rows (labels ``y``: default the target
        column, else the model's answers): :func:`core.compression.fcca`."""
        return analyses.fcca(self, y, **kwargs)

    def audit(self, target: TargetSpec | None = None, **kwargs: object) -> "Audit":
        """The recourse audit of this model on these rows (default target: the favourable
        outcome): :func:`core.audit.run_audit` with its keywords."""
        return analyses.audit(self, target, **kwargs)

    def story(self, row: int, target: TargetSpec | None = None, **kwargs: object) -> "CaseStory":
        """Row ``row`` told in plain language: :func:`core.audit.story.case_story`."""
        return analyses.story(self, row, target, **kwargs)

    def compare(self, other: "Workspace", target: TargetSpec | None = None, **kwargs: object) -> "ModelComparison":
        """This model (A) compared with ``other``'s (B) on the same rows:
        :func:`core.audit.compare.compare_models` with its keywords."""
        return analyses.compare(self, other, target, **kwargs)


def open_workspace(model: ModelLike, data: pd.DataFrame | str | os.PathLike[str], target: str | None = None, *,
                   filename: str | None = None, name: str | None = None, allow_pickle: bool = False,
                   output: str | None = None, confirm_positions: bool = False, schema: Schema | None = None,
                   protected: Sequence[str] | None = None, drop_missing: bool = False,
                   memory_mb: int | None = None, call_timeout: float | None = None) -> AnalysisWorkspace:
    """A model and a table made into one workspace, whatever the model's kind; every analysis
    then runs from it (``ws.optimal_counterfactual(row, target)``, ``ws.audit(...)``, ...).

    Parameters
    ----------
    model : a model file: str or pathlib.Path (its path), bytes (its content, with
        ``filename``) or an open binary file, read in a sandboxed child first
        (:func:`core.load_model`); or a fitted model object (scikit-learn, XGBoost, LightGBM,
        CatBoost, a pipeline; or a ``TreeEnsemble``, ``LinearModel``, ``BlackBoxModel``).
        A tree ensemble or a linear model is read exactly; any other model (an MLP, a kernel
        SVM, an ONNX graph that is not a tree ensemble) runs in a sandboxed worker of its own
        (a fitted object is sent to it pickled: it is the caller's own), and the analyses
        that need trees run on a surrogate of it, every answer checked on the model.
    data : a DataFrame, or the path of a CSV or Parquet file (:func:`core.intake.io.load_table`).
    target : the label column, or None.
    filename : the model file's name, required with bytes (its extension tells the format).
    name : the workspace's name (default: the data's and the model's).
    allow_pickle : read a pickle or joblib file: only one the user trusts.
    output : an ONNX graph's output to run it on, when it has several (:func:`core.load_model`).
    confirm_positions : the model's features have no names (an ONNX graph's one tensor, an
        array-fitted model) and the mapping of the data's columns to them by position has
        been checked: without it such a model is refused, the mapping shown
        (:class:`~core.errors.PositionalMatchRequired`, ``.mapping``).
    schema, protected, drop_missing : as :func:`core.intake.workspace.build_workspace`.
    memory_mb, call_timeout : the worker's limits (:class:`core.intake.worker.ModelWorker`), for a
        model run in one.

    Returns
    -------
    AnalysisWorkspace (a :class:`core.intake.workspace.Workspace` with every analysis as a
    method), also a context manager: leaving ``with open_workspace(...) as ws:`` (or
    ``ws.close()``) stops the model's worker, if it has one, and every process it started.

    Raises
    ------
    ModelError, UnsupportedModelError, UntrustedPickleError, WorkerError, DataError, SchemaError,
    PositionalMatchRequired. Nothing is left running when it raises.

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.neural_network import MLPClassifier
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> import core
    >>> X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    >>> X = X.iloc[:, :4]
    >>> mlp = make_pipeline(StandardScaler(), MLPClassifier((8,), max_iter=500, random_state=0)).fit(X, y)
    >>> with core.open_workspace(mlp, X.assign(y=y), "y") as ws:
    ...     res = ws.optimal_counterfactual(0, 1, time_limit=10)
    ...     ws.model_kind, res.valid, res.guarantee.kind
    ('black_box', True, 'valid_on_model')
    """
    return AnalysisWorkspace.of(read_workspace(
        model, data, target, filename=filename, name=name, allow_pickle=allow_pickle, output=output,
        confirm_positions=confirm_positions, schema=schema, protected=protected, drop_missing=drop_missing,
        memory_mb=memory_mb, call_timeout=call_timeout))
