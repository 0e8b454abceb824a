"""Figures: pure functions from results to Plotly figures (testable without Streamlit)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


def counterfactual_table(result: Any, feature_names: list[str]) -> pd.DataFrame:
    """Original vs counterfactual, one row per feature, with the change."""
    x0 = result.x_query
    x1 = result.x if result.x is not None else np.full_like(x0, np.nan)
    df = pd.DataFrame({"feature": feature_names, "original": x0, "counterfactual": x1})
    df["change"] = df["counterfactual"] - df["original"]
    df["changed"] = df["change"].abs() > 0
    return df


def counterfactual_changes_figure(result: Any, feature_names: list[str], span: np.ndarray | None = None):
    """Horizontal bars: the change of each changed feature, as a share of its range."""
    import plotly.graph_objects as go

    df = counterfactual_table(result, feature_names)
    df = df[df["changed"]].copy()
    sp = np.ones(len(feature_names)) if span is None else np.asarray(span)
    df["scaled"] = df["change"] / sp[df.index]
    df = df.reindex(df["scaled"].abs().sort_values().index)
    fig = go.Figure(go.Bar(
        x=df["scaled"], y=df["feature"], orientation="h",
        marker_color=np.where(df["scaled"] > 0, "#2f6fb0", "#c0504d"),
        customdata=np.column_stack([df["original"], df["counterfactual"]]) if len(df) else None,
        hovertemplate="%{y}: %{customdata[0]:.4g} → %{customdata[1]:.4g}<br>%{x:.1%} of the range<extra></extra>"))
    fig.update_layout(title="Changes (share of each feature's range)" if span is not None else "Changes",
                      xaxis_tickformat=".0%" if span is not None else None, height=120 + 28 * max(1, len(df)),
                      margin=dict(l=10, r=10, t=40, b=10))
    return fig
