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

from core.counterfactual import make_cost_model
from core.errors import AtlasError, QueryError
from core.intake.worker import ModelWorker
from core.intake.workspace import build_workspace
from core.optimal import optimal_counterfactual
from core.shown import number_text
from core.surrogate import Surrogate, distill


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
    ws = build_workspace(df.assign(y=y), "y", model, name="mlp")
    ws = ws.with_schema(ws.schema.with_updates("age", actionability="increase"))
    yield df, pipe, model, ws
    w.stop()


def _on_original(pipe, ws, X):
    return pipe.predict(ws.to_raw(np.atleast_2d(X))[["age", "income", "debt", "job"]])


def test_the_workspace_answers_with_the_model_and_its_surrogate_is_faithful(setting):
    df, pipe, model, ws = setting
    assert ws.model_kind == "black_box" and ws.model is model
    assert np.array_equal(ws.predictions, pipe.predict(df))              # the model's answers, not the surrogate's
    s = ws.surrogate
    ens = s.native
    assert ens.feature_names == model.feature_names and ens.categories == model.categories
    assert list(ens.classes) == list(model.classes) and ens.meta["input"] == "codes"
    assert s.ensemble.feature_names == ws.ensemble.feature_names                      # the one-hot view
    assert s.fidelity >= 0.93 and s.boundary_fidelity is not None
    assert np.mean(ws.ensemble.predict(ws.X.to_numpy(float)) == ws.predictions) >= 0.93
    assert any("not read exactly" in n for n in ws.notes)
    codes = np.column_stack([df[c].to_numpy(float) if model.categories[j] is None else
                             [model.categories[j].index(v) for v in df[c]] for j, c in enumerate(model.feature_names)])
    a = distill(model, codes[:1000], n_estimators=40, num_leaves=8, random_state=3)
    b = distill(model, codes[:1000], n_estimators=40, num_leaves=8, random_state=3)
    assert np.array_equal(a.native.predict(codes), b.native.predict(codes)) and a.fidelity == b.fidelity


def test_every_counterfactual_is_valid_on_the_original_model_minimal_and_constrained(setting):
    df, pipe, model, ws = setting
    X = ws.X.to_numpy(float)
    groups = [list(g) for g in ws.schema.groups().values()]
    singles = [[j] for j in range(X.shape[1]) if not any(j in g for g in groups)]
    age = list(ws.ensemble.feature_names).index("age")
    span = ws.schema.arrays()["span"]
    checked = 0
    for i in range(1000, 1030):
        x, p = X[i], ws.predictions[i]
        r = optimal_counterfactual(ws.ensemble, x, 1 - p, model=model, surrogate=ws.surrogate, schema=ws.schema,
                                   X_ref=X[:1000], time_limit=20)
        assert r.found, r.message
        assert _on_original(pipe, ws, r.x)[0] == 1 - p                                  # valid on the model
        g = r.guarantee
        assert g.kind == "valid_on_model" and g.model_kind == "black_box"
        assert g.surrogate_fidelity == ws.surrogate.fidelity and "not proven optimal" in g.text()
        assert r.x[age] >= x[age]                                                        # age: increase only
        moved = [u for u in groups + singles if not np.array_equal(r.x[u], x[u])]
        assert moved
        for u in moved:                                          # minimal: no change can be dropped
            back = r.x.copy()
            back[u] = x[u]
            assert _on_original(pipe, ws, back)[0] != 1 - p
        by_hand = sum(1.0 if len(u) > 1 else abs(r.x[u[0]] - x[u[0]]) / span[u[0]]
                      for u in moved)                            # a category switch costs one unit
        assert abs(r.cost - by_hand) < 1e-9
        assert abs(r.cost - make_cost_model(ws.ensemble, "l1", None, ws.schema).cost(x, r.x[None])[0]) < 1e-12
        income = list(ws.ensemble.feature_names).index("income")
        if r.x[income] != x[income]:                             # the number shown is the number checked
            shown = number_text(r.x[income])
            assert float(shown.replace(",", "")) == r.x[income] and len(shown.replace(",", "")) <= 9, shown
        checked += 1
    assert checked == 30


def test_a_poor_surrogate_is_repaired_and_its_answers_still_hold(setting):
    df, pipe, model, ws = setting
    codes = np.column_stack([df[c].to_numpy(float) if model.categories[j] is None else
                             [model.categories[j].index(v) for v in df[c]] for j, c in enumerate(model.feature_names)])
    poor = distill(model, codes[:200], n_estimators=3, num_leaves=4, n_pairs=50, random_state=1)
    poor = poor.with_view(ws.surrogate.view)
    assert poor.fidelity < 0.95
    X = ws.X.to_numpy(float)
    refits = 0
    for i in range(1100, 1125):
        x, p = X[i], ws.predictions[i]
        r = optimal_counterfactual(ws.ensemble, x, 1 - p, model=model, surrogate=poor, schema=ws.schema,
                                   X_ref=X[:1000], time_limit=20)
        assert r.found, r.message
        assert _on_original(pipe, ws, r.x)[0] == 1 - p
        refits += r.params["refits"]
    assert refits >= 1


def test_impossible_queries_say_so_and_claim_nothing(setting):
    df, pipe, model, ws = setting
    x, p = ws.X.to_numpy(float)[1000], ws.predictions[1000]
    r = optimal_counterfactual(ws.ensemble, x, 1 - p, model=model, surrogate=ws.surrogate, schema=ws.schema,
                               fixed=list(ws.ensemble.feature_names), time_limit=5)
    assert not r.found and r.x is None
    assert r.guarantee.kind == "not_found" and "Nothing is proven" in r.guarantee.text()
    with pytest.raises(QueryError, match="surrogate"):
        optimal_counterfactual(ws.ensemble, x, 1 - p, model=model, surrogate="nope", schema=ws.schema)
    with pytest.raises(QueryError, match="pass model="):
        optimal_counterfactual(ws.ensemble, x, 1 - p, surrogate=ws.surrogate, schema=ws.schema)
    with pytest.raises(QueryError, match="does not take plausibility"):
        optimal_counterfactual(ws.ensemble, x, 1 - p, model=model, surrogate=ws.surrogate, plausibility=object())
    with pytest.raises(QueryError, match="reads 6 features"):
        optimal_counterfactual(ws.ensemble, x[:2], 1 - p, model=model, surrogate=ws.surrogate)
    assert isinstance(ws.surrogate, Surrogate)


def test_a_counterfactual_under_constraints_keeps_them_and_is_valid_on_the_model(setting):
    """Constraints between features through the surrogate (issue #61 item 2): the surrogate's
    query is solved under them and every point the repair asks the model about keeps them."""
    from core.constraints import parse

    df, pipe, model, ws = setting
    X = ws.X.to_numpy(float)
    texts = ["delta(debt) <= -0.5 * delta(income)", "delta(income) <= 10", "job: clerk -> nurse"]
    cons = parse(texts, ws.schema)
    query, extra = ws.query_model()
    answered = 0
    for i in np.flatnonzero(ws.predictions == 0)[:4]:
        r = optimal_counterfactual(query, X[i], 1, schema=ws.schema, constraints=texts, time_limit=8, X_ref=X,
                                   **extra)
        assert r.status != "error", r.message
        if not r.found:                          # nothing valid on the model under these constraints
            assert r.guarantee.kind == "not_found"
            continue
        answered += 1
        assert cons.violated(X[i], r.x) == [], (i, r.x)
        assert _on_original(pipe, ws, r.x)[0] == 1 and r.guarantee.kind == "valid_on_model"
        assert r.params["constraints"] == texts
    assert answered >= 2


def test_a_model_whose_labels_never_cross_its_varying_probabilities_is_named_so():
    """#60 item 10: labels all one class while the probabilities vary (an ONNX graph whose
    label rule is not its probabilities') are not "the same answer on every row"."""
    from core.errors import AtlasError
    from core.model.blackbox import BlackBoxModel

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))

    def answers(Z, categories):
        p1 = 0.3 + 0.15 / (1 + np.exp(-Z[:, 0]))          # 0.30-0.45: never above one half
        return {"label": np.ones(len(Z), dtype=np.int64), "proba": np.column_stack([1 - p1, p1])}

    bb = BlackBoxModel(("a", "b", "c"), "classification", np.array([0, 1]), answers)
    with pytest.raises(AtlasError, match=r"labels every row of this data 1, though its probability of 1 varies "
                                         r"from 0\.3\d* to 0\.4\d*"):
        distill(bb, X)
    flat = BlackBoxModel(("a", "b", "c"), "classification", np.array([0, 1]),
                         lambda Z, categories: {"label": np.zeros(len(Z), dtype=np.int64), "proba": np.tile([0.9, 0.1], (len(Z), 1))})
    with pytest.raises(AtlasError, match="same answer on every row"):
        distill(flat, X)


def test_a_batch_checks_its_rows_together_each_as_alone_and_counts_each_row_once(setting):
    """Rows of a batch are checked on the model in waves whose calls go together: far fewer
    calls than row by row, the same answer for every row as when it is checked alone (a row
    that needs its surrogate refitted runs alone), valid on the original model, and progress
    counts each row once.

    "Alone" is the row as a batch of its own: the same solve on the surrogate, one solver
    thread each, so the same point on any machine. The row's own query starts its solve from
    the reference rows, which the batch leaves out (``core.optimal.batch``): of two equally
    cheap points on the surrogate it may take the other, so with it the batch shares what
    both guarantee: the surrogate's proven answer, and validity on the model."""
    from core.optimal.batch import batch_counterfactuals

    df, pipe, model, ws = setting
    codes = np.column_stack([df[c].to_numpy(float) if model.categories[j] is None else
                             [model.categories[j].index(v) for v in df[c]] for j, c in enumerate(model.feature_names)])
    poor = distill(model, codes[:200], n_estimators=3, num_leaves=4, n_pairs=50, random_state=1)
    poor = poor.with_view(ws.surrogate.view)                  # refused often: some rows are refitted
    X = ws.X.to_numpy(float)
    rows = list(range(1100, 1108))
    targets = [1 - p for p in ws.predictions[rows]]
    kw = dict(model=model, surrogate=poor, schema=ws.schema, X_ref=X[:1000], time_limit=20, n_workers=1)
    own = [optimal_counterfactual(ws.ensemble, X[i], t, **kw) for i, t in zip(rows, targets)]
    seen: list[tuple[int, int]] = []
    before = _worker_calls(model)
    batch = batch_counterfactuals(ws.ensemble, X[rows], targets, n_jobs=1, progress=lambda d, n: seen.append((d, n)),
                                  **kw)
    calls = _worker_calls(model) - before
    alone = [batch_counterfactuals(ws.ensemble, X[[i]], [t], n_jobs=1, **kw)[0] for i, t in zip(rows, targets)]
    assert sum(r.params["refits"] for r in alone) >= 1
    for r, a, o, t in zip(batch, alone, own, targets):
        assert r.found and _on_original(pipe, ws, r.x)[0] == t                    # valid on the model itself
        assert r.cost == a.cost and np.array_equal(r.x, a.x) and r.params["refits"] == a.params["refits"]
        assert r.guarantee.kind == o.guarantee.kind == "valid_on_model"
        assert r.params["surrogate"]["cost"] == pytest.approx(o.params["surrogate"]["cost"])
    assert calls < sum(r.params["model_calls"] for r in own) / 2
    assert {n for _, n in seen} == {len(rows)} and seen[-1][0] == len(rows)      # each row once
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def _worker_calls(model) -> int:
    """Calls the model's worker has answered (its answers are the worker's bound method)."""
    return model.answers.__self__.calls


def test_the_model_may_come_first_and_a_plain_model_is_sent_to_the_door(setting):
    """``optimal_counterfactual(black_box, x, target, surrogate=s)`` takes the first argument as
    the model the surrogate stands for (it raised "a surrogate without the model"), and
    ``distill`` given a fitted scikit-learn object says which call reads one (it raised an
    AttributeError on ``feature_names``)."""
    df, pipe, model, ws = setting
    p = ws.predictions
    i = int(np.flatnonzero(p == 0)[0])
    x = ws.X.to_numpy(float)[i]
    # one solver thread each: the same query, so the same point (on two, thread timing picks between
    # equally cheap points on the surrogate, and the repair on the model starts from the one picked)
    first = optimal_counterfactual(model, x, 1, surrogate=ws.surrogate, schema=ws.schema, time_limit=30, n_workers=1)
    named = optimal_counterfactual(ws.ensemble, x, 1, model=model, surrogate=ws.surrogate, schema=ws.schema,
                                   time_limit=30, n_workers=1)
    assert first.valid and first.cost == pytest.approx(named.cost)
    assert int(pipe.predict(ws.to_raw(first.x[None, :]))[0]) == 1
    with pytest.raises(AtlasError, match="open_workspace"):
        distill(pipe, ws.X.to_numpy(float))
