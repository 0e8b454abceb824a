"""CatBoost models from CatBoost's JSON export (and .cbm with the package): the
hash of category values, parity with CatBoost on every level for oblivious and
non-symmetric trees, binary / multiclass / regression, exports with and without
the training pool, through the sandboxed reader; CTR features refused by name;
a raw table and counterfactuals fed back to CatBoost itself; Adult on its raw
categorical columns."""

from __future__ import annotations

import json
import random
import string

import numpy as np
import pandas as pd
import pytest
from conftest import adult_sources

from core.errors import UnsupportedModelError
from core.intake import io
from core.intake.models import from_model
from core.intake.parsing import probe_points
from core.intake.parsing.catboost import OTHER, CatBoostJSON, apply_document
from core.intake.parsing.cityhash import cat_feature_hash
from core.intake.sandbox import load_vetted
from core.intake.workspace import build_workspace
from core.model.native import native_outputs

cb = pytest.importorskip("catboost")

LEVELS = list("xyzuvw")


def _frame(n=1500, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"a": rng.normal(size=n), "k": rng.choice(LEVELS, n), "b": rng.normal(size=n),
                       "m": rng.choice(["lo", "mid", "hi"], n)})
    y = ((df.a > 0) ^ df.k.isin(["y", "u"]) | (df.m == "hi") & (df.b > 1)).astype(int)
    return df, y


def _save(model, path, pool=None):
    model.save_model(str(path), format="json", pool=pool)
    return path.read_bytes()


def test_category_hashes_are_catboosts_own(tmp_path):
    random.seed(0)
    values = ["".join(random.choice(string.ascii_letters + string.digits + " é-_") for _ in range(n))
              for n in list(range(1, 130)) + [200, 257, 1000]] + ["Private", "ü", "日本", "3"]
    df = pd.DataFrame({"a": np.random.default_rng(0).normal(size=3 * len(values)), "k": values * 3})
    y = (df.a > 0).astype(int)
    model = cb.CatBoostClassifier(iterations=2, depth=2, verbose=0, allow_writing_files=False, one_hot_max_size=2000, cat_features=["k"])
    model.fit(df, y)
    doc = json.loads(_save(model, tmp_path / "h.json", cb.Pool(df, y, cat_features=["k"])))
    theirs = {d["value"]: d["hash"] for d in doc["features_info"]["cat_features_hash"]}
    assert len(theirs) == len(values)
    assert {v: cat_feature_hash(v) for v in values} == theirs


@pytest.mark.parametrize("grow_policy", ["SymmetricTree", "Depthwise", "Lossguide"])
@pytest.mark.parametrize("with_pool", [True, False], ids=["pool", "no-pool"])
def test_every_level_matches_catboost(grow_policy, with_pool, tmp_path):
    df, y = _frame()
    model = cb.CatBoostClassifier(iterations=40, depth=4, verbose=0, allow_writing_files=False, one_hot_max_size=10, cat_features=["k", "m"],
                                  grow_policy=grow_policy, thread_count=1).fit(df, y)
    data = _save(model, tmp_path / "m.json", cb.Pool(df, y, cat_features=["k", "m"]) if with_pool else None)
    loaded = io.load_model(data, "m.json")
    ens = from_model(loaded)
    assert ens.categorical_features == [1, 3] and ens.categories[1][-1] == OTHER
    # the levels the splits name: by their value with the pool, else by their hash ("#<hash>")
    named = {v: v if with_pool else f"#{cat_feature_hash(v)}" for v in LEVELS + ["lo", "mid", "hi"]}
    assert set(ens.categories[1][:-1]) <= {named[v] for v in LEVELS} and len(ens.categories[1]) >= 3
    assert set(ens.categories[3][:-1]) <= {named[v] for v in ("lo", "mid", "hi")} and len(ens.categories[3]) >= 2
    X = probe_points(ens, 128)
    ours, theirs, _ = native_outputs(ens, loaded, X)
    assert len(ours) >= 16          # without the pool, levels known only by their hash cannot be given to CatBoost
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-9)
    # every row of the data, its values hashed, against CatBoost
    np.testing.assert_allclose(ens.predict_raw(_codes(ens, df))[:, 0],
                               model.predict(df, prediction_type="RawFormulaVal"), rtol=0, atol=1e-9)
    # the JSON applied on its own (no catboost) agrees with CatBoost on the raw rows
    np.testing.assert_allclose(apply_document(loaded.document, df)[:, 0],
                               model.predict(df, prediction_type="RawFormulaVal"), rtol=0, atol=1e-9)
    vetted = load_vetted(data, "m.json")
    np.testing.assert_array_equal(vetted.ensemble.predict_raw(X), ens.predict_raw(X))


def test_multiclass_regression_and_cbm(tmp_path):
    df, y = _frame(900, seed=1)
    multi = (y + (df.m == "lo")).to_numpy()
    for model, classes in ((cb.CatBoostClassifier(iterations=20, depth=3, verbose=0, allow_writing_files=False,
                                                  loss_function="MultiClass", cat_features=["k", "m"],
                                                  one_hot_max_size=10, thread_count=1).fit(df, multi), [0, 1, 2]),
                           (cb.CatBoostRegressor(iterations=20, depth=3, verbose=0, allow_writing_files=False,
                                                 cat_features=["k", "m"], one_hot_max_size=10,
                                                 thread_count=1).fit(df, df.a * 2 + y), None)):
        pool = cb.Pool(df, cat_features=["k", "m"])
        for data, name in ((_save(model, tmp_path / "m.json", pool), "m.json"),
                           (_cbm(model, tmp_path / "m.cbm"), "m.cbm")):
            loaded = io.load_model(data, name)
            ens = from_model(loaded)
            raw = np.asarray(model.predict(df, prediction_type="RawFormulaVal"), dtype=float).reshape(len(df), -1)
            codes = ens.predict_raw(_codes(ens, df))
            np.testing.assert_allclose(codes, raw, rtol=0, atol=1e-9)
            assert ens.task == ("classification" if classes else "regression"), (name, ens.task)
            assert (list(ens.classes) if ens.is_classifier else None) == classes, name


def _cbm(model, path):
    model.save_model(str(path))
    return path.read_bytes()


def _codes(ens, df):
    X = np.empty((len(df), ens.n_features))
    for j, name in enumerate(ens.feature_names):
        if ens.categories[j] is None:
            X[:, j] = df[name]
        else:
            hashes = ens.meta["category_hashes"][name]
            X[:, j] = [hashes.index(cat_feature_hash(v)) if cat_feature_hash(v) in hashes else len(hashes)
                       for v in df[name]]
    return X


def test_folding_the_other_level_changes_no_prediction(tmp_path):
    """A level no data value takes is folded into the missing code: same routes on every code."""
    from conftest import every_code

    from core.intake.parsing.catboost import fold_other_level

    df, y = _frame(800, seed=4)
    model = cb.CatBoostClassifier(iterations=20, depth=4, verbose=0, allow_writing_files=False, one_hot_max_size=10,
                                  cat_features=["k", "m"], thread_count=1).fit(df, y)
    ens = from_model(io.load_model(_save(model, tmp_path / "m.json"), "m.json"))
    folded = fold_other_level(ens, [1, 3])
    assert folded.categories[1] == ens.categories[1][:-1] and folded.missing_code(1) == ens.missing_code(1) - 1
    X = every_code(folded, n_num=3)
    np.testing.assert_array_equal(folded.predict_raw(X), ens.predict_raw(X))


def test_ctr_features_are_refused_by_name(tmp_path):
    rng = np.random.default_rng(2)
    df = pd.DataFrame({"a": rng.normal(size=2000), "city": rng.choice(list("abcdefghij"), 2000)})
    y = ((df.a > 0) ^ df.city.isin(list("abc"))).astype(int)
    model = cb.CatBoostClassifier(iterations=30, depth=3, verbose=0, allow_writing_files=False, one_hot_max_size=2, cat_features=["city"],
                                  thread_count=1).fit(df, y)
    data = _save(model, tmp_path / "ctr.json")
    with pytest.raises(UnsupportedModelError, match=r"(?s)CTR.*'city'.*one_hot_max_size"):
        from_model(io.load_model(data, "ctr.json"))
    with pytest.raises(UnsupportedModelError, match="city"):
        load_vetted(data, "ctr.json")


def test_without_the_catboost_package_the_document_is_the_reference(tmp_path):
    df, y = _frame(800, seed=3)
    model = cb.CatBoostClassifier(iterations=15, depth=3, verbose=0, allow_writing_files=False, one_hot_max_size=10, cat_features=["k", "m"],
                                  thread_count=1).fit(df, y)
    doc = json.loads(_save(model, tmp_path / "m.json"))
    alone = CatBoostJSON(document=doc)                     # what a server without catboost holds
    ens = from_model(alone)
    X = probe_points(ens, 64)
    ours, theirs, _ = native_outputs(ens, alone, X)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-9)
    ws = build_workspace(df.assign(label=y), "label", alone, name="cb")
    np.testing.assert_array_equal(ws.predictions, model.predict(df))
    levels = ws.ensemble.meta["expanded"]["categories"]
    assert set(levels[1][:-1]) <= set(LEVELS) and levels[1][-1] == OTHER     # hashes named from the data
    # "m": the splits name 2 of its 3 values; the third, the only other value in the data, names
    # the "any other value" level itself
    assert len(ens.categories[3]) == 3 and ens.categories[3][-1] == OTHER, ens.categories[3]
    assert sorted(levels[3]) == ["hi", "lo", "mid"], levels[3]


@pytest.mark.parametrize("with_pool", [True, False], ids=["pool", "no-pool"])
def test_raw_table_and_counterfactuals_checked_on_catboost(with_pool, tmp_path):
    from core.optimal import optimal_counterfactual

    df, y = _frame()
    model = cb.CatBoostClassifier(iterations=40, depth=4, verbose=0, allow_writing_files=False, one_hot_max_size=10, cat_features=["k", "m"],
                                  thread_count=1).fit(df, y)
    data = _save(model, tmp_path / "m.json", cb.Pool(df, y, cat_features=["k", "m"]) if with_pool else None)
    vetted = load_vetted(data, "m.json")
    raw = df.assign(label=y)
    raw.loc[0, "k"] = "never-seen"
    ws = build_workspace(raw, "label", vetted, name="cb")
    expected = df.copy()
    expected.loc[0, "k"] = "never-seen"
    np.testing.assert_array_equal(ws.predictions, model.predict(expected))
    back = ws.to_raw(ws.X.head(60))
    assert set(back["k"]) <= set(LEVELS) | {"never-seen"} and set(back["m"]) <= {"lo", "mid", "hi"}
    np.testing.assert_array_equal(model.predict(back), ws.predictions[:60])
    X = ws.X.to_numpy(float)
    for row in np.flatnonzero(ws.predictions == 0)[:6]:
        res = optimal_counterfactual(ws.ensemble, X[row], 1, schema=ws.schema, X_ref=X, model=vetted.model)
        assert res.found and res.status == "optimal" and res.valid, res.message
        cf = ws.to_raw(np.asarray(res.x, dtype=float)[None, :])
        assert cf["k"].iloc[0] in LEVELS and cf["m"].iloc[0] in ("lo", "mid", "hi")   # known categories only
        assert model.predict(cf)[0] == 1


@pytest.mark.parametrize("path", adult_sources())
def test_adult_all_rows_with_one_hot_categoricals(path, tmp_path):
    table = io.load_table(path.read_bytes(), "adult.csv")
    kinds = table.attrs.get("column_types", {})
    cat_cols = [c for c, k in kinds.items() if k == "categorical"]
    X = table.drop(columns=["Class"]).astype({c: str for c in cat_cols})
    model = cb.CatBoostClassifier(iterations=100, depth=6, verbose=0, allow_writing_files=False, one_hot_max_size=255, cat_features=cat_cols,
                                  thread_count=2).fit(X, table["Class"])
    data = _save(model, tmp_path / "adult.json")
    vetted = load_vetted(data, "adult.json")
    ws = build_workspace(table, "Class", vetted, name="adult")
    assert len(ws.X) == len(table)
    np.testing.assert_array_equal(ws.predictions, model.predict(X))


@pytest.mark.parametrize("edit, says", [
    (lambda d: next(s for t in d["oblivious_trees"] for s in t["splits"]
                    if s["split_type"] == "FloatFeature").update(float_feature_index=99), "damaged"),
    (lambda d: d["oblivious_trees"][0].update(leaf_values=[1.0]), "leaf values"),
    (lambda d: d["features_info"]["float_features"][0].update(flat_feature_index=10**9), "lists"),
    (lambda d: d.update(scale_and_bias="x"), "damaged|crashed"),
], ids=["feature-index", "leaf-values", "huge-index", "scale"])
def test_damaged_exports_are_refused_with_a_message(edit, says, tmp_path):
    df, y = _frame(300, seed=5)
    model = cb.CatBoostClassifier(iterations=3, depth=2, verbose=0, allow_writing_files=False, one_hot_max_size=10,
                                  cat_features=["k", "m"], thread_count=1).fit(df, y)
    doc = json.loads(_save(model, tmp_path / "m.json"))
    edit(doc)
    from core.errors import ModelError

    with pytest.raises(ModelError, match=says):
        from_model(CatBoostJSON(document=doc))
    with pytest.raises(ModelError, match=says):     # through the sandbox (CatBoost's own reader may crash there)
        load_vetted(json.dumps(doc).encode(), "m.json")


def test_a_value_the_model_never_saw_is_named_in_the_notes(tmp_path):
    """A value no split names becomes (or joins) the "any other value" level, with a note either way."""
    rng = np.random.default_rng(5)
    df = pd.DataFrame({"a": rng.normal(size=1500), "job": rng.choice(["clerk", "nurse", "cook"], 1500)})
    y = ((df.a > 0) ^ (df.job == "nurse")).astype(int)
    model = cb.CatBoostClassifier(iterations=20, depth=3, verbose=0, allow_writing_files=False, one_hot_max_size=10,
                                  cat_features=["job"], thread_count=1).fit(df, y)
    data = _save(model, tmp_path / "m.json")
    audit = df.copy()
    audit.loc[:19, "job"] = "astronaut"                    # never seen in training
    ws = build_workspace(audit.assign(label=y), "label", load_vetted(data, "m.json"), name="cb")
    # every job value is named by a split, so "astronaut" is the model's "any other value" level
    # on its own, named by it (not one of several values folded into that level)
    levels = ws.ensemble.meta["expanded"]["categories"][1]
    assert sorted(levels[:-1]) == ["clerk", "cook", "nurse"] and levels[-1] == "astronaut", levels
    assert any(n.startswith("Of column 'job', the value 'astronaut' (20 rows) is no category a split of the "
                            "model names") for n in ws.notes), ws.notes
    np.testing.assert_array_equal(ws.predictions, model.predict(audit))
