"""A linear model over one column per category gives the same scores as on codes,
and its rows go back to the pipeline's own input."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from core.intake.models import model_from
from core.model.categorical import expand
from core.model.native import model_input


def test_one_hot_scores_equal_code_scores_and_rows_go_back_to_the_pipeline():
    rng = np.random.default_rng(0)
    n = 400
    df = pd.DataFrame({"income": rng.normal(50, 10, n), "job": rng.choice(["a", "b", "c"], n),
                       "city": rng.choice(["x", "y"], n)})
    y = rng.integers(0, 3, n)
    pre = ColumnTransformer([("num", StandardScaler(), ["income"]),
                             ("cat", OneHotEncoder(handle_unknown="ignore", drop="first"), ["job", "city"])])
    pipe = make_pipeline(pre, LogisticRegression(max_iter=500)).fit(df, y)
    lm = model_from(pipe)
    ex = expand(lm)
    assert ex.feature_names == ("income", "job=a", "job=b", "job=c", "city=x", "city=y")
    codes = np.column_stack([rng.normal(50, 10, 50), rng.integers(0, 4, 50), rng.integers(0, 3, 50)])
    onehot = np.zeros((50, 6))
    onehot[:, 0] = codes[:, 0]
    for k in range(3):
        onehot[:, 1 + k] = codes[:, 1] == k
    for k in range(2):
        onehot[:, 4 + k] = codes[:, 2] == k
    assert np.allclose(ex.scores(onehot), lm.scores(codes), rtol=0, atol=1e-12)   # unseen codes included
    assert np.array_equal(ex.predict(onehot), lm.predict(codes))
    frame = model_input(ex, onehot[:10])
    assert np.array_equal(pipe.predict(frame), ex.predict(onehot[:10]))
    assert expand(expand(lm)) is not lm and expand(ex) is ex
