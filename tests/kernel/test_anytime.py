"""An optimal query while it runs (issue 41, item 3): progress, and a stop that keeps what is known.

``on_progress`` hears the best valid point and the proven lower bound as the
solvers improve them (the cost never rises, the bound never falls, each point
valid on the model); ``should_stop`` ends the search with the best point
found, checked on the model, its bound and gap, never claimed optimal. The
case is built here: a random forest on scikit-learn's bundled breast cancer
table, where CP-SAT needs seconds for its proof without a warm start.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import RandomForestClassifier

from core.intake.models import from_model
from core.optimal import optimal_counterfactual
from core.schema import infer_schema


def _case(n_trees: int, depth: int):
    data = load_breast_cancer(as_frame=True)
    rf = RandomForestClassifier(n_trees, max_depth=depth, random_state=0).fit(data.data, data.target)
    X = data.data.to_numpy()
    row = int(np.flatnonzero(rf.predict(data.data) == 0)[0])
    return rf, from_model(rf), infer_schema(data.data), X, X[row]


@pytest.fixture(scope="module")
def small():
    """Proven optimal in a few seconds, after a dozen improvements."""
    return _case(20, 4)


@pytest.fixture(scope="module")
def hard():
    """Its first point comes in about a second, the proof takes ten or more."""
    return _case(40, 4)


def _predicts(rf, x) -> int:
    import pandas as pd
    return int(rf.predict(pd.DataFrame([x], columns=rf.feature_names_in_))[0])


# CP-SAT named: on "auto" this forest is small enough for the box search's probe first (core/solvers/
# race.py), whose bound can already be the best CP-SAT reports before its proof; "auto" is checked below.
def test_progress_never_worsens_and_ends_at_the_proven_optimum(small):
    rf, ens, schema, X, x = small
    told = []
    res = optimal_counterfactual(ens, x, 1, schema=schema, model=rf, warm=False, time_limit=300,
                                 on_progress=told.append, backend="cpsat")
    plain = optimal_counterfactual(ens, x, 1, schema=schema, model=rf, warm=False, time_limit=300)
    assert res.status == "optimal" and plain.status == "optimal", (res.message, plain.message)
    assert res.cost == pytest.approx(plain.cost, rel=1e-9, abs=1e-12)
    assert len(told) >= 3, [(r.cost, r.lower_bound) for r in told]
    costs = [r.cost for r in told]
    bounds = [r.lower_bound for r in told]
    assert all(b <= a for a, b in zip(costs, costs[1:])), costs
    assert all(b >= a for a, b in zip(bounds, bounds[1:])), bounds
    assert len(set(costs)) >= 2 and bounds[-1] > bounds[0]     # both moved while it ran
    for r in told:
        assert r.status == "feasible" and r.found
        assert _predicts(rf, r.x) == 1                        # each point shown is valid on the model
        assert r.lower_bound <= r.cost <= r.lower_bound + r.gap * r.cost + 1e-12
        assert r.cost >= res.cost - 1e-12 and r.lower_bound <= res.cost + 1e-9
    assert res.guarantee.kind == "proven_optimal"


def test_progress_with_the_probe_first_never_worsens_and_ends_at_the_proven_optimum(small):
    """backend "auto": the box search's probe, then CP-SAT; every point told is valid, costs only
    fall, bounds only rise and never pass the optimum both prove."""
    rf, ens, schema, X, x = small
    told = []
    res = optimal_counterfactual(ens, x, 1, schema=schema, model=rf, warm=False, time_limit=300,
                                 on_progress=told.append)
    plain = optimal_counterfactual(ens, x, 1, schema=schema, model=rf, warm=False, time_limit=300, backend="cpsat")
    assert res.status == plain.status == "optimal" and res.cost == pytest.approx(plain.cost, rel=1e-9, abs=1e-12)
    _never_worse(told, res, rf)


def _never_worse(told, res, rf) -> None:
    """What was told while ``res`` ran: something; costs only fall, bounds only rise; every
    point valid on the model, none cheaper than the optimum and no bound past it."""
    assert told, "nothing was told while the query ran"
    costs = [r.cost for r in told]
    bounds = [r.lower_bound for r in told]
    assert all(b <= a for a, b in zip(costs, costs[1:])), costs
    assert all(b >= a for a, b in zip(bounds, bounds[1:])), bounds
    for r in told:
        assert r.status == "feasible" and _predicts(rf, r.x) == 1
        assert r.cost >= res.cost - 1e-12 and r.lower_bound <= res.cost + 1e-9


# L-infinity on CP-SAT with the warm start told first: on the race (auto) the box search can
# prove this optimum before the stop is polled (a quiet machine did), which proves nothing
# about the stop; the race's stop has its own test below.
@pytest.mark.parametrize("norm,backend,warm", [("l1", "cpsat", False),    # the first point is CP-SAT's
                                               ("linf", "cpsat", True)])  # the first is the warm start
def test_stop_after_the_first_point_keeps_it_with_its_gap(hard, norm, backend, warm):
    rf, ens, schema, X, x = hard
    told = []
    t0 = time.perf_counter()
    res = optimal_counterfactual(ens, x, 1, schema=schema, model=rf, warm=warm, X_ref=X, time_limit=300, norm=norm,
                                 backend=backend, on_progress=told.append, should_stop=lambda: bool(told))
    assert told, "no point was reported before the stop"
    assert res.status == "stopped", (res.status, res.message)
    assert res.found and _predicts(rf, res.x) == 1               # fed back to the model
    assert ens.predict(res.x[None, :])[0] == 1
    assert 0.0 <= res.lower_bound <= res.cost
    assert res.cost <= told[0].cost + 1e-12
    assert res.gap == pytest.approx((res.cost - res.lower_bound) / res.cost, abs=1e-9)
    g = res.guarantee
    assert g.kind == "valid_on_model" and not g.proven and g.gap == pytest.approx(res.gap)
    assert "within a gap of" in g.text() and "proven optimal" not in g.text().replace("not proven optimal", "")
    assert "best valid point" in res.message
    assert time.perf_counter() - t0 < 150                       # it stopped, far before its time limit
    again = type(res).from_json(res.to_json())                  # the export carries the same
    assert again.status == "stopped" and again.gap == pytest.approx(res.gap)
    assert again.lower_bound == pytest.approx(res.lower_bound)


def test_stop_with_the_warm_start_on_the_box_search(small):
    rf, ens, schema, X, x = small
    told = []
    res = optimal_counterfactual(ens, x, 1, schema=schema, model=rf, X_ref=X, backend="boxsearch", time_limit=300,
                                 on_progress=told.append, should_stop=lambda: bool(told))
    assert told and told[0].backend == "warm start"
    assert res.status in ("stopped", "optimal"), res.message     # the bound may prove the warm start first
    assert res.found and _predicts(rf, res.x) == 1
    assert res.lower_bound <= res.cost + 1e-12


def test_stop_before_any_point_says_so(small):
    rf, ens, schema, X, x = small
    res = optimal_counterfactual(ens, x, 1, schema=schema, model=rf, warm=False, time_limit=300,
                                 should_stop=lambda: True)
    assert res.status == "stopped" and not res.found and res.x is None
    assert "Stopped before any valid point was found" in res.message
    assert res.guarantee.kind == "not_found"


def test_should_stop_must_be_a_function(small):
    from core.errors import QueryError
    rf, ens, schema, X, x = small
    with pytest.raises(QueryError, match="should_stop is a function"):
        optimal_counterfactual(ens, x, 1, schema=schema, should_stop=True)


def test_stop_ends_the_race_of_cpsat_and_the_box_search():
    """The L-infinity race (CP-SAT beside the box search) hears the stop too: on a forest of
    100 trees of depth 5, where neither proves within a minute, a stop after one second
    ends the query at once with the best point and its bound."""
    rf, ens, schema, X, x = _case(100, 5)
    t0 = time.perf_counter()
    res = optimal_counterfactual(ens, x, 1, schema=schema, model=rf, X_ref=X, norm="linf", time_limit=300,
                                 should_stop=lambda: time.perf_counter() - t0 > 1.0)
    assert res.status == "stopped", (res.status, res.message)
    assert res.found and _predicts(rf, res.x) == 1
    assert 0 < res.lower_bound <= res.cost and res.gap > 0
    assert res.elapsed < 60


@pytest.fixture(scope="module")
def forest100():
    """RandomForestClassifier(100, depth 5): CP-SAT needs minutes for this row, the LP box search (auto) seconds."""
    return _case(100, 5)


def test_the_lp_box_search_tells_its_progress_and_proves(forest100):
    """auto on a sum of costs and a forest of 1,600 leaves: the LP box search. Every point it
    tells is valid, costs only fall, bounds only rise and none passes the optimum it proves."""
    rf, ens, schema, X, x = forest100
    told = []
    res = optimal_counterfactual(ens, x, 1, schema=schema, model=rf, warm=False, time_limit=300,
                                 on_progress=told.append)
    assert res.status == "optimal" and res.backend == "lpbox", (res.status, res.backend, res.message)
    assert res.guarantee.kind == "proven_optimal" and _predicts(rf, res.x) == 1
    _never_worse(told, res, rf)
    assert {r.backend for r in told} == {"lpbox"}


def test_stop_after_the_lp_box_search_first_point_keeps_it_with_its_gap(forest100):
    rf, ens, schema, X, x = forest100
    told = []
    res = optimal_counterfactual(ens, x, 1, schema=schema, model=rf, warm=False, time_limit=300,
                                 on_progress=told.append, should_stop=lambda: bool(told))
    assert told and told[0].backend == "lpbox"
    assert res.status == "stopped", (res.status, res.message)
    assert res.found and _predicts(rf, res.x) == 1
    assert 0 < res.lower_bound <= res.cost and res.gap > 0
    assert res.guarantee.kind == "valid_on_model" and not res.guarantee.proven
    assert res.elapsed < 60


def test_the_reference_rows_start_runs_beside_the_lp_box_search(forest100):
    """With reference rows and two workers, auto starts the LP box search from the model's own
    start and computes the reference rows' beside its first LP: the same proven optimum as one
    worker (which computes it first) and as no reference rows; the progress never worsens."""
    rf, ens, schema, X, x = forest100
    told = []
    res = optimal_counterfactual(ens, x, 1, schema=schema, model=rf, X_ref=X, time_limit=300,
                                 on_progress=told.append)
    assert res.status == "optimal" and res.backend == "lpbox", (res.status, res.backend, res.message)
    assert "reference_start" in res.timings and _predicts(rf, res.x) == 1
    _never_worse(told, res, rf)
    assert told[0].backend == "warm start"
    one = optimal_counterfactual(ens, x, 1, schema=schema, model=rf, X_ref=X, time_limit=300, n_workers=1)
    alone = optimal_counterfactual(ens, x, 1, schema=schema, model=rf, time_limit=300)
    assert one.status == alone.status == "optimal"
    assert "reference_start" not in one.timings and "reference_start" not in alone.timings
    assert res.cost == pytest.approx(one.cost, rel=1e-6) and res.cost == pytest.approx(alone.cost, rel=1e-6)


def test_points_told_from_two_threads_arrive_in_the_order_they_were_kept(small):
    """The LP box search's workers and the reference rows' start tell points from their own
    threads: a point kept first is told first, even when its telling is slow, so the costs
    heard never rise."""
    import threading

    from core.cells import QueryRun
    from core.optimal import build_problem
    from core.optimal.anytime import Anytime

    rf, ens, schema, X, x = small
    prob = build_problem(ens, x, 1, schema=schema)
    point = optimal_counterfactual(ens, x, 1, schema=schema, model=rf).x
    valid = X[prob.is_valid(X)]
    far = valid[int(np.argmax(prob.cost_model.cost(x, valid)))]      # a dearer valid point
    cost_far, cost = (float(prob.cost_of(prob.interval_of(p)[0])) for p in (far, point))
    assert cost_far > cost
    heard = []
    telling = threading.Event()

    def on_progress(res):
        if not telling.is_set():       # the first point's telling (its result is costed again: not cost_far)
            telling.set()
            time.sleep(0.3)            # is slow
        heard.append(res.cost)

    anytime = Anytime(QueryRun(prob, {}, model=rf), on_progress, None)
    first = threading.Thread(target=anytime.point, args=(far, cost_far, "lpbox"))
    first.start()
    assert telling.wait(60)            # the first point is kept and being told (not a guess of how soon)
    anytime.point(point, cost, "warm start")
    first.join()
    assert len(heard) == 2 and heard[0] > heard[1], heard


def test_out_of_time_before_any_solve_still_tries_the_reference_rows(forest100, monkeypatch):
    """A time limit spent before any solver runs, the model's own start finding nothing: the
    reference rows' start (which would have run beside the LP box search) gives the answer."""
    import core.optimal as optimal

    rf, ens, schema, X, x = forest100
    monkeypatch.setattr(optimal, "greedy_start", lambda prob, deadline=None: (None, float("inf")))
    res = optimal_counterfactual(ens, x, 1, schema=schema, model=rf, X_ref=X, time_limit=1e-6)
    assert res.status == "time_limit" and res.found, (res.status, res.message)
    assert _predicts(rf, res.x) == 1 and "reference_start" in res.timings
