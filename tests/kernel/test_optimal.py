"""Optimal counterfactuals: optimality against brute force, validity on every family, constraints."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest
from conftest import make_data
from oracles import grid_brute_force, returned_cost, tiny_models

from core.intake.demo import synthetic_credit
from core.intake.models import from_model
from core.optimal import Plausibility, build_problem, greedy_start, optimal_counterfactual, radius_bound
from core.schema import infer_schema


@pytest.mark.parametrize("norm", ["l0", "l1", "l2"])
def test_optimal_cost_equals_brute_force(norm):
    X, _, models = tiny_models()
    compared = 0
    for model in models:
        ens = from_model(model)
        for q in range(3):
            x = X[q * 11]
            target = 1 - model.predict(x[None, :])[0]
            fixed = (1,) if q == 2 else ()
            ref = grid_brute_force(ens, x, target, norm, fixed)
            for backend in ("cpsat", "highs"):
                res = optimal_counterfactual(ens, x, target, norm=norm, fixed=fixed, backend=backend,
                                             X_ref=X if backend == "cpsat" else None, model=model)
                if not np.isfinite(ref):
                    assert res.status == "infeasible"
                    continue
                assert res.status == "optimal", (type(model).__name__, res.message)
                assert returned_cost(res, ens, x, norm) == pytest.approx(ref, rel=1e-6, abs=1e-9), (type(model).__name__, backend)
                assert model.predict(res.x[None, :])[0] == target
                assert all(res.x[j] == x[j] for j in fixed)
                compared += 1
    assert compared > 0, "every query was infeasible: nothing was compared"


@pytest.mark.parametrize("fid", ["sk-rf-bin", "sk-rf-multi", "sk-gb-bin", "sk-gb-multi", "xgb-bin", "xgb-multi",
                                 "lgb-bin", "lgb-multi", "sk-et-bin"])
def test_every_counterfactual_is_valid_on_the_original_model(fitted, fid):
    model, X, y, kind = fitted(fid)
    ens = from_model(model)
    rng = np.random.default_rng(0)
    for q in rng.choice(len(X), 4, replace=False):
        x = X[q]
        current = model.predict(x[None, :])[0]
        target = [c for c in model.classes_ if c != current][q % (len(model.classes_) - 1)]
        res = optimal_counterfactual(ens, x, target, X_ref=X, model=model, time_limit=60)   # proven well within it on a quiet machine
        assert res.found and res.status == "optimal", res.message
        assert model.predict(res.x[None, :])[0] == target
        assert res.cost > 0 and len(res.changes) >= 1


@pytest.mark.parametrize("fid", ["xgb-bin", "xgb-multi", "xgb-softmax"])
def test_an_xgboost_classifier_is_checked_by_the_label_its_predict_gives(fitted, fid):
    """The check on an XGBoost classifier reads its label from its own margins, as its predict
    does (no second prediction): on every row and for every class, the check says what its
    predict says; a margin at a tie, another objective (multi:softmax) or margins over other
    trees than its predict reads (an early-stopped model read whole) go to its predict."""
    import xgboost as xgb

    from core.cells.result import XGB_TIE, _xgb_label, check_on_model
    from core.counterfactual import make_target

    model, X, y, _ = fitted(fid)
    ens = from_model(model)
    labels = model.predict(X)
    for label in model.classes_:
        target = make_target(ens, label, None)
        said = [check_on_model(model, ens, x, target) for x in X[:120]]
        assert said == [bool(v == label) for v in labels[:120]], label
    k = len(model.classes_)
    read = _xgb_label(model, ens, np.zeros(1 if k == 2 else k))       # a tie: its predict decides
    assert read is None
    if fid == "xgb-bin":
        assert _xgb_label(model, ens, np.array([2 * XGB_TIE])) == 1
        assert _xgb_label(model, ens, np.array([-2 * XGB_TIE])) == 0
        early = xgb.XGBClassifier(n_estimators=40, max_depth=3, n_jobs=1, early_stopping_rounds=2)
        early.fit(X[:200], y[:200], eval_set=[(X[200:], y[200:])], verbose=False)
        whole = from_model(early.get_booster())                       # every tree, not its predict's
        assert _xgb_label(early, whole, np.array([1.0])) is None
        assert _xgb_label(early, from_model(early), np.array([1.0])) == 1
    if fid == "xgb-softmax":
        assert _xgb_label(model, ens, np.array([0.0, 1.0, 2.0])) is None


@pytest.mark.parametrize("fid", ["sk-rf-bin", "sk-rf-multi", "sk-gb-bin", "xgb-bin", "xgb-multi", "xgb-softmax",
                                 "lgb-bin", "lgb-multi", "sk-rf-reg", "xgb-reg", "lgb-reg"])
def test_rows_checked_on_the_model_together_get_each_ones_verdict(fitted, fid):
    """check_rows (several points, the model asked once: a result checks its point with the first
    points minimal recourse tries) says of each row what check_on_model says of it alone, for every
    target, on rows and on rows moved off them."""
    from core.cells.result import check_on_model, check_rows
    from core.counterfactual import make_target

    model, X, y, kind = fitted(fid)
    ens = from_model(model)
    rng = np.random.default_rng(1)
    rows = np.vstack([X[:25], X[25:50] + rng.normal(scale=0.5, size=(25, X.shape[1]))])
    targets = list(model.classes_) if kind != "regression" else [(float(np.median(y)), np.inf),
                                                                 (-np.inf, float(np.quantile(y, 0.3)))]
    for spec in targets:
        target = make_target(ens, spec, None)
        together = check_rows(model, ens, rows, target)
        alone = [check_on_model(model, ens, r, target) for r in rows]
        assert together == alone, spec
        assert any(alone) and not all(alone), spec                 # both verdicts are met


@pytest.mark.parametrize("fid", ["sk-rf-reg", "xgb-reg", "lgb-reg", "sk-gb-reg"])
def test_regression_interval_target(fitted, fid):
    model, X, y, _ = fitted(fid)
    ens = from_model(model)
    pred = model.predict(X)
    lo, hi = np.quantile(pred, [0.8, 0.9])
    x = X[int(np.argmin(pred))]
    res = optimal_counterfactual(ens, x, (lo, hi), X_ref=X, model=model)
    assert res.status == "optimal"
    assert lo <= model.predict(res.x[None, :])[0] <= hi


@pytest.fixture(scope="module")
def credit():
    import lightgbm as lgb

    df, target = synthetic_credit(1500, seed=1)
    X = df.drop(columns=[target])
    model = lgb.LGBMClassifier(n_estimators=40, num_leaves=8, verbose=-1, n_jobs=1).fit(X, df[target])
    return X, model, from_model(model), infer_schema(X, protected=["sex"])


def test_schema_kinds_ranges_and_one_hot(credit):
    X, model, ens, schema = credit
    Xa = X.to_numpy(float)
    rejected = np.flatnonzero(model.predict(X) == 0)[:8]
    groups = schema.groups()["employment"]
    for q in rejected:
        res = optimal_counterfactual(ens, Xa[q], 1, schema=schema, X_ref=Xa, model=model)
        assert res.found, res.message
        x = res.x
        assert x[groups].sum() == 1 and set(np.unique(x[groups])) <= {0.0, 1.0}
        for j, f in enumerate(schema.features):
            if f.kind in ("integer", "binary", "one-hot"):
                assert x[j] == np.round(x[j])
            assert min(f.lower, Xa[q, j]) - 1e-6 * f.span <= x[j] <= max(f.upper, Xa[q, j]) + 1e-6 * f.span
        assert x[schema.index("sex")] == Xa[q, schema.index("sex")]  # protected -> held fixed


@pytest.mark.parametrize("norm", ["l0", "l1", "l2"])
def test_a_category_switch_costs_one_unit(credit, norm):
    """OCEAN's categorical cost (eq. 29) and oceanpy: switching category is one
    change of one feature, not two column changes."""
    X, model, ens, schema = credit
    Xa = X.to_numpy(float)
    cols = schema.groups()["employment"]
    fixed = [n for j, n in enumerate(schema.names) if j not in cols]
    found = 0
    for q in np.flatnonzero(model.predict(X) == 0)[:40]:
        r = optimal_counterfactual(ens, Xa[q], 1, schema=schema, norm=norm, fixed=fixed, X_ref=Xa, model=model)
        switched = []                           # the brute force: every other category, all else kept
        for c in cols:
            if Xa[q, c] != 1:
                z = Xa[q].copy()
                z[cols], z[c] = 0.0, 1.0
                switched.append(z)
        reaches = model.predict(pd.DataFrame(switched, columns=X.columns)) == 1
        if reaches.any():  # only the category can move: the cost is that of one switch
            found += 1
            assert r.found and r.status == "optimal", r.message
            assert np.count_nonzero(r.x != Xa[q]) == 2 and r.x[cols].sum() == 1
            assert r.cost == pytest.approx(1.0)
            assert model.predict(pd.DataFrame(r.x[None, :], columns=X.columns))[0] == 1
        else:               # no category gives the target: proven so, not merely not found
            assert not r.found and r.status == "infeasible", (q, r.status, r.message)
    assert found >= 2


def test_monotone_features_move_the_right_way(credit):
    X, model, ens, schema = credit
    Xa = X.to_numpy(float)
    found = 0
    for q in np.flatnonzero(model.predict(X) == 0)[:6]:
        free = optimal_counterfactual(ens, Xa[q], 1, schema=schema, X_ref=Xa)
        res = optimal_counterfactual(ens, Xa[q], 1, schema=schema, X_ref=Xa, decrease_only=["income"],
                                     increase_only=["late_payments"])
        assert free.found and res.status in ("optimal", "infeasible"), res.message
        if res.status == "infeasible":          # proven: the monotone directions leave no way
            continue
        assert res.x[1] <= Xa[q, 1] and res.x[4] >= Xa[q, 4]
        assert res.cost >= free.cost - 1e-9
        found += 1
    assert found >= 2, "too few monotone counterfactuals to check the directions"


def test_infeasible_query_says_why(credit):
    X, model, ens, schema = credit
    Xa = X.to_numpy(float)
    q = int(np.flatnonzero(model.predict(X) == 0)[0])
    res = optimal_counterfactual(ens, Xa[q], 1, schema=schema, fixed=list(X.columns))
    assert res.status == "infeasible" and res.x is None and not res.found
    assert "No counterfactual" in res.message and "fixed" in res.message


def test_plausibility_constraint_holds(credit):
    X, model, ens, schema = credit
    Xa = X.to_numpy(float)
    plaus = Plausibility.fit(Xa[model.predict(X) == 1], contamination=0.1, n_estimators=30)
    for q in np.flatnonzero(model.predict(X) == 0)[:3]:
        res = optimal_counterfactual(ens, Xa[q], 1, schema=schema, plausibility=plaus, X_ref=Xa, time_limit=30)
        assert res.found, res.message
        assert plaus.forest.predict_raw(res.x[None, :])[0, 0] >= plaus.delta - 1e-9
        plain = optimal_counterfactual(ens, Xa[q], 1, schema=schema, X_ref=Xa)
        assert res.cost >= plain.cost - 1e-9


def test_diverse_alternatives_follow_the_exclusion_rule(credit):
    X, model, ens, schema = credit
    Xa = X.to_numpy(float)
    q = int(np.flatnonzero(model.predict(X) == 0)[2])
    res = optimal_counterfactual(ens, Xa[q], 1, schema=schema, X_ref=Xa, n_solutions=3)
    sols = [res, *res.alternatives]
    assert len(sols) >= 2
    changed = [{c.feature for c in s.changes} for s in sols]
    for k in range(1, len(sols)):
        for prev in changed[:k]:
            assert not prev <= changed[k]  # keeps at least one earlier changed feature unchanged
        assert sols[k].cost >= sols[0].cost - 1e-9
        assert model.predict(sols[k].x[None, :])[0] == 1


def _timed(fn):
    """``(fn(), the process's CPU seconds in it, its wall seconds)``."""
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c0, time.perf_counter() - t0


def test_time_limit_is_honoured():
    """The search stops at the limit (2 s here; the query's default is 30 s). Its two solver
    threads (``n_workers``) search at most that long, so the process's CPU time is bounded by
    them and by the work around the search (the problem, the starts, the checks on the model),
    measured now on this machine as the same query with a limit too short for any search. CPU
    time, not wall time, is what a machine busy with other work does not stretch; the wall time
    is checked too, against 6 s as ever or, on a machine slow at the work around the search,
    against that work's own time."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import RandomForestClassifier

    X, y = load_breast_cancer(return_X_y=True)
    model = RandomForestClassifier(100, max_depth=6, random_state=0).fit(X, y)
    ens = from_model(model)
    target = 1 - model.predict(X[:1])[0]
    limit, threads = 2.0, 2
    _, around_cpu, around_wall = _timed(lambda: optimal_counterfactual(ens, X[0], target, X_ref=X, time_limit=0.01))
    res, cpu, wall = _timed(lambda: optimal_counterfactual(ens, X[0], target, X_ref=X, time_limit=limit,
                                                           n_workers=threads))
    assert cpu < threads * limit + 2 * around_cpu + 2.0, (cpu, around_cpu)
    assert wall < max(6.0, limit + 4 * around_wall + 1.0), (wall, around_wall)
    assert res.status in ("optimal", "time_limit")
    assert res.found, res.message              # the starts give a valid point well within 2 s
    assert model.predict(res.x[None, :])[0] != model.predict(X[:1])[0]
    assert 0 <= res.gap and res.lower_bound <= res.cost * (1 + 1e-9) + 1e-12


def test_radius_bound_is_a_lower_bound(fitted):
    model, X, *_ = fitted("sk-rf-multi")
    ens = from_model(model)
    for q in range(6):
        target = (model.predict(X[q:q + 1])[0] + 1) % 3
        prob = build_problem(ens, X[q], target)
        res = optimal_counterfactual(ens, X[q], target, X_ref=X)
        assert radius_bound(prob) <= res.cost * (1 + 1e-9) + 1e-12


@pytest.mark.parametrize("fid", ["sk-rf-multi", "xgb-bin", "lgb-multi", "sk-rf-reg"])
def test_the_model_alone_gives_a_valid_start_and_the_same_optimum(fitted, fid):
    """Without reference rows the greedy start from the model is a valid point
    no cheaper than the optimum, and the optimum is the same as with them."""
    model, X, *_ = fitted(fid)
    ens = from_model(model)
    checked = 0
    for q in range(5):
        if ens.task == "regression":
            v = float(ens.predict(X[q:q + 1])[0])
            target = (v + 1.0, np.inf)
        else:
            target = ens.classes[(list(ens.classes).index(ens.predict(X[q:q + 1])[0]) + 1) % ens.n_classes]
        prob = build_problem(ens, X[q], target)
        x0, c0 = greedy_start(prob)
        with_ref = optimal_counterfactual(ens, X[q], target, X_ref=X, model=model, time_limit=20)
        alone = optimal_counterfactual(ens, X[q], target, model=model, time_limit=20)
        assert with_ref.status == alone.status == "optimal", (with_ref.message, alone.message)
        assert alone.cost == pytest.approx(with_ref.cost, rel=1e-9, abs=1e-12)
        assert x0 is not None, "the greedy start found no valid point"
        assert prob.is_valid(x0[None, :])[0]
        assert c0 == pytest.approx(prob.cost_of(prob.interval_of(x0[None, :])[0]), rel=1e-12)
        assert c0 >= alone.lower_bound * (1 - 1e-9) - 1e-12      # (a cell's infimum: the proven optimum's)
        checked += 1
    assert checked == 5


def test_a_row_at_its_target_already_is_proven_with_no_change():
    """A training row the forest already puts in the target class (breast cancer row 40: label 0,
    predicted 1): with or without reference rows, the answer is the row itself, proven optimal at
    cost 0. The model's own start once took a move of zero cost to another cell, which the check
    after the solve then undid, and the answer read "proof did not hold"."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import RandomForestClassifier

    data = load_breast_cancer()
    X, y = data.data.astype(float), data.target
    model = RandomForestClassifier(100, max_depth=5, random_state=0).fit(X, y)
    assert model.predict(X[40:41])[0] == 1 and y[40] == 0
    ens = from_model(model)
    prob = build_problem(ens, X[40], 1, norm="l2")
    x0, c0 = greedy_start(prob)
    assert c0 == 0.0 and np.array_equal(x0, X[40])
    for X_ref in (None, X):
        for backend in ("auto", "cpsat"):
            res = optimal_counterfactual(ens, X[40], 1, norm="l2", backend=backend, model=model, X_ref=X_ref,
                                         time_limit=60)
            assert res.status == "optimal" and res.cost == 0.0, (backend, X_ref is None, res.status, res.message)
            assert np.array_equal(res.x, X[40])


def _gurobi_here() -> str:
    """What Gurobi can do on this machine, found by trying it (not by the library's own
    licence check): "absent" (no gurobipy), "size-limited" (the pip wheel's licence: at
    most 2000 variables and 2000 constraints), "full", or "unusable" (any other
    licence error)."""
    try:
        import gurobipy as gp
    except ImportError:
        return "absent"
    try:
        with gp.Env(params={"OutputFlag": 0}) as env, gp.Model(env=env) as m:
            m.addMVar(2001)
            m.optimize()
    except gp.GurobiError as exc:
        return "size-limited" if "size-limited" in str(exc) else "unusable"
    return "full"


@pytest.mark.parametrize("trees, depth, size", [(10, 3, "small"), (120, 8, "large")])
def test_gurobi_is_used_where_it_can_solve_the_model_else_falls_back_with_a_notice(trees, depth, size):
    """backend="gurobi": Gurobi solves the model when it can here (installed, and the
    model within its licence), else CP-SAT does, with a notice saying why; the cost is
    CP-SAT's own optimum either way. Both models are tried on every machine: the small
    one fits the pip wheel's size-limited licence, the large one does not."""
    from sklearn.ensemble import RandomForestClassifier

    from core.solvers.ocean import build_ocean

    X, y = make_data("binary", n=400, d=5, seed=3)
    model = RandomForestClassifier(trees, max_depth=depth, random_state=0).fit(X, y)
    ens = from_model(model)
    target = 1 - model.predict(X[:1])[0]
    milp = build_ocean(build_problem(ens, X[0], target))
    fits_pip_licence = milp.n_vars <= 2000 and milp.A.shape[0] <= 2000
    assert fits_pip_licence == (size == "small"), (milp.n_vars, milp.A.shape)
    here = _gurobi_here()
    usable = here == "full" or (here == "size-limited" and fits_pip_licence)
    res = optimal_counterfactual(model, X[0], target, backend="gurobi", X_ref=X)
    ref = optimal_counterfactual(model, X[0], target, backend="cpsat", X_ref=X)
    assert res.status == ref.status == "optimal", (res.message, ref.message)
    assert res.cost == pytest.approx(ref.cost, rel=1e-9)
    assert model.predict(res.x[None, :])[0] == target
    if usable:
        assert res.backend == "gurobi", (here, res.backend, res.params.get("notice"))
        assert "notice" not in res.params, res.params["notice"]
    else:
        assert res.backend == "cpsat", (here, res.backend)
        notice = res.params["notice"]
        assert notice.endswith("Solved with CP-SAT instead."), notice
        why = {"absent": "gurobipy is not installed", "size-limited": "Model too large for size-limited license",
               "unusable": "Gurobi could not solve this model"}[here]
        assert why in notice, (here, notice)


def test_bad_queries_raise_clear_errors(fitted):
    from core.counterfactual import QueryError

    model, X, *_ = fitted("sk-rf-bin")
    with pytest.raises(QueryError, match="classes"):
        optimal_counterfactual(model, X[0], 7)
    with pytest.raises(QueryError, match="norm"):
        optimal_counterfactual(model, X[0], 1, norm="l3")
    with pytest.raises(QueryError, match="features"):
        optimal_counterfactual(model, X[0, :2], 1)
    with pytest.raises(ValueError, match="Unknown feature"):
        optimal_counterfactual(model, X[0], 1, fixed=["nope"])


def test_batch_is_deterministic_across_processes(fitted):
    from core.optimal.batch import batch_counterfactuals

    model, X, *_ = fitted("sk-rf-bin")
    ens = from_model(model)
    rows = X[:6]
    targets = 1 - model.predict(rows)
    seen = []
    a = batch_counterfactuals(ens, rows, targets, n_jobs=1, X_ref=X, progress=lambda d, t: seen.append(d))
    b = batch_counterfactuals(ens, rows, targets, n_jobs=2, X_ref=X)
    assert seen == list(range(1, 7))
    for ra, rb in zip(a, b):
        assert ra.status == rb.status == "optimal"
        assert ra.cost == pytest.approx(rb.cost, rel=1e-9)


def test_the_result_reports_the_backend_asked_and_names_the_one_that_answered():
    """``params`` are the query's settings as asked: "auto" (the default) stays "auto", so the
    same settings ask the same query again; the result's ``backend`` names the solver that
    answered (before, an "auto" query's params said "cpsat" while the LP box search answered,
    and asking again with them ran CP-SAT alone)."""
    from sklearn.ensemble import RandomForestClassifier

    X, y = make_data("binary", n=300, d=4, seed=5)
    ens = from_model(RandomForestClassifier(n_estimators=8, max_depth=4, random_state=0).fit(X, y))
    x = X[np.flatnonzero(ens.predict(X) == 0)[0]]
    for asked in (None, "auto", "cpsat", "boxsearch"):
        res = optimal_counterfactual(ens, x, 1, **({} if asked is None else {"backend": asked}))
        assert res.status == "optimal" and res.params["backend"] == (asked or "auto"), (asked, res.params)
        again = optimal_counterfactual(ens, x, 1, backend=res.params["backend"])
        assert again.params == res.params and np.isclose(again.cost, res.cost)
    assert optimal_counterfactual(ens, x, 1, backend="cpsat").backend == "cpsat"


def test_fewer_solutions_than_asked_say_why(credit):
    """With one feature free, the second solution would have to leave the first's only change
    alone: none exists, and the result says so beside the one found (not a silent short list)."""
    X, model, ens, schema = credit
    Xa = X.to_numpy(float)
    j = list(X.columns).index("income")
    fixed = [c for c in X.columns if c != "income"]
    for q in np.flatnonzero(model.predict(X) == 0)[:20]:
        res = optimal_counterfactual(ens, Xa[q], 1, fixed=fixed, n_solutions=3, time_limit=20)
        if res.found:
            break
    assert res.found and res.alternatives == ()
    assert [c.feature for c in res.changes] == ["income"] and res.x[j] != Xa[q, j]
    assert res.params["notice"] == ("1 of the 3 solutions asked: no other counterfactual leaves unchanged one "
                                    "feature of every earlier solution's changes.")
    assert model.predict(Xa[q][None, :])[0] == 0       # the only point keeping income is the row: refused
    all_found = optimal_counterfactual(ens, Xa[q], 1, n_solutions=2, time_limit=20)
    assert len(all_found.alternatives) == 1 and not all_found.params.get("notice")


def test_a_results_timings_are_seconds_only(credit):
    """``timings`` holds the stages' seconds; the radius lower bound (a cost) is the result's
    ``lower_bound``, not one of them (a JSON export showed it among the seconds)."""
    X, model, ens, schema = credit
    Xa = X.to_numpy(float)
    for q in np.flatnonzero(model.predict(X) == 0)[:5]:
        res = optimal_counterfactual(ens, Xa[q], 1, schema=schema, X_ref=Xa, time_limit=20)
        assert res.status == "optimal" and "lower_bound" not in res.timings and "bound" in res.timings
        assert all(0.0 <= v <= res.elapsed + 1e-6 for v in res.timings.values()), res.timings
        assert 0.0 < res.lower_bound <= res.cost


def test_the_reason_for_fewer_solutions_is_how_the_search_ended():
    """The notice names what ended the search for the next solution, in the order it happened
    (a trial saw "changes nothing to leave alone" after a solution with two changes, when the
    time had run out, and "the time limit" when a solver stopped early with time left)."""
    from types import SimpleNamespace

    from core.optimal import _fewer

    one = SimpleNamespace(found=True, alternatives=(object(),))           # two solutions back
    assert _fewer(one, 2, "time") == ""
    assert _fewer(SimpleNamespace(found=False, alternatives=()), 3, "infeasible") == ""
    said = {e: _fewer(one, 4, e) for e in ("stopped", "nothing", "time", "infeasible", "time_limit")}
    assert all(t.startswith("2 of the 4 solutions asked: ") for t in said.values())
    assert said["time"].endswith("the query's time limit was reached.")
    assert said["time_limit"].endswith("the search for the next one ended without one (status time_limit).")
    assert "time limit" not in said["infeasible"] and "time limit" not in said["nothing"]


def test_each_further_solution_gets_the_time_the_query_has_left(credit, monkeypatch):
    """The n-th solution's solver gets what is left of the query's time limit. Its deadline was
    counted from the query's start with only the time left, so each solution lost the time the
    earlier ones took twice: a trial's fourth solution stopped at once, 14.6 s of 30 left."""
    import core.optimal as co

    X, model, ens, schema = credit
    Xa = X.to_numpy(float)
    q = int(np.flatnonzero(model.predict(X) == 0)[2])
    given = []
    solve_once, exclude = co._solve_once, co._exclude_changes

    def timed_solve(prob, backend, left, *args, **kwargs):
        given.append((time.perf_counter(), left))
        return solve_once(prob, backend, left, *args, **kwargs)

    def slow_exclude(prob, res):                       # the first solutions as if each took 3 s
        time.sleep(3.0)
        return exclude(prob, res)

    monkeypatch.setattr(co, "_solve_once", timed_solve)
    monkeypatch.setattr(co, "_exclude_changes", slow_exclude)
    t0 = time.perf_counter()
    res = optimal_counterfactual(ens, Xa[q], 1, schema=schema, n_solutions=3, time_limit=20, backend="cpsat")
    assert res.found and len(res.alternatives) == 2, res.params.get("notice")
    for at, left in given:
        assert left >= 20 - (at - t0) - 0.5, (at - t0, left)        # what the query has left, not less
