"""T-CREx faithfulness: valid and maximal rules, lookups equal brute-force argmin, grid-aligned metarules."""

from __future__ import annotations

import numpy as np
import pytest

from core.intake.demo import synthetic_credit
from core.schema import infer_schema
from core.tcrex import NoValidRuleError, TCREx


@pytest.fixture(scope="module")
def credit():
    import lightgbm as lgb

    df, t = synthetic_credit(3000, seed=2)
    X = df.drop(columns=[t])
    model = lgb.LGBMClassifier(n_estimators=50, num_leaves=8, verbose=-1, n_jobs=1).fit(X, df[t])
    groups = list(infer_schema(X).groups().values())
    return X.to_numpy(float), model.predict(X), groups, list(X.columns)


@pytest.mark.parametrize("tau", [0.9, 0.99])
def test_rules_are_valid_and_maximal(credit, tau):
    X, y, groups, names = credit
    tc = TCREx(rho=0.02, tau=tau, groups=groups, random_state=0).fit(X, y, 1, feature_names=names)
    assert tc.rules_
    for r in tc.rules_:
        inside = r.contains(X)
        assert inside.mean() == pytest.approx(r.feasibility) and r.feasibility >= 0.02 - 1e-12
        assert np.mean(y[inside] == 1) == pytest.approx(r.accuracy) and r.accuracy >= tau
    for i, a in enumerate(tc.rules_):
        for j, b in enumerate(tc.rules_):
            if i != j:
                strict = np.all(b.lower <= a.lower) and np.all(a.upper <= b.upper) and not (
                    np.array_equal(a.lower, b.lower) and np.array_equal(a.upper, b.upper))
                assert not strict


def test_explain_is_the_argmin_of_the_cost(credit):
    X, y, groups, names = credit
    tc = TCREx(rho=0.02, tau=0.9, groups=groups, random_state=0).fit(X, y, 1, feature_names=names)
    rng = np.random.default_rng(0)
    P = X[rng.choice(len(X), 500)].copy()
    num = [j for j in range(X.shape[1]) if not any(j in g for g in groups)]
    P[:, num] += rng.normal(0, 1, size=(500, len(num))) * X[:, num].std(axis=0)
    grid_pts = P.copy()
    for j in num:  # also points exactly on grid bounds
        if tc.grid_[j].size:
            grid_pts[:, j] = rng.choice(tc.grid_[j], 500)
    for Q in (X, P, grid_pts):
        np.testing.assert_array_equal(tc.explain(Q), tc.cost_matrix(Q).argmin(axis=1))


def test_metarule_splits_lie_on_grid_bounds(credit):
    X, y, groups, names = credit
    tc = TCREx(rho=0.02, tau=0.9, groups=groups, random_state=0).fit(X, y, 1, feature_names=names)
    t = tc.metarule_tree_
    for f, thr in zip(t["feature"], t["threshold"]):
        if f >= 0:
            assert thr in set(tc.grid_[f])
    assert {m.rule for m in tc.metarules_} <= set(range(len(tc.rules_)))
    leaves = tc.apply(X)
    for m in tc.metarules_:
        rows = leaves == m.node
        assert np.all((X[rows] > m.lower) & (X[rows] <= m.upper))
        assert np.all(tc.changes(X[rows], np.full(rows.sum(), m.rule)) <= m.worst_case_changes)


def test_categorical_rules_are_well_formed(credit):
    X, y, groups, names = credit
    for target in (0, 1):
        tc = TCREx(rho=0.02, tau=0.9, groups=groups, random_state=0).fit(X, y, target, feature_names=names)
        for r in tc.rules_:
            for g in groups:
                hot = np.isfinite(r.lower[g])
                cold = np.isfinite(r.upper[g])
                assert hot.sum() <= 1  # never two hot categories
                assert not (hot.any() and cold.any())
                assert np.all(r.lower[g][hot] == 0.5) and np.all(r.upper[g][cold] == 0.5)
                assert cold.sum() < len(g) - 1 or cold.sum() == 0  # all-but-one-cold became one-hot


def test_toy_case_with_a_known_answer():
    """Figure 1 in spirit: the target class lies right of x0 = 5; the one maximal rule says so."""
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 10, size=(2000, 2))
    y = (X[:, 0] > 5).astype(int)
    tc = TCREx(rho=0.05, tau=0.9, random_state=0).fit(X, y, 1)
    assert len(tc.rules_) == 1
    r = tc.rules_[0]
    assert r.lower[0] == pytest.approx(5.0, abs=0.05) and np.isinf(r.upper[0])
    assert np.isinf(r.lower[1]) and np.isinf(r.upper[1]) and r.accuracy == 1.0
    assert tc.recourse_text([2.0, 3.0]).startswith("Rule 0: change x0 > 5")
    assert np.all(tc.changes(X[y == 0]) == 1) and np.all(tc.changes(X[y == 1]) == 0)


def test_untargeted_and_regression_targets():
    from sklearn.datasets import load_diabetes
    from sklearn.ensemble import RandomForestRegressor

    X, y = load_diabetes(return_X_y=True)
    f = RandomForestRegressor(50, max_depth=6, random_state=0).fit(X, y).predict(X)
    mu = f.mean()
    tc = TCREx(rho=0.02, tau=0.9, random_state=0).fit(X, f, (mu, np.inf))
    for r in tc.rules_:
        assert np.mean(f[r.contains(X)] >= mu) >= 0.9
    yc = (f > mu).astype(int)
    tu = TCREx(rho=0.02, tau=0.9, random_state=0).fit(X, yc, ("other", 0))
    assert all(np.mean(yc[r.contains(X)] != 0) >= 0.9 for r in tu.rules_)
    majority = np.bincount(yc).argmax()
    tm = TCREx(rho=0.02, tau=0.9, random_state=0).fit(X, yc, "other")
    assert all(np.mean(yc[r.contains(X)] != majority) >= 0.9 for r in tm.rules_)


def test_clear_errors():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = rng.integers(0, 2, 300)
    with pytest.raises(NoValidRuleError, match="lower tau or rho"):
        TCREx(rho=0.3, tau=0.99).fit(X, y, 1)
    with pytest.raises(NoValidRuleError, match="target"):
        TCREx().fit(X, y, 7)
    y2 = (X[:, 0] + X[:, 1] > 0).astype(int)
    with pytest.raises(ValueError, match="cells"):
        TCREx(rho=0.01, tau=0.7, max_cells=3).fit(X, y2, 1)
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        TCREx().explain(X)


def test_text_graph_and_dict(credit):
    import json

    X, y, groups, names = credit
    tc = TCREx(rho=0.02, tau=0.9, groups=groups, random_state=0).fit(X, y, 1, feature_names=names)
    assert "R0" in tc.to_text() and "Metarules" in tc.to_text()
    dot = tc.to_graphviz(highlight=tc.decision_path(X[0]))
    assert dot.startswith("digraph") and "penwidth=3" in dot
    d = json.loads(json.dumps(tc.to_dict()))
    assert len(d["rules"]) == len(tc.rules_) and len(d["metarules"]) == len(tc.metarules_)


def test_a_row_inside_its_rule_without_the_target_is_not_told_no_change_is_needed():
    """A rule is an estimate (accuracy >= tau): a row the model refuses can already meet every
    condition of the rule it is prescribed. Its text never says "no change needed" then; it
    says so only of a row the model gives the target (seen on Adult: 17 refused rows were told
    "no change needed")."""
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(2000, 2))
    y = (X[:, 0] > 0.5).astype(int)
    flip = np.flatnonzero(X[:, 0] > 0.5)[::25]                  # 4% of the accepted side refused
    y[flip] = 0
    tc = TCREx(rho=0.02, tau=0.9, n_trees=20, random_state=0).fit(X, y, 1, feature_names=["a", "b"])
    inside = flip[tc.changes(X[flip]) == 0]
    assert len(inside) > 0
    for i in inside[:5]:
        for decision, says in ((0, "yet the model does not give it the target"),
                               (None, "check the model's decision for this row")):
            text = tc.recourse_text(X[i], decision)
            assert "no change needed" not in text and says in text, text
    accepted = np.flatnonzero((y == 1) & (tc.changes(X) == 0))[0]
    assert "no change needed" in tc.recourse_text(X[accepted], 1)
