"""Any other model through a surrogate: every counterfactual is fed back to the original
model (the scikit-learn object itself, in this process), is minimal, keeps the query's
constraints, and says what it guarantees; the surrogate keeps the model's features."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import skops.io as sio
from sklearn.compose import ColumnTransformer
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from core.errors import QueryError
from core.intake.worker import ModelWorker
from core.model.native import model_input
from core.schema import infer_schema
from core.surrogate import Surrogate, distill
from core.surrogate.repair import checked_counterfactual


def _frame(n=1500, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"age": rng.integers(18, 80, n).astype(float), "income": rng.normal(50, 15, n).round(2),
                       "debt": rng.gamma(2.0, 5.0, n).round(2), "job": rng.choice(["clerk", "nurse", "pilot"], n)})
    score = 0.06 * (df.income - 50) - 0.12 * (df.debt - 10) + 0.03 * (df.age - 45) + (df.job == "pilot") * 1.2
    return df, (score + rng.normal(0, 0.3, n) > 0).astype(int).to_numpy()


@pytest.fixture(scope="module")
def setting():
    df, y = _frame()
    pre = ColumnTransformer([("num", StandardScaler(), ["age", "income", "debt"]),
                             ("cat", OneHotEncoder(handle_unknown="ignore"), ["job"])])
    pipe = make_pipeline(pre, MLPClassifier(hidden_layer_sizes=(32, 32), max_iter=600, random_state=0)).fit(df, y)
    w = ModelWorker(sio.dumps(pipe), "mlp.skops")
    model = w.model("mlp")
    codes = np.column_stack([df[c].to_numpy(float) if model.categories[j] is None else
                             [model.categories[j].index(v) for v in df[c]] for j, c in enumerate(model.feature_names)])
    surrogate = distill(model, codes[:1000], n_estimators=80, num_leaves=15, random_state=0)
    schema = infer_schema(pd.DataFrame(codes, columns=model.feature_names),
                          levels={"job": model.categories[3]}).with_updates("age", actionability="increase")
    yield df, pipe, model, codes, surrogate, schema
    w.stop()


def _on_original(pipe, model, surrogate, X):
    frame = model_input(surrogate.ensemble, np.atleast_2d(X), frame=True)
    return pipe.predict(frame[list(model.feature_names)])


def test_the_surrogate_keeps_the_models_features_and_is_faithful(setting):
    df, pipe, model, codes, surrogate, _ = setting
    ens = surrogate.native
    assert ens.feature_names == model.feature_names and ens.categories == model.categories
    assert list(ens.classes) == list(model.classes) and ens.meta["input"] == "codes"
    assert surrogate.fidelity >= 0.93 and surrogate.boundary_fidelity is not None
    held = codes[1000:]                                         # rows it never saw
    assert np.mean(ens.predict(held) == pipe.predict(df.iloc[1000:])) >= 0.9
    again = distill(model, codes[:1000], n_estimators=80, num_leaves=15, random_state=0)
    assert np.array_equal(again.native.predict(held), ens.predict(held))          # reproducible
    assert again.fidelity == surrogate.fidelity


def test_every_counterfactual_is_valid_on_the_original_model_minimal_and_constrained(setting):
    df, pipe, model, codes, surrogate, schema = setting
    rows = codes[1000:1030]
    pred = pipe.predict(df.iloc[1000:1030])
    checked = 0
    for x, p in zip(rows, pred):
        r = checked_counterfactual(model, x, 1 - p, surrogate=surrogate, schema=schema, X_ref=codes[:1000],
                                   time_limit=20)
        assert r.found, r.message
        assert _on_original(pipe, model, surrogate, r.x)[0] == 1 - p                     # valid on the model
        g = r.guarantee
        assert g.kind == "valid_on_model" and g.model_kind == "black_box"
        assert g.surrogate_fidelity == surrogate.fidelity and "not proven optimal" in g.text()
        assert r.x[0] >= x[0]                                                               # age: increase only
        moved = np.flatnonzero(r.x != x)
        assert len(moved) == len(r.changes) >= 1
        for j in moved:                                         # minimal: no change can be dropped
            back = r.x.copy()
            back[j] = x[j]
            assert _on_original(pipe, model, surrogate, back)[0] != 1 - p
        assert abs(r.cost - schema_cost(schema, x, r.x)) < 1e-9
        checked += 1
    assert checked == 30


def schema_cost(schema, x, z):
    from core.counterfactual import make_cost_model
    from core.model.categorical import expand  # noqa: F401  (the codes view: no groups here)
    span = schema.arrays()["span"]
    cost = 0.0
    for j, f in enumerate(schema.features):
        if z[j] != x[j]:
            cost += 1.0 if f.kind == "categorical" else abs(z[j] - x[j]) / span[j]
    return cost + 0 * make_cost_model.__code__.co_argcount


def test_a_poor_surrogate_is_repaired_and_its_answers_still_hold(setting):
    df, pipe, model, codes, _, schema = setting
    poor = distill(model, codes[:200], n_estimators=3, num_leaves=4, n_pairs=50, random_state=1)
    assert poor.fidelity < 0.95
    pred = pipe.predict(df.iloc[1100:1125])
    repaired = 0
    for x, p in zip(codes[1100:1125], pred):
        r = checked_counterfactual(model, x, 1 - p, surrogate=poor, schema=schema, X_ref=codes[:1000],
                                   time_limit=20, rounds=2)
        assert r.found, r.message
        assert _on_original(pipe, model, poor, r.x)[0] == 1 - p
        repaired += r.params["refits"] > 0 or r.params["model_calls"] > 4
    assert repaired >= 1


def test_impossible_queries_say_so_and_claim_nothing(setting):
    df, pipe, model, codes, surrogate, schema = setting
    x = codes[1000]
    p = pipe.predict(df.iloc[[1000]])[0]
    r = checked_counterfactual(model, x, 1 - p, surrogate=surrogate, schema=schema,
                               fixed=list(model.feature_names), time_limit=5)
    assert not r.found and r.x is None
    assert r.guarantee.kind == "not_found" and "Nothing is proven" in r.guarantee.text()
    with pytest.raises(QueryError, match="surrogate"):
        checked_counterfactual(model, x, 1 - p, surrogate="nope", schema=schema)
    with pytest.raises(QueryError, match="reads 4 features"):
        checked_counterfactual(model, x[:2], 1 - p, surrogate=surrogate)
    assert isinstance(surrogate, Surrogate)
