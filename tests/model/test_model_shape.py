"""One shape for a model kind (issue #64 item 3): a tree ensemble, a linear model and a model
known by its answers share one base (``core.model.features.ModelShape``): their features,
categorical codes and labels, classes, ``predict`` / ``predict_proba`` and the strongest
guarantee an answer on them can carry. The conformance check runs on every kind (classifier,
multiclass, regressor, categorical features, a classifier without probabilities); the codes of
a numerical feature are refused alike by every kind (they were a SchemaError, a bare
ValueError and 0), and a workspace reads its kind from its model instead of a string of its
own."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from lightgbm import LGBMClassifier
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder
from sklearn.svm import LinearSVC

from core.errors import ModelError, SchemaError, UnsupportedModelError
from core.intake.models import model_from
from core.intake.workspace import Workspace, build_workspace
from core.model import LinearModel, ModelShape, TreeEnsemble, check_model_shape, kind_of
from core.model.blackbox import BlackBoxModel
from core.model.features import MISSING_LABEL

SHARED = ("n_classes", "is_classifier", "categorical_features", "is_categorical", "n_codes", "missing_code",
          "category_label", "exact", "strongest_guarantee")


def _frame(n=240, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"age": rng.integers(18, 80, n).astype(float), "income": rng.normal(50, 15, n).round(1),
                       "job": rng.choice(["clerk", "nurse", "pilot"], n)})
    y = ((df.income > 50) ^ (df.job == "pilot")).astype(int).to_numpy()
    y3 = np.where(df.age > 60, 2, y)
    return df, y, y3


def _codes(model, df):
    """The codes view of ``df`` for ``model``: numbers as they are, a category as its code (the
    job's code among the sorted jobs for a model fitted on those codes as numbers)."""
    coded = df.assign(job=df.job.astype("category").cat.codes.astype(float))
    return np.column_stack([coded[n].to_numpy(dtype=float) if c is None else
                            np.array([list(map(str, c)).index(str(v)) for v in df[n]], dtype=float)
                            for n, c in zip(model.feature_names, model.categories)])


def _answered_by(fitted, categories):
    """A model known by its answers: ``fitted`` (on the codes view) answers from a callable."""
    def answers(X, _categories):
        out = {"label": fitted.predict(X)}
        if hasattr(fitted, "predict_proba"):
            out["proba"] = fitted.predict_proba(X)
        return out
    classes = getattr(fitted, "classes_", None)
    return BlackBoxModel(feature_names=("age", "income", "job"), task="classification" if classes is not None
                         else "regression", classes=classes, answers=answers, categories=categories,
                         source=f"sklearn.{type(fitted).__name__}", identity=type(fitted).__name__)


@pytest.fixture(scope="module")
def models():
    df, y, y3 = _frame()
    onehot = ColumnTransformer([("job", OneHotEncoder(), ["job"])], remainder="passthrough")
    cat = df.assign(job=df.job.astype("category"))
    levels = (None, None, ("clerk", "nurse", "pilot"))
    codes = pd.DataFrame({"age": df.age, "income": df.income, "job": cat.job.cat.codes.astype(float)})
    out = {
        "forest": model_from(RandomForestClassifier(10, max_depth=4, random_state=0).fit(codes, y3)),
        "forest regressor": model_from(RandomForestRegressor(10, max_depth=4, random_state=0).fit(codes, df.income)),
        "categorical boosting": model_from(LGBMClassifier(n_estimators=10, num_leaves=4, min_child_samples=5,
                                                          verbose=-1, random_state=0).fit(cat, y)),
        "logistic pipeline": model_from(make_pipeline(onehot, LogisticRegression(max_iter=500)).fit(df, y)),
        "linear svc": model_from(make_pipeline(onehot, LinearSVC()).fit(df, y)),
        "ridge": model_from(make_pipeline(onehot, Ridge()).fit(df, df.age)),
        "answers": _answered_by(KNeighborsClassifier(5).fit(codes.to_numpy(), y3), levels),
        "answers regressor": _answered_by(KNeighborsRegressor(5).fit(codes.to_numpy(), df.income), levels),
    }
    return df, out


def test_every_kind_has_the_one_shape(models):
    df, ms = models
    kinds = {type(m) for m in ms.values()}
    assert kinds == {TreeEnsemble, LinearModel, BlackBoxModel}
    assert any(m.categorical_features for m in ms.values() if isinstance(m, TreeEnsemble))
    assert any(m.categorical_features for m in ms.values() if isinstance(m, LinearModel))
    for name, m in ms.items():
        check_model_shape(m, _codes(m, df.head(40)))
        assert m.exact == (not isinstance(m, BlackBoxModel)), name
        assert m.strongest_guarantee == ("valid_on_model" if isinstance(m, BlackBoxModel) else "proven_optimal")


def test_what_the_kinds_share_is_written_once():
    for name in SHARED:
        one = ModelShape.__dict__[name]
        assert all(name not in cls.__dict__ for cls in (TreeEnsemble, LinearModel, BlackBoxModel)), name
        assert all(getattr(cls, name) is getattr(ModelShape, name) for cls in (TreeEnsemble, LinearModel,
                                                                                BlackBoxModel)), one


def test_codes_labels_and_probabilities_are_refused_alike_by_every_kind(models):
    df, ms = models
    for m in ms.values():
        j = m.feature_names.index("income")
        for ask in (m.n_codes, m.missing_code, lambda j: m.category_label(j, 0)):
            with pytest.raises(SchemaError, match="'income' is numerical, not categorical"):
                ask(j)
    categorical = [m for m in ms.values() if m.categorical_features]
    assert {type(m) for m in categorical} == {TreeEnsemble, LinearModel, BlackBoxModel}
    for m in categorical:
        k = m.categorical_features[0]
        assert m.n_codes(k) == len(m.categories[k]) + 1 and m.missing_code(k) == len(m.categories[k])
        assert m.category_label(k, m.missing_code(k)) == MISSING_LABEL
    regressors = [m for m in ms.values() if not m.is_classifier]
    assert {type(m) for m in regressors} == {TreeEnsemble, LinearModel, BlackBoxModel}
    for m in regressors:
        with pytest.raises(UnsupportedModelError, match="predict_proba needs a classifier"):
            m.predict_proba(_codes(m, df.head(2)))


def test_the_check_names_what_does_not_conform(models):
    df, ms = models
    m = ms["answers"]
    liar = dataclasses.replace(m, answers=lambda X, c: {"label": np.full(len(X), 7), "proba": np.ones((len(X), 3))})
    with pytest.raises(ModelError, match="not one of its classes.*sum to 1"):
        check_model_shape(liar, _codes(m, df.head(10)))
    with pytest.raises(ModelError, match="not a model of core.model"):
        check_model_shape(RandomForestClassifier(), _codes(m, df.head(10)))


def test_a_workspace_reads_its_kind_from_its_model(models):
    df, ms = models
    _, y, _ = _frame()
    table = df.assign(y=y)
    assert "model_kind" not in {f.name for f in dataclasses.fields(Workspace)}     # no string of its own
    for name, kind in (("categorical boosting", "tree_ensemble"), ("logistic pipeline", "linear"),
                       ("linear svc", "linear")):
        ws = build_workspace(table, "y", ms[name], name=name)
        assert ws.model_kind == ws.own_model.kind == kind
        X = ws.X.to_numpy(dtype=float)[:20]
        check_model_shape(ws.own_model, X)
        p = ws.predict_proba(X)
        assert (p is None) == (name == "linear svc")          # a decision function only: no probabilities
        assert name == "linear svc" or np.allclose(p, ws.own_model.predict_proba(X))
        on, extra = ws.query_model()
        assert on is ws.own_model and extra == {"model": ws.model}


def test_a_kind_is_read_from_the_model_and_a_foreign_object_has_none(models):
    """``kind_of`` answers what every guarantee and report says was read: the model's own kind,
    never a guess from its class; a fitted object of another library gets the default given."""
    _, ms = models
    for name, m in ms.items():
        assert kind_of(m) == kind_of(m, "tree_ensemble") == m.kind, name
    assert {kind_of(m) for m in ms.values()} == {"tree_ensemble", "linear", "black_box"}
    foreign = LogisticRegression()
    assert kind_of(foreign) == "black_box" and kind_of(foreign, "tree_ensemble") == "tree_ensemble"
