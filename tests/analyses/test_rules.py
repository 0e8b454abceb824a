"""Counterfactual rules (paper 000): estimators against brute force, rules
against their definitions, and the paper's metrics on real data."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import make_data, shared_data
from oracles import brute_cdp, brute_crp

import core.rules.bitsets as B
from core.errors import NotFittedError
from core.intake.demo import synthetic_credit
from core.rules import CounterfactualRules, NoCounterfactualRuleError, region_from_filter
from core.ruletext import rule_text
from core.schema import infer_schema


@pytest.fixture(scope="module")
def small():
    X, y = make_data("binary", n=250, d=4, seed=3)
    cr = CounterfactualRules(n_estimators=6, max_depth=4, random_state=0, top_k=4).fit(X, y)
    return X, y, cr


def test_projected_forest_equals_brute_force(small):
    X, y, cr = small
    rng = np.random.default_rng(0)
    for _ in range(40):
        x = X[rng.integers(len(X))] + rng.normal(scale=0.05, size=X.shape[1])
        for s in range(0, 5):
            for S in itertools.combinations(range(4), s):
                expect = brute_cdp(cr, x, S, 1)
                assert cr.cdp(x, S, 1) == pytest.approx(expect, abs=1e-12)


def test_compiled_and_numpy_cells_agree(small, monkeypatch):
    X, y, cr = small
    assert B._projected is not None, "the compiled kernel (core/rules/_projected.c) was not built: reinstall with a C compiler"
    rng = np.random.default_rng(1)
    for _ in range(20):
        x = X[rng.integers(len(X))]
        S = list(rng.choice(4, size=rng.integers(0, 5), replace=False))
        a, wa = cr.cdp(x, S, 0), cr.projected_weights(x, S)
        monkeypatch.setattr(B, "USE_COMPILED", False)
        b, wb = cr.cdp(x, S, 0), cr.projected_weights(x, S)
        monkeypatch.setattr(B, "USE_COMPILED", True)
        assert a == pytest.approx(b, abs=1e-12)
        np.testing.assert_allclose(wa, wb, atol=1e-12)
        assert wa.sum() == pytest.approx(1.0)


def test_projected_weights_reproduce_cdp(small):
    X, y, cr = small
    x = X[5]
    for S in ([0], [1, 2], [0, 1, 2, 3]):
        w = cr.projected_weights(x, S)
        assert w.sum() == pytest.approx(1.0)
        assert float(np.sum(w * (cr.y_ == 1))) == pytest.approx(cr.cdp(x, S, 1))


def test_regional_rf_crp_equals_brute_force(small):
    X, y, cr = small
    rng = np.random.default_rng(2)
    for _ in range(30):
        x = X[rng.integers(len(X))]
        lower, upper = np.full(4, -np.inf), np.full(4, np.inf)
        S = rng.choice(4, size=2, replace=False)
        a, b = np.sort(rng.normal(size=2))
        lower[S[0]], upper[S[0]] = a, b
        upper[S[1]] = rng.normal()
        qlo = np.where(np.isfinite(lower) | np.isfinite(upper), lower, np.nextafter(x, -np.inf))
        qhi = np.where(np.isfinite(lower) | np.isfinite(upper), upper, x)
        assert cr.crp(x, lower, upper, 1) == pytest.approx(brute_crp(cr, qlo, qhi, 1), abs=1e-12)
        assert cr.regional_crp(lower, upper, 1) == pytest.approx(brute_crp(cr, lower, upper, 1), abs=1e-12)


def test_minimal_divergent_explanations_are_minimal(small):
    X, y, cr = small
    cr.pi = 0.45
    try:
        checked = 0
        for i in range(0, 250, 5):
            x, tgt = X[i], 1 - cr.y_[i]
            found = cr.minimal_divergent_explanations(x, tgt)
            cand = cr.candidate_units()
            best_small = {S: brute_cdp(cr, x, S, tgt) for s in range(1, 5) for S in itertools.combinations(cand, s)}
            if not found:
                assert all(v < 0.45 for v in best_small.values())
                continue
            size = len(found[0][0])
            for S, c in found:
                assert len(S) == size and c >= 0.45 - 1e-12
                assert c == pytest.approx(brute_cdp(cr, x, S, tgt), abs=1e-12)
            # nothing smaller reaches pi, and every set of that size that does is listed
            assert all(v < 0.45 for S, v in best_small.items() if len(S) < size)
            listed = {tuple(sorted(S)) for S, _ in found}
            assert listed == {tuple(sorted(S)) for S, v in best_small.items() if len(S) == size and v >= 0.45 - 1e-12}
            checked += 1
        assert checked >= 5
    finally:
        cr.pi = 0.9


def test_local_rules_hold_on_the_surrogate(small):
    X, y, cr = small
    got = 0
    for i in range(0, 250, 10):
        x, tgt = X[i], 1 - cr.y_[i]
        rule = cr.local_rule(x, tgt)                 # every row has a rule (flagged when below pi_c)
        got += not rule.below_pi_c
        # a rule reaches pi_c, or is flagged and is the best possible cell (positive CRP below pi_c)
        assert (rule.crp >= cr.pi_c - 1e-12) != rule.below_pi_c and rule.crp > 0
        assert cr.crp(x, rule.lower, rule.upper, tgt, S=rule.features) == pytest.approx(rule.crp)
        for b in rule.alternatives:
            assert b.crp >= cr.pi_c - 1e-12 if not rule.below_pi_c else b.crp <= rule.crp
        assert not rule.contains(x)[0], "a rule must not contain the row itself"
        Z = cr.sample_counterfactuals(x, rule, n=4)
        assert len(Z) >= 1 and rule.contains(Z).all()
        rest = [j for j in range(4) if j not in rule.constrained]
        np.testing.assert_array_equal(Z[:, rest], np.repeat(x[None, rest], len(Z), axis=0))
    assert got >= 5


def _paper_fit(X, y):
    """The paper's experiment: 75/25 split, LightGBM(50 estimators, 8 leaves),
    surrogate RF(20, depth 10), pi = pi_c = 0.9: (model, fitted rules, held-out rows)."""
    from lightgbm import LGBMClassifier
    from sklearn.model_selection import train_test_split

    Xtr, Xte, ytr, _ = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    model = LGBMClassifier(n_estimators=50, num_leaves=8, verbose=-1, random_state=0, n_jobs=1).fit(Xtr, ytr)
    cr = CounterfactualRules(random_state=0).fit(Xtr, model.predict(Xtr))
    return model, cr, Xte


def _check_per_class(records, f, min_per_class: int):
    """For held-out rows the other class is the target. Correctness >= 0.9 and
    plausibility >= 0.8 per class (its L-CR table: accuracy 0.9-1.0, plausibility 0.73-1.0)."""
    for c in (0, 1):
        ok = [r for r, v in zip(records, f) if v == c and "correct" in r and not r["below_pi_c"]]
        res = (c, len(ok), np.mean([r["correct"] for r in ok]), np.mean([r["inlier"] for r in ok]))
        assert len(ok) >= min_per_class, res
        assert res[2] >= 0.9 and res[3] >= 0.8, res


def _paper_protocol(X, y, n_rows: int, min_per_class: int):
    """The paper's experiment on the first ``n_rows`` held-out rows."""
    model, cr, Xte = _paper_fit(X, y)
    rows = Xte[:n_rows]
    _, records = cr.evaluate(rows, model.predict, lambda v: 1 - v)
    _check_per_class(records, model.predict(rows), min_per_class)


@pytest.fixture(scope="module")
def breast_cancer_every_row():
    """The paper's protocol on breast cancer, every held-out row evaluated once for the
    two tests below (the slowest of the suite: 143 rows, each a search for its rule)."""
    from sklearn.datasets import load_breast_cancer

    model, cr, Xte = _paper_fit(*load_breast_cancer(return_X_y=True))
    _, records = cr.evaluate(Xte, model.predict, lambda v: 1 - v)
    return model, cr, Xte, records


@pytest.mark.slow
def test_breast_cancer_correct_and_plausible(breast_cancer_every_row):
    """The first 70 held-out rows, as the paper's table. ``evaluate`` treats each row on
    its own (its rule, then one sample drawn with the fitted seed), so their records are
    those of the run on every row (checked on the first rows): the rows are not searched twice."""
    model, cr, Xte, records = breast_cancer_every_row
    _, again = cr.evaluate(Xte[:3], model.predict, lambda v: 1 - v)
    untimed = [[{k: v for k, v in r.items() if k != "time"} for r in recs] for recs in (again, records[:3])]
    assert untimed[0] == untimed[1] and all("correct" in r for r in again)
    _check_per_class(records[:70], model.predict(Xte[:70]), min_per_class=5)


def test_breast_cancer_every_row_gets_a_rule(breast_cancer_every_row):
    """The paper's protocol on every held-out row: a rule for >= 95% of rows, those
    below pi_c flagged, and the sampled counterfactuals correct >= 0.9 overall (seen
    before issue #27: 143 of 143 rows, 77 flagged; 0.965, flagged 0.935). Since the set
    of a rule is searched over every feature when the top_k give no region at pi_c, at
    most 5% of rows may be flagged (seen: 0 of 143) and each predicted class, flagged
    rows included, is correct >= 0.98 (the issue's bar)."""
    _, cr, Xte, records = breast_cancer_every_row
    got = [r for r in records if "correct" in r]
    below = [r for r in got if r["below_pi_c"]]
    assert len(got) >= 0.95 * len(Xte)
    assert all(0 < r["crp"] < cr.pi_c for r in below)
    assert len(below) <= 0.05 * len(got)          # was 77 of 143 with the top_k alone
    assert all(r["crp"] >= cr.pi_c - 1e-12 for r in got if not r["below_pi_c"])
    assert np.mean([r["correct"] for r in got]) >= 0.9
    for t in (0, 1):                                  # issue #27: >= 0.98 on each predicted class, flagged rows in
        mine = [r["correct"] for r in got if r["target"] == t]
        assert len(mine) >= 40 and np.mean(mine) >= 0.98, (t, len(mine), np.mean(mine))


def test_compas_correct_and_plausible():
    from core.intake import io

    p = shared_data("compas.csv")
    df = io.load_table(p.read_bytes(), p.name)
    prep = io.prepare_data(df, df.attrs["target"])
    _paper_protocol(prep.X.to_numpy(float), prep.y.to_numpy().astype(int), n_rows=80, min_per_class=10)


def test_regression_interval_target():
    from lightgbm import LGBMRegressor
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    model = LGBMRegressor(n_estimators=50, num_leaves=8, verbose=-1, random_state=0, n_jobs=1).fit(X, y)
    cr = CounterfactualRules(random_state=0).fit(X, model.predict(X))
    assert cr.regression_
    target = (200.0, 300.0)
    low = X[model.predict(X) < 110][:20]
    ok = []
    for x in low:
        rule = cr.local_rule(x, target)
        assert rule.below_pi_c == (rule.crp < 0.9 - 1e-12)   # flagged exactly when below pi_c
        if rule.below_pi_c:                                  # the correctness below counts rules at pi_c
            continue
        z = cr.sample_counterfactuals(x, rule, n=1)[0]
        ok.append(200 <= model.predict(z[None])[0] <= 300)
    assert len(ok) >= 10 and np.mean(ok) >= 0.8


def test_regional_rule_on_a_planted_recourse():
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(2000, 3))
    y = (X[:, 0] > 0.6).astype(int)          # the decision moves only with feature 0
    cr = CounterfactualRules(random_state=0).fit(X, y)
    region = (np.array([-np.inf, 0.5, -np.inf]), np.array([0.6, np.inf, np.inf]))   # x1 > 0.5, x0 <= 0.6
    (rule,) = cr.regional_rules([region], 1)
    assert rule.found and rule.features == (0,)
    assert rule.lower[0] >= 0.55 and rule.crp >= 0.9
    assert rule.coverage == pytest.approx(np.mean((X[:, 0] <= 0.6) & (X[:, 1] > 0.5)))
    assert rule.crp == pytest.approx(cr.regional_crp(region[0], region[1], 1, rule.lower, rule.upper))
    rows = X[(X[:, 0] <= 0.6) & (X[:, 1] > 0.5)][:20]
    Z = np.vstack([cr.sample_counterfactuals(x, rule, n=1) for x in rows])
    assert np.mean(Z[:, 0] > 0.6) >= 0.9
    regions = cr.propose_regions(1)
    assert regions and all(len(r) == 2 for r in regions)


def test_a_regional_rule_below_pi_says_so():
    """The decision needs x0 > 0.6 and x2 > 0.3; x2 fixed, moving x0 alone reaches it for some of
    the region's rows only: the rule found on x0 falls short of pi, and its note says so (the
    sub-populations table showed its CDP with no word, where the one-row tab warns)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(2000, 3))
    y = ((X[:, 0] > 0.6) & (X[:, 2] > 0.3)).astype(int)
    cr = CounterfactualRules(random_state=0).fit(X, y)
    region = (np.full(3, -np.inf), np.array([0.6, np.inf, np.inf]))
    (rule,) = cr.regional_rules([region], 1, fixed=[2], pi_c=0.6)
    assert rule.found and rule.features == (0,) and not rule.divergent and rule.cdp < 0.9
    assert rule.note == (f"No set of the changeable features reaches the level pi 0.9 (CDP); the rule uses the best "
                         f"set found, CDP {rule.cdp:.2f}.")
    planted = CounterfactualRules(random_state=0).fit(X, (X[:, 0] > 0.6).astype(int))
    (reached,) = planted.regional_rules([region], 1, fixed=[2], pi=0.3)    # x0 drawn anew: CDP about 0.4
    assert reached.found and reached.divergent and reached.cdp >= 0.3 and reached.note == ""


def test_one_hot_groups_move_together_and_immutables_stay():
    import lightgbm as lgb

    df, t = synthetic_credit(2500, seed=4)
    Xdf = df.drop(columns=[t])
    model = lgb.LGBMClassifier(n_estimators=50, num_leaves=8, verbose=-1, n_jobs=1).fit(Xdf.to_numpy(float), df[t])
    schema = infer_schema(Xdf)
    groups = list(schema.groups().values())
    assert groups
    X = Xdf.to_numpy(float)
    names = list(Xdf.columns)
    frozen = [j for j, n in enumerate(names) if n in ("age", "sex")]
    cr = CounterfactualRules(random_state=0, groups=groups).fit(X, model.predict(X), feature_names=names)
    f = model.predict(X)
    done = 0
    for i in np.flatnonzero(f == 0)[:15]:
        rule = cr.local_rule(X[i], 1, fixed=frozen)
        assert not set(rule.features) & set(frozen)
        for g in groups:                          # a group is in S whole or not at all
            assert set(g) <= set(rule.features) or not set(g) & set(rule.features)
        Z = cr.sample_counterfactuals(X[i], rule, n=3)
        for g in groups:
            np.testing.assert_array_equal(Z[:, g].sum(axis=1), 1.0)
        np.testing.assert_array_equal(Z[:, frozen], np.repeat(X[i:i + 1, frozen], len(Z), axis=0))
        done += 1
    assert done >= 5


def test_region_from_filter():
    names = ["Age", "Income", "Hours per week"]
    lo, hi = region_from_filter("Age >= 30 and Income < 5e4 & `Hours per week` > 20", names)
    assert lo[0] < 30 <= hi[0] and not (5e4 <= hi[1]) and lo[2] == 20
    X = np.array([[30, 49999, 21], [29.9, 1, 21], [40, 5e4, 25], [40, 1, 20]])
    inside = np.all((X > lo) & (X <= hi), axis=1)
    assert inside.tolist() == [True, False, False, False]
    with pytest.raises(ValueError, match="Unknown feature"):
        region_from_filter("Salary > 3", names)
    with pytest.raises(ValueError, match="Cannot read"):
        region_from_filter("Age is old", names)
    with pytest.raises(ValueError, match="cross"):
        region_from_filter("Age > 5 and Age < 3", names)


@pytest.mark.parametrize("text, shown", [
    ("Age >= 30", "Age >= 30"), ("Income < 5e4", "Income < 50,000"), ("Age > 30", "Age > 30"),
    ("Age <= 30", "Age <= 30"), ("Age >= 30 and Age < 50.5", "30 <= Age < 50.5"),
    ("20 < Age <= 40", "20 < Age <= 40"), ("Age >= 0", "Age >= 0"), ("Age < 0", "Age < 0"),
    ("Age >= -3 and Age <= 7", "-3 <= Age <= 7")])
def test_a_filter_reads_back_as_written(text, shown):
    """A sub-population is shown as its filter was written: ``Age >= 30`` is kept as
    ``Age > nextafter(30, -inf)`` and was shown "Age > 29.9999"; no float lies between that
    bound and 30, so ``>=`` is exact. The shown condition holds for exactly the rows the box does."""
    lo, hi = region_from_filter(text, ["Age", "Income"])
    names = ["Age", "Income"]
    bounded = [j for j in range(2) if np.isfinite(lo[j]) or np.isfinite(hi[j])]      # as region_text
    assert bounded and rule_text(bounded, lo, hi, names) == shown
    grid = np.array([-3, -1e-300, 0, 20, 29.999999, 30, 40, 50.5, 1e5])
    cond = shown.replace(",", "").split(" and ")
    assert len(cond) == len(bounded)
    for j, text in zip(bounded, cond):                # each shown condition, read as Python, holds where the box does
        assert names[j] in text and not any(n in text for n in names if n != names[j]), (j, text)
        ok = [eval(text.replace(names[j], repr(float(v)))) for v in grid]
        inside = (grid > lo[j]) & (grid <= hi[j])
        assert ok == inside.tolist(), (text, grid[np.array(ok) != inside])


def test_clear_errors(small):
    X, y, cr = small
    with pytest.raises(NotFittedError, match="not fitted"):
        CounterfactualRules().local_rule(X[0], 1)
    with pytest.raises(ValueError, match="finite"):
        cr.local_rule(X[0][:2], 1)
    with pytest.raises(NoCounterfactualRuleError, match="target"):
        cr.local_rule(X[0], 7)
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="missing"):
        CounterfactualRules().fit(bad, y)
    with pytest.raises(NoCounterfactualRuleError, match="immutable"):
        cr.local_rule(X[0], 1 - cr.y_[0], fixed=[0, 1, 2, 3])


def test_max_rows_samples_the_estimation_rows_only():
    X, y = make_data("binary", n=1500, d=4, seed=5)
    cr = CounterfactualRules(n_estimators=5, max_depth=4, random_state=0, max_rows=600).fit(X, y)
    assert cr.X_.shape == (600, 4) and len(cr.surrogate_.estimators_[0].tree_.value) > 1
    assert cr.surrogate_.n_features_in_ == 4 and cr.fidelity_ > 0.8      # fitted on all 1500 rows
    x = X[3]
    for S in ([0], [1, 3]):
        assert cr.cdp(x, S, 1) == pytest.approx(brute_cdp(cr, x, S, 1), abs=1e-12)
