"""TreeEnsemble: exact parity with every source library, invariants, structure."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FAMILY_IDS

from core.errors import ModelError, UnsupportedModelError
from core.intake.models import from_model
from core.intake.parsing import probe_points
from core.model import Tree, TreeEnsemble, float32_le_bound


def _points(ens, X):
    """Random points, points exactly on split thresholds, their float neighbours, training values."""
    P = probe_points(ens, 300, seed=1)
    rng = np.random.default_rng(2)
    near = P[300:].copy()
    j = rng.integers(0, ens.n_features, near.shape[0])
    up = near.copy()
    up[np.arange(len(j)), j] = np.nextafter(near[np.arange(len(j)), j], np.inf)
    down = near.copy()
    down[np.arange(len(j)), j] = np.nextafter(near[np.arange(len(j)), j], -np.inf)
    f32 = near.astype(np.float32).astype(np.float64)  # exactly representable in float32
    return np.vstack([P, up, down, f32, X])


@pytest.mark.parametrize("fid", FAMILY_IDS)
def test_parity_with_source_library(fitted, fid):
    model, X, y, kind = fitted(fid)
    ens = from_model(model)
    P = _points(ens, X)
    if kind == "regression":
        ours, theirs = ens.predict(P), np.asarray(model.predict(P), dtype=float)
        tol = 1e-5 * max(1.0, np.abs(theirs).max()) if fid.startswith("xgb") else 1e-9
        assert np.max(np.abs(ours - theirs)) <= tol
        return
    proba, ref = ens.predict_proba(P), np.asarray(model.predict_proba(P), dtype=float)
    assert proba.shape == ref.shape
    assert np.max(np.abs(proba - ref)) <= 1e-6
    labels, ref_labels = ens.predict(P), model.predict(P)
    top2 = np.sort(ref, axis=1)[:, -2:]
    tie = np.abs(top2[:, 1] - top2[:, 0]) <= 1e-6
    assert np.all((labels == ref_labels) | tie)
    np.testing.assert_array_equal(ens.classes, model.classes_)


@pytest.mark.parametrize("fid", ["sk-rf-bin", "xgb-bin", "lgb-multi", "sk-gb-reg"])
def test_leaf_boxes_contain_the_points_that_reach_them(fitted, fid):
    model, X, *_ = fitted(fid)
    ens = from_model(model)
    leaves = ens.apply(X)
    for t, (ids, lo, hi) in enumerate(ens.leaf_boxes()):
        pos = np.searchsorted(ids, leaves[:, t])
        assert np.all(ids[pos] == leaves[:, t])
        assert np.all(X > lo[pos]) and np.all(X <= hi[pos])


def test_split_levels_are_sorted_distinct_thresholds(fitted):
    model, X, *_ = fitted("sk-rf-bin")
    ens = from_model(model)
    for j in range(ens.n_features):
        lv = ens.split_levels(j)
        assert np.all(np.diff(lv) > 0)
        raw = np.concatenate([t.threshold[t.feature == j] for t in ens.trees])
        assert set(raw) == set(lv)


def test_isolation_forest_scores_match_sklearn():
    from sklearn.ensemble import IsolationForest

    X = np.random.default_rng(0).normal(size=(300, 4))
    m = IsolationForest(n_estimators=40, max_features=0.75, random_state=0).fit(X)
    ens = from_model(m)
    P = np.vstack([probe_points(ens, 200), X])
    np.testing.assert_allclose(ens.score_samples(P), m.score_samples(P), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(ens.predict(P), m.predict(P))


def test_float32_bound_is_exact():
    rng = np.random.default_rng(0)
    a = rng.normal(size=2000).astype(np.float32)
    T = float32_le_bound(a)
    assert np.all(T.astype(np.float32) <= a)                       # T itself satisfies the rule
    assert np.all(np.nextafter(T, np.inf).astype(np.float32) > a)  # the next float64 does not


def test_sklearn_float32_cast_at_the_threshold():
    """A float64 x just above the stored threshold that rounds down to it in float32 goes left."""
    from sklearn.tree import DecisionTreeClassifier

    X = np.array([[0.1], [0.2], [0.3], [0.4]])
    m = DecisionTreeClassifier().fit(X, [0, 0, 1, 1])
    t = m.tree_.threshold[0]
    xs = np.array([t, np.nextafter(t, np.inf), float(np.float32(t)), np.nextafter(float(np.float32(t)), np.inf),
                   np.nextafter(float(np.nextafter(np.float32(t), np.float32(1))), -np.inf)])[:, None]
    np.testing.assert_array_equal(from_model(m).predict(xs), m.predict(xs))


def test_xgboost_strict_less_than_in_float32():
    import xgboost as xgb

    X = np.array([[0.0], [1.0], [2.0], [3.0]] * 5)
    y = np.array([0, 0, 1, 1] * 5)
    m = xgb.XGBClassifier(n_estimators=1, max_depth=1, learning_rate=1.0, n_jobs=1).fit(X, y)
    ens = from_model(m)
    t = ens.trees[0]
    cond = float(np.float32(1.5)) if np.isclose(t.threshold[0], 1.5, atol=1e-3) else t.threshold[0]
    xs = np.array([cond, np.nextafter(cond, -np.inf), np.nextafter(cond, np.inf), 1.5, 1.4999999, 1.50000001])[:, None]
    np.testing.assert_allclose(ens.predict_proba(xs), m.predict_proba(xs), atol=1e-7)


def test_tree_invariants_are_checked():
    ok = dict(children_left=[1, -1, -1], children_right=[2, -1, -1], feature=[0, -1, -1],
              threshold=[0.5, np.nan, np.nan], value=[[0.0], [1.0], [2.0]])
    Tree(**ok)
    with pytest.raises(ModelError, match="larger than its parent"):
        Tree(**{**ok, "children_left": [0, -1, -1]})
    with pytest.raises(ModelError, match="exactly one child"):
        Tree(**{**ok, "children_right": [-1, -1, -1]})
    with pytest.raises(ModelError, match="reached exactly once"):
        Tree(**{**ok, "children_left": [1, -1, -1], "children_right": [1, -1, -1]})


def test_hand_built_ensemble_predicts_by_the_split_rule():
    stump = Tree([1, -1, -1], [2, -1, -1], [0, -1, -1], [1.0, np.nan, np.nan], [[0.0], [-1.0], [1.0]])
    ens = TreeEnsemble((stump,), n_features=1, feature_names=("a",), task="classification",
                       aggregation="sum", link="sigmoid", base_score=[0.0], classes=np.array([0, 1]))
    np.testing.assert_array_equal(ens.predict([[1.0], [np.nextafter(1.0, 2)]]), [0, 1])
    with pytest.raises(ValueError, match="NaN"):
        ens.predict([[np.nan]])
    with pytest.raises(ValueError, match="expects"):
        ens.predict([[1.0, 2.0]])


def test_unsupported_models_are_refused_with_the_list():
    """(HistGradientBoostingClassifier was the unsupported tree ensemble here until it was
    supported: tests/intake/test_hgb.py; AdaBoost is still refused.)"""
    from sklearn.ensemble import AdaBoostClassifier
    from sklearn.linear_model import LogisticRegression

    X = np.random.default_rng(0).normal(size=(60, 3))
    y = (X[:, 0] > 0).astype(int)
    for m in (LogisticRegression().fit(X, y), AdaBoostClassifier(n_estimators=3).fit(X, y), object()):
        with pytest.raises(UnsupportedModelError, match="Supported"):
            from_model(m)


def test_lightgbm_categorical_splits_are_parsed_exactly():
    """Formerly refused; issue 15 asks for them (tests/intake/test_parse_categorical.py has the full checks)."""
    import lightgbm as lgb
    import pandas as pd

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"c": pd.Categorical(rng.integers(0, 6, 400)), "x": rng.normal(size=400)})
    y = (df["c"].cat.codes.isin([1, 3, 4]) ^ (df["x"] > 1)).astype(int)
    m = lgb.LGBMClassifier(n_estimators=5, verbose=-1, min_data_per_group=5, cat_smooth=1).fit(df, y)
    ens = from_model(m)
    assert ens.categorical_features == [0]
    from core.model.native import model_input

    X = np.array([[c, x] for c in range(ens.n_codes(0)) for x in (-2.0, 0.0, 1.5)])
    np.testing.assert_allclose(ens.predict_proba(X), m.predict_proba(model_input(ens, X)), rtol=0, atol=1e-12)


def test_xgboost_categorical_splits_match_the_library():
    import pandas as pd
    import xgboost as xgb

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"c": pd.Categorical(rng.integers(0, 6, 400)), "x": rng.normal(size=400)})
    y = (df["c"].cat.codes.isin([1, 3, 4])).astype(int)
    m = xgb.XGBClassifier(n_estimators=3, enable_categorical=True, tree_method="hist", max_cat_to_onehot=1,
                          n_jobs=1).fit(df, y)
    ens = from_model(m)                  # verified against XGBoost on every code, the missing one too
    assert ens.categories[0] == tuple(range(6))
    from core.model.native import model_input

    codes = np.array([[c, x] for c in range(7) for x in (-1.0, 0.5)])
    np.testing.assert_allclose(ens.predict_proba(codes), m.predict_proba(model_input(ens, codes)), atol=1e-6)


def test_summary_and_names(fitted):
    model, X, *_ = fitted("lgb-bin")
    ens = from_model(model, feature_names=list("abcde"))
    assert ens.feature_names == tuple("abcde")
    assert ens.feature_index("c") == 2
    s = ens.summary()
    assert s["trees"] == 30 and s["features"] == 5 and s["task"] == "classification"


def test_lightgbm_zero_zone_thresholds():
    """LightGBM reads |x| <= 1e-35f as 0; splits between negatives and zero sit in that zone."""
    import lightgbm as lgb

    from core.intake.parsing.lightgbm import KZERO

    rng = np.random.default_rng(0)
    X = rng.choice([-1.0, 0.0, 1.0], size=(600, 2))
    y = (X[:, 0] >= 0).astype(int) ^ (X[:, 1] > 0).astype(int)
    m = lgb.LGBMClassifier(n_estimators=5, num_leaves=4, verbose=-1, n_jobs=1).fit(X, y)
    ens = from_model(m)
    thr = np.concatenate([t.threshold[t.feature >= 0] for t in ens.trees])
    assert np.any(np.abs(thr) <= 2 * KZERO)  # the case under test occurs
    vals = np.array([-2e-35, -KZERO, np.nextafter(-KZERO, -1), -5e-36, 0.0, 5e-36, KZERO,
                     np.nextafter(KZERO, 1), 2e-35, -1.0, 1.0])
    P = np.array([[a, b] for a in vals for b in vals])
    np.testing.assert_allclose(ens.predict_proba(P), m.predict_proba(P), atol=1e-12)


@pytest.mark.parametrize("fid", ["sk-rf-multi", "xgb-multi", "lgb-bin", "sk-gb-reg"])
def test_compiled_and_numpy_walks_agree(fitted, fid, monkeypatch):
    import core.model.flatwalk as ce  # the walk and its switch

    assert ce._treewalk is not None, "the compiled walk (core/model/_treewalk.c) was not built: reinstall with a C compiler"
    model, X, *_ = fitted(fid)
    ens = from_model(model)
    P = np.vstack([_points(ens, X)] * 30)  # large enough to use threads
    raw_c, leaves_c = ens.predict_raw(P), ens.apply(P)
    monkeypatch.setattr(ce, "USE_COMPILED", False)
    np.testing.assert_array_equal(ens.apply(P), leaves_c)
    np.testing.assert_allclose(ens.predict_raw(P), raw_c, rtol=0, atol=1e-12)


def test_any_memory_layout_and_dtype(fitted):
    model, X, *_ = fitted("sk-rf-bin")
    ens = from_model(model)
    ref = ens.predict_proba(np.ascontiguousarray(X))
    for variant in (np.asfortranarray(X), X[:, ::-1][:, ::-1], X.astype(np.float32).astype(np.float64)[::1],
                    __import__("pandas").DataFrame(X)):
        out = ens.predict_proba(variant)
        assert out.shape == ref.shape
    np.testing.assert_array_equal(ens.predict_proba(np.asfortranarray(X)), ref)
    np.testing.assert_array_equal(ens.apply(X[::2]), ens.apply(np.ascontiguousarray(X[::2])))
