"""The model worker: any other model answered from a sandboxed child process, exactly as
the model answers in its own library, and a model that crashes, hangs or eats memory
becomes a message while the caller carries on."""

from __future__ import annotations

import io
import operator

import numpy as np
import pandas as pd
import pytest
import skops.io as sio
from sklearn.compose import ColumnTransformer
from sklearn.neighbors import KNeighborsClassifier
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler
from sklearn.svm import SVC

from core.errors import ModelError, SchemaError, UnsupportedModelError, UntrustedPickleError
from core.intake.worker import ModelWorker
from core.model.blackbox import BlackBoxModel


def _frame(n=300, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"age": rng.integers(18, 80, n).astype(float), "income": rng.normal(50, 15, n),
                       "job": rng.choice(["clerk", "nurse", "pilot"], n)})
    y = ((df.income > 50) ^ (df.job == "pilot")).astype(int).to_numpy()
    return df, y


def _skops(model) -> bytes:
    return sio.dumps(model)


@pytest.fixture(scope="module")
def mlp_pipeline():
    df, y = _frame()
    pre = ColumnTransformer([("num", StandardScaler(), ["age", "income"]),
                             ("cat", OneHotEncoder(handle_unknown="ignore"), ["job"])])
    pipe = make_pipeline(pre, MLPClassifier(hidden_layer_sizes=(16,), max_iter=400, random_state=0)).fit(df, y)
    return df, y, pipe


def _codes(df: pd.DataFrame, model: BlackBoxModel) -> np.ndarray:
    X = np.zeros((len(df), model.n_features))
    for j, name in enumerate(model.feature_names):
        cats = model.categories[j]
        if cats is None:
            X[:, j] = df[name].to_numpy(dtype=float)
        else:
            X[:, j] = [cats.index(v) if v in cats else len(cats) for v in df[name]]
    return X


def test_a_pipeline_mlp_answers_as_in_its_library(mlp_pipeline):
    df, _, pipe = mlp_pipeline
    w = ModelWorker(_skops(pipe), "mlp.skops")
    try:
        model = w.model(identity="abc")
        assert model.feature_names == ("age", "income", "job")
        assert model.categories[2] == ("clerk", "nurse", "pilot") and model.categories[0] is None
        assert model.task == "classification" and model.has_proba and list(model.classes) == [0, 1]
        X = _codes(df, model)
        assert np.array_equal(model.predict(X), pipe.predict(df))
        assert np.allclose(model.predict_proba(X), pipe.predict_proba(df), rtol=0, atol=1e-12)
        # an unseen category (the missing code) is what the encoder ignores
        X_unseen = X[:5].copy()
        X_unseen[:, 2] = 3
        df_unseen = df.iloc[:5].assign(job="astronaut")
        assert np.allclose(model.predict_proba(X_unseen), pipe.predict_proba(df_unseen), atol=1e-12)
        assert w.calls >= 3 and w.rows >= len(df)
        assert model.content_hash() == "abc"
    finally:
        w.stop()
    assert not w.alive


@pytest.mark.parametrize("make", [
    lambda: SVC(probability=False, random_state=0),
    lambda: KNeighborsClassifier(5),
    lambda: MLPRegressor(hidden_layer_sizes=(8,), max_iter=300, random_state=0),
])
def test_array_models_answer_as_in_their_library(make):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 4))
    y = X[:, 0] + X[:, 1] ** 2 if "Regressor" in type(make()).__name__ else (X[:, 0] * X[:, 1] > 0).astype(int)
    est = make().fit(X, y)
    w = ModelWorker(_skops(est), "m.skops")
    try:
        model = w.model()
        assert model.feature_names == ("x0", "x1", "x2", "x3")
        if model.is_classifier:
            assert np.array_equal(model.predict(X), est.predict(X))
            if not model.has_proba:               # scores: the decision function, the larger class wins
                assert np.array_equal(model.classes[model.predict_proba(X).argmax(axis=1)], est.predict(X))
        else:
            assert np.allclose(model.predict(X), est.predict(X), atol=1e-12)
    finally:
        w.stop()


def test_rows_of_the_wrong_shape_and_missing_values_get_words(mlp_pipeline):
    df, _, pipe = mlp_pipeline
    w = ModelWorker(_skops(pipe), "mlp.skops")
    try:
        model = w.model()
        with pytest.raises(SchemaError, match="takes 3 features"):
            model.predict(np.zeros((2, 5)))
        assert not model.takes_missing         # StandardScaler passes NaN to the MLP, which refuses it
        with pytest.raises(SchemaError, match="does not take missing values"):
            model.predict(np.array([[np.nan, 1.0, 0.0]]))
        with pytest.raises(ModelError, match="cannot be sent to another process"):
            import pickle
            pickle.dumps(model)
    finally:
        w.stop()


@pytest.mark.parametrize("hook, words", [("segfault", "crashed"), ("memory", "MB"), ("hang", "longer than")])
def test_a_model_that_crashes_eats_memory_or_hangs_becomes_a_message(mlp_pipeline, hook, words):
    df, _, pipe = mlp_pipeline
    w = ModelWorker(_skops(pipe), "mlp.skops", memory_mb=1024, call_timeout=3, _hook=hook)
    try:
        model = w.model()                       # loading works; the first call misbehaves
        with pytest.raises(ModelError, match=words):
            model.predict(np.zeros((1, 3)))
        assert not w.alive
        starts = w.starts
        with pytest.raises(ModelError):         # the next call starts a fresh child (which misbehaves again)
            model.predict(np.zeros((1, 3)))
        assert w.starts == starts + 1
    finally:
        w.stop()


def test_stop_kills_the_child_and_the_next_call_starts_one(mlp_pipeline):
    df, _, pipe = mlp_pipeline
    w = ModelWorker(_skops(pipe), "mlp.skops")
    try:
        model = w.model()
        X = np.array([[30.0, 40.0, 1.0]])
        before = model.predict_proba(X)
        w.stop()
        assert not w.alive
        assert np.array_equal(model.predict_proba(X), before) and w.alive and w.starts == 2
    finally:
        w.stop()


def test_bad_files_are_refused_with_words():
    with pytest.raises(ModelError, match="empty"):
        ModelWorker(b"", "m.skops")
    w = ModelWorker(b"not a zip", "m.skops")
    with pytest.raises(ModelError, match="not a readable"):
        w.describe()
    assert not w.alive
    buf = io.BytesIO()
    import joblib
    joblib.dump(SVC().fit(np.eye(3), [0, 1, 1]), buf)
    w = ModelWorker(buf.getvalue(), "m.pkl")
    with pytest.raises(UntrustedPickleError, match="I trust this file"):
        w.describe()
    from sklearn.preprocessing import FunctionTransformer
    w = ModelWorker(_skops(make_pipeline(FunctionTransformer(operator.neg), SVC()).fit(np.eye(3), [0, 1, 1])),
                    "m.skops")
    with pytest.raises(UnsupportedModelError, match="allow-list"):
        w.describe()


def test_an_onnx_graph_answers_as_onnxruntime_and_its_string_inputs_take_the_datas_categories(mlp_pipeline):
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import FloatTensorType, StringTensorType

    df, _, pipe = mlp_pipeline
    onx = to_onnx(pipe, initial_types=[("age", FloatTensorType([None, 1])), ("income", FloatTensorType([None, 1])),
                                       ("job", StringTensorType([None, 1]))], target_opset=17)
    w = ModelWorker(onx.SerializeToString(), "mlp.onnx")
    try:
        model = w.model()
        assert model.feature_names == ("age", "income", "job") and model.meta["categories_from_data"] == ["job"]
        assert list(model.classes) == [0, 1] and model.source == "onnx"
        model = model.with_categories([None, None, ("clerk", "nurse", "pilot")])
        X = _codes(df, model)
        assert np.mean(model.predict(X) == pipe.predict(df)) > 0.99          # float32 in the graph
        assert np.allclose(model.predict_proba(X), pipe.predict_proba(df), atol=1e-4)
    finally:
        w.stop()
