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

Every name of the audit is importable from here; they live in
:mod:`core.auditrun` (:func:`run_audit`, its settings and stages),
:mod:`core.auditstats` (groups, statistics, summary), :mod:`core.auditresult`
(:class:`Audit`) and :mod:`core.auditcli` (the command line).

Command line (no UI)::

    python -m core.audit --data credit.csv --model model.json --protected sex \\
        --target 1 [--scheduler tcp://HOST:8786] [--rows 500] --out report.html
"""

from __future__ import annotations

from core.auditcli import main  # noqa: F401 - the command line, run by ``python -m core.audit``
from core.auditmetrics import METRICS
from core.auditresult import Audit
from core.auditrun import REPORT_PACKAGES, AuditSettings, Provenance, package_versions, run_audit  # noqa: F401
from core.auditstats import _statistics, group_labels, protected_attributes, summarise  # noqa: F401
from core.errors import AuditCancelled, AuditError

# REPORT_PACKAGES, summarise and _statistics are importable from here too, as before the split
__all__ = ["run_audit", "AuditSettings", "Provenance", "Audit", "AuditError", "AuditCancelled",
           "protected_attributes", "group_labels", "METRICS", "package_versions"]

if __name__ == "__main__":
    raise SystemExit(main())
