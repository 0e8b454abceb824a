"""The faster T-CREx fit gives what the first membership step gave (tests/tcrex_v1.py): the same
rules (bounds, accuracy, feasibility), grid, metarule tree, metarules and explanations,
on Adult at the paper's settings (the carried 10,000-row sample, and the whole file where
../shared/data holds it), on the credit demo, and on awkward data."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import adult_sources
from tcrex_v1 import TCRExV1

from core.intake.demo import synthetic_credit
from core.schema import infer_schema
from core.tcrex import TCREx


def assert_same_fit(new: TCREx, old: TCREx, X_query: np.ndarray) -> None:
    assert len(new.rules_) == len(old.rules_)
    for a, b in zip(new.rules_, old.rules_):
        np.testing.assert_array_equal(a.lower, b.lower)
        np.testing.assert_array_equal(a.upper, b.upper)
        assert (a.accuracy, a.feasibility) == (b.accuracy, b.feasibility)
    assert len(new.grid_) == len(old.grid_) and new.n_cells_ == old.n_cells_
    for g, h in zip(new.grid_, old.grid_):
        np.testing.assert_array_equal(g, h)
    assert new.metarule_tree_.keys() == old.metarule_tree_.keys()
    for k in old.metarule_tree_:
        np.testing.assert_array_equal(new.metarule_tree_[k], old.metarule_tree_[k])
    assert len(new.metarules_) == len(old.metarules_)
    for m, o in zip(new.metarules_, old.metarules_):
        np.testing.assert_array_equal(m.lower, o.lower)
        np.testing.assert_array_equal(m.upper, o.upper)
        assert (m.rule, m.worst_case_changes, m.node) == (o.rule, o.worst_case_changes, o.node)
    np.testing.assert_array_equal(new.explain(X_query), old.explain(X_query))
    # the same export but for the time each fit took (the result shape records it)
    assert {**new.to_dict(), "elapsed": None} == {**old.to_dict(), "elapsed": None}
    assert new.to_text() == old.to_text()


def fit_both(X, y, target, **kw):
    """Both fits, or (None, None) when both refuse with the same error."""
    try:
        old = TCRExV1(**kw).fit(X, y, target)
    except Exception as e:
        with pytest.raises(type(e)) as got:
            TCREx(**kw).fit(X, y, target)
        assert str(got.value) == str(e)
        return None, None
    return TCREx(**kw).fit(X, y, target), old


@pytest.fixture(scope="module", params=adult_sources())
def adult(request):
    import xgboost as xgb
    from sklearn.model_selection import train_test_split

    from core.intake import io

    path = request.param
    df = io.load_table(path.read_bytes(), path.name)
    prep = io.prepare_data(df, df.attrs["target"])
    groups = list(infer_schema(prep.X, kinds=prep.kinds, groups=prep.groups).groups().values())
    X = prep.X.to_numpy(float)
    y = prep.y.to_numpy().astype(int)
    Xtr, Xte, ytr, _ = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    f = xgb.XGBClassifier(n_estimators=50, max_leaves=8, grow_policy="lossguide", tree_method="hist",
                          n_jobs=1).fit(Xtr, ytr)
    return Xtr, f.predict(Xtr), Xte, groups, path.name


@pytest.mark.parametrize("tau", [0.9, 0.99])
@pytest.mark.parametrize("target", [1, 0])
def test_adult_at_the_papers_settings(adult, tau, target):
    X, y, X_test, groups, source = adult
    new, old = fit_both(X, y, target, rho=0.02, tau=tau, groups=groups, random_state=0)
    if (source, target, tau) == ("adult_sample.csv", 1, 0.99):
        # On the sample's 7,000 training rows no box of "> 50K" predictions at 99% holds 2%
        # of them (140 rows): both fits refuse alike (fit_both checked the error); compare
        # the fits at rho 0.01, where one rule holds.
        assert new is None and old is None
        new, old = fit_both(X, y, target, rho=0.01, tau=tau, groups=groups, random_state=0)
    assert new is not None and new.rules_
    assert_same_fit(new, old, np.vstack([X, X_test]))


@pytest.mark.parametrize("tau", [0.8, 0.9, 0.99])
@pytest.mark.parametrize("target", [1, 0])
def test_credit_demo(tau, target):
    import lightgbm as lgb

    df, t = synthetic_credit(3000, seed=2)
    X = df.drop(columns=[t])
    y = lgb.LGBMClassifier(n_estimators=50, num_leaves=8, verbose=-1, n_jobs=1).fit(X, df[t]).predict(X)
    groups = list(infer_schema(X).groups().values())
    for rho, n_trees in ((0.02, 1), (0.05, 3)):
        new, old = fit_both(X.to_numpy(float), y, target, rho=rho, tau=tau, n_trees=n_trees, groups=groups,
                            random_state=0)
        # the one setting no rule meets: 99% approvals in a box of 5% of the applicants
        refused = (tau, target, rho) == (0.99, 1, 0.05)
        assert (old is None) == refused, (tau, target, rho)
        if not refused:                 # (a refusal: both the same error, checked by fit_both)
            assert_same_fit(new, old, X.to_numpy(float))


def test_awkward_data_nan_non_binary_one_hot_and_regression():
    """NaNs (outside every box), one-hot columns holding values other than 0 and 1
    (where the appendix-A corrections change a box), a forest and regression."""
    rng = np.random.default_rng(3)
    n = 3000
    num = rng.normal(size=(n, 3))
    cat = np.eye(4)[rng.integers(0, 4, n)]
    cat[rng.random(n) < 0.05] = 0.0                      # rows with no category
    cat[rng.random(n) < 0.05, 1] = 0.3                   # a value that is neither 0 nor 1
    X = np.hstack([num, cat])
    X[rng.random(X.shape) < 0.01] = np.nan
    score = num[:, 0] + np.nan_to_num(num[:, 1]) + 2 * np.nan_to_num(X[:, 4]) - np.nan_to_num(X[:, 6])
    y = (np.nan_to_num(score) > 0.5).astype(int)
    groups = [[3, 4, 5, 6]]
    for tau, n_trees in ((0.8, 1), (0.9, 1), (0.9, 4)):
        for target in (0, 1):
            new, old = fit_both(X, y, target, rho=0.02, tau=tau, n_trees=n_trees, groups=groups, random_state=1)
            assert old is not None, (tau, n_trees, target)          # every setting here has rules
            assert_same_fit(new, old, X)
    Xr = np.nan_to_num(X)
    new, old = fit_both(Xr, np.nan_to_num(score), (0.5, np.inf), rho=0.02, tau=0.9, random_state=0)
    assert_same_fit(new, old, Xr)
