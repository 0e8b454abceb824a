"""Constraints between features in the global analyses (issue #61 items 1 and 5): the batch of
optimal counterfactuals, T-CREx, the counterfactual rules and FCCA take ``constraints=`` and
honour them.

Every counterfactual and every prescription is fed back to the model and checked against
every constraint (:meth:`core.constraints.Constraints.violated`); whether a rule can be
reached is checked against an oracle written here (each branch of the implications a linear
program of its own, HiGHS through scipy's ``milp``), and so is the least move into it.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pandas as pd
import pytest
from oracles import tiny_models
from scipy.optimize import Bounds, LinearConstraint, milp
from sklearn.ensemble import RandomForestClassifier

from core.compression import FCCAResult, fcca
from core.constraints import parse
from core.errors import QueryError
from core.figures import change_keep_counts
from core.intake.models import from_model
from core.optimal import optimal_counterfactual, verify_recourse
from core.optimal.batch import BatchResult, batch_counterfactuals
from core.rules import CounterfactualRules, LocalRule, RegionalRule
from core.rules.onmodel import on_model
from core.rules.reach import Reach
from core.schema import infer_schema
from core.tcrex import TCREx, TCRExResult

NAMES = ["a", "b", "c"]
STEP = 1e-6                         # an open end stepped into, a share of the span (core.cells.problem.NUDGE)


# ----------------------------------------------------------------------------- the oracle
def _broken(form, x):
    """The ways a comparison breaks, each as (a, lo, hi) over the new values."""
    a, rhs, sense = form.on_row(x)
    return {"<=": [(a, rhs + 1e-7, np.inf)], "<": [(a, rhs, np.inf)], ">=": [(a, -np.inf, rhs - 1e-7)],
            ">": [(a, -np.inf, rhs)], "==": [(a, rhs + 1e-7, np.inf), (a, -np.inf, rhs - 1e-7)]}[sense]


def _held(form, x):
    a, rhs, sense = form.on_row(x)
    return (a, *{"<=": (-np.inf, rhs), "<": (-np.inf, rhs - 1e-7), ">=": (rhs, np.inf), ">": (rhs + 1e-7, np.inf),
                 "==": (rhs, rhs)}[sense])


def oracle(x, lower, upper, cons, schema, keep=()):
    """The least ``sum |z - x| / span`` over the points z of the box (open ends stepped), the
    schema's range widened to x, ``keep`` held at x, that keep every constraint: each
    combination of the implications' branches (the conclusions, or one premise broken) one
    program; inf when none has a point."""
    arr = schema.arrays()
    span = arr["span"]
    integral = np.array([f.integral for f in schema.features])
    lb = np.minimum(arr["lower"], x)
    ub = np.maximum(arr["upper"], x)
    opened = np.where(integral, np.floor(lower) + 1.0, lower + STEP * span)
    lb = np.where(np.isfinite(lower), np.maximum(lb, opened), lb)
    ub = np.minimum(ub, upper)
    for j in keep:
        lb[j], ub[j] = max(lb[j], x[j]), min(ub[j], x[j])
    if np.any(lb > ub + 1e-12):
        return np.inf
    d = len(x)
    fixed = [_held(f, x) for f in cons.linear()]
    branches = [[[_held(q, x) for q in imp.conclusions]] + [[w] for p in imp.premises for w in _broken(p, x)]
                for imp in cons.implications()]
    best = np.inf
    for pick in itertools.product(*branches) if branches else [()]:
        rows = fixed + [r for part in pick for r in part]
        # z, p, n with z - p + n = x
        A = [np.concatenate([a, np.zeros(2 * d)]) for a, _, _ in rows] + \
            [np.concatenate([np.eye(d)[j], -np.eye(d)[j], np.eye(d)[j]]) for j in range(d)]
        lo = [r[1] for r in rows] + list(x)
        hi = [r[2] for r in rows] + list(x)
        res = milp(np.concatenate([np.zeros(d), 1 / span, 1 / span]),
                   integrality=np.concatenate([integral.astype(int), np.zeros(2 * d, dtype=int)]),
                   bounds=Bounds(np.concatenate([lb, np.zeros(2 * d)]), np.concatenate([ub, np.full(2 * d, np.inf)])),
                   constraints=[LinearConstraint(np.array(A), lo, hi)])
        if res.status == 0:
            best = min(best, float(res.fun))
    return best


def _cost(x, z, schema):
    return float(np.sum(np.abs(z - x) / schema.arrays()["span"]))


# ----------------------------------------------------------------------------- the data
@pytest.fixture(scope="module")
def tiny():
    """The tiny forests of tests/oracles.py (b holds integers)."""
    X, y, models = tiny_models()
    schema = infer_schema(pd.DataFrame(X, columns=NAMES), kinds={"b": "integer"})
    return X, y, schema, [(m, from_model(m, feature_names=NAMES)) for m in models[:2]]


@pytest.fixture(scope="module")
def two_ways():
    """The target for a > 0.6 or c > 0.7 (b integers 0-9), a forest of one exact tree, so a
    rule's edge is where the model's own boundary lies."""
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.uniform(size=400).round(3), rng.integers(0, 10, 400), rng.uniform(size=400).round(3)])
    y = ((X[:, 0] > 0.6) | (X[:, 2] > 0.7)).astype(int)
    df = pd.DataFrame(X, columns=NAMES)
    rf = RandomForestClassifier(1, bootstrap=False, max_depth=3, random_state=0).fit(df, y)
    ens = from_model(rf, feature_names=NAMES)
    schema = infer_schema(df, kinds={"b": "integer"})
    return X, ens.predict(X), rf, ens, schema


def test_the_reach_of_a_box_and_its_least_move_are_the_oracles(tiny):
    """Random boxes on the tiny data, under comparisons of one and of several features and an
    implication: a row reaches a box exactly when the oracle finds a point, and its move is
    the oracle's least one, in the box, keeping every constraint."""
    X, _, schema, _ = tiny
    texts = ["delta(a) >= delta(c)", "b <= old(b) + 2", "if delta(c) > 0 then delta(b) >= 1", "a + c <= 3"]
    cons = parse(texts, schema)
    reach = Reach.of(cons, schema)
    rng = np.random.default_rng(1)
    lo_q, hi_q = np.quantile(X, [0.1, 0.9], axis=0)
    seen = {True: 0, False: 0}
    for _ in range(12):
        lower = np.where(rng.random(3) < 0.5, rng.uniform(lo_q, hi_q), -np.inf)
        upper = np.where(rng.random(3) < 0.3, np.maximum(lower, rng.uniform(lo_q, hi_q)) + 0.5, np.inf)
        rows = X[rng.choice(len(X), 6, replace=False)]
        ok, Z = reach.moves(rows, lower, upper)
        for x, got, z in zip(rows, ok, Z):
            want = oracle(x, lower, upper, cons, schema)
            assert got == np.isfinite(want), (x, lower, upper, want)
            seen[bool(got)] += 1
            if got:
                assert cons.violated(x, z) == [] and np.all((z > lower) & (z <= upper)), (x, z)
                assert _cost(x, z, schema) == pytest.approx(want, abs=1e-6), (x, z, want)
    assert seen[True] >= 10 and seen[False] >= 10, seen


def test_a_batch_answers_each_row_by_its_optimum_under_the_constraints(tiny):
    """Each row's answer is the optimal counterfactual under the constraints (precluded rows
    infeasible, proven), fed back to the model; the constraints change some answers; the
    batch names them and counts the precluded rows, and its JSON keeps them."""
    X, _, schema, models = tiny
    texts = ["delta(c) >= -0.5", "a <= old(a) + 0.5", "if delta(b) > 0 then delta(a) >= 0.2"]
    cons = parse(texts, schema)
    model, ens = models[0]
    rows = np.flatnonzero(ens.predict(X) == 0)[:8]
    got = batch_counterfactuals(ens, X[rows], 1, schema=schema, constraints=texts, n_jobs=1, model=model)
    free = batch_counterfactuals(ens, X[rows], 1, schema=schema, n_jobs=1)
    by_schema = batch_counterfactuals(ens, X[rows], 1, schema=schema.with_constraints(texts), n_jobs=1)
    moved = 0
    for r, res, f, s in zip(rows, got, free, by_schema):
        one = optimal_counterfactual(ens, X[r], 1, schema=schema, constraints=texts)
        assert res.status == one.status == s.status, (r, res.status, one.status)
        if res.status == "infeasible":
            assert verify_recourse(ens, X[r], 1, schema=schema, constraints=texts).precluded
            moved += 1
            continue
        assert res.status == "optimal" and res.cost == pytest.approx(one.cost, rel=1e-9, abs=1e-9)
        assert s.cost == pytest.approx(res.cost, rel=1e-9, abs=1e-9)
        assert model.predict(res.x[None, :])[0] == 1 and cons.violated(X[r], res.x) == [], r
        moved += int(res.cost > f.cost + 1e-9)
    assert moved >= 1                                  # the constraints change some answer
    precluded = sum(r.status == "infeasible" for r in got)
    assert got.params["constraints"] == texts and got.params["precluded"] == precluded
    assert "constraints" not in free.params
    back = BatchResult.from_json(got.to_json())
    assert back.params["constraints"] == texts and back.params["precluded"] == precluded
    assert [r.status for r in back] == [r.status for r in got]


def test_a_batch_through_a_surrogate_keeps_the_constraints_when_it_repairs_on_the_model():
    """Any other model (an MLP known by its answers): each row's surrogate query and its check
    and repair on the model keep the constraints (the repair once ignored them)."""
    from sklearn.neural_network import MLPClassifier

    from core.model.blackbox import BlackBoxModel
    from core.surrogate import distill

    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (600, 3))
    y = ((X[:, 0] + X[:, 1] ** 2 + 0.5 * np.sin(6 * X[:, 2])) > 1.1).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                 # an MLP that has not quite converged is a model too
        mlp = MLPClassifier((16,), max_iter=800, random_state=0).fit(X, y)
    bb = BlackBoxModel(tuple(NAMES), "classification", np.array([0, 1]),
                       lambda Z, categories: {"label": mlp.predict(Z), "proba": mlp.predict_proba(Z)})
    sur = distill(bb, X, n_estimators=4, num_leaves=4, n_pairs=100, random_state=1)   # a rough one: repairs
    schema = infer_schema(pd.DataFrame(X, columns=NAMES))
    texts = ["delta(b) <= 0.5 * delta(a)", "delta(c) >= 0"]
    cons = parse(texts, schema)
    rows = np.flatnonzero(mlp.predict(X) == 0)[:12]
    got = batch_counterfactuals(sur.ensemble, X[rows], 1, schema=schema, surrogate=sur, model=bb, constraints=texts,
                                n_jobs=1, time_limit=5)
    found = [(r, res) for r, res in zip(rows, got) if res.found]
    assert len(found) >= 3
    for r, res in found:
        assert cons.violated(X[r], res.x) == [], (r, res.x)
        assert mlp.predict(res.x[None, :])[0] == 1 and res.guarantee.kind == "valid_on_model"
    assert got.params["constraints"] == texts


def _prescribed(tc, X, cons, schema):
    """T-CREx's prescription by definition: the metarule's rule when the oracle reaches it,
    else the cheapest rule (changes - feasibility, ties to the first) it reaches, else -1."""
    given = tc.metarule_tree_["rule"][tc.apply(X)]
    cost = np.column_stack([tc.changes(X, np.full(len(X), k)) - r.feasibility for k, r in enumerate(tc.rules_)])
    out = []
    for x, g, c in zip(X, given, cost):
        reach = [np.isfinite(oracle(x, r.lower, r.upper, cons, schema)) for r in tc.rules_]
        if g >= 0 and reach[g]:
            out.append(int(g))
            continue
        ok = [k for k in np.argsort(c, kind="stable") if reach[k]]
        out.append(int(ok[0]) if ok else -1)
    return np.array(out)


@pytest.mark.parametrize("texts", [["delta(a) <= 0"], ["delta(a) <= 0", "delta(c) <= 0.3 * delta(b)"]])
def test_tcrex_prescribes_only_rules_a_row_can_reach(two_ways, texts):
    """With a never rising, the rule "a > 0.6" is out of reach of every row below it: it is
    dropped for them and they are prescribed the rule on c (with c tied to b, only the rows
    that can raise b enough reach it). Each prescription is the definition's, its move lies in
    the rule, keeps every constraint and is accepted by the model itself."""
    X, pred, rf, ens, schema = two_ways
    cons = parse(texts, schema)
    free = TCREx(rho=0.05, tau=0.9, random_state=0).fit(X, pred, 1, feature_names=NAMES, model=on_model(ens),
                                                        schema=schema)
    tc = TCREx(rho=0.05, tau=0.9, random_state=0).fit(X, pred, 1, feature_names=NAMES, model=on_model(ens),
                                                      schema=schema, constraints=texts)
    a_rule = next(k for k, r in enumerate(tc.rules_) if np.isfinite(r.lower[0]) and not np.isfinite(r.lower[2]))
    lacking = pred == 0
    assert tc.result_.params["constraints"] == texts
    assert tc.result_.params["unreachable_rules"] == [f"R{a_rule}"]
    assert tc.rules_[a_rule].unreachable_rows == int(np.sum(free.explain(X[lacking]) == a_rule)) > 0
    rows = np.r_[np.flatnonzero(lacking)[:40], np.flatnonzero(~lacking)[:10]]
    got = tc.explain(X[rows])
    np.testing.assert_array_equal(got, _prescribed(tc, X[rows], cons, schema))
    assert not np.any(got[lacking[rows]] == a_rule) and np.any(got != free.explain(X[rows]))
    moves = tc.moves(X[rows])
    for x, k, z in zip(X[rows], got, moves):
        if k < 0:
            continue
        r = tc.rules_[k]
        assert np.all((z > r.lower) & (z <= r.upper)) and cons.violated(x, z) == [], (x, z)
    assert np.all(rf.predict(pd.DataFrame(moves[got >= 0], columns=NAMES)) == 1)   # the model agrees
    checked = [r for r in tc.rules_ if r.edge_rows]
    assert checked and all(r.edge_accepted == 1.0 for r in checked)
    reach = tc.reachable(X[rows])
    assert np.array_equal(np.isinf(tc.cost_matrix(X[rows])), ~reach) and not reach[lacking[rows], a_rule].any()
    assert "cannot be reached under the constraints" in tc.recourse_text(X[np.flatnonzero(lacking)[0]])
    counts = change_keep_counts(tc, X[rows]).set_index("feature")                # a row with no rule asks nothing
    for j, name in enumerate(NAMES):
        bounding = sum(k >= 0 and np.isfinite([tc.rules_[k].lower[j], tc.rules_[k].upper[j]]).any() for k in got)
        assert counts["change"].get(name, 0) + counts["keep"].get(name, 0) == bounding, name
    assert "Constraints between features in force" in tc.to_text() and "R" + str(a_rule) in tc.result_.guarantee.note


def test_tcrex_json_keeps_the_constraints_and_their_prescriptions(two_ways):
    X, pred, _, ens, schema = two_ways
    texts = ["delta(a) <= 0", "delta(c) <= 0.3 * delta(b)"]
    tc = TCREx(rho=0.05, tau=0.9, random_state=0).fit(X, pred, 1, feature_names=NAMES, model=on_model(ens),
                                                      schema=schema.with_constraints(texts))     # the schema's own
    assert tc.result_.params["constraints"] == texts
    back = TCREx.from_result(TCRExResult.from_json(tc.result_.to_json()))
    assert back.result_.params["constraints"] == texts and back.result_.schema.constraints == tuple(texts)
    np.testing.assert_array_equal(back.explain(X), tc.explain(X))
    np.testing.assert_allclose(back.moves(X), tc.moves(X))
    assert [r.unreachable_rows for r in back.rules_] == [r.unreachable_rows for r in tc.rules_]
    assert tc.to_dict()["params"]["constraints"] == texts
    free = TCREx(rho=0.05, tau=0.9, random_state=0).fit(X, pred, 1, feature_names=NAMES, schema=schema)
    again = TCREx.from_result(TCRExResult.from_json(free.result_.to_json()))
    np.testing.assert_array_equal(again.moves(X), free.moves(X))             # b stepped as an integer again
    with pytest.raises(QueryError, match="schema"):
        TCREx(rho=0.05, tau=0.9).fit(X, pred, 1, feature_names=NAMES, constraints=texts)


@pytest.fixture(scope="module")
def rules(two_ways):
    X, pred, rf, ens, schema = two_ways
    cr = CounterfactualRules(n_estimators=8, max_depth=5, random_state=0).fit(X, pred, feature_names=NAMES,
                                                                            schema=schema, model=on_model(ens))
    return X, pred, rf, schema, cr


def test_a_local_rule_is_made_of_regions_the_row_can_reach(rules):
    """Without a constraint the row is sent up on a; with a never rising, those regions are
    dropped and the rule raises c: the rule and each alternative are reachable by the oracle
    (the other features kept), and its samples and its checked edge keep the constraints and
    reach the target on the model."""
    X, pred, rf, schema, cr = rules
    texts = ["delta(a) <= 0"]
    cons = parse(texts, schema)
    x = X[np.flatnonzero((pred == 0) & (X[:, 0] > 0.3) & (X[:, 2] < 0.5))[0]]
    free = cr.local_rule(x, 1)
    rule = cr.local_rule(x, 1, constraints=texts)
    assert free.lower[0] >= x[0] and rule.unreachable_cells > 0       # the free rule raises a
    assert not rule.lower[0] >= x[0] and 2 in rule.constrained          # this one does not: it is on c
    assert rule.params["constraints"] == texts and "constraints" not in free.params
    keep = [j for j in range(3) if j not in rule.features]
    for box in (rule, *rule.alternatives):
        assert np.isfinite(oracle(x, box.lower, box.upper, cons, schema, keep)), (box.lower, box.upper)
    samples = cr.sample_counterfactuals(x, rule, n=3, constraints=texts)
    assert len(samples) and all(cons.violated(x, z) == [] and rule.contains(z[None, :])[0] for z in samples)
    assert np.all(rf.predict(pd.DataFrame(samples, columns=NAMES)) == 1)
    assert rule.edge_rows == 1 and rule.edge_accepted == 1.0 and rule.model_crp == 1.0
    back = LocalRule.from_json(rule.to_json())
    assert back.unreachable_cells == rule.unreachable_cells and back.params["constraints"] == texts
    stuck = cr.local_rule(x, 1, constraints=["delta(a) <= 0", "delta(c) <= 0"])     # neither way up is left
    assert stuck.below_pi_c and "keeping the constraints between features" in stuck.note
    assert np.isfinite(oracle(x, stuck.lower, stuck.upper, parse(["delta(a) <= 0", "delta(c) <= 0"], schema),
                              schema, [j for j in range(3) if j not in stuck.features]))


def test_regional_rules_drop_the_rules_a_region_cannot_reach(rules):
    """The rows lacking the target are sent up on a; with a never rising that rule is dropped
    and the one kept is reached by exactly the rows the oracle says, each moved by its least
    move that keeps the constraint and accepted by the model; with c held too, nothing is left."""
    X, pred, rf, schema, cr = rules
    region = (np.array([-np.inf, -np.inf, -np.inf]), np.array([0.6, np.inf, 0.7]))     # rows lacking the target
    free = cr.regional_rules([region], 1)[0]
    assert free.found and free.lower[0] > -np.inf and not free.unreachable     # a raised
    got = cr.regional_rules([region], 1, constraints=["delta(a) <= 0"])[0]
    assert got.found and got.unreachable and got.reachable_rows > 0            # that one dropped: another kept
    assert got.params["constraints"] == ["delta(a) <= 0"]
    cons = parse(["delta(a) <= 0"], schema)
    inside = np.all((X > region[0]) & (X <= region[1]), axis=1) & (pred == 0)
    keep = [j for j in range(3) if j not in got.features]
    reach = [np.isfinite(oracle(x, got.lower, got.upper, cons, schema, keep)) for x in X[inside]]
    assert got.reachable_rows == sum(reach) and got.edge_rows == sum(reach) and got.edge_accepted == 1.0
    blocked = cr.regional_rules([region], 1, constraints=["delta(a) <= 0", "delta(c) <= 0"])[0]
    assert not blocked.found and blocked.unreachable and "constraints between features" in blocked.note
    back = RegionalRule.from_json(blocked.to_json())
    assert len(back.unreachable) == len(blocked.unreachable) and back.params["constraints"] == blocked.params[
        "constraints"]


def test_evaluate_samples_keep_the_constraints(rules):
    """Each row's sample, as the model is asked about it, keeps the constraints."""
    X, pred, rf, schema, cr = rules
    texts = ["delta(a) <= 0"]
    cons = parse(texts, schema)
    rows = X[np.flatnonzero(pred == 0)[:6]]
    asked = []

    def predict(Z):
        asked.append(np.array(Z, copy=True))
        return rf.predict(pd.DataFrame(Z, columns=NAMES))

    metrics, records = cr.evaluate(rows, predict, lambda y: 1, constraints=texts)
    samples = [Z[0] for Z in asked[1:]]                  # after every row at once, one sample per row with a rule
    done = [r["row"] for r in records if "note" not in r]
    assert done and len(samples) == len(done) and metrics["coverage"] == len(done) / len(rows)
    assert all(cons.violated(rows[i], z) == [] for i, z in zip(done, samples))
    assert metrics["correctness"] == 1.0


def test_fcca_collects_counterfactuals_under_the_constraints(tiny):
    """Each pair FCCA collects is the optimum under the constraints (the model gives another
    class at it, every constraint kept); rows no such move helps are counted infeasible and
    are precluded; the constraints change the pairs, and the result's JSON names them."""
    X, y, schema, models = tiny
    model, ens = models[0]
    texts = ["delta(c) <= 0.5 * delta(a)"]
    cons = parse(texts, schema)
    free = fcca(ens, X[:40], y[:40], schema=schema, n_jobs=1, max_points=12)
    got = fcca(ens, X[:40], y[:40], schema=schema, n_jobs=1, max_points=12, constraints=texts)
    assert got.params["constraints"] == texts and "constraints" not in free.params
    assert got.statuses.get("infeasible", 0) > 0 and len(got.rows) > 0
    for i, x0, xc, cost in zip(got.rows, got.x0, got.x_ce, got.costs):
        assert cons.violated(x0, xc) == [] and model.predict(xc[None, :])[0] != model.predict(x0[None, :])[0]
        # up to where each solver places its point inside the optimal cell (the free path's points
        # sit further in, 1e-4 more cost seen here; the infima are checked in test_constraints_exact.py)
        assert cost >= free.costs[list(free.rows).index(i)] - 1e-3
    left = sorted(set(free.rows) - set(got.rows))                    # the rows the constraint precludes
    assert left and len(left) == got.statuses["infeasible"] and all(verify_recourse(ens, X[i], 1 - model.predict(X[i][None, :])[0], schema=schema,
                                        constraints=texts).precluded for i in left[:3])
    assert "keeps the 1 constraint" in got.guarantee.note
    back = FCCAResult.from_json(got.to_json())
    assert back.params["constraints"] == texts and back.statuses == got.statuses
