"""XGBoost's native categorical splits (``enable_categorical``, one-hot and
partition-based) parsed into the one TreeEnsemble: parity with the library on
every category, the missing one and unseen ones, categories named in one tree
only, string and integer categories, from the model object, its JSON and UBJ
files and through the sandboxed reader; a raw table with unseen values; Adult
on its raw categorical columns; counterfactuals fed back to the original model."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import adult_sources, every_code

from core.intake import io
from core.intake.models import from_model
from core.intake.sandbox import load_vetted
from core.intake.workspace import build_workspace
from core.model.native import model_input, native_outputs

CATS = [f"k{i}" for i in range(30)]
ATOL = 2e-5          # XGBoost sums leaf values in float32; a wrong route costs a whole leaf (>= 1e-2 here)


def _frame(n=2500, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"a": rng.normal(size=n),
                       "c": pd.Categorical(rng.choice(CATS, n), categories=CATS[::-1]),   # not sorted
                       "b": rng.normal(size=n),
                       "d": pd.Categorical(rng.choice([3, 10, 7], n))})
    df.loc[rng.random(n) < 0.05, "c"] = np.nan
    y = ((df.a > 0) ^ df.c.isin(CATS[::3]) | (df.d == 10)).astype(int)
    return df, y


@pytest.fixture(scope="module", params=[1, 64], ids=["partition", "one-hot"])
def synthetic(request):
    import xgboost as xgb

    df, y = _frame()
    model = xgb.XGBClassifier(n_estimators=40, max_depth=4, enable_categorical=True, tree_method="hist",
                              max_cat_to_onehot=request.param, n_jobs=1).fit(df, y)
    return df, y, model


def _margins(model, frame):
    import xgboost as xgb

    booster = model.get_booster() if hasattr(model, "get_booster") else model
    return booster.predict(xgb.DMatrix(frame, enable_categorical=True), output_margin=True)


def test_every_category_and_missing_match_the_library(synthetic, tmp_path):
    df, y, model = synthetic
    ens = from_model(model)
    assert ens.categorical_features == [1, 3]
    assert ens.categories[1] == tuple(df["c"].cat.categories) and ens.categories[3] == (3, 7, 10)
    X = every_code(ens)
    np.testing.assert_allclose(ens.predict_raw(X)[:, 0], _margins(model, model_input(ens, X)), rtol=0, atol=ATOL)
    ours, theirs, _ = native_outputs(ens, model, X)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=ATOL)
    for suffix in ("json", "ubj"):
        path = tmp_path / f"m.{suffix}"
        model.save_model(path)
        data = path.read_bytes()
        for loaded in (from_model(io.load_model(data, path.name)), load_vetted(data, path.name).ensemble):
            assert loaded.categories == ens.categories
            np.testing.assert_array_equal(loaded.predict_raw(X), ens.predict_raw(X))


def test_a_category_named_in_one_tree_only_and_unseen_values():
    """Levels that only one tree lists, and values the model never saw, routed as XGBoost does."""
    import json

    import xgboost as xgb

    df, y = _frame()
    model = xgb.XGBClassifier(n_estimators=12, max_depth=2, enable_categorical=True, max_cat_to_onehot=1,
                              n_jobs=1).fit(df, y)
    trees = json.loads(bytes(model.get_booster().save_raw("json")))["learner"]["gradient_booster"]["model"]["trees"]
    listed: dict = {}
    for t in trees:
        for node, s, z in zip(t["categories_nodes"], t["categories_segments"], t["categories_sizes"]):
            for c in t["categories"][s:s + z]:
                listed[(t["split_indices"][node], c)] = listed.get((t["split_indices"][node], c), 0) + 1
    assert 1 in listed.values(), listed                    # some level is listed by one tree only
    ens = from_model(model)
    X = every_code(ens, n_num=5)
    np.testing.assert_allclose(ens.predict_raw(X)[:, 0], _margins(model, model_input(ens, X)), rtol=0, atol=ATOL)
    raw = pd.DataFrame({"a": [0.3, -0.2, 1.0], "c": ["never-seen", None, "k3"], "b": [0.0, 0.1, -1.0],
                        "d": [3, 99, 10]})                 # 99: an unseen number
    as_model = raw.assign(c=pd.Categorical(raw.c.where(raw.c.isin(ens.categories[1])), categories=ens.categories[1]),
                          d=pd.Categorical(raw.d.where(raw.d.isin(ens.categories[3])), categories=ens.categories[3]))
    miss_c, miss_d = ens.missing_code(1), ens.missing_code(3)
    codes = np.array([[0.3, miss_c, 0.0, 0], [-0.2, miss_c, 0.1, miss_d],
                      [1.0, ens.categories[1].index("k3"), -1.0, 2]], dtype=float)
    np.testing.assert_allclose(ens.predict_raw(codes)[:, 0], _margins(model, as_model), rtol=0, atol=ATOL)


def test_multiclass_and_regression_on_categories():
    import xgboost as xgb

    df, y = _frame(1500, seed=2)
    multi = (y + (df.d == 3)).to_numpy()
    for model in (xgb.XGBClassifier(n_estimators=15, max_depth=3, enable_categorical=True, n_jobs=1).fit(df, multi),
                  xgb.XGBRegressor(n_estimators=15, max_depth=3, enable_categorical=True, n_jobs=1)
                  .fit(df, df.a * 2 + y)):
        ens = from_model(model)
        X = every_code(ens, n_num=2)
        ours, theirs, _ = native_outputs(ens, model, X)
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=ATOL)


def test_raw_table_and_counterfactuals_checked_on_the_original_model(synthetic):
    from core.optimal import optimal_counterfactual

    df, y, model = synthetic
    raw = df.astype({"c": object, "d": object}).assign(label=y)
    raw.loc[0, "c"] = "never-seen"
    ws = build_workspace(raw, "label", model, name="xgb-cat")
    assert any("never saw" in n for n in ws.notes)
    expected = df.copy()
    expected.loc[0, "c"] = np.nan
    np.testing.assert_array_equal(ws.predictions, model.predict(expected))
    back = ws.to_raw(ws.X.head(40))
    np.testing.assert_array_equal(model.predict(back), ws.predictions[:40])
    X = ws.X.to_numpy(float)
    groups = [list(v) for v in ws.schema.groups().values() if len(v) >= 2]
    for row in np.flatnonzero(ws.predictions == 0)[:5]:
        res = optimal_counterfactual(ws.ensemble, X[row], 1, schema=ws.schema, X_ref=X, model=model)
        assert res.found and res.status == "optimal", res.message
        cf = np.asarray(res.x, dtype=float)
        for g in groups:
            assert set(np.round(cf[g], 9)) <= {0.0, 1.0} and cf[g].sum() <= 1
        cf_raw = ws.to_raw(cf[None, :])
        # "c" reads back as the category of its hot column, or as missing where none is hot
        # (row 1's own missing value, kept), never as "never-seen" or anything else
        hot = [ws.ensemble.feature_names[i] for i in ws.schema.groups()["c"] if cf[i] == 1]
        value = cf_raw["c"].iloc[0]
        if hot:
            assert hot == [f"c={value}"] and value in CATS, (hot, value)
        else:
            assert pd.isna(value), value
        assert model.predict(cf_raw)[0] == 1


@pytest.mark.parametrize("path", adult_sources())
def test_adult_all_rows_with_enable_categorical(path):
    import xgboost as xgb

    table = io.load_table(path.read_bytes(), "adult.csv")
    kinds = table.attrs.get("column_types", {})
    cat_cols = [c for c, k in kinds.items() if k == "categorical"]
    X = table.drop(columns=["Class"]).astype({c: "category" for c in cat_cols})
    model = xgb.XGBClassifier(n_estimators=100, max_depth=5, enable_categorical=True, n_jobs=1).fit(X, table["Class"])
    data = bytes(model.get_booster().save_raw("json"))
    vetted = load_vetted(data, "adult.json")
    assert set(vetted.ensemble.categorical_features) == {X.columns.get_loc(c) for c in cat_cols}
    ws = build_workspace(table, "Class", vetted, name="adult")
    assert len(ws.X) == len(table)
    np.testing.assert_array_equal(ws.predictions, model.predict(X))


# ------------------------------------------------- fitted on codes, no saved categories
def _codes_booster(max_cat_to_onehot: int, seed: int = 0):
    """A Booster trained on an array whose first column holds category codes 0..9
    (``feature_types`` "c"): its file saves no categories, its splits name only some codes."""
    import xgboost as xgb

    rng = np.random.default_rng(seed)
    n = 3000
    c = rng.integers(0, 10, n).astype(float)
    z = rng.normal(size=n)
    y = (np.isin(c, [3, 7]) | (z > 1)).astype(int)
    miss = rng.random(n) < 0.1
    c[miss], y[miss] = np.nan, 1                          # missing values go their own (default) way
    d = xgb.DMatrix(np.column_stack([c, z]), y, feature_types=["c", "q"], enable_categorical=True)
    return xgb.train({"objective": "binary:logistic", "max_depth": 3, "eta": 0.3,
                      "max_cat_to_onehot": max_cat_to_onehot}, d, 20)


def _booster_margins(booster, raw: np.ndarray) -> np.ndarray:
    import xgboost as xgb

    return booster.predict(xgb.DMatrix(raw, feature_types=["c", "q"], enable_categorical=True), output_margin=True)


@pytest.mark.parametrize("onehot", [1, 16], ids=["partition", "one-hot"])
def test_codes_no_split_names_route_as_xgboost_routes_them(onehot):
    """A code no split names (above the largest named, negative, huge) goes left at
    every split, as XGBoost's InvalidCat / bit-field test sends it, not the missing
    value's way; a fraction is truncated to its code. Parity on the raw values,
    through the file and the sandboxed reader, and on every code of the codes view."""
    from core.model.categorical import OTHER_CODE

    booster = _codes_booster(onehot)
    data = bytes(booster.save_raw("json"))
    vetted = load_vetted(data, "codes.json")
    for ens in (from_model(io.load_model(data, "codes.json")), vetted.ensemble):
        top = len(ens.categories[0]) - 2
        assert ens.categories[0] == tuple(range(top + 1)) + (OTHER_CODE,) and top <= 9
        X = every_code(ens, n_num=4)
        np.testing.assert_allclose(ens.predict_raw(X)[:, 0], _booster_margins(booster, model_input(ens, X)),
                                   rtol=0, atol=ATOL)
    values = np.r_[np.arange(10), 12, -1, 1e8, 2.7, np.nan]
    raw = np.column_stack([np.repeat(values, 3), np.tile([-1.5, 0.2, 1.7], values.size)])
    table = pd.DataFrame(raw, columns=["code", "z"])
    ws = build_workspace(table, None, vetted, name="codes", confirm_positions=True)   # as the app loads it
    assert any("no split of the model names" in n for n in ws.notes) and any("not whole codes" in n for n in ws.notes)
    np.testing.assert_allclose(ws.ensemble.predict_raw(ws.X.to_numpy(float))[:, 0], _booster_margins(booster, raw),
                               rtol=0, atol=ATOL)
    back = ws.to_raw(ws.X)                                  # raw rows the booster scores alike
    np.testing.assert_allclose(_booster_margins(booster, back.to_numpy(float)), _booster_margins(booster, raw),
                               rtol=0, atol=ATOL)
    shown = ws.raw_view(ws.X)["code"].to_numpy()            # what the pages show: the level's name
    other = ~np.isin(raw[:, 0], np.arange(len(ws.ensemble.meta["expanded"]["categories"][0]) - 1)) & (
        raw[:, 0] != 2.7) & ~np.isnan(raw[:, 0])
    assert set(shown[other]) == {OTHER_CODE} and OTHER_CODE not in set(shown[~other])


def test_codes_other_level_named_dropped_or_text_refused():
    from core.errors import DataError
    from core.model.categorical import OTHER_CODE
    from core.optimal import optimal_counterfactual

    booster = _codes_booster(16, seed=1)
    top = len(from_model(booster).categories[0]) - 2
    rng = np.random.default_rng(3)
    z = rng.normal(size=400)
    only_named = pd.DataFrame({"code": rng.integers(0, top + 1, 400).astype(float), "z": z})
    ws = build_workspace(only_named, None, booster, name="named", confirm_positions=True)
    native_cats = ws.ensemble.meta["expanded"]["categories"][0]
    assert native_cats == list(range(top + 1))              # no row holds another code: no such level
    np.testing.assert_allclose(ws.ensemble.predict_raw(ws.X.to_numpy(float))[:, 0],
                               _booster_margins(booster, only_named.to_numpy(float)), rtol=0, atol=ATOL)
    one_other = only_named.assign(code=np.where(np.arange(400) % 5 == 0, 11.0, only_named.code))
    ws1 = build_workspace(one_other, None, booster, name="one", confirm_positions=True)
    assert ws1.ensemble.meta["expanded"]["categories"][0][-1] == 11 and OTHER_CODE not in ws1.ensemble.meta[
        "expanded"]["categories"][0]                        # the level takes the one value's name
    assert any("the value 11" in n and "no split of the model names" in n for n in ws1.notes)
    labelled = one_other.assign(y=(booster.predict(xgb_matrix(one_other)) > 0.5).astype(int))
    ws2 = build_workspace(labelled, "y", booster, name="cf", confirm_positions=True)
    np.testing.assert_array_equal(ws2.predictions, labelled.y.to_numpy())
    X = ws2.X.to_numpy(float)
    for row in np.flatnonzero(ws2.predictions == 0)[:5]:
        res = optimal_counterfactual(ws2.ensemble, X[row], 1, schema=ws2.schema, X_ref=X)
        assert res.found and res.status == "optimal", res.message
        cf_raw = ws2.to_raw(np.asarray(res.x, dtype=float)[None, :])
        assert cf_raw["code"].iloc[0] in set(range(top + 1)) | {11}
        assert booster.predict(xgb_matrix(cf_raw))[0] > 0.5
    text = only_named.assign(code=np.where(np.arange(400) % 2, "clerk", "nurse"))
    with pytest.raises(DataError, match="saved without its categories.*cat.codes"):
        build_workspace(text, None, booster, name="text", confirm_positions=True)


def xgb_matrix(frame: pd.DataFrame):
    import xgboost as xgb

    return xgb.DMatrix(frame[["code", "z"]].to_numpy(float), feature_types=["c", "q"], enable_categorical=True)
