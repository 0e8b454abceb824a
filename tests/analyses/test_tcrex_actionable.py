"""T-CREx takes ``fixed`` / ``increase_only`` / ``decrease_only`` (issue #40 item 2).

The rules are learnt as without them; a row is prescribed the cheapest rule (eq. 9:
changes - feasibility, ties to the first) among those it can reach moving no fixed
feature, increase-only features only up and decrease-only ones only down, and none
(-1) when it can reach none. Checked against a brute force written here from the
rules' bounds, on the fitting rows, perturbed rows and rows on the grid bounds."""

from __future__ import annotations

import numpy as np
import pytest

from core.errors import QueryError
from core.intake.demo import synthetic_credit
from core.schema import infer_schema
from core.tcrex import TCREx, TCRExResult


@pytest.fixture(scope="module")
def credit():
    import lightgbm as lgb

    df, t = synthetic_credit(3000, seed=2)
    X = df.drop(columns=[t])
    model = lgb.LGBMClassifier(n_estimators=50, num_leaves=8, verbose=-1, n_jobs=1).fit(X, df[t])
    groups = list(infer_schema(X).groups().values())
    return X.to_numpy(float), model.predict(X), groups, list(X.columns)


def _brute(tc, X, fixed, inc, dec):
    """The prescribed rule of each row, from the rules' bounds alone."""
    R = tc.rules_
    out = np.full(len(X), -1)
    for i, x in enumerate(X):
        best, best_cost = -1, np.inf
        for k, r in enumerate(R):
            ok = all(r.lower[j] < x[j] <= r.upper[j] for j in fixed)
            ok &= all(x[j] <= r.upper[j] for j in inc) and all(x[j] > r.lower[j] for j in dec)
            if not ok:
                continue
            out_of = (x <= r.lower) | (x > r.upper)
            for g in tc.groups_:
                out_of[g[0]] = out_of[list(g)].any()
                out_of[list(g[1:])] = False
            cost = out_of.sum() - r.feasibility
            if cost < best_cost:
                best, best_cost = k, cost
        out[i] = best
    return out


def _rows(tc, X, groups, seed=0):
    rng = np.random.default_rng(seed)
    P = X[rng.choice(len(X), 300)].copy()
    num = [j for j in range(X.shape[1]) if not any(j in g for g in groups)]
    P[:, num] += rng.normal(0, 1, size=(300, len(num))) * X[:, num].std(axis=0)
    G = P.copy()
    for j in num:
        if tc.grid_[j].size:
            G[:, j] = rng.choice(tc.grid_[j], 300)
    return [X[:400], P, G]


def test_the_constraints_restrict_the_prescribed_rule_exactly(credit):
    X, y, groups, names = credit
    free = TCREx(rho=0.02, tau=0.9, groups=groups, random_state=0).fit(X, y, 1, feature_names=names)
    inc, dec, fixed = ["owns_home"], ["late_payments"], ["income", "sex"]
    tc = TCREx(rho=0.02, tau=0.9, groups=groups, random_state=0).fit(
        X, y, 1, feature_names=names, fixed=fixed, increase_only=inc, decrease_only=dec)
    assert len(tc.rules_) == len(free.rules_) and all(         # the rules themselves do not change
        np.array_equal(a.lower, b.lower) and np.array_equal(a.upper, b.upper) for a, b in zip(tc.rules_, free.rules_))
    J = {role: [names.index(n) for n in v] for role, v in (("f", fixed), ("i", inc), ("d", dec))}
    moved = 0
    for Q in _rows(tc, X, groups):
        got = tc.explain(Q)
        np.testing.assert_array_equal(got, _brute(tc, Q, J["f"], J["i"], J["d"]))
        np.testing.assert_array_equal(free.explain(Q), _brute(free, Q, [], [], []))
        moved += int(np.sum(got != free.explain(Q)))
        for x, k in zip(Q, got):                               # the change each rule asks for obeys them
            if k < 0:
                continue
            r = tc.rules_[k]
            for j in J["f"]:
                assert r.lower[j] < x[j] <= r.upper[j]
            for j in J["i"]:
                assert x[j] <= r.upper[j]
            for j in J["d"]:
                assert x[j] > r.lower[j]
        cm = tc.cost_matrix(Q)
        np.testing.assert_array_equal(np.isinf(cm), ~tc.reachable(Q))
    assert moved > 0                                           # the constraints changed some prescriptions
    assert tc.result_.params["increase_only"] == inc and tc.result_.params["fixed"] == fixed
    back = TCREx.from_result(TCRExResult.from_json(tc.result_.to_json()))
    np.testing.assert_array_equal(back.explain(X), tc.explain(X))
    np.testing.assert_array_equal(back.cost_matrix(X[:50]), tc.cost_matrix(X[:50]))


def test_a_row_that_can_reach_no_rule_is_prescribed_none(credit):
    X, y, groups, names = credit
    tc = TCREx(rho=0.02, tau=0.9, groups=groups, random_state=0).fit(X, y, 1, feature_names=names,
                                                                     fixed=list(range(X.shape[1])))
    k = tc.explain(X)
    stuck = np.flatnonzero(k < 0)
    assert stuck.size > 0
    assert np.all(tc.changes(X[stuck]) == -1) and np.all(np.isinf(tc.cost(X[stuck])))
    assert "No rule is reachable" in tc.recourse_text(X[stuck[0]])
    assert "no reachable rule" in tc.to_text() and "no reachable rule" in tc.to_graphviz()
    assert all(m["rule"] is None or m["rule"].startswith("R") for m in tc.to_dict()["metarules"])
    ok = np.flatnonzero(k >= 0)
    assert np.all(tc.changes(X[ok]) == 0)                      # every feature fixed: only rules it is in


def test_the_roles_are_checked_and_keyword_only(credit):
    X, y, groups, names = credit
    tc = TCREx(rho=0.02, tau=0.9, groups=groups, random_state=0)
    with pytest.raises(QueryError, match="'income'"):
        tc.fit(X, y, 1, feature_names=names, fixed=["incme"])
    with pytest.raises(QueryError, match="increase-only and decrease-only"):
        tc.fit(X, y, 1, feature_names=names, increase_only=["debt_ratio"], decrease_only=["debt_ratio"])
    with pytest.raises(QueryError, match="positional"):
        tc.fit(X, y, 1, names, ["age"])
