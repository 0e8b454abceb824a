"""Fairness audit of recourse: is recourse equally available and equally costly across groups?

For the protected attribute(s) of the schema (a one-hot group is one
attribute; a numerical one is cut into quartiles) and the rows whose
decision is unfavourable (the model's output misses the target):

* per row, the optimal recourse (:func:`core.optimal.optimal_counterfactual`,
  OCEAN) under the schema's actionability with every protected column held
  fixed: whether one exists, its cost (the schema's cost: range-scaled, one
  unit per category switch) and the number of the analyst's columns it changes
  (a category switch, or a missing value given one, is one change; the recourse is
  minimal: no change can be undone with the target kept), under the constraints
  between features in force (``constraints=``, default the schema's own:
  :mod:`core.audit.constrained`); a row no action under them helps is *precluded*
  (proven, for a model read exactly), and its share per group is one more gap tested;
* per row, the T-CREx rule the metarule tree prescribes (:mod:`core.tcrex`):
  whether it is actionable (asks no change of a fixed feature) and how many
  features it asks to change;
* for a seeded sample of rows per group, the local counterfactual rule
  (:mod:`core.rules`) and its correctness: the share of its counterfactual
  samples the model puts in the target;
* per group, these as shares, means, medians and quantiles with intervals
  (Wilson's for a share of rows, else the bootstrap's), and for each group against the attribute's largest group the
  gap, its bootstrap interval and a two-sided permutation p-value
  (:mod:`core.audit.fairstats`), Holm-adjusted over every test of the audit;
* a plain-language summary of the significant gaps, largest first.

``run_audit`` returns an :class:`Audit`, which serialises to JSON, to a
self-contained HTML report (:mod:`core.audit.report`) and to per-row CSV. Every
stage runs on local processes or a Dask cluster (:mod:`core.audit.stages`, over
:mod:`core.optimal.batch`), with the same answers however it runs.

The audit's public names (``__all__``) are importable from here; they live in
:mod:`core.audit.run` (:func:`run_audit`, its settings and stages),
:mod:`core.audit.stats` (groups, statistics, summary), :mod:`core.audit.result`
(:class:`Audit`) and :mod:`core.audit.metrics`; the command line is
:mod:`core.audit.cli`. The rest of the audit's package: :mod:`core.audit.fairstats`,
:mod:`core.audit.groupfair`, :mod:`core.audit.subgroups`, :mod:`core.audit.stages`, :mod:`core.audit.report`,
:mod:`core.audit.history`, :mod:`core.audit.story`, :mod:`core.audit.compare` and
:mod:`core.audit.constrained`.

Command line (no UI)::

    python -m core.audit --data credit.csv --model model.json --protected sex \\
        --target 1 [--scheduler tcp://HOST:8786] [--rows 500] --out report.html
"""

from __future__ import annotations

from core.audit.metrics import METRICS
from core.audit.result import Audit
from core.audit.run import AuditSettings, Provenance, package_versions, run_audit
from core.audit.stats import group_labels, protected_attributes
from core.errors import AuditCancelled, AuditError

__all__ = ["run_audit", "AuditSettings", "Provenance", "Audit", "AuditError", "AuditCancelled",
           "protected_attributes", "group_labels", "METRICS", "package_versions"]
