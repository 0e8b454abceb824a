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
