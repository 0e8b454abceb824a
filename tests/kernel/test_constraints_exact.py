"""Constraints between features, solved exactly (issue #61 items 2-3).

On tiny forests of four families the optimum under linear constraints, implications and
bounds on new values is checked against an enumeration of every cell of the split grid,
each solved as its own linear program (:func:`oracles.constrained_oracle`); a row is
precluded (``infeasible``, and ``verify_recourse`` says "precluded") exactly when the
enumeration finds no point. Every point is fed back to the original model and checked
against every constraint. A linear model is checked the same way against a brute force
over its own integer grid.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from oracles import constrained_oracle, tiny_models

from core.constraints import parse
from core.intake.models import from_model
from core.optimal import optimal_counterfactual, verify_recourse
from core.schema import infer_schema

NAMES = ["a", "b", "c"]            # b holds integers (tests/conftest.py make_data)
SETS = {
    "coupled": ["delta(a) >= delta(b)"],
    "budget and if-then": ["a + c <= 1.5", "if delta(b) > 0 then delta(a) >= 0.5 * delta(b)"],
    "held and capped": ["delta(c) == 0", "b <= old(b) + 1", "delta(a) <= 0.5"],
    "out of range": ["a >= old(a) + 100"],
    # a forced move (the row's own value left out), an implication whose premises split into cases
    # (an equation fails either way), a cap on an integral feature
    "forced and split": ["delta(a) >= 0.3", "if b == old(b) and delta(c) < 0 then delta(a) >= -0.002 * delta(c)",
                         "b <= old(b) + 1"],
}


# sets that move some row's optimum or preclude it (c held, a + c capped, a out of range); "coupled" never
# moves these rows' optima (they move c alone), so the free solvers' optima stand
MOVED = {"budget and if-then", "held and capped", "out of range", "forced and split"}
# three exact ways to the same optimum: the LP box search under the constraints, the MILP on its relaxation
# (HiGHS; taken when the implications split into too many cases) and the MILP on OCEAN's rows (taken where
# the box search does not apply, e.g. one-hot groups); the free optimum is tried first on the last two
PATHS = ["box search", "box program", "ocean program"]


def _path(monkeypatch, path):
    from core.solvers import constrained_box

    if path == "box program":
        monkeypatch.setattr(constrained_box, "cases", lambda cons, limit=16: None)
    elif path == "ocean program":
        monkeypatch.setattr(constrained_box, "applies", lambda prob: False)


@pytest.fixture(scope="module")
def tiny():
    X, y, models = tiny_models()
    schema = infer_schema(pd.DataFrame(X, columns=NAMES), kinds={"b": "integer"})
    return X, schema, [(m, from_model(m, feature_names=NAMES)) for m in models]


def _own_cost(ens, schema, x, point, norm="l1"):
    from core.counterfactual import make_cost_model

    return float(make_cost_model(ens, norm, None, schema).cost(x, point[None, :])[0])


def _rows(ens, X, n=2):
    return [int(r) for r in np.flatnonzero(ens.predict(X) == 0)[:n]]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("which", list(SETS))
def test_the_optimum_under_constraints_is_the_enumerations(tiny, which, path, monkeypatch):
    X, schema, models = tiny
    _path(monkeypatch, path)
    cons = parse(SETS[which], schema)
    answered = []
    for model, ens in models:
        for r in _rows(ens, X):
            want = constrained_oracle(ens, schema, X[r], 1, cons)
            res = optimal_counterfactual(ens, X[r], 1, schema=schema, constraints=SETS[which], model=model,
                                         time_limit=30)
            here = (type(model).__name__, r, which)
            answered.append(res.backend)
            check = verify_recourse(ens, X[r], 1, schema=schema, constraints=SETS[which])
            if not np.isfinite(want):
                assert res.status == "infeasible" and not res.found, here
                assert res.guarantee.kind == "infeasible", here
                assert check.precluded and check.blocking is not None, here
                continue
            assert res.status == "optimal", (here, res.status, res.message)
            assert res.guarantee.kind == "proven_optimal", here
            # the proven optimum is the enumeration's infimum; the point returned costs at most
            # the step inside its cell (and the shortening of its digits) more, and its cost is its own
            assert res.lower_bound == pytest.approx(want, rel=1e-6, abs=1e-7), (here, res.lower_bound, want)
            assert res.cost == pytest.approx(_own_cost(ens, schema, X[r], res.x), rel=1e-12), here
            assert want - 1e-9 <= res.cost <= want + 1e-4 * len(NAMES), (here, res.cost, want)
            assert model.predict(res.x[None, :])[0] == 1, here               # the original model agrees
            assert cons.violated(X[r], res.x) == [], here
            assert res.params["constraints"] == SETS[which]
            assert check.status == "reachable" and cons.violated(X[r], check.witness) == [], here
            assert ens.predict(check.witness[None, :])[0] == 1, here
    if path == "box search":        # the constrained search answers every query itself
        assert set(answered) == {"milp"}, answered
    else:                           # the free optimum first: it stands where the constraints do not move it
        assert ("milp" in answered) == (which in MOVED), answered


def test_a_blocked_row_names_the_constraint_that_blocks_it(tiny):
    X, schema, models = tiny
    _, ens = models[0]
    r = _rows(ens, X, 1)[0]
    texts = ["a <= old(a) + 1000", "a >= old(a) + 100", "b <= 4"]     # the second one alone blocks
    check = verify_recourse(ens, X[r], 1, schema=schema, constraints=texts)
    assert check.precluded and check.blocking == ("a >= old(a) + 100",)
    assert "a >= old(a) + 100" in check.explain()
    res = optimal_counterfactual(ens, X[r], 1, schema=schema, constraints=texts)
    assert res.status == "infeasible" and res.guarantee.kind == "infeasible"


def test_the_binding_constraints_are_listed(tiny):
    X, schema, models = tiny
    _, ens = models[0]
    # a feature the free optimum of a row leaves alone: holding it (an equation, always binding) keeps that optimum
    r = _rows(ens, X, 1)[0]
    free = optimal_counterfactual(ens, X[r], 1, schema=schema)
    alone = [n for n in NAMES if n not in {ch.feature for ch in free.changes}]
    assert alone, "the free optimum moves some feature and leaves another"
    texts = [f"delta({alone[0]}) == 0", "a <= old(a) + 1000"]
    res = optimal_counterfactual(ens, X[r], 1, schema=schema, constraints=texts)
    assert res.status == "optimal" and res.binding == (texts[0],)
    assert res.lower_bound == pytest.approx(free.lower_bound, rel=1e-6, abs=1e-7)
    assert texts[0] in res.guarantee.text()
    back = type(res).from_json(res.to_json())
    assert back.binding == res.binding and back.params["constraints"] == texts


def test_a_linear_model_under_constraints_is_exact():
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    X = np.column_stack([rng.integers(0, 6, 300), rng.integers(0, 6, 300), rng.integers(0, 6, 300)]).astype(float)
    y = (X[:, 0] + 2 * X[:, 1] - X[:, 2] + rng.normal(0, 1, 300) > 4).astype(int)
    df = pd.DataFrame(X, columns=NAMES)
    lr = LogisticRegression().fit(df, y)
    schema = infer_schema(df, kinds={n: "integer" for n in NAMES})
    texts = ["delta(a) >= delta(b)", "if delta(b) > 0 then delta(c) >= 1", "a + b + c <= 12"]
    cons = parse(texts, schema)
    grid = np.array(np.meshgrid(*[np.arange(6.0)] * 3)).reshape(3, -1).T
    for r in np.flatnonzero(lr.predict(df) == 0)[:4]:
        x = X[r]
        ok = (lr.predict(pd.DataFrame(grid, columns=NAMES)) == 1) & cons.holds(x, grid).all(axis=1)
        res = optimal_counterfactual(lr, x, 1, schema=schema, constraints=texts)
        if not ok.any():
            assert res.status == "infeasible"
            continue
        want = float((np.abs(grid[ok] - x) / schema.arrays()["span"]).sum(axis=1).min())
        assert res.status == "optimal" and res.cost == pytest.approx(want, abs=1e-9), (r, res.cost, want)
        assert lr.predict(pd.DataFrame([res.x], columns=NAMES))[0] == 1 and cons.violated(x, res.x) == []


@pytest.mark.parametrize("norm", ["l2", "linf", "l0", {"l0": 0.5, "l1": 1.0}])
def test_every_cost_agrees_with_the_free_solvers_where_no_constraint_binds(tiny, norm):
    """Squared l2 (tangent cuts), L-infinity and l0 (indicators) under constraints that never
    bind equal the optimum of the solvers without constraints (two exact methods agree)."""
    X, schema, models = tiny
    model, ens = models[1]
    texts = ["a <= old(a) + 1000", "if delta(b) > 0 then delta(a) >= -1000"]
    for r in _rows(ens, X):
        free = optimal_counterfactual(ens, X[r], 1, schema=schema, norm=norm)
        res = optimal_counterfactual(ens, X[r], 1, schema=schema, norm=norm, constraints=texts, model=model)
        assert free.status == res.status == "optimal" and res.binding == ()
        assert res.lower_bound == pytest.approx(free.lower_bound, rel=1e-6, abs=1e-7), (norm, r)
        assert res.cost == pytest.approx(_own_cost(ens, schema, X[r], res.x, norm), rel=1e-12)
        assert model.predict(res.x[None, :])[0] == 1
