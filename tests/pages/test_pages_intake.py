"""The real pages on models as analysts have them, uploaded through the Data & model
page (so read in the sandbox): a scikit-learn Pipeline saved with skops, LightGBM and
XGBoost models trained on pandas category columns and a CatBoost JSON export with
one-hot categorical features, each with its raw table. Every analysis page
opens without a traceback and the optimal counterfactual is found and valid."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT
from streamlit.testing.v1 import AppTest

PAGES = ["compare_models.py", "optimal_cf.py", "metarule_tree.py", "decision_regions.py", "counterfactual_rules.py",
         "fcca.py", "fairness_audit.py"]


def _table(n=1500, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"age": rng.integers(18, 80, n).astype(float),
                       "job": rng.choice(["clerk", "nurse", "cook", "pilot"], n),
                       "income": rng.normal(50, 20, n).round(1), "sex": rng.choice(["f", "m"], n)})
    df["approved"] = ((df.age > 40) ^ df.job.isin(["clerk", "cook"]) | (df.income > 70)).astype(int)
    return df


def _pipeline_file(df):
    import skops.io as sio
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    pre = ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), ["job", "sex"]),
                             ("num", StandardScaler(), ["age", "income"])])
    pipe = Pipeline([("pre", pre), ("rf", RandomForestClassifier(25, max_depth=5, random_state=0))])
    pipe.fit(df.drop(columns="approved"), df.approved)
    return "model.skops", sio.dumps(pipe)


def _lightgbm_file(df):
    import lightgbm as lgb

    X = df.drop(columns="approved").astype({"job": "category", "sex": "category"})
    m = lgb.LGBMClassifier(n_estimators=25, num_leaves=8, verbose=-1, min_data_per_group=5, cat_smooth=1, n_jobs=1)
    m.fit(X, df.approved)
    return "model.txt", m.booster_.model_to_string().encode()


def _xgboost_file(df):
    import xgboost as xgb

    X = df.drop(columns="approved").astype({"job": "category", "sex": "category"})
    m = xgb.XGBClassifier(n_estimators=25, max_depth=4, enable_categorical=True, max_cat_to_onehot=1, n_jobs=1)
    m.fit(X, df.approved)
    return "model.json", bytes(m.get_booster().save_raw("json"))


def _catboost_file(df):
    import tempfile
    from pathlib import Path

    cb = pytest.importorskip("catboost")
    X = df.drop(columns="approved")
    m = cb.CatBoostClassifier(iterations=40, depth=4, verbose=0, one_hot_max_size=10, cat_features=["job", "sex"],
                              allow_writing_files=False, thread_count=1).fit(X, df.approved)
    with tempfile.TemporaryDirectory() as tmp:
        m.save_model(str(Path(tmp) / "m.json"), format="json")       # no pool: levels named from the data
        return "catboost.json", (Path(tmp) / "m.json").read_bytes()


def _original_says(model, raw):
    """The class the original model object gives the raw row."""
    if hasattr(model, "raw_scores"):                                       # CatBoost JSON
        return int(model.raw_scores(raw)[0, 0] > 0)
    if type(model).__module__.startswith("xgboost") and not hasattr(model, "predict_proba"):
        import xgboost as xgb

        return int(model.predict(xgb.DMatrix(raw, enable_categorical=True))[0] > 0.5)
    out = model.predict(raw) if hasattr(model, "predict_proba") else model.predict(raw) > 0.5
    return int(np.ravel(out)[0])


@pytest.mark.parametrize("make", [_pipeline_file, _lightgbm_file, _xgboost_file, _catboost_file],
                         ids=["pipeline", "lightgbm-categorical", "xgboost-categorical", "catboost-one-hot"])
def test_every_page_on_an_outside_model(make):
    df = _table()
    name, data = make(df)
    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=240)
    at.run()
    at.radio(key="dm_source").set_value("Upload your own").run()
    at.file_uploader(key="dm_data_file").upload("data.csv", df.to_csv(index=False).encode(), "text/csv")
    at.run()
    at.selectbox(key="dm_target").set_value("approved").run()
    at.file_uploader(key="dm_model_file").upload(name, data, "application/octet-stream")
    at.run()
    at.button(key="dm_load").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    ws = at.session_state["workspace"]
    assert "job=clerk" in ws.X.columns and ws.schema.groups()
    assert (ws.predictions == df.approved.to_numpy()).mean() > 0.8
    facts = ws.summary()                          # the uploaded model's own size, not its one-hot rewrite's
    assert facts["features"] == 4 and facts["categorical features"] == 2 and "one-hot rewrite" in facts["analysed as"]
    assert facts["leaves"] <= ws.ensemble.n_leaves
    for page in PAGES:
        at.switch_page(f"../pages/{page}").run()
        assert not at.exception, (page, at.exception)
    at.switch_page("../pages/optimal_cf.py").run()
    row = int(np.flatnonzero(ws.predictions == 0)[0])
    at.number_input(key="ocf_row").set_value(row).run()
    form_buttons = [b for b in at.button if b.label == "Find the optimal counterfactual"]
    form_buttons[0].click().run()
    assert not at.exception
    res = at.session_state["ocf_result"]
    assert res.found
    assert ws.model is not None
    raw = ws.to_raw(res.x[None, :])
    assert raw["job"].iloc[0] in {"clerk", "nurse", "cook", "pilot"}      # a category, never "missing"
    assert _original_says(ws.model, raw) == 1                              # valid on the original model
    shown = next(d.value for d in at.dataframe if "column" in d.value.columns)   # the page's table: raw columns
    assert list(shown["column"]) == ["age", "job", "income", "sex"]
    assert set(shown["original"].iloc[[1, 3]]) <= {"clerk", "nurse", "cook", "pilot", "f", "m"}
    assert shown.loc[shown["changed"], "counterfactual"].tolist() == [
        ws.raw_changes(res.x_query, res.x).set_index("column").loc[c, "counterfactual"] for c in shown.loc[
            shown["changed"], "column"]]
