"""The box search bounded by linear programs (core.solvers.lpbox).

Checked against CP-SAT on real data (breast cancer, 30 features; wine, 3
classes), with one worker and two, stopped from outside, and the problems
it hands to CP-SAT (the L-infinity cost). Brute force on the tiny models and
further models with a margin, stopped after a few boxes: tests/kernel/test_boxsearch.py,
for both searches."""

from __future__ import annotations

import numpy as np
import pytest
from oracles import scaled_breast_cancer_forest
from sklearn.datasets import load_wine
from sklearn.ensemble import RandomForestClassifier

from core.intake.models import from_model
from core.optimal import build_problem, optimal_counterfactual
from core.solvers import cpsat, lpbox


@pytest.fixture(scope="module")
def breast_cancer():
    """Breast cancer, min-max scaled on the training rows, RandomForestClassifier(30, depth 4)."""
    return scaled_breast_cancer_forest()


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
    for i in (0, 70, 140):               # two targets each, every one reachable
        for target in set(range(3)) - {int(model.predict(X[i:i + 1])[0])}:
            prob = build_problem(ens, X[i], target, norm="l1")
            sol = lpbox.solve(prob, time_limit=60)
            cp = cpsat.solve(prob, time_limit=60)
            assert sol is not None and sol.status == cp.status == "optimal", (i, target, sol, cp.status)
            assert prob.cost_of(sol.cells) == pytest.approx(prob.cost_of(cp.cells), rel=1e-6, abs=1e-9)
            assert model.predict(prob.point_of(sol.cells)[None, :])[0] == target


def test_the_linf_cost_goes_to_cp_sat_with_a_notice(breast_cancer):
    model, ens, X = breast_cancer
    x, target = X[400], 1 - int(model.predict(X[400:401])[0])
    assert lpbox.applies(build_problem(ens, x, target, norm="linf")) is not None
    told = []
    res = optimal_counterfactual(ens, x, target, norm="linf", backend="lpbox", model=model, time_limit=120,
                                 on_progress=told.append)
    assert res.status == "optimal" and res.backend != "lpbox"
    assert "sum of costs" in res.params.get("notice", ""), res.params
    assert told and "lpbox" not in {r.backend for r in told}, {r.backend for r in told}   # CP-SAT's points


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


def test_a_start_given_later_is_computed_once_and_kept_as_the_incumbent(breast_cancer):
    """``later`` (the reference rows' start in a query) runs once, on the second worker or before
    the only one starts, even when the search ends first; its point becomes the incumbent."""
    model, ens, X = breast_cancer
    x, target = X[401], 1 - int(model.predict(X[401:402])[0])
    prob = build_problem(ens, x, target, norm="l1")
    best = lpbox.solve(prob, time_limit=120)
    assert best.status == "optimal"
    for n_workers in (1, 2):
        calls = []

        def later(ended):
            calls.append(ended())
            return prob.point_of(best.cells)

        sol = lpbox.solve(prob, time_limit=120, n_workers=n_workers, node_limit=0, later=later)
        assert len(calls) == 1, (n_workers, calls)
        assert sol.cells is not None and prob.cost_of(sol.cells) == pytest.approx(prob.cost_of(best.cells)), n_workers


def test_a_stopped_reference_start_keeps_a_valid_point(breast_cancer):
    """The reference rows' start told to stop polishes one candidate: valid, never cheaper than in full."""
    from core.cells import warm_start

    model, ens, X = breast_cancer
    x, target = X[402], 1 - int(model.predict(X[402:403])[0])
    prob = build_problem(ens, x, target, norm="l1")
    full_x, full_cost = warm_start(prob, X)
    cut_x, cut_cost = warm_start(prob, X, stop=lambda: True)
    assert full_x is not None and cut_x is not None
    assert model.predict(cut_x[None, :])[0] == target
    assert cut_cost >= full_cost - 1e-12


def test_a_box_whose_lp_passes_the_cutoff_stops_there_and_says_so(breast_cancer):
    """GLOP's dual simplex stops once its objective passes the cutoff: the box's bound is then
    the cutoff itself (no values), below it the LP's optimum, whichever the LP solved before."""
    from core.solvers.boxsearch import BoxSearch

    model, ens, X = breast_cancer
    x, target = X[403], 1 - int(model.predict(X[403:404])[0])
    prob = build_problem(ens, x, target, norm="l1")
    S = BoxSearch(prob)
    full, values, _ = lpbox.LPBox(prob, S).bound(S.root_lo, S.root_hi, deadline=None)
    assert np.isfinite(full) and values is not None
    LP = lpbox.LPBox(prob, S)
    for below, above in ((0.5 * full, 2.0 * full), (0.9 * full, np.inf)):
        got, vals, _ = LP.bound(S.root_lo, S.root_hi, cutoff=below)
        assert got == below and vals is None, (below, got)
        got, vals, _ = LP.bound(S.root_lo, S.root_hi, cutoff=above)
        assert got == pytest.approx(full, rel=1e-9) and vals is not None, (above, got)
