"""Native categorical splits of LightGBM parsed into the one TreeEnsemble: parity
with the library on every category, the missing one and unseen ones, from the
model object, its text file (CRLF too) and through the sandboxed reader; and a
model trained on Adult's categorical columns used on the raw table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import adult_sources, every_code

from core.intake import io
from core.intake.models import from_model
from core.intake.sandbox import load_vetted
from core.intake.workspace import build_workspace
from core.model.native import model_input

CATS = [f"k{i}" for i in range(40)]


@pytest.fixture(scope="module")
def synthetic():
    import lightgbm as lgb

    rng = np.random.default_rng(0)
    n = 3000
    df = pd.DataFrame({"a": rng.normal(size=n), "c": pd.Categorical(rng.choice(CATS, n)),
                       "b": rng.normal(size=n), "d": pd.Categorical(rng.choice(["lo", "mid", "hi"], n))})
    df.loc[rng.random(n) < 0.05, "c"] = np.nan
    y = ((df.a > 0) ^ df.c.isin(CATS[::3]) | (df.d == "hi")).astype(int)
    model = lgb.LGBMClassifier(n_estimators=60, num_leaves=16, verbose=-1, min_data_per_group=5, cat_smooth=1,
                               n_jobs=1).fit(df, y)
    return df, y, model


def test_every_category_and_missing_match_the_library(synthetic, tmp_path):
    df, y, model = synthetic
    ens = from_model(model)
    assert ens.categorical_features == [1, 3] and ens.categories[1] == tuple(df["c"].cat.categories)
    assert "missing" in ens.category_label(1, ens.missing_code(1))
    X = every_code(ens)
    np.testing.assert_allclose(ens.predict_proba(X), model.predict_proba(model_input(ens, X)), rtol=0, atol=1e-12)
    path = tmp_path / "cat.txt"
    model.booster_.save_model(path)
    for data, name in ((path.read_bytes(), "cat.txt"), (path.read_bytes().replace(b"\n", b"\r\n"), "crlf.txt")):
        for loaded in (from_model(io.load_model(data, name)), load_vetted(data, name).ensemble):
            assert loaded.categories == ens.categories
            np.testing.assert_allclose(loaded.predict_raw(X)[:, 0],
                                       model.booster_.predict(model_input(loaded, X), raw_score=True),
                                       rtol=0, atol=1e-12)


def test_raw_table_with_unseen_and_missing_categories(synthetic):
    """The workspace's analysis view has one 0/1 column per category (core.model.categorical);
    unseen and missing values are the all-zero row, routed as the model routes them."""
    df, y, model = synthetic
    raw = df.astype({"c": object, "d": object}).assign(label=y)
    raw.loc[0, "c"] = "never-seen"
    raw.loc[1, "d"] = None
    ws = build_workspace(raw, "label", model, name="cat")
    c_cols = [f"c={v}" for v in df["c"].cat.categories]
    assert c_cols[0] in ws.X.columns and ws.X.loc[0, c_cols].sum() == 0 and ws.X.loc[2, c_cols].sum() == 1
    assert {f.kind for f in ws.schema.features if f.name in c_cols} == {"one-hot"}
    assert any("never saw" in n for n in ws.notes)
    expected = df.copy()
    expected["c"] = expected["c"].astype(object)
    expected.loc[0, "c"] = np.nan
    expected.loc[1, "d"] = np.nan
    expected = expected.astype({"c": df["c"].dtype, "d": df["d"].dtype})
    np.testing.assert_array_equal(ws.predictions, model.predict(expected))
    back = ws.to_raw(ws.X.head(50))
    assert list(back.columns) == ["a", "c", "b", "d"] and back["c"].iloc[2] == df["c"].iloc[2]
    assert pd.isna(back["c"].iloc[0]) and pd.isna(back["d"].iloc[1])
    np.testing.assert_array_equal(model.predict(back), ws.predictions[:50])


def test_integer_categories_from_an_array_model():
    import lightgbm as lgb

    rng = np.random.default_rng(1)
    X = np.column_stack([rng.normal(size=2000), rng.integers(0, 12, 2000)]).astype(float)
    y = (X[:, 0] + np.isin(X[:, 1], [1, 5, 7, 11]) > 0.5).astype(int)
    model = lgb.LGBMClassifier(n_estimators=30, num_leaves=8, verbose=-1, min_data_per_group=5, cat_smooth=1,
                               n_jobs=1).fit(X, y, categorical_feature=[1])
    ens = from_model(model)
    assert ens.categories[1] == tuple(range(12)) and ens.meta["input"] == "array"
    P = every_code(ens)
    np.testing.assert_allclose(ens.predict_proba(P), model.predict_proba(model_input(ens, P)), rtol=0, atol=1e-12)
    Q = P.copy()
    Q[:, 1] = np.where(P[:, 1] == ens.missing_code(1), np.nan, P[:, 1])   # missing as NaN for LightGBM
    np.testing.assert_allclose(ens.predict_proba(P), model.predict_proba(Q), rtol=0, atol=1e-12)
    # a raw table of codes as LightGBM reads them: int(x) (5.6 is 5, -0.5 is 0); above the
    # largest, negative or missing goes the missing value's way
    codes = np.r_[np.arange(12), 12, 40, -1, -0.5, 2.7, 5.6, 7.2, 1e10, np.nan]
    raw = np.column_stack([np.tile([-0.8, 0.1, 0.9], codes.size), np.repeat(codes, 3)])
    ws = build_workspace(pd.DataFrame(raw, columns=["x", "code"]), None, model, name="codes",
                         confirm_positions=True)
    np.testing.assert_allclose(ws.ensemble.predict_proba(ws.X.to_numpy(float)), model.predict_proba(raw),
                               rtol=0, atol=1e-12)
    assert any("not whole codes" in n for n in ws.notes)
    from core.optimal import optimal_counterfactual

    X_ws = ws.X.to_numpy(float)
    for row in np.flatnonzero(ws.predictions == 0)[:3]:       # checked on the original model, given codes
        res = optimal_counterfactual(ws.ensemble, X_ws[row], 1, schema=ws.schema, X_ref=X_ws, model=model)
        assert res.found and res.status == "optimal" and res.valid, res.message
        assert model.predict(ws.to_raw(res.x[None, :]))[0] == 1          # the raw frame as it is


def test_a_constant_category_column_keeps_every_column_its_categories(tmp_path):
    """A category column with one value in every row is never split on: LightGBM writes "none"
    for it in ``feature_infos`` but keeps its categories in ``pandas_categorical``. Each category
    column keeps its own categories (before: all were read as integer codes, and the table's
    text refused), from the model object, its text file and in a workspace on the raw table."""
    import lightgbm as lgb

    rng = np.random.default_rng(2)
    n = 1500
    df = pd.DataFrame({"a": rng.normal(size=n), "edu": pd.Categorical(rng.choice(["hs", "uni", "phd"], n)),
                       "sex": pd.Categorical(["m"] * n), "mar": pd.Categorical(rng.choice(["s", "m", "o"], n))})
    y = ((df.a > 0) ^ (df.edu == "uni") | (df.mar == "o")).astype(int)
    model = lgb.LGBMClassifier(n_estimators=20, num_leaves=8, verbose=-1, min_data_per_group=5, cat_smooth=1,
                               n_jobs=1).fit(df, y)
    path = tmp_path / "const.txt"
    model.booster_.save_model(path)
    expected = (None, tuple(df["edu"].cat.categories), ("m",), tuple(df["mar"].cat.categories))
    for ens in (from_model(model), from_model(io.load_model(path.read_bytes(), "const.txt")),
                load_vetted(path.read_bytes(), "const.txt").ensemble):
        assert ens.categories == expected and ens.meta["input"] == "frame"
        X = every_code(ens, n_num=2)
        np.testing.assert_allclose(ens.predict_raw(X)[:, 0],
                                   model.booster_.predict(model_input(ens, X), raw_score=True), rtol=0, atol=1e-12)
    raw = df.astype({c: object for c in ("edu", "sex", "mar")}).assign(label=y)
    ws = build_workspace(raw, "label", io.load_model(path.read_bytes(), "const.txt"), name="const")
    np.testing.assert_array_equal(ws.predictions, model.predict(df))
    back = ws.to_raw(ws.X.head(40))
    np.testing.assert_array_equal(model.predict(back.astype({c: df[c].dtype for c in ("edu", "sex", "mar")})),
                                  ws.predictions[:40])


@pytest.mark.parametrize("objective", ["multiclass", "regression"])
def test_multiclass_and_regression(synthetic, objective):
    import lightgbm as lgb

    df, y, _ = synthetic
    target = (y + (df.d == "lo")).to_numpy() if objective == "multiclass" else df.a.to_numpy() * 3 + y
    cls = lgb.LGBMClassifier if objective == "multiclass" else lgb.LGBMRegressor
    model = cls(n_estimators=20, num_leaves=8, verbose=-1, min_data_per_group=5, cat_smooth=1, n_jobs=1)
    model.fit(df, target)
    ens = from_model(model)
    X = every_code(ens, n_num=2)
    ours = ens.predict_proba(X) if objective == "multiclass" else ens.predict(X)
    theirs = model.predict_proba(model_input(ens, X)) if objective == "multiclass" else \
        model.predict(model_input(ens, X))
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("path", adult_sources())
def test_adult_all_rows_with_categorical_columns(path):
    import lightgbm as lgb

    table = io.load_table(path.read_bytes(), "adult.csv")
    kinds = table.attrs.get("column_types", {})
    cat_cols = [c for c, k in kinds.items() if k == "categorical"]
    assert cat_cols
    X = table.drop(columns=["Class"]).astype({c: "category" for c in cat_cols})
    model = lgb.LGBMClassifier(n_estimators=100, num_leaves=31, verbose=-1, n_jobs=1).fit(X, table["Class"])
    data = model.booster_.model_to_string().encode()
    vetted = load_vetted(data, "adult.txt")
    assert set(vetted.ensemble.categorical_features) == {X.columns.get_loc(c) for c in cat_cols}
    ws = build_workspace(table, "Class", vetted, name="adult")
    assert len(ws.X) == len(table)
    np.testing.assert_array_equal(ws.predictions, model.predict(X))


def test_one_hot_expansion_is_exact_onevery_code(synthetic):
    from core.model.categorical import decode, expand

    _, _, model = synthetic
    ens = from_model(model)
    wide = expand(ens)
    C = every_code(ens)
    cols = wide.meta["expanded"]["columns"]
    O = np.zeros((len(C), wide.n_features))
    for j, idx in enumerate(cols):
        if ens.categories[j] is None:
            O[:, idx[0]] = C[:, j]
        else:
            hot = C[:, j].astype(int) < len(idx)
            O[np.flatnonzero(hot), np.asarray(idx)[C[hot, j].astype(int)]] = 1
    np.testing.assert_array_equal(wide.predict_raw(O), ens.predict_raw(C))
    np.testing.assert_array_equal(decode(wide.meta, O), C)
    np.testing.assert_allclose(wide.predict_proba(O), model.predict_proba(model_input(wide, O)), rtol=0, atol=1e-12)


def test_analyses_on_a_categorical_model_give_valid_answers_in_category_terms(synthetic):
    """Every counterfactual fed back to the original model; categories switch whole."""
    from core.optimal import optimal_counterfactual
    from core.regions import exact_counterfactual

    df, y, model = synthetic
    ws = build_workspace(df.astype({"c": object, "d": object}).assign(label=y), "label", model, name="cat")
    X, pred = ws.X.to_numpy(float), ws.predictions
    groups = [list(v) for v in ws.schema.groups().values() if len(v) >= 2]
    for row in np.flatnonzero(pred == 0)[:5]:
        for res in (optimal_counterfactual(ws.ensemble, X[row], 1, schema=ws.schema, X_ref=X, model=model),
                    exact_counterfactual(ws.ensemble, X[row], 1, schema=ws.schema, X_ref=X, norm="l1")):
            assert res.found, res.message
            cf = np.asarray(res.x, dtype=float)
            for g in groups:
                assert set(np.round(cf[g], 9)) <= {0.0, 1.0} and cf[g].sum() <= 1
            assert model.predict(ws.to_raw(cf[None, :]))[0] == 1


def test_lightgbm_names_read_back_as_the_tables_columns():
    """LightGBM saves "mean radius" as "mean_radius"; the columns are matched by that name and
    every view speaks of them as the table writes them (the features, the raw rows, the change
    texts), a category column too; the model's answers and the counterfactual's check are its own."""
    import lightgbm as lgb

    from core.optimal import optimal_counterfactual

    rng = np.random.default_rng(3)
    n = 1200
    df = pd.DataFrame({"mean radius": rng.normal(size=n), "job (kind)": pd.Categorical(rng.choice(["a", "b", "c"], n)),
                       "age": rng.integers(18, 80, n).astype(float)})
    y = ((df["mean radius"] > 0) ^ (df["job (kind)"] == "b")).astype(int)
    model = lgb.LGBMClassifier(n_estimators=20, num_leaves=8, verbose=-1, min_data_per_group=5, cat_smooth=1,
                               n_jobs=1).fit(df, y)
    assert model.booster_.feature_name()[:2] == ["mean_radius", "job_(kind)"]
    raw = df.astype({"job (kind)": object}).assign(label=y)
    for source in (model, io.load_model(model.booster_.model_to_string().encode(), "m.txt")):
        ws = build_workspace(raw, "label", source, name="names")
        assert "mean radius" in ws.X.columns and not any("_" in c for c in ws.X.columns), list(ws.X.columns)
        np.testing.assert_array_equal(ws.predictions, model.predict(df))
        X = ws.X.to_numpy(float)
        row = int(np.flatnonzero(ws.predictions == 0)[0])
        res = optimal_counterfactual(ws.ensemble, X[row], 1, schema=ws.schema, X_ref=X, model=source)
        assert res.status == "optimal" and res.valid
        back = ws.to_raw(res.x[None, :])
        assert list(back.columns) == list(df.columns)
        assert model.predict(back.astype({"job (kind)": df["job (kind)"].dtype}))[0] == 1
        assert "mean_radius" not in ws.describe_raw_changes(X[row], res.x, ", ", row)
