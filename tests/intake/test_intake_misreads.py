"""No silent misreads, no bare exceptions (#26 item 3): reproducers that failed before."""

from __future__ import annotations

import json

import numpy as np
import pytest

from core.errors import DataError, ModelError, UnsupportedModelError
from core.intake.models import from_model


def test_lightgbm_reg_sqrt_is_refused_not_misread():
    """reg_sqrt=True: LightGBM squares the trees' sum; reading the sum as the prediction was silent and wrong."""
    import lightgbm as lgb

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = np.abs(X[:, 0]) * 10 + 1
    m = lgb.LGBMRegressor(n_estimators=5, reg_sqrt=True, verbose=-1).fit(X, y)
    with pytest.raises(UnsupportedModelError, match="reg_sqrt"):
        from_model(m)
    with pytest.raises(UnsupportedModelError, match="reg_sqrt"):
        from_model(lgb.Booster(model_str=m.booster_.model_to_string()))


def test_an_infinite_xgboost_threshold_is_a_project_error(tmp_path):
    """A Booster read from a JSON file with an infinite split gave a bare OverflowError."""
    import xgboost as xgb

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    m = xgb.XGBClassifier(n_estimators=3, max_depth=2).fit(X, (X[:, 0] > 0).astype(int))
    path = tmp_path / "m.json"
    m.save_model(str(path))
    doc = json.loads(path.read_text())
    doc["learner"]["gradient_booster"]["model"]["trees"][1]["split_conditions"][0] = float("inf")
    path.write_text(json.dumps(doc))
    booster = xgb.Booster()
    booster.load_model(str(path))
    with pytest.raises(ModelError, match="tree 1, node 0 has the threshold inf"):
        from_model(booster)


def test_non_finite_values_are_refused_by_the_representation():
    from core.model.ensemble import TreeEnsemble
    from core.model.tree import Tree

    with pytest.raises(ModelError, match="infinite threshold"):
        Tree(np.array([1, -1, -1]), np.array([2, -1, -1]), np.array([0, -2, -2]), np.array([np.inf, 0, 0]),
             np.array([[0.0], [1.0], [2.0]]))
    leaf = Tree(np.array([1, -1, -1]), np.array([2, -1, -1]), np.array([0, -2, -2]),
                np.array([0.5, 0, 0]), np.array([[0.0], [np.nan], [2.0]]))
    with pytest.raises(ModelError, match="Tree 0, leaf 1"):
        TreeEnsemble((leaf,), n_features=1, feature_names=("a",), task="regression", aggregation="sum",
                     link="identity", base_score=np.zeros(1))


def test_a_forest_predicting_in_threads_is_not_refused(monkeypatch):
    """A Pipeline whose forest has n_jobs=2 was refused ("read differently in the checking process and in the
    server"): its threads add the trees in any order, so the last bits of the probabilities differ between
    two reads. The two reads must agree to rounding and decide alike; a real difference is still refused."""
    import pandas as pd
    import skops.io as sio
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    from core.intake import sandbox

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.normal(size=300), "job": rng.choice(["x", "y", "z"], 300)})
    pipe = Pipeline([("pre", ColumnTransformer([("c", OneHotEncoder(handle_unknown="ignore"), ["job"]),
                                                ("n", StandardScaler(), ["a"])])),
                     ("rf", RandomForestClassifier(10, n_jobs=2, random_state=0))]).fit(df, (df.a > 0).astype(int))
    data = sio.dumps(pipe)
    real = sandbox.native_outputs

    def last_bits(ens, model, X):             # what a different summation order does
        ours, theirs, what = real(ens, model, X)
        return ours, None if theirs is None else np.nextafter(theirs, 2.0), what

    monkeypatch.setattr(sandbox, "native_outputs", last_bits)
    assert sandbox.load_vetted(data, "p.skops").ensemble.n_trees == 10

    def another_model(ens, model, X):
        ours, theirs, what = real(ens, model, X)
        return ours, None if theirs is None else theirs[:, ::-1], what

    monkeypatch.setattr(sandbox, "native_outputs", another_model)
    with pytest.raises(ModelError, match="read differently"):
        sandbox.load_vetted(data, "p2.skops")


def test_a_catboost_multiclass_loss_on_one_output_is_refused(tmp_path):
    """A CatBoost JSON whose loss says MultiClass while its trees have one output was read as one class."""
    cb = pytest.importorskip("catboost")
    from core.intake.parsing.catboost import CatBoostJSON

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    m = cb.CatBoostClassifier(iterations=5, depth=2, verbose=0, allow_writing_files=False).fit(X, X[:, 0] > 0)
    m.save_model(str(tmp_path / "m.json"), format="json")
    doc = json.loads((tmp_path / "m.json").read_text())
    doc["model_info"]["params"]["loss_function"]["type"] = "MultiClass"
    doc["model_info"].get("class_params", {}).pop("class_names", None)
    with pytest.raises(ModelError, match="MultiClass but it holds one output"):
        from_model(CatBoostJSON(document=doc))


def test_a_lightgbm_file_trained_on_names_with_spaces_matches_its_columns():
    """LightGBM saves "mean radius" as "mean_radius"; the data's own columns were refused as missing."""
    import lightgbm as lgb
    import pandas as pd

    from core.intake.workspace import build_workspace

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"mean radius": rng.normal(size=300), "worst area": rng.normal(size=300)})
    y = (df["mean radius"] + 0.3 * df["worst area"] > 0).astype(int)
    m = lgb.LGBMClassifier(n_estimators=10, verbose=-1).fit(df, y)
    booster = lgb.Booster(model_str=m.booster_.model_to_string())
    ws = build_workspace(df.assign(y=y), "y", booster, name="spaces")
    assert dict(ws.mapping) == {"mean radius": "mean radius", "worst area": "worst area"}   # shown as the table's
    assert any("mean_radius for 'mean radius'" in n and "worst_area for 'worst area'" in n for n in ws.notes)
    np.testing.assert_array_equal(ws.predictions, m.predict(df))


# ------------------------------------------------------------------ tables (#37 item 5)
def test_numbers_with_a_decimal_comma_are_read_as_numbers():
    """A European spreadsheet's CSV (';' between fields, ',' in numbers) loaded its numbers as text
    categories, which training one-hot encoded without a word."""
    from core.intake.io import load_table, prepare_data

    data = "âge;revenu;dette;y\n34;3000,12;1.234,5;1\n51;2100;-12,75;0\n29;4150,5;0,5;1\n".encode("cp1252")
    df = load_table(data, "europe.csv")
    assert df[["revenu", "dette"]].to_dict("list") == {"revenu": [3000.12, 2100.0, 4150.5],
                                                       "dette": [1234.5, -12.75, 0.5]}
    assert any("decimal comma" in n and "'revenu'" in n for n in df.attrs["notes"]), df.attrs
    assert list(prepare_data(df, "y").X.columns) == ["âge", "revenu", "dette"]      # numbers, not categories
    quoted = load_table(b'a,b,y\n2.5,"1,234",1\n7,"12,000",0\n', "quoted.csv")
    assert quoted[["a", "b"]].to_dict("list") == {"a": [2.5, 7.0], "b": [1234.0, 12000.0]}
    assert any("thousands" in n and "'b'" in n for n in quoted.attrs["notes"]), quoted.attrs
    with pytest.raises(DataError, match="'a' holds numbers written with a decimal comma .* comma-separated file"):
        load_table(b'a,b,y\n"3000,12",1,1\n"12,5",2,0\n', "quoted.csv")     # that file's numbers use points
    tabs = load_table(b"a\tb\ty\n3000,12\t1\t1\n12,5\t2\t0\n", "tabs.tsv")
    assert tabs["a"].tolist() == [3000.12, 12.5]
    mixed = load_table(b"a;b;y\n1,5;2;0\n2.5;3;1\n", "mixed.csv")          # two ways in one column: refused with words
    with pytest.raises(DataError, match="'1,5' in row 0 - a number written with a decimal comma"):
        prepare_data(mixed, "y")


def test_duplicate_parquet_column_names_are_refused_by_name():
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from core.intake.io import load_table

    buf = io.BytesIO()
    pq.write_table(pa.table([pa.array([1, 2]), pa.array([3, 4]), pa.array([0, 1])], names=["a", "a", "y"]), buf)
    with pytest.raises(DataError, match=r"duplicate column names \['a'\]"):             # was a KeyError
        load_table(buf.getvalue(), "d.parquet")


def test_temporal_parquet_columns_are_numbers_that_train_and_explain():
    """A time-zone-aware timestamp or a duration was accepted, then 'Train a model here' raised IndexError.
    Now each is a number with a note giving its unit, and a model trains and explains on them."""
    import datetime as dt
    import io

    import pandas as pd

    from core import optimal_counterfactual
    from core.intake.io import load_table, prepare_data, train_model
    from core.intake.workspace import build_workspace

    rng = np.random.default_rng(0)
    n = 400
    df = pd.DataFrame({"amount": rng.normal(50, 10, n),
                       "signed": pd.Timestamp("2024-01-01", tz="Europe/Paris")
                       + pd.to_timedelta(rng.integers(0, 365 * 24, n), unit="h"),
                       "naive": pd.Timestamp("2023-06-01") + pd.to_timedelta(rng.integers(0, 100, n), unit="D"),
                       "waited": pd.to_timedelta(rng.integers(0, 3600, n), unit="s")})
    df["day"] = [dt.date(2024, 1, 1) + dt.timedelta(days=int(d)) for d in rng.integers(0, 30, n)]
    df["y"] = ((df.amount > 50) ^ (df.waited.dt.total_seconds() > 1800)).astype(int)
    buf = io.BytesIO()
    df.to_parquet(buf)
    t = load_table(buf.getvalue(), "t.parquet")
    assert all(t[c].dtype == np.float64 for c in ("signed", "naive", "waited", "day"))
    utc = df["signed"].dt.tz_convert("UTC").dt.tz_localize(None)
    np.testing.assert_allclose(t["signed"], (utc - pd.Timestamp("1970-01-01")) / pd.Timedelta(days=1))
    np.testing.assert_allclose(t["waited"], df["waited"].dt.total_seconds())
    assert t["day"].iloc[0] == (pd.Timestamp(df["day"].iloc[0]) - pd.Timestamp("1970-01-01")).days
    notes = " ".join(t.attrs["notes"])
    assert "days since 1970-01-01" in notes and "seconds" in notes and "'waited'" in notes
    prep = prepare_data(t, "y")                                  # the page's "Train a model here"
    tm = train_model(prep.X, prep.y, "random_forest", n_estimators=20, max_depth=4)
    ws = build_workspace(t, "y", tm.model, name="t")
    assert any("days since 1970-01-01" in n for n in ws.notes)
    row = int(np.flatnonzero(ws.predictions == 0)[0])
    res = optimal_counterfactual(ws.ensemble, ws.X.to_numpy()[row], target=1, schema=ws.schema, time_limit=30)
    assert res.found and int(tm.model.predict(pd.DataFrame([res.x], columns=ws.X.columns))[0]) == 1
    with pytest.raises(DataError, match="hold dates, times or durations: 'signed'"):
        prepare_data(df, "y")                                    # a frame handed over as is: refused in words
