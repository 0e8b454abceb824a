"""A linear model's workspace: its answers exact, over the table's columns; a surrogate for
the analyses that need trees; the optimal counterfactual proven on the linear model and
valid on the pipeline itself."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from core.intake.workspace import build_workspace
from core.optimal import optimal_counterfactual


@pytest.fixture(scope="module")
def linear_ws():
    rng = np.random.default_rng(0)
    n = 1200
    df = pd.DataFrame({"age": rng.integers(18, 80, n).astype(float), "income": rng.normal(50, 15, n).round(2),
                       "job": rng.choice(["clerk", "nurse", "pilot"], n)})
    y = ((df.income - 50) / 15 + (df.job == "pilot") - 0.02 * (df.age - 45) + rng.normal(0, .5, n) > 0).astype(int)
    pre = ColumnTransformer([("num", StandardScaler(), ["age", "income"]),
                             ("cat", OneHotEncoder(handle_unknown="ignore"), ["job"])])
    pipe = make_pipeline(pre, LogisticRegression()).fit(df, y)
    return df, pipe, build_workspace(df.assign(y=y), "y", pipe, name="lr")


def test_a_linear_workspace_answers_exactly_over_the_tables_columns(linear_ws):
    df, pipe, ws = linear_ws
    assert ws.model_kind == "linear" and ws.model is pipe
    assert ws.linear.feature_names == ws.ensemble.feature_names == ("age", "income", "job=clerk", "job=nurse",
                                                                     "job=pilot")
    assert np.array_equal(ws.predictions, pipe.predict(df))
    assert ws.surrogate is not None and ws.surrogate.fidelity > 0.9
    assert any("read exactly" in n for n in ws.notes)


def test_the_optimal_counterfactual_of_a_linear_workspace_is_proven_and_valid_on_the_pipeline(linear_ws):
    df, pipe, ws = linear_ws
    X = ws.X.to_numpy(float)
    for i in range(5):
        p = ws.predictions[i]
        r = optimal_counterfactual(ws.linear, X[i], 1 - p, schema=ws.schema, model=pipe)
        assert r.status == "optimal" and r.guarantee.kind == "proven_optimal" and r.guarantee.model_kind == "linear"
        raw = ws.to_raw(r.x[None])[["age", "income", "job"]]
        assert pipe.predict(raw)[0] == 1 - p


def test_a_linear_workspaces_story_never_says_the_model_was_not_read_exactly(linear_ws):
    """The case story's region is its surrogate's (a linear model's regions are not boxes), and it
    says so without claiming the linear model was not read exactly (it is)."""
    from core.audit.story import case_story

    df, pipe, ws = linear_ws
    row = int(np.flatnonzero(ws.predictions == 0)[0])
    story = case_story(ws, row, 1, time_limit=10.0)
    where = dict(story.sections)["Where the case sits"][0]
    assert "surrogate" in where and "not read exactly" not in where, where
    assert "regions are not boxes" in where


def test_a_link_never_keeps_a_linear_model_as_its_surrogate(linear_ws, tmp_path):
    """A link keeps a tree ensemble's arrays: a linear model's would open as its surrogate, a tree
    ensemble answering (and claiming proven optimal) in the model's place. It is refused, saying why."""
    from core.audit.history import AuditStore, HistoryError, link_refusal

    _, _, ws = linear_ws
    store = AuditStore(f"sqlite:///{tmp_path / 'history.sqlite'}")
    with pytest.raises(HistoryError, match="would open as its surrogate"):
        store.save_workspace(ws)
    assert "linear model, read exactly" in link_refusal(ws)
