"""Boosted stumps: the exact branch and bound (core.solvers.separable) gives the
same optimal costs as the general CP-SAT model, and only runs where it applies."""

from __future__ import annotations

import pytest
from conftest import make_data

import core.optimal as opt
from core.intake.models import from_model
from core.schema import infer_schema


def _stump_models(X, y):
    import lightgbm as lgb
    import xgboost as xgb
    from sklearn.ensemble import GradientBoostingClassifier

    return {
        "sk-gb": GradientBoostingClassifier(n_estimators=40, max_depth=1, random_state=0).fit(X, y),
        "sk-gb-exp": GradientBoostingClassifier(n_estimators=30, max_depth=1, loss="exponential",
                                                random_state=0).fit(X, y),
        "xgb": xgb.XGBClassifier(n_estimators=30, max_depth=1, learning_rate=0.3, n_jobs=1).fit(X, y),
        "lgb": lgb.LGBMClassifier(n_estimators=30, num_leaves=2, min_child_samples=5, verbose=-1,
                                  n_jobs=1).fit(X, y),
    }


def _both(model, X, rows, target_of, monkeypatch, **kw):
    ens = from_model(model)
    fast = [opt.optimal_counterfactual(ens, X[i], target_of(i), model=model, **kw) for i in rows]
    with monkeypatch.context() as m:
        m.setattr(opt, "_separable", lambda *a, **k: None)
        slow = [opt.optimal_counterfactual(ens, X[i], target_of(i), model=model, **kw) for i in rows]
    return fast, slow


@pytest.mark.parametrize("norm", ["l0", "l1", "l2", {"l0": 0.1, "l1": 1.0}])
def test_same_optimal_costs_as_cp_sat(norm, monkeypatch):
    X, y = make_data("binary", n=300, d=5, seed=2)
    schema = infer_schema(__import__("pandas").DataFrame(X, columns=[f"x{j}" for j in range(5)]), protected=[])
    for name, model in _stump_models(X, y).items():
        ens = from_model(model)
        pred = ens.predict(X)
        schema_m = schema if list(ens.feature_names) == schema.names else None
        fast, slow = _both(model, X, range(0, 300, 23), lambda i: 1 - pred[i], monkeypatch,
                           schema=schema_m, norm=norm, fixed=[3])
        assert {r.backend for r in fast} == {"separable"}, name
        for a, b in zip(fast, slow):
            assert a.status == b.status == "optimal", (name, a.status, b.status)
            assert a.valid and a.found
            assert a.cost == pytest.approx(b.cost, rel=1e-7, abs=1e-12), name
            assert a.x[3] == a.x_query[3]   # immutable kept


def test_infeasible_is_proven(monkeypatch):
    X, y = make_data("binary", n=300, d=5, seed=2)
    model = _stump_models(X, y)["sk-gb"]
    ens = from_model(model)
    pred = ens.predict(X)
    used = [j for j in range(5) if ens.split_levels(j).size]
    fast, slow = _both(model, X, [0, 1], lambda i: 1 - pred[i], monkeypatch, fixed=used)
    assert all(r.status == "infeasible" for r in fast + slow)


def test_not_used_beyond_stumps():
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier

    X, y = make_data("binary", n=200, d=4, seed=1)
    for model in (GradientBoostingClassifier(n_estimators=10, max_depth=2, random_state=0).fit(X, y),
                  RandomForestClassifier(n_estimators=5, max_depth=1, random_state=0).fit(X, y)):
        res = opt.optimal_counterfactual(model, X[0], 1 - model.predict(X[:1])[0])
        assert res.backend != "separable" and res.found
