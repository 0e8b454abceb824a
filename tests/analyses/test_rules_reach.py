"""Local counterfactual rules that reach pi_C (issue #27 item 2): the set S of a
rule is searched over every actionable feature, not only the top_k, when no
minimal divergent explanation among the top_k gives a region reaching pi_C; a
row that cannot get one is told why. CRPs are checked with the brute-force
Regional RF of tests/oracles.py, CDPs with its brute-force Projected Forest."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from oracles import brute_cdp, brute_crp

from core.rules import CounterfactualRules, NoCounterfactualRuleError
from core.rules.search import cdp_of_sets


def _correlated(n: int = 600, seed: int = 0):
    """x1, x2 follow a latent z closely, x0 loosely, x3 is noise; the outcome
    needs x0 > 0.3 and x1 > 0.4. Rows with a high z but a low x0 are where
    freeing x0 gives the target for most rows alike (a divergent set)."""
    rng = np.random.default_rng(seed)
    z = rng.uniform(size=n)
    X = np.column_stack([z + rng.normal(0, 0.25, n), z + rng.normal(0, 0.05, n), z + rng.normal(0, 0.05, n),
                         rng.normal(size=n)]).round(3)
    return X, ((X[:, 0] > 0.3) & (X[:, 1] > 0.4)).astype(int)


@pytest.fixture(scope="module")
def narrow():
    """top_k = 1: the search for minimal divergent explanations sees one feature."""
    X, y = _correlated()
    cr = CounterfactualRules(n_estimators=8, max_depth=5, random_state=0, top_k=1).fit(X, y)
    return X, y, cr


def _rule_crp(cr, x, rule, target) -> float:
    """The rule's CRP by the oracle: its intervals on S, x's values elsewhere."""
    inS = np.isin(np.arange(len(x)), rule.features)
    qlo = np.where(inS, rule.lower, np.nextafter(x, -np.inf))
    qhi = np.where(inS, rule.upper, x)
    return brute_crp(cr, qlo, qhi, target)


def test_every_row_with_a_divergent_set_gets_a_rule_reaching_pi_c(narrow):
    """Every row whose CDP reaches pi for some subset of all the features (brute
    force over the 15 subsets) gets a rule whose CRP, by the oracle, reaches
    pi_C; here every other row does too (before: 216 of the 258 rows fell
    below pi_C with top_k = 1)."""
    X, y, cr = narrow
    d = X.shape[1]
    top = set(cr.state_.columns(cr.candidate_units()))
    divergent = beyond = 0
    for i in np.flatnonzero(y == 0):
        x = X[i]
        best = max(brute_cdp(cr, x, S, 1) for s in range(1, d + 1) for S in itertools.combinations(range(d), s))
        rule = cr.local_rule(x, 1)
        crp = _rule_crp(cr, x, rule, 1)
        assert crp == pytest.approx(rule.crp, abs=1e-12)
        assert not rule.contains(x)[0], "a rule must not contain the row itself"
        divergent += best >= cr.pi - 1e-12
        assert crp >= cr.pi_c - 1e-12 and not rule.below_pi_c and rule.note == "", (i, crp, rule.note)
        beyond += bool(set(rule.features) - top)
    assert divergent >= 5
    assert beyond >= 1, "no rule used a feature outside the top_k"


def test_a_row_that_needs_a_fixed_feature_is_told_which():
    """The outcome moves only with x0; with x0 fixed no rule reaches pi_C, the
    best one is flagged, and its note names x0 as the feature it would need."""
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(1500, 3))
    y = (X[:, 0] > 0.6).astype(int)
    cr = CounterfactualRules(n_estimators=8, max_depth=5, random_state=0).fit(X, y)
    x = X[np.flatnonzero(y == 0)[0]]
    rule = cr.local_rule(x, 1, fixed=[0])
    assert rule.below_pi_c and rule.crp < cr.pi_c and 0 not in rule.features
    assert rule.crp == pytest.approx(_rule_crp(cr, x, rule, 1), abs=1e-12)
    assert "fixed feature(s) ['x0']" in rule.note, rule.note
    assert f"best {rule.crp:.2f}" in rule.note, rule.note
    free = cr.local_rule(x, 1)                       # x0 free: a rule reaching pi_C
    assert 0 in free.features and not free.below_pi_c and free.note == ""
    assert _rule_crp(cr, x, free, 1) >= cr.pi_c - 1e-12


def test_a_row_no_region_can_serve_is_told_so():
    """Labels with 25% noise: no forest cell is pure enough for pi_C = 0.99 even
    with every feature free; the rule is flagged and the note says so."""
    rng = np.random.default_rng(1)
    X = rng.uniform(size=(800, 3))
    y = ((X[:, 0] > 0.5) ^ (rng.uniform(size=800) < 0.25)).astype(int)
    cr = CounterfactualRules(n_estimators=8, max_depth=3, random_state=0).fit(X, y)
    x = X[np.flatnonzero(y == 0)[0]]
    try:
        rule = cr.local_rule(x, 1, pi_c=0.99)
    except NoCounterfactualRuleError as exc:       # no cell with a positive CRP at all
        assert "no region near this row" in str(exc)
        return
    assert rule.below_pi_c and rule.crp < 0.99
    assert rule.crp == pytest.approx(_rule_crp(cr, x, rule, 1), abs=1e-12)
    assert "No region reaches CRP 0.99" in rule.note and "no region near this row" in rule.note, rule.note


def test_the_grown_sets_cdp_equals_brute_force(narrow, monkeypatch):
    """The CDP that ranks the grown sets, compiled and bitsets, against the oracle."""
    import core.rules.bitsets as B

    X, y, cr = narrow
    sets = [(0,), (1, 3), (0, 2, 3), (2,), (0, 1, 2, 3)]
    for i in np.flatnonzero(y == 0)[:10]:
        expect = [brute_cdp(cr, X[i], list(cr.state_.columns(S)), 1) for S in sets]
        np.testing.assert_allclose(cdp_of_sets(cr.state_, X[i], 1, sets), expect, atol=1e-12)
        monkeypatch.setattr(B, "USE_COMPILED", False)
        np.testing.assert_allclose(cdp_of_sets(cr.state_, X[i], 1, sets), expect, atol=1e-12)
        monkeypatch.setattr(B, "USE_COMPILED", True)
