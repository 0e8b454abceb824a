"""The recourse metrics the fairness audit compares between groups.

One :class:`Metric` per key: its label, the column of the audit's per-row
table it reads, the statistic over a group (``core.audit.fairstats.STATS``), the
rows it is measured on ("decided": rows whose recourse was decided, "found":
rows with a recourse, "tcrex", "local": rows where that method ran) and
whether a higher value is better for the group. Shared by :mod:`core.audit`
(the statistics) and :mod:`core.audit.report` (tables and figures).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Metric", "METRICS", "SHARES"]


class Metric(NamedTuple):
    label: str
    column: str
    statistic: str
    rows: str
    higher_is_better: bool


METRICS: dict[str, Metric] = {
    "feasible": Metric("share with a recourse", "feasible", "mean", "decided", True),
    "precluded": Metric("share precluded (no action helps, proven)", "precluded", "mean", "decided", False),
    "cost": Metric("mean recourse cost", "cost", "mean", "found", False),
    "cost_median": Metric("median recourse cost", "cost", "median", "found", False),
    "changes": Metric("features to change", "n_changed", "mean", "found", False),
    "tcrex_actionable": Metric("share with an actionable T-CREx rule", "tcrex_actionable", "mean", "tcrex", True),
    "tcrex_changes": Metric("features a T-CREx rule asks to change", "tcrex_changes", "mean", "tcrex", False),
    "local_correctness": Metric("local-rule correctness", "local_correctness", "mean", "local", True),
}
SHARES = ("feasible", "precluded", "tcrex_actionable", "local_correctness")   # metrics that are shares of rows
