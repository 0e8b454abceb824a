"""Missing values as a state (issue 26, item 2): rows with a missing number are kept,
predict as the library predicts them, and every analysis handles them.

* Parity: each family that routes missing values (scikit-learn trees and forests,
  HistGradientBoosting, XGBoost, LightGBM) trained with NaN predicts rows with NaN
  exactly as its library; GradientBoosting, which refuses NaN, still refuses them.
* :func:`core.model.missing.expand` is exact: the rewrite over "is missing" columns
  predicts what the original predicts on the same rows with NaN.
* Optimal counterfactuals of rows with a missing value equal brute force over the
  *original* ensemble (candidates: stay missing, or each split level / just above
  one), and get the target from the original model on the raw row (NaN where the
  counterfactual keeps a value missing).
* The analyst's settings: "is missing" fixed keeps it missing; its weight is the
  price of giving a value.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pandas as pd
import pytest
from oracles import returned_cost
from sklearn import ensemble as ske
from sklearn import tree as skt

from core.counterfactual import make_cost_model
from core.errors import DataError
from core.intake.models import from_model
from core.intake.workspace import build_workspace
from core.model.missing import expand, indicator_of
from core.optimal import optimal_counterfactual

EPS = 1e-9


def _data(n=600, seed=0, frac=0.2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)).round(2)
    y = ((X[:, 0] + X[:, 1] * X[:, 2] > 0) ^ (rng.random(n) < 0.05)).astype(int)
    Xn = X.copy()
    Xn[rng.random(X.shape) < frac] = np.nan
    Xn[np.isnan(Xn[:, 3]) & (rng.random(n) < 0.5), 0] = np.nan          # missing together too
    return Xn, y, X[:, 0] * 2 + X[:, 3]


def _families():
    import lightgbm as lgb
    import xgboost as xgb

    return {
        "sk-dt": lambda X, y, r: skt.DecisionTreeClassifier(max_depth=6, random_state=0).fit(X, y),
        "sk-rf": lambda X, y, r: ske.RandomForestClassifier(15, max_depth=5, random_state=0).fit(X, y),
        "sk-et": lambda X, y, r: ske.ExtraTreesClassifier(15, max_depth=5, random_state=0).fit(X, y),
        "sk-rf-reg": lambda X, y, r: ske.RandomForestRegressor(10, max_depth=5, random_state=0).fit(X, r),
        "hgb": lambda X, y, r: ske.HistGradientBoostingClassifier(max_iter=25).fit(X, y),
        "hgb-3": lambda X, y, r: ske.HistGradientBoostingClassifier(max_iter=15).fit(X, y + (r > 1)),
        "hgb-reg": lambda X, y, r: ske.HistGradientBoostingRegressor(max_iter=25).fit(X, r),
        "xgb": lambda X, y, r: xgb.XGBClassifier(n_estimators=25, max_depth=4, n_jobs=1).fit(X, y),
        "xgb-reg": lambda X, y, r: xgb.XGBRegressor(n_estimators=25, max_depth=4, n_jobs=1).fit(X, r),
        "lgbm": lambda X, y, r: lgb.LGBMClassifier(n_estimators=25, verbose=-1, n_jobs=1).fit(X, y),
        "lgbm-no-missing": lambda X, y, r: lgb.LGBMClassifier(n_estimators=25, use_missing=False, verbose=-1,
                                                              n_jobs=1).fit(X, y),
    }


def _outputs(ens, model, X):
    if ens.source.startswith("xgboost"):
        import xgboost as xgb

        m = model.get_booster().predict(xgb.DMatrix(X), output_margin=True)
        return ens.predict_raw(X)[:, 0], np.asarray(m, dtype=float), 2e-5
    if ens.is_classifier:
        return ens.predict_proba(X), model.predict_proba(X), 1e-12
    return ens.predict(X), model.predict(X), 1e-9


@pytest.mark.parametrize("family", list(_families()))
def test_rows_with_missing_values_predict_as_the_library(family):
    Xn, y, r = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = _families()[family](Xn, y, r)
    ens = from_model(model)
    assert ens.routes_missing
    rng = np.random.default_rng(5)
    T = rng.normal(size=(400, 4))
    T[rng.random(T.shape) < 0.35] = np.nan
    T[:5] = np.nan                                             # every value missing
    ours, theirs, tol = _outputs(ens, model, T)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=tol)
    feats = [0, 1, 3]                                         # the rewrite: exact on the same rows
    fill = [0.5, -1.0, 2.0]
    ex = expand(ens, feats, fill)
    assert not ex.routes_missing and ex.n_features == 7
    Z = np.hstack([np.nan_to_num(T), np.isnan(T[:, feats]).astype(float)])
    Z[:, 2] = np.where(np.isnan(T[:, 2]), 0.0, T[:, 2])
    keep = ~np.isnan(T[:, 2])                                   # feature 2 has no indicator: numbers only
    for k, j in enumerate(feats):
        Z[np.isnan(T[:, j]), j] = fill[k]
    np.testing.assert_array_equal(ex.predict_raw(Z[keep]), ens.predict_raw(T[keep]))


def test_a_model_that_refuses_missing_values_still_refuses_them():
    Xn, y, r = _data()
    X = pd.DataFrame(np.nan_to_num(Xn), columns=list("abcd"))
    model = ske.GradientBoostingClassifier(n_estimators=5).fit(X, y)
    ens = from_model(model)
    assert not ens.routes_missing
    with pytest.raises(ValueError, match="does not take missing values"):
        ens.predict(Xn[:3])
    df = pd.DataFrame(Xn, columns=list("abcd")).assign(y=y)
    with pytest.raises(DataError, match="missing values"):
        build_workspace(df, "y", model, name="gb")
    ws = build_workspace(df, "y", model, name="gb", drop_missing=True)
    assert len(ws.X) == int((~np.isnan(Xn).any(axis=1)).sum())


def _table(n=900, seed=3):
    """Adult-like raw data: numbers with NaN, a category column with NaN."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"age": rng.integers(18, 80, n).astype(float),
                       "income": rng.lognormal(3, 0.5, n).round(2),
                       "hours": rng.integers(10, 60, n).astype(float),
                       "job": rng.choice(["clerk", "nurse", "driver"], n)})
    y = (((df.income > 25) & (df.age > 30)) | (df.hours > 45)).astype(int)
    df.loc[rng.random(n) < 0.2, "income"] = np.nan
    df.loc[rng.random(n) < 0.1, "hours"] = np.nan
    df.loc[rng.random(n) < 0.08, "job"] = np.nan
    return df, y


def _hgb(df, y, kind="binary", **kw):
    frame = df.astype({"job": "category"})
    target = {"binary": y, "3-class": y + (df.age.fillna(0) > 60), "regression": df.age * 0.1 + y}[kind]
    cls = ske.HistGradientBoostingRegressor if kind == "regression" else ske.HistGradientBoostingClassifier
    return cls(categorical_features="from_dtype", random_state=0, **kw).fit(frame, target), target


@pytest.mark.parametrize("kind", ["binary", "3-class", "regression"])
def test_hgb_with_missing_values_every_row_kept_and_predicted_as_the_library(kind):
    from skops import io as sio

    from core.intake import io

    df, y = _table()
    model, target = _hgb(df, y, kind, max_iter=30, max_depth=4)
    back = io.load_model(sio.dumps(model), "hgb.skops")
    ws = build_workspace(df.assign(y=target), "y", back, name="hgb")
    assert len(ws.X) == len(df)
    assert set(indicator_of(ws.ensemble)) == {ws.ensemble.feature_names.index("income"),
                                              ws.ensemble.feature_names.index("hours")}
    assert any("rows have a missing number" in n for n in ws.notes)
    raw = df.astype({"job": "category"})
    np.testing.assert_allclose(ws.predictions.astype(float), model.predict(raw).astype(float), rtol=0, atol=1e-9)
    again = ws.to_raw(ws.X.to_numpy(float)).astype({"job": raw.job.dtype})
    assert again.income.isna().sum() == df.income.isna().sum()
    np.testing.assert_allclose(model.predict(again).astype(float), model.predict(raw).astype(float), rtol=0,
                               atol=1e-9)
    shown = ws.analyst_view(ws.X.to_numpy(float)[:50], list(range(50)))
    assert ((shown.income == "missing") == df.income[:50].isna().to_numpy()).all()
    assert ((shown.job == "missing") == df.job[:50].isna().to_numpy()).all()     # a category too
    assert not shown.isna().any().any()


def test_hgb_pipeline_with_missing_values():
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OrdinalEncoder

    df, y = _table()
    pre = ColumnTransformer([("cat", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1,
                                                    encoded_missing_value=-2), ["job"])],
                            remainder="passthrough")
    model = Pipeline([("pre", pre), ("hgb", ske.HistGradientBoostingClassifier(max_iter=20, random_state=0))])
    model.fit(df, y)
    ws = build_workspace(df.assign(y=y), "y", model, name="pipe")
    assert len(ws.X) == len(df)
    np.testing.assert_array_equal(ws.predictions, model.predict(df))
    X = ws.X.to_numpy(float)
    rows = [r for r in np.flatnonzero(ws.X.filter(like="is missing").sum(axis=1).to_numpy() > 0)][:4]
    assert rows
    for r in rows:
        tgt = 1 - ws.predictions[r]
        res = optimal_counterfactual(ws.ensemble, X[r], tgt, schema=ws.schema, X_ref=X, model=model, time_limit=30)
        assert res.found and res.valid, res.message
        assert model.predict(ws.to_raw(res.x[None, :]))[0] == tgt


def _native_brute_force(ws, native, x_exp, target):
    """Minimum l1 cost by enumeration over the original ensemble (NaN routing):
    each number at its value, a split level or just above one; a missing one may
    also stay missing; each one-hot group at each level. Costed in the rewritten
    space with the workspace's cost model."""
    ens = ws.ensemble
    states = indicator_of(ens)
    cm = make_cost_model(ens, "l1", schema=ws.schema)
    groups = [list(g) for g in ws.schema.groups().values() if len(g) >= 2]
    in_group = {j for g in groups for j in g}
    d = native.n_features
    axes, kinds = [], []
    for j in range(d):
        if j in in_group:
            continue
        lv = native.split_levels(j)
        lv = lv[lv < 1e300]
        if ws.schema[j].kind == "integer":                     # whole numbers: at or just above a level
            vals = {x_exp[j], *np.floor(lv), *(np.floor(lv) + 1)}
        else:
            vals = {x_exp[j], *lv, *(lv + EPS)}
        if j in states and x_exp[states[j]] > 0.5:
            vals.add(np.nan)
        axes.append(sorted(vals, key=lambda v: (np.isnan(v), v)))
        kinds.append(("num", j))
    for g in groups:
        axes.append(list(range(len(g))))
        kinds.append(("cat", g))
    base = x_exp[:d].copy()
    for j, k in states.items():
        if x_exp[k] > 0.5:
            base[j] = np.nan
    P, Q = [], []
    for combo in itertools.product(*axes):
        p = base.copy()
        q = x_exp.copy()
        for (kind, where), v in zip(kinds, combo):
            if kind == "cat":
                p[where] = 0.0
                p[where[v]] = 1.0
                q[where] = p[where]
                continue
            p[where] = v
            if np.isnan(v):
                continue                                       # stays missing: q keeps fill and indicator 1
            on = ws.schema[where].kind != "integer" and np.isin(v, native.split_levels(where) + EPS)
            q[where] = v - EPS if on else v
            if where in states:
                q[states[where]] = 0.0
        P.append(p)
        Q.append(q)
    P, Q = np.array(P), np.array(Q)
    ok = native.predict(P) == target
    return float(cm.cost(x_exp, Q[ok]).min()) if ok.any() else np.inf


def _tiny(name, df, y):
    import lightgbm as lgb
    import xgboost as xgb

    X = df.drop(columns="job")
    if name == "hgb":
        return ske.HistGradientBoostingClassifier(max_iter=4, max_leaf_nodes=4, random_state=0).fit(X, y), X
    if name == "xgb":
        return xgb.XGBClassifier(n_estimators=4, max_depth=2, n_jobs=1).fit(X, y), X
    if name == "lgbm":
        return lgb.LGBMClassifier(n_estimators=4, num_leaves=4, verbose=-1, n_jobs=1).fit(X, y), X
    return ske.RandomForestClassifier(4, max_depth=3, random_state=0).fit(X, y), X


@pytest.mark.parametrize("name", ["hgb", "xgb", "lgbm", "rf"])
def test_optimal_counterfactuals_of_rows_with_missing_values_equal_brute_force(name):
    df, y = _table(n=500, seed=7)
    model, X = _tiny(name, df, y)
    ws = build_workspace(X.assign(y=y), "y", model, name="tiny")
    native = from_model(model)
    ens, C = ws.ensemble, ws.X.to_numpy(float)
    states = indicator_of(ens)
    rows = np.flatnonzero(C[:, list(states.values())].sum(axis=1) > 0)
    checked = 0
    for r in rows[:40]:
        target = 1 - ws.predictions[r]
        res = optimal_counterfactual(ens, C[r], target, schema=ws.schema, norm="l1", X_ref=C, model=model)
        brute = _native_brute_force(ws, native, C[r], target)
        if not np.isfinite(brute):
            assert not res.found
            continue
        assert res.found and res.status == "optimal", res.message
        assert returned_cost(res, ens, C[r], "l1", ws.schema) == pytest.approx(brute, rel=1e-6, abs=1e-7)
        raw = ws.to_raw(res.x[None, :])
        assert model.predict(raw)[0] == target                 # the original model, NaN where kept missing
        checked += 1
    assert checked >= 8


@pytest.fixture(scope="module")
def income_case():
    """An HGB model on the Adult-like table, its workspace, codes and the column of
    "income is missing"."""
    df, y = _table()
    model, _ = _hgb(df, y, max_iter=30, max_depth=4)
    ws = build_workspace(df.assign(y=y), "y", model, name="hgb")
    return df, model, ws, ws.X.to_numpy(float), ws.ensemble.feature_names.index("income is missing")


def test_missing_stays_missing_when_fixed_and_its_weight_prices_a_value(income_case):
    df, model, ws, C, k = income_case
    ens = ws.ensemble
    assert ws.schema["income is missing"].actionability == "decrease"
    assert ws.schema["income is missing"].weight == 0.0
    rows = [r for r in np.flatnonzero(C[:, k] > 0.5) if ws.predictions[r] == 0][:10]
    gave = []
    for r in rows:
        res = optimal_counterfactual(ens, C[r], 1, schema=ws.schema, X_ref=C, model=model)
        assert res.found and res.valid
        if res.x[k] < 0.5:
            gave.append((r, res.cost))
    assert gave, "no counterfactual gave income a value"
    fixed = ws.schema.with_updates("income is missing", actionability="fixed")
    valued = {5.0: 0, 0.1: 0}
    for r, cost in gave:
        kept = optimal_counterfactual(ens, C[r], 1, schema=fixed, X_ref=C, model=model)
        assert kept.found and kept.x[k] > 0.5                      # kept missing
        assert kept.cost >= cost - 1e-9
        assert model.predict(ws.to_raw(kept.x[None, :]).astype({"job": df.job.astype("category").dtype}))[0] == 1
        for w in valued:
            # a value now costs the weight on top: the best is the cheaper of keeping it missing
            # (kept.cost) and the best with a value (cost, found at weight 0, plus w)
            res = optimal_counterfactual(ens, C[r], 1, schema=ws.schema.with_updates("income is missing", weight=w),
                                         X_ref=C, model=model)
            assert res.found and res.cost == pytest.approx(min(kept.cost, cost + w), rel=1e-9, abs=1e-12), (r, w)
            assert (res.x[k] < 0.5) == (cost + w < kept.cost), (r, w, cost, kept.cost)
            valued[w] += bool(res.x[k] < 0.5)
    # weight 5 is dearer than any other way here; at 0.1 a value is the cheaper way for some rows
    assert valued[5.0] == 0 and valued[0.1] >= 1, valued
    # a value never becomes missing
    present = [r for r in np.flatnonzero(C[:, k] < 0.5) if ws.predictions[r] == 0][:10]
    for r in present:
        res = optimal_counterfactual(ens, C[r], 1, schema=ws.schema, X_ref=C, model=model)
        assert res.found and res.x[k] < 0.5


def test_every_analysis_handles_rows_with_missing_values():
    """Regions, T-CREx, counterfactual rules, FCCA and the audit on a workspace whose
    rows have missing numbers and categories: each runs, and every counterfactual it
    gives for a row with a missing value gets the target from the original model."""
    from core.audit.run import run_audit
    from core.compression import fcca
    from core.regions import exact_counterfactual
    from core.rules.estimator import CounterfactualRules
    from core.ruletext import rule_text
    from core.tcrex import TCREx

    df, y = _table()
    df["sex"] = np.random.default_rng(0).integers(0, 2, len(df))
    model, _ = _hgb(df, y, max_iter=30, max_depth=4)
    ws = build_workspace(df.assign(y=y), "y", model, name="hgb", protected=["sex"])
    ens, X, schema = ws.ensemble, ws.X.to_numpy(float), ws.schema
    cat = df.astype({"job": "category"}).job.dtype

    def says(x):
        return model.predict(ws.to_raw(np.atleast_2d(x)).astype({"job": cat}))

    states = list(indicator_of(ens).values())
    gappy = np.flatnonzero((X[:, states].sum(axis=1) > 0) & (ws.predictions == 0))[:5]
    assert len(gappy) == 5
    for r in gappy:
        res = exact_counterfactual(ens, X[r], 1, schema=schema)
        assert res.found and says(res.x)[0] == 1
    groups = [g for g in schema.groups().values() if len(g) > 1]
    tc = TCREx(random_state=0, groups=groups).fit(X, ws.predictions, 1, feature_names=list(ens.feature_names))
    assert tc.rules_
    cr = CounterfactualRules(random_state=0).fit(X, ws.predictions, feature_names=list(ens.feature_names))
    rule = cr.local_rule(X[gappy[0]], 1)
    text = rule_text(rule.features, rule.lower, rule.upper, ens.feature_names, groups)
    assert " is missing <=" not in text and " is missing >" not in text     # the state in words
    res = fcca(ens, X[:150], ws.predictions[:150], schema=schema, n_jobs=1)
    assert res is not None
    audit = run_audit(ens, ws.X.iloc[:120], schema=schema, target=1, protected=["sex"], model=model,
                      y=ws.y.iloc[:120])
    cfs = audit.counterfactuals
    has = ~np.isnan(cfs).any(axis=1)
    rows_missing = X[audit.rows["row"].to_numpy(dtype=int)][:, states].sum(axis=1) > 0
    assert (has & rows_missing).sum() >= 5
    np.testing.assert_array_equal(says(cfs[has]), np.ones(int(has.sum())))


def test_the_changes_chart_reads_a_given_value_as_a_state(income_case):
    from core.figures import counterfactual_changes_figure

    df, model, ws, C, k = income_case
    ens = ws.ensemble
    for r in np.flatnonzero((C[:, k] > 0.5) & (ws.predictions == 0)):
        res = optimal_counterfactual(ens, C[r], 1, schema=ws.schema, X_ref=C, model=model)
        if res.found and res.x[k] < 0.5:
            break
    else:
        pytest.fail("no counterfactual gave income a value")
    span = np.array([f.span for f in ws.schema.features])
    bars = counterfactual_changes_figure(res, list(ens.feature_names), span).data[0]
    from core.shown import number_text

    j = list(ens.feature_names).index("income")
    assert f"income: missing → {number_text(res.x[j])}" in list(bars.y)      # the change reads once, with its value
    assert not any(str(label).endswith(" is missing") or str(label) == "income" for label in bars.y)
