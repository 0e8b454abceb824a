"""Decision-region slices of a linear model (core.solvers.linear_regions) are exact: the
polygons tile the view, and at random points of it the polygon holding the point gives
the label the scikit-learn pipeline gives there (binary, multinomial, a regressor's
target interval, a categorical axis as bands)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from core.counterfactual import QueryError
from core.model import as_model
from core.model.native import model_input
from core.solvers.linear_regions import linear_slice, linear_slice_figure


def _fit(kind, seed=0, n=400):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"a": rng.normal(50, 10, n), "b": rng.normal(0, 1, n), "job": rng.choice(["p", "q", "r"], n)})
    score = (df.a - 50) / 10 + df.b + df.job.map({"p": -1, "q": 0, "r": 1.5})
    pre = ColumnTransformer([("num", StandardScaler(), ["a", "b"]), ("cat", OneHotEncoder(), ["job"])])
    est, y = {"binary": (LogisticRegression(), score > 0),
              "multi": (LogisticRegression(max_iter=1000), np.digitize(score, [-1, 1])),
              "regression": (Ridge(), 3 * score)}[kind]
    pipe = Pipeline([("pre", pre), ("m", est)]).fit(df, y)
    return pipe, as_model(pipe)


@pytest.mark.parametrize("kind", ["binary", "multi", "regression"])
@pytest.mark.parametrize("axes", [("a", "b"), ("job", "b"), ("a", "job")])
def test_slice_polygons_tile_the_view_and_give_the_model_label(kind, axes):
    pipe, lin = _fit(kind)
    x = np.array([50.0, 0.2, 1.0])
    target = (1.0, 2.5) if kind == "regression" else None
    sl = linear_slice(lin, x, axes, bounds={"a": (20.0, 80.0), "b": (-3.0, 3.0)}, target=target)
    assert sl.guarantee.kind == "exact" and sl.guarantee.model_kind == "linear"
    (a0, a1), (b0, b1) = sl.view
    assert sum(p.area for p in sl.polygons) == pytest.approx((a1 - a0) * (b1 - b0), rel=1e-9)
    assert len({str(p.prediction) for p in sl.polygons}) >= 2
    rng = np.random.default_rng(1)
    fa, fb = sl.features
    P = np.column_stack([rng.uniform(a0, a1, 300), rng.uniform(b0, b1, 300)])
    for j, col in ((fa, 0), (fb, 1)):
        if lin.categories[j] is not None:
            P[:, col] = np.clip(np.round(P[:, col]), 0, len(lin.categories[j]) - 1)
    X = np.repeat(x[None, :], len(P), axis=0)
    X[:, fa], X[:, fb] = P[:, 0], P[:, 1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        truth = pipe.predict(model_input(lin, X))
    if kind == "regression":
        truth = np.where(truth < target[0], "below", np.where(truth > target[1], "above", "in target"))
    for p, t in zip(P, truth):
        holders = [poly for poly in sl.polygons if poly.contains(p[None, :])[0]]
        assert holders and all(str(h.prediction) == str(t) for h in holders), (p, t, [h.prediction for h in holders])
    assert linear_slice_figure(sl).data


def test_slice_refuses_a_tree_ensemble_and_a_regressor_without_target():
    from sklearn.ensemble import RandomForestClassifier

    pipe, lin = _fit("regression")
    with pytest.raises(QueryError, match="target interval"):
        linear_slice(lin, np.array([50.0, 0.0, 0.0]), ("a", "b"))
    rf = RandomForestClassifier(3, max_depth=2, random_state=0).fit(np.random.default_rng(0).normal(size=(50, 2)),
                                                                  np.arange(50) % 2)
    with pytest.raises(QueryError, match="slice_regions"):
        linear_slice(rf, np.zeros(2), (0, 1))
