"""Pipelines as scikit-learn makes them by default, for any model: a OneHotEncoder with its
default sparse output (a ColumnTransformer keeps it sparse below ``sparse_threshold``), an
OrdinalEncoder; fitted on an Adult-like table, saved with skops (or exported with skl2onnx)
as a data scientist would, read with core.load_model: a linear model exactly, any other
(SVC, k-nearest neighbours, MLP) in its sandboxed worker; each gives scikit-learn's own
predictions on the table. A refusal names its real reason."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse
import skops.io as sio
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, OrdinalEncoder, StandardScaler
from sklearn.svm import SVC

from core.errors import UnsupportedModelError
from core.intake import io
from core.intake.door import load_model
from core.intake.models import model_from
from core.model.blackbox import BlackBoxModel

CATS, NUMS = ["occupation", "country", "sex"], ["age", "education_num", "hours"]


@pytest.fixture(scope="module")
def adult():
    rng = np.random.default_rng(0)
    n = 400
    occupations = ["Adm-clerical", "Craft-repair", "Exec-managerial", "Farming-fishing", "Handlers-cleaners",
                   "Machine-op-inspct", "Other-service", "Prof-specialty", "Protective-serv", "Sales",
                   "Tech-support", "Transport-moving"]
    countries = ["United-States", "Mexico", "Philippines", "Germany", "Canada", "India", "Cuba", "England",
                 "China", "Italy", "Jamaica", "Vietnam", "Poland", "Japan", "Columbia"]
    df = pd.DataFrame({"age": rng.integers(17, 90, n).astype(float), "occupation": rng.choice(occupations, n),
                       "country": rng.choice(countries, n), "education_num": rng.integers(1, 17, n).astype(float),
                       "sex": rng.choice(["Male", "Female"], n), "hours": rng.integers(5, 80, n).astype(float)})
    y = (((df.age > 35) & (df.education_num > 10)) | df.occupation.isin(["Exec-managerial", "Prof-specialty"])
         | (df.hours > 60)).astype(int)
    return df, y


def _one_hot(**ct):
    return ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), CATS), ("num", StandardScaler(), NUMS)],
                             **ct)


PREPROCESSING = {
    "one-hot": _one_hot,                                              # sparse: denser than 0.3 it is not
    "one-hot-sparse-threshold": lambda: _one_hot(sparse_threshold=1.0),
    "ordinal": lambda: ColumnTransformer([("cat", OrdinalEncoder(handle_unknown="use_encoded_value",
                                                                 unknown_value=-1), CATS),
                                          ("num", StandardScaler(), NUMS)]),
}
MODELS = {"svc": SVC, "knn": KNeighborsClassifier, "lr": lambda: LogisticRegression(max_iter=1000),
          "mlp": lambda: MLPClassifier((8,), max_iter=200, random_state=0)}


def _fit(pre, est, df, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Pipeline([("pre", PREPROCESSING[pre]()), ("model", MODELS[est]())]).fit(df, y)


def _codes(model, df):
    """The table in the model's codes view: numbers as they are, a category as its index."""
    X = np.zeros((len(df), len(model.feature_names)))
    for j, name in enumerate(model.feature_names):
        cats = model.categories[j]
        X[:, j] = df[name] if cats is None else [list(cats).index(v) for v in df[name]]
    return X


@pytest.mark.parametrize("pre, est", [("one-hot", "svc"), ("one-hot", "knn"), ("one-hot", "mlp"), ("one-hot", "lr"),
                                      ("one-hot-sparse-threshold", "svc"), ("ordinal", "knn"), ("ordinal", "lr")])
def test_a_default_pipeline_loads_and_predicts_as_scikit_learn(adult, pre, est):
    df, y = adult
    pipe = _fit(pre, est, df, y)
    if pre.startswith("one-hot"):
        assert scipy.sparse.issparse(pipe[:-1].transform(df))      # scikit-learn's default output here
    model = load_model(sio.dumps(pipe), f"{est}.skops")
    if est == "lr":                                  # read exactly, as a linear model
        lin = model_from(model)
        assert lin.kind == "linear" and lin.categories[lin.feature_names.index("country")] is not None
        assert np.array_equal(lin.predict(_codes(lin, df)), pipe.predict(df))
        return
    assert isinstance(model, BlackBoxModel) and model.source == "sklearn.Pipeline"
    assert np.array_equal(model.predict(_codes(model, df)), pipe.predict(df))


def _log_hours(x):
    return np.log1p(x)


def test_refusals_name_the_real_reason(adult):
    df, y = adult
    knn = _fit("ordinal", "knn", df, y)             # its KDTree and metric are the worker's types, not the trees'
    with pytest.raises(UnsupportedModelError, match="KNeighborsClassifier|KDTree") as err:
        io.load_model(sio.dumps(knn), "knn.skops")
    assert "not a tree ensemble or a linear model" in str(err.value) and "any other model" in str(err.value)
    own = Pipeline([("log", FunctionTransformer(_log_hours)), ("model", SVC())]).fit(df[NUMS], y)
    with pytest.raises(UnsupportedModelError, match=r"outside the allow-list: \[.*_log_hours"):
        load_model(sio.dumps(own), "own.skops")


def test_a_default_svc_pipeline_exported_to_onnx_runs_on_its_labels(adult):
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import FloatTensorType, StringTensorType

    df, y = adult
    pipe = _fit("one-hot", "svc", df, y)
    types = [(c, StringTensorType([None, 1]) if c in CATS else FloatTensorType([None, 1])) for c in df.columns]
    data = to_onnx(pipe, initial_types=types, target_opset=17).SerializeToString()
    with pytest.raises(UnsupportedModelError, match=r"not probabilities.*output='output_label'"):
        load_model(data, "svc.onnx")                 # its second output holds decision scores
    model = load_model(data, "svc.onnx", output="output_label")
    assert isinstance(model, BlackBoxModel) and not model.has_proba
    cats = [tuple(sorted(df[c].unique())) if c in CATS else None for c in model.feature_names]
    model = model.with_categories(cats)
    assert np.mean(model.predict(_codes(model, df)) == pipe.predict(df)) > 0.99     # float32 in the graph
