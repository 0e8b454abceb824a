"""Figures that put a counterfactual on screen, read back from their data."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from core.figures import counterfactual_changes_figure


def test_a_category_switch_is_one_bar_named_by_its_levels():
    names = ["age", "job=clerk", "job=nurse", "job=pilot", "income"]
    res = SimpleNamespace(x_query=np.array([30.0, 1, 0, 0, 50.0]), x=np.array([35.0, 0, 0, 1, 50.0]))
    span = np.array([50.0, 1, 1, 1, 100.0])
    bar = counterfactual_changes_figure(res, names, span, {"job": [1, 2, 3]}).data[0]
    assert list(bar.y) == ["age", "job: clerk → pilot"]
    np.testing.assert_allclose(bar.x, [0.1, 1.0])
    assert "a category switch" in bar.hovertext[1] and "30 → 35" in bar.hovertext[0]
    plain = counterfactual_changes_figure(res, names, span).data[0]    # without groups: one bar per 0/1 column
    assert set(plain.y) == {"age", "job=clerk", "job=pilot"}


def test_rule_intervals_read_in_the_analysts_columns():
    """The counterfactual rule's chart: a one-hot group is one row named by its column with
    the condition as the rule writes it, the row's own category beside it; numbers as bounds."""
    from core.figures import rule_intervals_figure

    names = ["income", "job=cook", "job=nurse", "job=pilot", "age"]
    X = np.array([[10.0, 1, 0, 0, 20], [90.0, 0, 1, 0, 60], [50.0, 0, 0, 1, 40]])
    inf = np.inf
    rule = SimpleNamespace(lower=np.array([47.25, -inf, -inf, -inf, -inf]),
                           upper=np.array([inf, 0.5, inf, 0.5, inf]))
    fig = rule_intervals_figure(X, rule, [0, 1, 2, 3], names, X[0], (), groups=[[1, 2, 3]])
    bars = fig.data[1]
    assert list(bars.y) == ["income", "job"]
    assert list(bars.text) == ["income > 47.25", "not in {cook, pilot}"]
    marker = fig.data[2]
    assert list(marker.text) == ["10", "cook"]
    assert not any("inf" in str(t) or "0.5]" in str(t) for t in bars.text)
