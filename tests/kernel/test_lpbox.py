"""The box search bounded by linear programs (core.solvers.lpbox).

Checked against brute force on tiny forests (:func:`oracles.grid_brute_force`),
against CP-SAT on real data (breast cancer, 30 features; wine, 3 classes), with
further models and a probability margin, stopped early (anytime), and the
problems it hands to CP-SAT (the L-infinity cost)."""

from __future__ import annotations

import numpy as np
import pytest
from oracles import grid_brute_force, tiny_models
from sklearn.datasets import load_breast_cancer, load_wine
from sklearn.ensemble import RandomForestClassifier

from core.intake.models import from_model
from core.optimal import build_problem, optimal_counterfactual
from core.solvers import cpsat, lpbox


@pytest.mark.parametrize("norm", ["l0", "l1", "l2"])
def test_the_lp_box_search_equals_brute_force(norm):
    """backend="lpbox", with and without the warm start, on every tiny model's three queries."""
    X, _, models = tiny_models()
    compared = 0
    for model in models:
        ens = from_model(model)
        for q in range(3):
            x = X[q * 11]
            target = 1 - model.predict(x[None, :])[0]
            fixed = (1,) if q == 2 else ()
            ref = grid_brute_force(ens, x, target, norm, fixed)
            for warm in (True, False):
                res = optimal_counterfactual(ens, x, target, norm=norm, fixed=fixed, backend="lpbox",
                                             X_ref=X if warm else None, warm=warm, model=model)
                here = (type(model).__name__, norm, q, warm)
                if not np.isfinite(ref):
                    assert res.status == "infeasible", here
                    continue
                assert res.status == "optimal", (here, res.status, res.message)
                assert res.backend in ("lpbox", "separable", "bound"), here
                assert res.cost == pytest.approx(ref, rel=1e-6, abs=1e-9), here
                assert model.predict(res.x[None, :])[0] == target, here
                assert all(res.x[j] == x[j] for j in fixed), here
                compared += 1
    assert compared > 0, "every query was infeasible: nothing was compared"


@pytest.fixture(scope="module")
def breast_cancer():
    """Breast cancer, min-max scaled on the training rows, RandomForestClassifier(30, depth 4)."""
    b = load_breast_cancer()
    X = b.data.astype(float)
    X = (X - X.min(axis=0)) / np.maximum(X.max(axis=0) - X.min(axis=0), 1e-12)
    model = RandomForestClassifier(30, max_depth=4, random_state=0).fit(X[:400], b.target[:400])
    return model, from_model(model), X


def test_the_lp_box_search_equals_cp_sat_on_breast_cancer(breast_cancer):
    """The same proven optimum as CP-SAT on six held-out rows (30 features, L1), both alone."""
    model, ens, X = breast_cancer
    for i in range(400, 406):
        x, target = X[i], 1 - int(model.predict(X[i:i + 1])[0])
        prob = build_problem(ens, x, target, norm="l1")
        sol = lpbox.solve(prob, time_limit=120)
        cp = cpsat.solve(prob, time_limit=120)
        assert sol is not None and sol.status == cp.status == "optimal", (i, sol, cp.status)
        assert prob.is_valid(prob.point_of(sol.cells)[None, :])[0], i
        assert model.predict(prob.point_of(sol.cells)[None, :])[0] == target, i
        assert prob.cost_of(sol.cells) == pytest.approx(prob.cost_of(cp.cells), rel=1e-6, abs=1e-9), i
        assert sol.lower_bound == pytest.approx(prob.cost_of(sol.cells), rel=1e-6, abs=1e-9), i


def test_the_lp_box_search_takes_three_classes():
    """Wine, RandomForestClassifier(10, depth 3): every other class as the target, CP-SAT's optimum."""
    w = load_wine()
    X = (w.data - w.data.min(axis=0)) / np.ptp(w.data, axis=0)
    model = RandomForestClassifier(10, max_depth=3, random_state=0).fit(X, w.target)
    ens = from_model(model)
    compared = 0
    for i in (0, 70, 140):
        for target in set(range(3)) - {int(model.predict(X[i:i + 1])[0])}:
            prob = build_problem(ens, X[i], target, norm="l1")
            sol = lpbox.solve(prob, time_limit=60)
            cp = cpsat.solve(prob, time_limit=60)
            assert sol is not None and sol.status == cp.status, (i, target, sol, cp.status)
            if cp.status == "optimal":
                assert prob.cost_of(sol.cells) == pytest.approx(prob.cost_of(cp.cells), rel=1e-6, abs=1e-9)
                assert model.predict(prob.point_of(sol.cells)[None, :])[0] == target
                compared += 1
    assert compared >= 4


def test_the_lp_box_search_takes_further_models_and_a_margin():
    """also_valid_for and margin: the LP box search itself answers, with CP-SAT's optimum."""
    X, _, (rf, gb, *_) = tiny_models()
    compared = 0
    for m, o in ((rf, gb), (gb, rf)):
        for r in range(0, 60, 12):
            for margin in (None, 0.6):
                t = 1 - int(m.predict(X[r:r + 1])[0])
                kw = dict(also_valid_for=[o], margin=margin, warm=False, model=m)
                mine = optimal_counterfactual(m, X[r], t, backend="lpbox", **kw)
                cp = optimal_counterfactual(m, X[r], t, backend="cpsat", **kw)
                assert mine.backend == "lpbox" and mine.status == cp.status, (r, margin, mine.status, cp.status)
                if cp.found:
                    assert mine.cost == pytest.approx(cp.cost, rel=1e-6, abs=1e-9), (r, margin)
                    assert m.predict(mine.x[None])[0] == t and o.predict(mine.x[None])[0] == t
                    compared += 1
    assert compared > 0


def test_the_lp_box_search_is_anytime(breast_cancer):
    """Stopped after a few boxes it keeps a proven lower bound at most the optimum, told in order."""
    model, ens, X = breast_cancer
    x, target = X[403], 1 - int(model.predict(X[403:404])[0])
    prob = build_problem(ens, x, target, norm="l1")
    best = cpsat.solve(prob, time_limit=120)
    assert best.status == "optimal"
    opt = float(prob.cost_of(best.cells))
    told = []
    early = lpbox.solve(prob, time_limit=120, node_limit=2, on_bound=lambda lb, ub: told.append((lb, ub)))
    assert early is not None and early.status in ("feasible", "unknown"), early
    assert 0 < early.lower_bound <= opt * (1 + 1e-9)
    assert told and all(lb <= opt * (1 + 1e-9) for lb, _ in told)
    assert [lb for lb, _ in told] == sorted(lb for lb, _ in told)
    if early.cells is not None:
        assert prob.cost_of(early.cells) >= opt * (1 - 1e-9)


def test_the_linf_cost_goes_to_cp_sat_with_a_notice(breast_cancer):
    model, ens, X = breast_cancer
    x, target = X[400], 1 - int(model.predict(X[400:401])[0])
    assert lpbox.applies(build_problem(ens, x, target, norm="linf")) is not None
    res = optimal_counterfactual(ens, x, target, norm="linf", backend="lpbox", model=model, time_limit=120)
    assert res.status == "optimal" and res.backend != "lpbox"
    assert "sum of costs" in res.params.get("notice", ""), res.params


def test_one_worker_and_two_give_the_same_optimum_and_a_stop_keeps_the_bound(breast_cancer):
    """The workers share one queue: one or two of them prove the same cost; a stop set from
    outside ends both with the incumbent, a proven lower bound, and nothing left running."""
    import threading

    model, ens, X = breast_cancer
    for i in (401, 403):
        x, target = X[i], 1 - int(model.predict(X[i:i + 1])[0])
        prob = build_problem(ens, x, target, norm="l1")
        one = lpbox.solve(prob, time_limit=120, n_workers=1)
        two = lpbox.solve(prob, time_limit=120, n_workers=2)
        assert one.status == two.status == "optimal", (i, one, two)
        assert prob.cost_of(one.cells) == pytest.approx(prob.cost_of(two.cells), rel=1e-6, abs=1e-9), i
    stop = threading.Event()
    stop.set()
    before = threading.active_count()
    early = lpbox.solve(prob, time_limit=120, stop=stop, n_workers=2)
    assert early.status in ("feasible", "unknown"), early
    assert early.lower_bound <= prob.cost_of(two.cells) * (1 + 1e-9)
    assert threading.active_count() == before
