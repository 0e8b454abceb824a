"""scikit-learn linear models read exactly (core.intake.parsing.linear and the linear
branch of core.intake.parsing.pipeline): labels equal and scores within 1e-9 of the
library's own on every row of a raw table (unseen categories and missing values
included), for each estimator alone and at the end of pipelines with every accepted
encoder, scaler and imputer; refusals say why; a skops file written by skops.io.dump
loads and reads the same; the arrays round trip keeps the model."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import skops.io as sio
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import (
    ElasticNet,
    Lasso,
    LinearRegression,
    LogisticRegression,
    Ridge,
    RidgeClassifier,
    SGDClassifier,
)
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import (
    MaxAbsScaler,
    MinMaxScaler,
    OneHotEncoder,
    OrdinalEncoder,
    PolynomialFeatures,
    RobustScaler,
    StandardScaler,
)
from sklearn.svm import LinearSVC

from core.errors import UnsupportedModelError
from core.intake import io
from core.intake.models import from_model, model_from
from core.model import LinearModel, as_model
from core.model.native import model_input


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    """The fits and scores here are of 600 rows and a few columns: OpenBLAS's second thread
    adds nothing but its spinning while it waits (a multinomial LogisticRegression's lbfgs took
    9 times the CPU with two, measured). The models, and so every comparison, are the same."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _data(n=600, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"age": rng.integers(18, 80, n).astype(float), "income": rng.normal(50_000, 20_000, n),
                       "job": rng.choice(["clerk", "nurse", "cook", "pilot", "rare"], n, p=[.35, .3, .2, .13, .02]),
                       "city": rng.choice(["x", "y"], n), "hours": rng.normal(40, 8, n)})
    score = (df.age - 45) / 10 + (df.income - 50_000) / 20_000 + df.job.map(
        {"clerk": -1, "nurse": 0, "cook": 0.5, "pilot": 2, "rare": 1}) + (df.city == "y") - (df.hours - 40) / 8
    return df, score


def _codes(lin: LinearModel, df: pd.DataFrame) -> np.ndarray:
    cols = []
    for j, c in enumerate(lin.feature_names):
        if lin.categories[j] is None:
            cols.append(df[c].to_numpy(float))
        else:
            known = {v: k for k, v in enumerate(lin.categories[j])}
            fill = lin.meta.get("impute", {}).get(c)        # an imputed column reads a missing value as its fill
            cols.append(np.array([known.get(fill if (v is None or v != v) and fill is not None else v, len(known))
                                  for v in df[c]], dtype=float))
    return np.column_stack(cols)


def _same(model, lin: LinearModel, df: pd.DataFrame) -> None:
    X = _codes(lin, df)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        theirs = model.decision_function(df) if hasattr(model, "decision_function") else model.predict(df)
        labels = model.predict(df)
        ours_input = model.predict(model_input(lin, X))
    theirs = np.asarray(theirs, dtype=float).reshape(len(df), -1)
    assert np.all(np.abs(lin.scores(X) - theirs) <= 1e-9 * np.maximum(1.0, np.abs(theirs)))
    if lin.task == "classification":
        assert (lin.predict(X) == labels).all() and (ours_input == labels).all()
    else:
        assert np.allclose(lin.predict(X), labels, rtol=1e-9, atol=1e-9)
    if lin.has_proba:
        assert np.allclose(lin.predict_proba(X), model.predict_proba(df), rtol=0, atol=1e-12)


def _pre(variant):
    if variant == "standard-onehot":
        return ColumnTransformer([("num", StandardScaler(), ["age", "income", "hours"]),
                                  ("cat", OneHotEncoder(handle_unknown="ignore"), ["job", "city"])])
    if variant == "drop-first":
        return ColumnTransformer([("num", RobustScaler(), ["age", "income"]), ("mm", MinMaxScaler(), ["hours"]),
                                  ("cat", OneHotEncoder(drop="first"), ["job", "city"])])
    if variant == "if-binary-infrequent":
        return ColumnTransformer([("num", MaxAbsScaler(), ["age", "income"]),
                                  ("cat", OneHotEncoder(drop="if_binary", min_frequency=0.05,
                                                        handle_unknown="infrequent_if_exist"), ["job", "city"])],
                                 remainder="passthrough")
    if variant == "ordinal-imputed":
        num = Pipeline([("imp", SimpleImputer(strategy="median")), ("sc", StandardScaler())])
        cat = Pipeline([("imp", SimpleImputer(strategy="most_frequent")),
                        ("oh", OneHotEncoder(handle_unknown="ignore", sparse_output=False))])
        return ColumnTransformer([("num", num, ["age", "income", "hours"]), ("cat", cat, ["job"]),
                                  ("ord", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1),
                                   ["city"])])
    raise ValueError(variant)


ESTIMATORS = {
    "logistic-binary": (lambda: LogisticRegression(max_iter=2000), "binary"),
    "logistic-multinomial": (lambda: LogisticRegression(max_iter=2000), "multi"),
    "linear-svc": (lambda: LinearSVC(), "multi"),
    "sgd-log": (lambda: SGDClassifier(loss="log_loss", random_state=0), "multi"),
    "sgd-hinge": (lambda: SGDClassifier(random_state=0), "binary"),
    "ridge-classifier": (lambda: RidgeClassifier(), "binary"),
    "linear-regression": (lambda: LinearRegression(), "regression"),
    "ridge": (lambda: Ridge(), "regression"),
    "lasso": (lambda: Lasso(alpha=0.01), "regression"),
    "elastic-net": (lambda: ElasticNet(alpha=0.01), "regression"),
}


def _y(score, task):
    if task == "binary":
        return (score > 0).astype(int)
    if task == "multi":
        return np.digitize(score, [-1.0, 1.0])
    return 1000 * score + 30_000


@pytest.mark.parametrize("name", list(ESTIMATORS))
@pytest.mark.parametrize("variant", ["standard-onehot", "drop-first", "if-binary-infrequent", "ordinal-imputed"])
def test_pipeline_ending_in_a_linear_model_reads_exactly(name, variant):
    df, score = _data()
    make, task = ESTIMATORS[name]
    pipe = Pipeline([("pre", _pre(variant)), ("m", make())]).fit(df, _y(score, task))
    lin = model_from(pipe)
    assert isinstance(lin, LinearModel) and lin.kind == "linear"
    assert set(lin.feature_names) == {"age", "income", "job", "city", "hours"}
    rows = df.copy()
    rows.loc[:4, "job"] = "astronaut"                              # a category the encoder never saw
    if variant == "ordinal-imputed":
        rows.loc[5:9, "income"] = np.nan                            # imputed: read as the fill value
        rows.loc[10:12, "job"] = np.nan
    elif variant == "drop-first":                                  # handle_unknown="error": not a row it takes
        rows = rows.iloc[5:]
    _same(pipe, lin, rows)


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_each_estimator_alone_reads_exactly(name):
    df, score = _data(seed=1)
    make, task = ESTIMATORS[name]
    X = df[["age", "income", "hours"]]
    est = make().fit(X, _y(score, task))
    lin = model_from(est)
    assert lin.feature_names == ("age", "income", "hours") and lin.categories == (None, None, None)
    _same(est, lin, X)
    on_array = make().fit(X.to_numpy(), _y(score, task))
    assert model_from(on_array).feature_names == ("x0", "x1", "x2")


def test_links_follow_the_library():
    df, score = _data(seed=2)
    X = df[["age", "income"]]
    assert model_from(LogisticRegression().fit(X, score > 0)).link == "sigmoid"
    assert model_from(LogisticRegression().fit(X, np.digitize(score, [-1, 1]))).link == "softmax"
    assert model_from(SGDClassifier(loss="log_loss").fit(X, np.digitize(score, [-1, 1]))).link == "ovr"
    svm = model_from(LinearSVC().fit(X, score > 0))
    assert svm.link == "decision" and not svm.has_proba
    with pytest.raises(ValueError, match="no probabilities"):
        svm.predict_proba(X.to_numpy())


def test_ties_follow_scikit_learn():
    """A decision of exactly 0 predicts the first class, as LinearClassifierMixin.predict does."""
    X = np.array([[-1.0], [1.0], [-2.0], [2.0]])
    est = LogisticRegression().fit(X, [0, 1, 0, 1])
    est.coef_[:] = 1.0
    est.intercept_[:] = 0.0
    lin = model_from(est)
    at = np.array([[0.0]])
    assert lin.predict(at)[0] == est.predict(at)[0] == 0


@pytest.mark.parametrize("step,match", [
    (MinMaxScaler(clip=True), "not affine"),
    (PolynomialFeatures(2), "PolynomialFeatures"),
])
def test_steps_that_are_not_exact_are_refused(step, match):
    df, score = _data(seed=3)
    pre = ColumnTransformer([("num", step, ["age", "income"]), ("cat", OneHotEncoder(), ["job"])])
    pipe = Pipeline([("pre", pre), ("m", LogisticRegression(max_iter=2000))]).fit(df, score > 0)
    with pytest.raises(UnsupportedModelError, match=match):
        as_model(pipe)


def test_multi_target_regression_and_tree_only_entry_refuse():
    df, score = _data(seed=4)
    X = df[["age", "income"]]
    with pytest.raises(UnsupportedModelError, match="single-target"):
        model_from(Ridge().fit(X, np.column_stack([score, score * 2])))
    with pytest.raises(UnsupportedModelError, match="linear model.*optimal counterfactual"):
        from_model(LogisticRegression().fit(X, score > 0))


def test_unknown_category_refused_when_the_encoder_refuses_it():
    df, score = _data(seed=5)
    pre = ColumnTransformer([("num", StandardScaler(), ["age"]), ("cat", OneHotEncoder(), ["job"])])
    pipe = Pipeline([("pre", pre), ("m", LogisticRegression(max_iter=2000))]).fit(df, score > 0)
    lin = as_model(pipe)
    j = lin.feature_names.index("job")
    assert not lin.code_allowed(j, lin.missing_code(j))
    x = _codes(lin, df.iloc[:1])
    x[0, j] = lin.missing_code(j)
    with pytest.raises(ValueError, match="refuses a missing or unknown category"):
        lin.predict(x)


def test_skops_file_of_a_linear_pipeline_loads_and_reads_the_same(tmp_path):
    df, score = _data(seed=6)
    pipe = Pipeline([("pre", _pre("standard-onehot")), ("m", LogisticRegression(max_iter=2000))]).fit(
        df, np.digitize(score, [-1, 1]))
    path = tmp_path / "model.skops"
    sio.dump(pipe, path)
    loaded = io.load_model(path.read_bytes(), "model.skops")
    lin = as_model(loaded)
    assert lin.link == "softmax"
    _same(pipe, lin, df)
    for est in (LinearSVC().fit(df[["age"]], score > 0), Ridge().fit(df[["age"]], score)):
        sio.dump(est, path)
        assert as_model(io.load_model(path.read_bytes(), "model.skops")).kind == "linear"


def test_arrays_round_trip_and_hash():
    df, score = _data(seed=7)
    pipe = Pipeline([("pre", _pre("ordinal-imputed")), ("m", LogisticRegression(max_iter=2000))]).fit(df, score > 0)
    lin = as_model(pipe)
    arrays, meta = lin.to_arrays()
    import json

    back = LinearModel.from_arrays({k: np.array(v) for k, v in arrays.items()}, json.loads(json.dumps(meta)))
    X = _codes(lin, df)
    assert np.array_equal(back.scores(X), lin.scores(X)) and back.content_hash() == lin.content_hash()
    assert back.categories == lin.categories and back.meta["impute"] == lin.meta["impute"]


def test_as_model_reads_either_kind_and_says_which():
    from sklearn.ensemble import RandomForestClassifier

    df, score = _data(seed=8)
    X = df[["age", "income"]]
    rf = RandomForestClassifier(3, max_depth=2, random_state=0).fit(X, score > 0)
    ens = as_model(rf)
    assert ens.kind == "tree_ensemble" and as_model(ens) is ens
    lin = as_model(LogisticRegression().fit(X, score > 0))
    assert lin.kind == "linear" and as_model(lin) is lin
