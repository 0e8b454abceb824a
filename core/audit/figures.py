"""The audit's own figures (Plotly): recourse cost and a metric per protected group.

They live with the audit, not in :mod:`core.figures`, because they read the audit's
metric definitions (:mod:`core.audit.metrics`); the shared figures import nothing of
the analyses above them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import plotly.graph_objects as go

from core.audit.metrics import METRICS, SHARES
from core.figures import _ROOM, text
from core.shown import label_order

if TYPE_CHECKING:
    from core.audit.shape import AuditLike

__all__ = ["cost_figure", "metric_figure"]


def cost_figure(audit: AuditLike, attribute: str):
    """Recourse-cost distribution per group (box and points), rows with a recourse."""
    rows = audit.rows
    col = f"group:{attribute}"
    fig = go.Figure()
    for g in sorted(rows[col].astype(str).unique(), key=label_order):
        v = rows.loc[(rows[col].astype(str) == g) & (rows["feasible"] == 1), "cost"].to_numpy(dtype=float)
        fig.add_trace(go.Box(y=v, name=text(f"{attribute} = {g} (n={v.size})"), boxpoints="outliers", boxmean=True))
    fig.update_layout(title=dict(text=f"Optimal recourse cost by {text(attribute)}", y=0.97, yanchor="top"),
                      yaxis_title="cost (range-scaled)", height=400, showlegend=False, **_ROOM)
    return fig


def metric_figure(audit: AuditLike, attribute: str, metric: str = "feasible"):
    """A metric per group with its bootstrap interval, the groups in their labels' order (as
    :func:`cost_figure` draws them)."""
    g = audit.groups[audit.groups["attribute"] == attribute]
    if metric not in g:
        return None
    g = g.iloc[sorted(range(len(g)), key=lambda i: label_order(g["group"].iloc[i]))]
    fig = go.Figure(go.Bar(x=[text(f"{attribute} = {v}") for v in g["group"]], y=g[metric],
                           error_y=dict(type="data", symmetric=False, array=g[f"{metric}_hi"] - g[metric],
                                        arrayminus=g[metric] - g[f"{metric}_lo"]),
                           marker_color="#2f6fb0"))
    fig.update_layout(title=dict(text=f"{METRICS[metric].label.capitalize()} by {text(attribute)} "
                                      "(95% bootstrap interval)",
                                 y=0.97, yanchor="top"), height=360, **_ROOM)
    if metric in SHARES:
        fig.update_layout(yaxis_tickformat=".0%", yaxis_range=[0, 1.05])
    return fig
