"""Counterfactual rules' API (issue #28 items 3-4): the fitted state is one
object the plain functions take, the estimator's methods wrap them; ``fixed``,
``increase_only`` and ``decrease_only`` take names or indices; a direction is
respected by the rule's box and its samples."""

from __future__ import annotations

import numpy as np
import pytest
from oracles import brute_crp
from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import GradientBoostingClassifier

from core.errors import NoCounterfactualRuleError, QueryError
from core.rules import CounterfactualRules, FittedRules, engines, sampling, search


@pytest.fixture(scope="module")
def cancer():
    data = load_breast_cancer()
    X, names = data.data, [str(n) for n in data.feature_names]
    pred = GradientBoostingClassifier(n_estimators=50, random_state=0).fit(X, data.target).predict(X)
    cr = CounterfactualRules(n_estimators=10, random_state=0).fit(X, pred, feature_names=names)
    return X, pred, names, cr


@pytest.fixture(scope="module")
def threshold():
    """The outcome is x0 > 0.6 alone: a row with a low x0 must increase it."""
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(1200, 3))
    y = (X[:, 0] > 0.6).astype(int)
    cr = CounterfactualRules(n_estimators=8, max_depth=5, random_state=0).fit(X, y, feature_names=["a", "b", "c"])
    return X, y, cr


def _same_rule(a, b) -> None:
    assert a.features == b.features
    np.testing.assert_array_equal(a.lower, b.lower)
    np.testing.assert_array_equal(a.upper, b.upper)
    assert (a.cdp, a.crp, a.divergent, a.n_cells, a.below_pi_c, a.note) == \
           (b.cdp, b.crp, b.divergent, b.n_cells, b.below_pi_c, b.note)
    assert a.divergent_sets == b.divergent_sets
    assert len(a.alternatives) == len(b.alternatives)
    for u, v in zip(a.alternatives, b.alternatives):
        np.testing.assert_array_equal(u.lower, v.lower)
        np.testing.assert_array_equal(u.upper, v.upper)
        assert (u.crp, u.n_cells) == (v.crp, v.n_cells)


def _inside_direction(rule, x, inc=(), dec=()) -> int:
    """Every value the rule (and each alternative) allows on an increase-only
    feature is >= x_j, on a decrease-only one <= x_j, and the box is not empty.
    Returns how many of the rule's features had a direction to check."""
    for box in (rule, *rule.alternatives):
        for j in rule.features:
            assert box.lower[j] < box.upper[j]
            if j in inc:
                assert box.lower[j] >= np.nextafter(x[j], -np.inf) and box.upper[j] >= x[j], (j, box.lower[j], x[j])
            if j in dec:
                assert box.upper[j] <= x[j], (j, box.upper[j], x[j])
    return len(set(rule.features) & (set(inc) | set(dec)))


def test_names_and_indices_give_identical_rules(cancer):
    X, pred, names, cr = cancer
    by_name = ["worst radius", "worst area", "mean concave points"]
    by_index = [names.index(n) for n in by_name]
    for i in (0, 7, 21):
        x, t = X[i], 1 - pred[i]
        _same_rule(cr.local_rule(x, t, fixed=by_name), cr.local_rule(x, t, fixed=by_index))
        _same_rule(cr.local_rule(x, t, fixed=by_name, increase_only=["mean texture"]),
                   cr.local_rule(x, t, fixed=np.array(by_index), increase_only=[1]))
    assert cr.candidate_units(fixed=by_name) == cr.candidate_units(fixed=by_index)
    assert cr.minimal_divergent_explanations(X[0], 1 - pred[0], fixed=by_name) == \
           cr.minimal_divergent_explanations(X[0], 1 - pred[0], fixed=by_index)
    assert cr.local_rule(X[0], 1 - pred[0], fixed="worst area").features == \
           cr.local_rule(X[0], 1 - pred[0], fixed=[names.index("worst area")]).features
    regions = cr.propose_regions(1)[:2]
    a = cr.regional_rules(regions, 1, fixed=by_name, pi_c=0.6)
    b = cr.regional_rules(regions, 1, fixed=by_index, pi_c=0.6)
    for u, v in zip(a, b):
        assert (u.features, u.cdp, u.crp, u.note) == (v.features, v.cdp, v.crp, v.note)


def test_unknown_name_or_index_is_a_query_error_listing_the_features(cancer):
    X, pred, names, cr = cancer
    with pytest.raises(QueryError) as err:
        cr.local_rule(X[0], 1, fixed=["mean radiuss"])
    text = str(err.value)
    assert "'mean radiuss'" in text and "mean radius" in text and "worst fractal dimension" in text
    with pytest.raises(QueryError, match="index 30"):
        cr.local_rule(X[0], 1, fixed=[30])
    with pytest.raises(QueryError, match="index -1"):
        cr.local_rule(X[0], 1, fixed=[-1])
    with pytest.raises(QueryError, match="increase_only.*'nope'"):
        cr.local_rule(X[0], 1, increase_only=["nope"])
    with pytest.raises(QueryError, match="decrease_only"):
        cr.regional_rules(cr.propose_regions(1)[:1], 1, decrease_only=["nope"])
    with pytest.raises(QueryError, match="fixed"):
        cr.candidate_units(fixed=["nope"])


def test_increase_only_is_respected_by_the_box_and_the_samples(cancer):
    """Forbid every feature of the unconstrained rule to go down: the new rule's
    box lies at or above x on them, its CRP is the Regional RF's (oracle), and
    every sample keeps x_j' >= x_j."""
    X, pred, names, cr = cancer
    directed = 0
    for i in (0, 40, 80, 160, 320):
        x, t = X[i], 1 - pred[i]
        inc = cr.local_rule(x, t).features
        rule = cr.local_rule(x, t, increase_only=[names[j] for j in inc])
        directed += _inside_direction(rule, x, inc=inc)
        inS = np.isin(np.arange(len(x)), rule.features)
        qlo = np.where(inS, rule.lower, np.nextafter(x, -np.inf))
        qhi = np.where(inS, rule.upper, x)
        assert rule.crp == pytest.approx(brute_crp(cr, qlo, qhi, t), abs=1e-12)
        Z = cr.sample_counterfactuals(x, rule, n=5)
        assert np.all(Z[:, list(inc)] >= x[list(inc)])
        assert np.all(rule.contains(Z))
    assert directed, "no rule bounded an increase-only feature: the box check saw nothing"


def test_decrease_only_is_respected_and_can_forbid_the_only_way(threshold):
    X, y, cr = threshold
    rows = np.flatnonzero(y == 0)[:8]
    checked = 0
    for i in rows:
        x = X[i]
        free = cr.local_rule(x, 1)
        assert 0 in free.features and not free.below_pi_c
        up = cr.local_rule(x, 1, increase_only=["a"])      # the way it goes anyway: the same rule
        _same_rule(free, up)
        try:
            down = cr.local_rule(x, 1, decrease_only=["a", "b"])
        except NoCounterfactualRuleError:
            continue
        assert _inside_direction(down, x, dec=(0, 1))
        assert down.below_pi_c and "allowed directions" in down.note
        Z = cr.sample_counterfactuals(x, down, n=5)
        assert np.all(Z[:, :2] <= x[:2])
        checked += 1
    assert checked, "no row had a decrease-only rule to check"
    with pytest.raises(QueryError, match="list it in fixed"):       # both directions: said, not read as fixed
        cr.local_rule(X[rows[0]], 1, increase_only=["a"], decrease_only=["a"])
    assert 0 not in cr.local_rule(X[rows[0]], 1, fixed=["a"]).features


@pytest.fixture(scope="module")
def two_ways():
    """The outcome is x0 <= 0.15 or x0 > 0.6: a row in between may go either way."""
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(1500, 3))
    y = ((X[:, 0] > 0.6) | (X[:, 0] <= 0.15)).astype(int)
    cr = CounterfactualRules(n_estimators=8, max_depth=5, random_state=0).fit(X, y, feature_names=["a", "b", "c"])
    return X, y, cr


def test_a_direction_picks_the_way_to_the_target(two_ways):
    """Local: increase-only a gives a rule above x, decrease-only a one below,
    both reaching pi_C. Regional (0.2 < a <= 0.55): the rule lies above every
    row of the region, or below every one, and its CRP is the Regional RF's."""
    X, y, cr = two_ways
    x = X[np.flatnonzero((X[:, 0] > 0.3) & (X[:, 0] < 0.5))[0]]
    up = cr.local_rule(x, 1, increase_only=["a"])
    down = cr.local_rule(x, 1, decrease_only=["a"])
    for rule, kw in ((up, dict(inc=(0,))), (down, dict(dec=(0,)))):
        assert 0 in rule.features and not rule.below_pi_c
        assert _inside_direction(rule, x, **kw)
    assert up.lower[0] > 0.55 and down.upper[0] <= 0.2
    region = (np.array([0.2, -np.inf, -np.inf]), np.array([0.55, np.inf, np.inf]))
    inside = np.all((cr.X_ > region[0]) & (cr.X_ <= region[1]), axis=1)
    top, bottom = cr.X_[inside, 0].max(), cr.X_[inside, 0].min()
    for kw in (dict(increase_only=["a"]), dict(decrease_only=[0])):
        r = cr.regional_rules([region], 1, **kw)[0]
        assert r.found and 0 in r.features and r.crp >= cr.pi_c - 1e-12
        assert r.crp == pytest.approx(cr.regional_crp(*region, 1, r.lower, r.upper), abs=1e-12)
        for box in (r, *r.alternatives):
            if "increase_only" in kw:
                assert box.lower[0] >= np.nextafter(top, -np.inf)
            else:
                assert box.upper[0] <= bottom


def test_the_estimator_wraps_the_plain_functions_on_its_state(cancer):
    X, pred, names, cr = cancer
    st = cr.state_
    assert isinstance(st, FittedRules)
    assert st.ensemble is cr.ensemble_ and st.X is cr.X_ and st.feature_names == cr.feature_names_
    assert (st.levels.pi, st.levels.pi_c, st.levels.top_k) == (cr.pi, cr.pi_c, cr.top_k)
    x, t = X[3], 1 - pred[3]
    S = [20, 27]
    assert cr.cdp(x, S, t) == engines.cdp(st, x, S, t)
    np.testing.assert_array_equal(cr.projected_weights(x, S), engines.projected_weights(st, x, S))
    assert cr.candidate_units(fixed=["worst area"]) == search.candidate_units(st, fixed=["worst area"])
    assert cr.minimal_divergent_explanations(x, t) == search.minimal_divergent_explanations(st, x, t)
    a = cr.local_rule(x, t, fixed=["worst area"], increase_only=["mean texture"])
    b = search.local_rule(st, x, t, fixed=["worst area"], increase_only=["mean texture"])
    _same_rule(a, b)
    assert cr.crp(x, a.lower, a.upper, t, S=a.features) == engines.crp(st, x, a.lower, a.upper, t, S=a.features)
    np.testing.assert_array_equal(cr.sample_counterfactuals(x, a, n=3), sampling.sample_counterfactuals(st, x, a, 3))
    np.testing.assert_array_equal(cr.inlier(X[:20]), sampling.inlier(st, X[:20]))
    regions = cr.propose_regions(1)
    assert all(np.array_equal(p[0], q[0]) and np.array_equal(p[1], q[1])
               for p, q in zip(regions, search.propose_regions(st, 1)))
    pairs = list(zip(cr.regional_rules(regions[:2], 1, pi_c=0.6), search.regional_rules(st, regions[:2], 1, pi_c=0.6)))
    assert any(u.found for u, _ in pairs)        # so the regional CRPs below are compared
    for u, v in pairs:
        assert (u.features, u.cdp, u.crp, u.note) == (v.features, v.cdp, v.crp, v.note)
        if u.found:
            assert cr.regional_crp(u.region_lower, u.region_upper, 1, u.lower, u.upper) == \
                   engines.regional_crp(st, u.region_lower, u.region_upper, 1, u.lower, u.upper)
    m1, r1 = cr.evaluate(X[:3], lambda Z: cr.ensemble_.predict(Z), lambda v: 1 - v)
    m2, r2 = sampling.evaluate(st, X[:3], lambda Z: cr.ensemble_.predict(Z), lambda v: 1 - v)
    assert m1 == m2 and [{k: v for k, v in r.items() if k != "time"} for r in r1] == \
           [{k: v for k, v in r.items() if k != "time"} for r in r2]


def test_a_table_of_sub_populations_with_no_rule_does_not_say_no_row_was_there_to_move():
    """An outside trial: every sub-population's rule "—" (none reaches the probability), yet the
    table's guarantee said "no row lacking the target was there to move" of 1,416 such rows. With
    no rule found it says so and claims nothing; with some found, only theirs are pooled."""
    from core.rules.results import RegionalRule, rules_guarantee

    params = {"checked_on": "tree_ensemble", "n_rows": 500}
    def region(n, found, edge=0, ok=0.0):
        kw = dict(features=(0,), lower=np.array([0.0]), upper=np.array([1.0]), crp=0.95) if found else {}
        return RegionalRule(region_lower=np.array([-np.inf]), region_upper=np.array([np.inf]), target=1,
                            coverage=0.5, n_rows=n, params=params, edge_rows=edge, edge_accepted=ok,
                            note="" if found else "No rule reaches probability 0.9 (best 0.86).", **kw)
    none = rules_guarantee([region(1416, False), region(300, False)])
    assert none.kind == "not_found" and "no row lacking the target" not in none.text()
    assert "No rule was found for any of the 2 sub-populations" in none.text()
    some = rules_guarantee([region(1416, False), region(300, True, edge=40, ok=1.0)])
    assert some.kind == "valid_on_model" and "to the 40 rows lacking the target" in some.text(), some.text()
