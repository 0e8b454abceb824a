"""AppTest of the app shell and the Data & model page (the real scripts)."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT
from streamlit.testing.v1 import AppTest

APP = str(ROOT / "dashboard" / "app.py")


@pytest.fixture
def at():
    app = AppTest.from_file(APP, default_timeout=120)
    app.run()
    assert not app.exception, app.exception
    return app


@pytest.fixture(scope="module")
def upload_files(tmp_path_factory):
    import xgboost as xgb

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.normal(size=120), "b": rng.integers(0, 4, 120)})
    df["label"] = (df.a + df.b > 1.5).astype(int)
    m = xgb.XGBClassifier(n_estimators=10, max_depth=3, n_jobs=1).fit(df[["a", "b"]], df["label"])
    path = tmp_path_factory.mktemp("m") / "model.json"
    m.save_model(path)
    return df.to_csv(index=False).encode(), path.read_bytes(), pickle.dumps(m)


def _workspace(at):
    return at.session_state["workspace"]


def test_app_opens_on_the_demo(at):
    assert [t.value for t in at.title] == ["Data & model"]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Model"] == "LightGBM" and metrics["Trees"] == "100"
    assert float(metrics["Accuracy on data"]) > 0.85
    assert not at.error
    assert _workspace(at).schema.protected() == ["sex"]


def test_switch_demo(at):
    at.selectbox(key="dm_demo").set_value("cancer-rf").run()
    at.button(key="dm_load_demo").click().run()
    assert not at.exception
    assert "Breast cancer" in _workspace(at).name
    assert any("Loaded the demo" in s.value for s in at.success)
    assert {m.label: m.value for m in at.metric}["Model"] == "scikit-learn"


def _to_upload(at, csv_bytes):
    at.radio(key="dm_source").set_value("Upload your own").run()
    at.file_uploader(key="dm_data_file").upload("data.csv", csv_bytes, "text/csv")
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    at.selectbox(key="dm_target").set_value("label").run()


def test_upload_csv_and_model(at, upload_files):
    csv_bytes, model_json, _ = upload_files
    _to_upload(at, csv_bytes)
    at.file_uploader(key="dm_model_file").upload("model.json", model_json, "application/json")
    at.run()
    at.button(key="dm_load").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    ws = _workspace(at)
    assert ws.name == "data.csv · model.json" and ws.ensemble.source == "xgboost.Booster"
    assert list(ws.X.columns) == ["a", "b"]
    assert {m.label: m.value for m in at.metric}["Trees"] == "10"
    # another page, then back: the source shown is that of what is loaded, not the demo's
    at.switch_page("../pages/optimal_cf.py").run()
    assert not at.exception
    at.switch_page("../pages/data_model.py").run()
    assert not at.exception and at.radio(key="dm_source").value == "Upload your own"
    assert not [s for s in at.selectbox if s.key == "dm_demo"]


def test_bad_model_file_shows_an_error_and_keeps_the_workspace(at, upload_files):
    before = _workspace(at)
    _to_upload(at, upload_files[0])
    at.file_uploader(key="dm_model_file").upload("model.json", b"{corrupt", "application/json")
    at.run()
    at.button(key="dm_load").click().run()
    assert not at.exception
    assert any("could not be loaded" in e.value and "XGBoost" in e.value for e in at.error)
    assert _workspace(at) is before


def test_untrusted_pickle_is_refused_until_trusted(at, upload_files):
    csv_bytes, _, pkl = upload_files
    _to_upload(at, csv_bytes)
    at.file_uploader(key="dm_model_file").upload("model.pkl", pkl)
    at.run()
    at.button(key="dm_load").click().run()
    assert any("trust" in e.value for e in at.error)
    at.checkbox(key="dm_trust").check().run()
    assert any("arbitrary code" in w.value for w in at.warning)
    at.button(key="dm_load").click().run()
    assert not at.error and _workspace(at).ensemble.source == "xgboost.XGBClassifier"


def test_bad_table_is_explained(at):
    at.radio(key="dm_source").set_value("Upload your own").run()
    at.file_uploader(key="dm_data_file").upload("empty.csv", b"", "text/csv")
    at.run()
    assert not at.exception
    assert any("empty" in e.value for e in at.error)


def test_model_with_other_columns_is_explained(at, upload_files):
    csv_bytes, model_json, _ = upload_files
    df = pd.read_csv(__import__("io").BytesIO(csv_bytes)).rename(columns={"b": "zz"})
    _to_upload(at, df.to_csv(index=False).encode())
    at.file_uploader(key="dm_model_file").upload("model.json", model_json)
    at.run()
    at.button(key="dm_load").click().run()
    assert any("expects columns ['b']" in e.value for e in at.error)


def test_train_a_model_here(at, upload_files):
    _to_upload(at, upload_files[0])
    at.radio(key="dm_how").set_value("Train a model here").run()
    at.selectbox(key="dm_family").set_value("gradient_boosting")
    at.number_input(key="dm_trees").set_value(20)
    at.button(key="dm_train_go").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    ws = _workspace(at)
    assert ws.ensemble.source == "sklearn.GradientBoostingClassifier" and ws.ensemble.n_trees == 20
    assert any("held-out accuracy" in s.value for s in at.success)


def test_schema_file_round_trip(at):
    ws = _workspace(at)
    changed = ws.schema.with_updates("age", actionability="increase")
    at.file_uploader(key="dm_schema_file").upload("schema.json", changed.to_json().encode())
    at.run()
    at.button(key="dm_apply_schema_file").click().run()
    assert _workspace(at).schema["age"].actionability == "increase"
    at.file_uploader(key="dm_schema_file").upload("schema.json", b'{"features": []}')
    at.run()
    at.button(key="dm_apply_schema_file").click().run()
    assert any("do not match" in e.value for e in at.error)
    assert _workspace(at).schema["age"].actionability == "increase"


@pytest.fixture(scope="module")
def sex_upload(tmp_path_factory):
    """A table with a ``Sex`` column and a model that reads it."""
    import xgboost as xgb

    rng = np.random.default_rng(1)
    df = pd.DataFrame({"a": rng.normal(size=200), "Sex": rng.integers(0, 2, 200), "b": rng.integers(0, 4, 200)})
    df["label"] = (df.a + df.b + df.Sex > 2).astype(int)
    m = xgb.XGBClassifier(n_estimators=10, max_depth=3, n_jobs=1).fit(df[["a", "Sex", "b"]], df["label"])
    path = tmp_path_factory.mktemp("s") / "model.json"
    m.save_model(path)
    return df.to_csv(index=False).encode(), path.read_bytes()


PROPOSAL = ("Proposed as protected (and held fixed in counterfactuals): “Sex”, because its name reads like a "
            "protected attribute (sex). Untick it (and set its actionability) in the feature settings if that is "
            "wrong.")


def test_an_uploaded_sex_column_is_proposed_as_protected_visibly_and_can_be_unticked(at, sex_upload):
    """The app, not the library, proposes: the proposal is on the page with its reason, in the
    settings table, and the analyst's untick holds."""
    assert not any("Proposed as protected" in w.value for w in at.warning)   # the demo names its own
    csv_bytes, model_json = sex_upload
    _to_upload(at, csv_bytes)
    at.file_uploader(key="dm_model_file").upload("model.json", model_json, "application/json")
    at.run()
    at.button(key="dm_load").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    ws = _workspace(at)
    assert ws.schema.protected() == ["Sex"] and ws.schema["Sex"].actionability == "fixed"
    assert [f.name for f in ws.schema.features if f.actionability != "free"] == ["Sex"]
    assert [w.value for w in at.warning if "Proposed" in w.value] == [PROPOSAL]
    table = at.data_editor[0].value.set_index("name")
    assert bool(table.at["Sex", "protected"]) and table.at["Sex", "actionability"] == "fixed"
    assert not table.drop(index="Sex")["protected"].any()
    row = list(table.index).index("Sex")
    at.session_state["dm_schema_editor"] = {"edited_rows": {row: {"protected": False, "actionability": "free"}},
                                            "added_rows": [], "deleted_rows": []}
    next(b for b in at.button if b.label == "Apply settings").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    ws = _workspace(at)
    assert ws.schema.protected() == [] and ws.schema["Sex"].actionability == "free"
    assert not any("Proposed as protected" in w.value for w in at.warning)   # nothing proposed stays in force
    assert any("Feature settings applied" in s.value for s in at.success)


def test_a_model_trained_here_gets_the_same_proposal(at, sex_upload):
    _to_upload(at, sex_upload[0])
    at.radio(key="dm_how").set_value("Train a model here").run()
    at.number_input(key="dm_trees").set_value(10)
    at.button(key="dm_train_go").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert _workspace(at).schema.protected() == ["Sex"]
    assert [w.value for w in at.warning if "Proposed" in w.value] == [PROPOSAL]
