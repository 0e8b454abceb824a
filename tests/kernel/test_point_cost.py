"""The cost a result reports is the cost of the point it returns, on every backend.

A point on an open interval end is moved strictly inside its cell, and a moved value to
the shortest number near its cell's cheapest point (:func:`core.cells.result.shown_point`):
the result's ``cost`` is that point's cost, never the cell's infimum, and a proven optimum
stays honest: its point costs at most the nudge more than its proven lower bound."""

from __future__ import annotations

import numpy as np
import pytest
from oracles import grid_brute_force, scaled_breast_cancer_forest, tiny_models
from sklearn.ensemble import GradientBoostingClassifier

from core.cells.problem import NUDGE
from core.cells.result import SHOWN_TOLERANCE
from core.counterfactual import make_cost_model
from core.intake.models import from_model
from core.optimal import optimal_counterfactual


def _nudge(cm, x, point):
    """The most the nudges inside the cells may add: each moved feature by at most
    SHOWN_TOLERANCE + NUDGE of its span (no schema: spans and weights are 1)."""
    moved = (point != x).astype(float) * (SHOWN_TOLERANCE + NUDGE)
    return float(cm.total(moved)) * (1 + 1e-9)


def _check(res, ens, x, norm, here):
    cm = make_cost_model(ens, norm)
    own = float(cm.cost(x, res.x[None, :])[0])
    assert res.cost == pytest.approx(own, rel=1e-12, abs=1e-15), here
    assert res.lower_bound <= res.cost + 1e-15, here
    if res.status == "optimal":
        assert res.cost - res.lower_bound <= _nudge(cm, x, res.x) + 1e-15, here


@pytest.mark.parametrize("norm, backends", [("l1", ("cpsat", "boxsearch", "lpbox", "highs", "auto")),
                                            ("linf", ("cpsat", "boxsearch", "auto"))])
def test_the_cost_is_the_returned_points_on_every_backend(norm, backends):
    X, _, models = tiny_models()
    by, moved = set(), 0
    for model in models:
        ens = from_model(model)
        for q in (0, 11):
            x = X[q]
            target = 1 - model.predict(x[None, :])[0]
            ref = grid_brute_force(ens, x, target, norm)
            for backend in backends:
                for warm in (True, False):
                    res = optimal_counterfactual(ens, x, target, norm=norm, backend=backend, warm=warm,
                                                 X_ref=X if warm else None, model=model)
                    here = (type(model).__name__, q, backend, warm)
                    assert res.status == "optimal" and res.found, here
                    _check(res, ens, x, norm, here)
                    assert ref - 1e-9 <= res.cost <= ref + _nudge(make_cost_model(ens, norm), x, res.x), here
                    moved += res.cost > res.lower_bound
                    by.add(res.backend)
    assert moved > 0, "no point was nudged: nothing was compared"
    assert {"bound"} < by, by


def test_the_separable_solver_reports_its_points_cost():
    X, _, _ = tiny_models()
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    stumps = GradientBoostingClassifier(n_estimators=20, max_depth=1, learning_rate=0.5, random_state=0).fit(X, y)
    ens = from_model(stumps)
    seen = set()
    for q in range(0, 40, 4):
        x = X[q]
        res = optimal_counterfactual(ens, x, 1 - stumps.predict(x[None, :])[0], norm="l1", model=stumps)
        _check(res, ens, x, "l1", q)
        seen.add(res.backend)
    assert "separable" in seen, seen


def test_linf_cost_is_the_largest_change_of_the_point():
    """On breast cancer's scaled forest the L-infinity cost is the returned point's largest change,
    exactly, though the point lies inside its cell (not on the level the optimum is the infimum at)."""
    model, ens, X = scaled_breast_cancer_forest()
    for i in range(400, 404):
        x = X[i]
        res = optimal_counterfactual(ens, x, 1 - int(model.predict(X[i:i + 1])[0]), norm="linf", model=model)
        assert res.status == "optimal"
        assert res.cost == float(np.max(np.abs(res.x - x)))
        assert 0.0 <= res.cost - res.lower_bound <= SHOWN_TOLERANCE + NUDGE
