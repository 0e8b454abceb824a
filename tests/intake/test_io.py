"""Loading tables and models from bytes: formats, and a clear error for each kind of bad input."""

from __future__ import annotations

import io
import pickle

import numpy as np
import pandas as pd
import pytest
from conftest import adult_sources, carried_data

from core.errors import DataError, ModelError, SchemaError, UnsupportedModelError, UntrustedPickleError
from core.intake import io as cio
from core.intake.models import from_model
from core.schema import validate


def _csv(df: pd.DataFrame, sep: str = ",") -> bytes:
    return df.to_csv(index=False, sep=sep).encode()


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.normal(size=80), "b": rng.integers(0, 5, 80), "c": rng.normal(size=80)})
    df["y"] = (df["a"] + df["b"] > 2).astype(int)
    return df


def test_csv_roundtrip_with_sniffed_delimiters(table):
    for sep in (",", ";", "\t", "|"):
        df = cio.load_table(_csv(table, sep), "t.csv")
        pd.testing.assert_frame_equal(df, table, check_dtype=False)


def test_latin1_and_bom_encodings(table):
    t = table.rename(columns={"a": "âge"})
    assert list(cio.load_table(_csv(t).decode().encode("cp1252"), "t.csv").columns)[0] == "âge"
    assert list(cio.load_table(b"\xef\xbb\xbf" + _csv(t), "t.csv").columns)[0] == "âge"


def test_parquet(table):
    buf = io.BytesIO()
    table.to_parquet(buf)
    pd.testing.assert_frame_equal(cio.load_table(buf.getvalue(), "t.parquet"), table)


@pytest.mark.parametrize("data,match", [
    (b"", "empty"),
    (b"   \n\n", "blank"),
    (b"a,b,c\n", "no data rows"),
    (b"a b c\n1 2 3\n4 5 6\n", "delimiter"),
    (b"a,b\n1,2,3,4\n5,6\n", "consistent"),
    (b"a,,c\n1,2,3\n", "without a name"),
    (b"PAR1garbage", "Parquet"),
])
def test_bad_tables_say_what_is_wrong(data, match):
    with pytest.raises(DataError, match=match):
        cio.load_table(data, "bad.csv")


def test_size_limit(table):
    with pytest.raises(DataError, match="limit"):
        cio.load_table(_csv(table), "t.csv", max_bytes=100)


def test_strings_in_numeric_columns_are_reported_with_an_example(table):
    t = table.astype({"a": object})
    t.loc[5, "a"] = "abc"
    df = cio.load_table(_csv(t), "t.csv")
    with pytest.raises(DataError, match=r"'a': 1 non-numeric values \(e.g. 'abc' in row 5\)"):
        cio.prepare_data(df, "y")


def test_missing_values_are_reported_not_dropped_unless_asked(table):
    t = table.copy()
    t.loc[[3, 7], "c"] = np.nan
    df = cio.load_table(_csv(t), "t.csv")
    with pytest.raises(DataError, match="2 of 80 rows have missing values"):
        cio.prepare_data(df, "y")
    p = cio.prepare_data(df, "y", drop_missing=True)
    assert len(p.X) == 78 and any("Dropped 2 rows" in n for n in p.notes)


def test_text_columns_are_one_hot_encoded(table):
    t = table.copy()
    t["city"] = np.where(t["b"] > 2, "Paris", "Lyon")
    p = cio.prepare_data(cio.load_table(_csv(t), "t.csv"), "y")
    assert {"city=Lyon", "city=Paris"} <= set(p.X.columns)
    assert p.groups == {"city": ["city=Lyon", "city=Paris"]}
    assert (p.X[["city=Lyon", "city=Paris"]].sum(axis=1) == 1).all()


@pytest.mark.parametrize("adult", adult_sources())
def test_type_row_files_of_compas_and_adult(adult):
    df = cio.load_table(carried_data("compas.csv").read_bytes(), "compas.csv")
    assert df.attrs["target"] == "Class" and df.attrs["column_types"]["PriorsCount"] == "integer"
    assert pd.api.types.is_numeric_dtype(df["PriorsCount"])
    prep = cio.prepare_data(cio.load_table(adult.read_bytes(), "adult.csv"), "Class")
    assert len(prep.groups["Occupation"]) == 14                 # every level, in the sample too


# ------------------------------------------------------------------ models
@pytest.fixture(scope="module")
def models(table):
    import lightgbm as lgb
    import xgboost as xgb
    from sklearn.ensemble import RandomForestClassifier

    X, y = table[["a", "b", "c"]], table["y"]
    return {
        "xgb": xgb.XGBClassifier(n_estimators=5, max_depth=3, n_jobs=1).fit(X, y),
        "lgb": lgb.LGBMClassifier(n_estimators=5, num_leaves=4, verbose=-1, n_jobs=1).fit(X, y),
        "rf": RandomForestClassifier(5, max_depth=3, random_state=0).fit(X, y),
    }


def _assert_same(native, loaded, X):
    a = from_model(native).predict_proba(X)
    b = from_model(loaded).predict_proba(X)
    np.testing.assert_allclose(a, b, atol=1e-7)


@pytest.mark.parametrize("ext", ["json", "ubj"])
def test_xgboost_files(tmp_path, models, table, ext):
    path = tmp_path / f"m.{ext}"
    models["xgb"].save_model(path)
    loaded = cio.load_model(path.read_bytes(), path.name)
    _assert_same(models["xgb"], loaded, table[["a", "b", "c"]].to_numpy())
    assert from_model(loaded).feature_names == ("a", "b", "c")


def test_lightgbm_text(tmp_path, models, table):
    path = tmp_path / "m.txt"
    models["lgb"].booster_.save_model(path)
    loaded = cio.load_model(path.read_bytes(), path.name)
    _assert_same(models["lgb"], loaded, table[["a", "b", "c"]].to_numpy())


def test_skops_with_allow_list(models, table):
    import skops.io as sio

    loaded = cio.load_model(sio.dumps(models["rf"]), "m.skops")
    _assert_same(models["rf"], loaded, table[["a", "b", "c"]].to_numpy())


class Payload:
    """A type no allow-list knows."""

    def __init__(self):
        self.x = 1


def test_skops_outside_allow_list_is_refused():
    import skops.io as sio

    with pytest.raises(UnsupportedModelError, match="allow-list"):
        cio.load_model(sio.dumps({"model": Payload()}), "m.skops")


def test_untrusted_pickle_is_refused_and_trusted_one_loads(models):
    data = pickle.dumps(models["rf"])
    for name in ("m.pkl", "m.joblib", "model.bin"):
        with pytest.raises(UntrustedPickleError, match="trust"):
            cio.load_model(data, name)
    assert type(cio.load_model(data, "m.pkl", allow_pickle=True)).__name__ == "RandomForestClassifier"


@pytest.mark.parametrize("data,name", [
    (b"", "m.json"), (b"{not json", "m.json"), (b"\x00\x01garbage", "m.ubj"), (b"tree\nversion=v4\ngarbage", "m.txt"),
    (b"PKnot-a-zip", "m.skops"), (b"hello", "m.model"),
])
def test_corrupt_model_files(data, name):
    with pytest.raises((ModelError, UnsupportedModelError)):
        cio.load_model(data, name)


def test_corrupt_trusted_pickle_says_so():
    with pytest.raises(ModelError, match="unpickled"):
        cio.load_model(b"\x80\x04garbage", "m.pkl", allow_pickle=True)


def test_model_with_wrong_number_of_features(models, table):
    ens = from_model(models["rf"])
    with pytest.raises(SchemaError, match=r"expects columns \['c'\]"):
        validate(table[["a", "b"]], ens)
    with pytest.raises(SchemaError, match="missing values"):
        validate(table[["a", "b", "c"]].assign(c=np.nan), ens)


def test_generic_names_match_by_position(tmp_path, models, table):
    booster = models["xgb"].get_booster()
    booster.feature_names = None
    path = tmp_path / "m.json"
    booster.save_model(path)
    ens = from_model(cio.load_model(path.read_bytes(), "m.json"))
    assert ens.feature_names == ("f0", "f1", "f2")
    X = validate(table.drop(columns="y"), ens)
    assert list(X.columns) == ["a", "b", "c"]
    with pytest.raises(SchemaError, match="3"):
        validate(table[["a", "b"]], ens)


@pytest.mark.parametrize("family", cio.FAMILIES)
def test_train_model_here(table, family):
    tm = cio.train_model(table[["a", "b", "c"]], table["y"], family, n_estimators=20, max_depth=3)
    assert tm.task == "classification" and 0.5 <= tm.holdout_score <= 1.0
    from_model(tm.model)


def test_train_refuses_a_constant_target(table):
    with pytest.raises(DataError, match="single value"):
        cio.train_model(table[["a", "b"]], table["y"] * 0, "random_forest")
