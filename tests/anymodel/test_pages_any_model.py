"""The app with a model that is not a tree ensemble: uploaded as a user would (skops, ONNX),
read as what it is, and every page runs on it without a traceback."""

from __future__ import annotations

import operator

import numpy as np
import pandas as pd
import pytest
import skops.io as sio
from conftest import ROOT
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, StandardScaler
from streamlit.testing.v1 import AppTest

APP = str(ROOT / "dashboard" / "app.py")
PAGES = sorted(p.name for p in (ROOT / "pages").glob("*.py"))


@pytest.fixture(scope="module")
def files():
    rng = np.random.default_rng(0)
    n = 600
    df = pd.DataFrame({"age": rng.integers(18, 80, n).astype(float), "income": rng.normal(50, 15, n).round(2),
                       "job": rng.choice(["clerk", "nurse", "pilot"], n)})
    df["label"] = ((df.income - 50) / 15 + (df.job == "pilot") - 0.02 * (df.age - 45)
                   + rng.normal(0, .5, n) > 0).astype(int)
    X = df.drop(columns="label")
    pre = lambda: ColumnTransformer([("num", StandardScaler(), ["age", "income"]),   # noqa: E731
                                     ("cat", OneHotEncoder(handle_unknown="ignore"), ["job"])])
    mlp = make_pipeline(pre(), MLPClassifier(hidden_layer_sizes=(16,), max_iter=500, random_state=0)).fit(X, df.label)
    lr = make_pipeline(pre(), LogisticRegression()).fit(X, df.label)
    bad = make_pipeline(FunctionTransformer(operator.neg), LogisticRegression()).fit(X[["age"]], df.label)
    return df, mlp, lr, {"mlp.skops": sio.dumps(mlp), "lr.skops": sio.dumps(lr), "bad.skops": sio.dumps(bad)}


def _upload(at, df, name, data):
    at.radio(key="dm_source").set_value("Upload your own").run()
    at.file_uploader(key="dm_data_file").upload("data.csv", df.to_csv(index=False).encode(), "text/csv")
    at.run()
    at.selectbox(key="dm_target").set_value("label").run()
    at.file_uploader(key="dm_model_file").upload(name, data)
    at.run()
    at.button(key="dm_load").click().run()
    assert not at.exception, at.exception


@pytest.fixture
def at():
    app = AppTest.from_file(APP, default_timeout=300)
    app.run()
    return app


def test_an_mlp_is_read_as_any_other_model_answered_by_itself(at, files):
    df, mlp, _, data = files
    _upload(at, df, "mlp.skops", data["mlp.skops"])
    assert not at.error, [e.value for e in at.error]
    ws = at.session_state["workspace"]
    assert ws.model_kind == "black_box" and ws.surrogate.fidelity > 0.9
    assert np.array_equal(ws.predictions, mlp.predict(df.drop(columns="label")))
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Kind"] == "Any other" and metrics["Surrogate agreement"].endswith("%")
    assert any("not read exactly" in i.value for i in at.info)


def test_a_logistic_pipeline_is_read_exactly(at, files):
    df, _, lr, data = files
    _upload(at, df, "lr.skops", data["lr.skops"])
    assert not at.error, [e.value for e in at.error]
    ws = at.session_state["workspace"]
    assert ws.model_kind == "linear" and ws.linear is not None
    assert np.array_equal(ws.predictions, lr.predict(df.drop(columns="label")))
    assert {m.label: m.value for m in at.metric}["Kind"] == "Linear"


def test_a_model_with_an_unsafe_type_is_refused_and_the_workspace_kept(at, files):
    df, _, _, data = files
    before = at.session_state["workspace"]
    _upload(at, df, "bad.skops", data["bad.skops"])
    assert any("allow-list" in e.value for e in at.error), [e.value for e in at.error]
    assert at.session_state["workspace"] is before


@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_on_any_other_model(files, page):
    df, _, _, data = files
    app = AppTest.from_file(APP, default_timeout=300)
    app.run()
    _upload(app, df, "mlp.skops", data["mlp.skops"])
    app.switch_page(str(ROOT / "pages" / page)).run()
    assert not app.exception, app.exception
