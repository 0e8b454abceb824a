"""Counterfactual Atlas core library: pure numpy/pandas/scikit-learn, no UI.

A newcomer's map, the one map of ``core`` (the README points here), in the order
data flows (each module's docstring cites the paper's equations it implements).

The door: :func:`core.open_workspace` (:mod:`core.door`, the top of the layers) turns a
model file or a fitted model of any kind, and a table, into a workspace from which every
analysis runs with its own keywords (``ws.optimal_counterfactual(row, target)``,
``ws.audit(...)``: :mod:`core.door.analyses`); the calls below it stay, for those who need
them.

The layout: packages by concern, each above the ones it imports::

    core/
      model/          the representation every analysis reads; imports nothing above it
      constraints/    the language of constraints between features, read against the schema
      intake/         tables and model files in, from_model, the checked workspace, the model worker
      cells/ solvers/ the counterfactual kernel
      surrogate/      any other model: a tree-ensemble surrogate, its answers checked on the model
      optimal/ regions.py tcrex.py rules/ compression/   the five analyses (FCCA in compression/)
      audit/          the recourse audit: statistics, report, history, story, model versions
      door/           open_workspace: any model and a table in, a workspace every analysis runs from
      counterfactual.py schema.py errors.py figures.py ruletext.py shown.py
      jsonable.py settings.py dot.py                shared by all of them

Nothing in model/, cells/, solvers/, surrogate/ or the analyses imports intake/ (checked
by ``tests/test_layering.py``): an analysis given a fitted model converts it with
:func:`core.model.as_ensemble`, which calls the converter ``core`` registers by its path,
:func:`core.intake.models.from_model`, imported the first time a fitted model arrives
(so ``import core`` imports no parser, and no XGBoost, LightGBM, CatBoost or ONNX).

The model. :mod:`core.model` holds the one representation every analysis reads,
:class:`core.model.TreeEnsemble` (a split is ``x <= t`` or ``x in S``; the node
layout, categories, missing values and links are documented there); the pieces
live in :mod:`core.model.tree` (one tree's node arrays), :mod:`core.model.ensemble`
(the ensemble and :func:`~core.model.as_ensemble`) and :mod:`core.model.flatwalk`
(all trees walked at once, by the compiled ``core.model._treewalk`` or numpy);
:mod:`core.model.box` the one box type ``lower < x <= upper``, :mod:`core.model.features`
the checks of tables and feature names every analysis shares, :mod:`core.model.guarantee`
what an answer guarantees and :mod:`core.model.result` the one result shape.
:mod:`core.model.categorical` rewrites category splits as exact one-hot trees and
:mod:`core.model.missing` missing values as exact "is missing" columns;
:mod:`core.model.native` feeds rows back to the original model; :mod:`core.model.blackbox`
holds any other model, answered by :mod:`core.intake.worker` in a sandboxed child process,
and :mod:`core.surrogate` distils a tree-ensemble surrogate of it and checks every answer
on the model itself.

Linear models. :class:`core.model.linear.LinearModel` holds a linear classifier or
regressor exactly (coefficients, intercepts, a score table per categorical feature, the
link); :func:`core.model.as_model` reads either kind of model, while
:func:`core.model.as_ensemble` refuses a linear one. scikit-learn's linear estimators
are parsed by :mod:`core.intake.parsing.linear` (a pipeline ending in one by
:mod:`core.intake.parsing.pipeline`), their optimal counterfactual is the MILP of
:mod:`core.solvers.linear` (reached through :func:`core.optimal.optimal_counterfactual`),
and :mod:`core.solvers.linear_regions` cuts a 2-D slice by their exact boundary.

Intake. :mod:`core.intake.io` reads tables and model files (CSV by
:mod:`core.intake.csvfile` in the encoding :mod:`core.intake.encoding` tells,
Parquet within limits set before any memory is spent by :mod:`core.intake.parquet`
from the page headers :mod:`core.intake.parquet_pages` reads, either inside an
archive opened by :mod:`core.intake.compressed`; :mod:`core.intake.heap` gives freed
memory back; XGBoost JSON/UBJ, LightGBM text, CatBoost JSON/CBM, skops; pickle only
when trusted);
:mod:`core.intake.sandbox`
reads untrusted model bytes in a short-lived child process with time and memory
limits (forked by :mod:`core.intake.forkserver`, which imported the libraries once); :mod:`core.intake.parsing` converts each library's trees (one module per
library, :mod:`core.intake.parsing.pipeline` for scikit-learn Pipelines,
:mod:`core.intake.parsing.validate` for structural checks before any allocation,
with :mod:`core.intake.parsing.filecheck`, :mod:`core.intake.parsing.ubjson` and
:mod:`core.intake.parsing.skopscheck`); :func:`core.intake.models.from_model` is the
one entry from a fitted model; :mod:`core.intake.training` trains a model in the
app. :mod:`core.intake.workspace` turns a table and a model into a checked
workspace (numeric view ``X``, raw view ``to_raw``), matching the table's columns
to the model's features with :mod:`core.intake.matching` and showing them as the
analyst's columns (:mod:`core.intake.columns`); :mod:`core.schema` describes
features (kind, range, actionability, one-hot groups) and keeps the constraints
between features the analyst writes, one per line, in the language
:mod:`core.constraints` reads (linear relations over new values, the row's values
and changes; implications; category moves); :mod:`core.intake.demo`
builds the embedded demo; :mod:`core.intake.csvsafe` writes CSV exports that no
spreadsheet runs as formulas.

The counterfactual kernel. :mod:`core.counterfactual` has the cost model, the
target and the result type; :mod:`core.cells` the problem on the grid of
split levels (OCEAN section 3.2), its bounds, starts, cached structures,
checked results and leaves read as category sets of one-hot groups
(:mod:`core.cells.groups`, what makes native categorical splits cheap);
:mod:`core.solvers` the exact solvers of that problem (CP-SAT cell model, OCEAN's
MILP on HiGHS/Gurobi, a knapsack for boosted stumps), each
``solve(problem) -> CellSolution``.

The five analyses. :mod:`core.optimal` (OCEAN, Parmentier & Vidal 2021):
per-instance optimal counterfactuals, proven optimal; :mod:`core.optimal.batch`
runs many rows (a process pool per run, or Dask). :mod:`core.regions`
(Blanchart): exact pure regions, the exact branch-and-bound counterfactual,
counterfactual sets, 2-D slices and projections. :mod:`core.tcrex` (T-CREx,
Bewley et al. 2024): global rules of recourse and the metarule tree.
:mod:`core.rules` (Amoukou & Brunel): counterfactual rules, local and
regional, on the Projected Forest and the Regional RF (its kernel is the C
module ``core.rules._projected``; :mod:`core.rules.filters` reads sub-population
filters with a linear-time tokenizer). :mod:`core.compression` (FCCA, Piccialli et al. 2023):
thresholds found by counterfactuals (there), the result's selection by Q,
rates and heatmap (:mod:`core.compression.result`) and the small faithful tree
(:mod:`core.compression.tree`).

Audit and reporting. :mod:`core.audit` runs the recourse audit over protected
groups (its public names importable from there; the run and its stages in
:mod:`core.audit.run`, statistics and summary in :mod:`core.audit.stats`, the
metrics in :mod:`core.audit.metrics`, the result in :mod:`core.audit.result`, the
command line ``python -m core.audit`` in :mod:`core.audit.cli`), with
:mod:`core.audit.fairstats` (bootstrap, permutation, Holm),
:mod:`core.audit.groupfair` (group metrics) and :mod:`core.audit.subgroups` (the
subgroup scan); :mod:`core.audit.report` writes the self-contained HTML report
(its figures, like every page's, are in :mod:`core.figures`),
:mod:`core.audit.story` tells one case in plain language, :mod:`core.audit.history`
keeps audits, :mod:`core.audit.compare` compares two model versions (agreement,
recourse invalidation per group). :mod:`core.dot` draws trees with Graphviz;
:mod:`core.shown` writes numbers as shown. Every user-facing error class is in
:mod:`core.errors`.

The contract the analyses follow. Arguments with the same meaning have the
same name: ``fixed`` (features, by name or index, that must not move:
optimal, exact regions, counterfactual rules, the audit's protected columns),
``increase_only`` / ``decrease_only``, ``target`` (a class label of a
classifier, or an interval ``(lo, hi)`` of a regressor's output, read by
:func:`core.counterfactual.make_target`; T-CREx and counterfactual rules,
whose Y* is a set of outputs, also take ``"other"``, any output but the most
frequent, and ``("other", c)``, read by :func:`core.counterfactual.output_mask`),
``schema`` (kinds, ranges, actionability), ``time_limit`` (finite positive seconds, checked by
:func:`core.counterfactual.check_time_limit`), ``progress(done, total)`` on
long runs (the audit adds its stage: ``progress(stage, done, total)``),
``should_stop()`` polled to cancel, ``random_state``. Settings that change an
answer are keyword-only parameters of the call where they act (a counterfactual
rule's ``pi``, ``pi_c`` and ``top_k`` per query), checked at the call by
:func:`core.settings.validated`; ``n_jobs`` / ``scheduler`` (processes) and
``n_workers`` (threads), ``norm`` (the cost) and the shared defaults
(``TIME_LIMIT``, ``ROW_TIME_LIMIT``, ``RANDOM_STATE``) mean the same everywhere
(:mod:`core.settings`). The optimal counterfactual's ``on_progress(result)``
is not a progress count: it hands over the best valid point so far with the
proven lower bound and gap (the warm start first, then each improvement) while
the solver works on the proof; its ``should_stop()`` ends the search with that
point (status "stopped"). Results are frozen dataclasses; those of the
analyses share one shape (:class:`core.model.result.Result`: ``params``, ``elapsed``,
``guarantee``, ``to_json`` / ``from_json``); errors a user
can cause are the classes of :mod:`core.errors` (all ``ValueError``); values
are made JSON-able by :func:`core.jsonable.plain`; a saved result of any kind is read
back by :func:`core.load_result`, which reads its ``kind``; rules are written by
:mod:`core.ruletext`; changes read ``feature: before → after``
(:func:`core.counterfactual.describe_changes`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# An analysis given a fitted model converts it with core.model.as_ensemble, which calls
# the converter registered here by its path: imported (with the parser of the model's
# library only) the first time a model that is not yet one of core's arrives.
from core.model.ensemble import register_converter, register_model_converter

register_converter("core.intake.models:from_model")
register_model_converter("core.intake.models:model_from")

__version__ = "0.1.0"

#: The public face: ``from core import NAME`` for each, loaded on first use (PEP 562).
_PUBLIC = {
    # the five analyses
    "optimal_counterfactual": "core.optimal",
    "exact_counterfactual": "core.regions", "counterfactual_set": "core.regions",
    "TCREx": "core.tcrex", "CounterfactualRules": "core.rules",
    "fcca": "core.compression",
    "run_audit": "core.audit",
    # the door: a model and a table in, a workspace every analysis runs from
    "open_workspace": "core.door", "AnalysisWorkspace": "core.door",
    # intake
    "load_model": "core.intake.door", "load_table": "core.intake.io",
    "build_workspace": "core.intake.workspace", "from_model": "core.intake.models",
    "Schema": "core.schema", "infer_schema": "core.schema",
    "Constraints": "core.constraints", "parse_constraints": "core.constraints",
    # what they return
    "TreeEnsemble": "core.model", "Box": "core.model.box", "Workspace": "core.intake.workspace",
    "CounterfactualResult": "core.counterfactual", "Region": "core.regions", "RegionSet": "core.regions",
    "Rule": "core.tcrex", "Metarule": "core.tcrex", "LocalRule": "core.rules.results",
    "load_result": "core.model.result",
    "RegionalRule": "core.rules.results", "FCCAResult": "core.compression.result", "Audit": "core.audit",
    # targets
    "default_target": "core.counterfactual", "already_at_target": "core.counterfactual",
}

__all__ = [
    "AnalysisWorkspace", "Audit", "Box", "Constraints", "CounterfactualResult", "CounterfactualRules", "FCCAResult",
    "LocalRule", "Metarule", "Region", "RegionSet", "RegionalRule", "Rule", "Schema", "TCREx",
    "TreeEnsemble", "Workspace", "already_at_target", "build_workspace", "counterfactual_set", "default_target",
    "exact_counterfactual", "fcca", "from_model", "infer_schema", "load_model", "load_result", "load_table",
    "open_workspace",
    "optimal_counterfactual", "parse_constraints", "run_audit"
]

if TYPE_CHECKING:
    from core.audit import Audit, run_audit
    from core.compression import fcca
    from core.compression.result import FCCAResult
    from core.constraints import Constraints, parse_constraints
    from core.counterfactual import CounterfactualResult, already_at_target, default_target
    from core.door import AnalysisWorkspace, open_workspace
    from core.intake.door import load_model
    from core.intake.io import load_table
    from core.intake.models import from_model
    from core.intake.workspace import Workspace, build_workspace
    from core.model import TreeEnsemble
    from core.model.box import Box
    from core.model.result import load_result
    from core.optimal import optimal_counterfactual
    from core.regions import Region, RegionSet, counterfactual_set, exact_counterfactual
    from core.rules import CounterfactualRules
    from core.rules.results import LocalRule, RegionalRule
    from core.schema import Schema, infer_schema
    from core.tcrex import Metarule, Rule, TCREx


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'core' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
