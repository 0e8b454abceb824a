"""``fixed`` / ``increase_only`` / ``decrease_only`` mean one thing everywhere (issue 28
item 3): names or indices alike, and an explicit list *replaces* the schema's
features of that role (None keeps the schema's), so unticking a feature the schema
fixes frees it. An "is missing" column a list leaves out stays decrease-only."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier

from core.cells.problem import feature_actions
from core.intake.models import from_model
from core.intake.workspace import build_workspace
from core.optimal import optimal_counterfactual
from core.regions import exact_counterfactual
from core.schema import infer_schema


@pytest.fixture(scope="module")
def case():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.uniform(0, 1, 400), "b": rng.uniform(0, 1, 400), "c": rng.uniform(0, 1, 400)})
    y = ((df.a > 0.5) | (df.b > 0.9)).astype(int)          # a is the cheap lever, b the dear one
    rf = RandomForestClassifier(10, max_depth=4, random_state=0).fit(df, y)
    ens = from_model(rf)
    schema = infer_schema(df).with_updates("a", actionability="fixed")
    X = df.to_numpy()
    row = int(np.flatnonzero((rf.predict(df) == 0) & (df.a > 0.3).to_numpy() & (df.b < 0.5).to_numpy())[0])
    return ens, rf, schema, X, row


def test_none_keeps_the_schemas_fixed_and_a_list_replaces_it(case):
    ens, rf, schema, X, row = case
    kept = optimal_counterfactual(ens, X[row], 1, schema=schema, model=rf)
    freed = optimal_counterfactual(ens, X[row], 1, schema=schema, fixed=[], model=rf)
    assert kept.found and freed.found
    assert kept.x[0] == X[row, 0]                          # a held by the schema
    assert freed.x[0] != X[row, 0]                         # the empty list frees it: a moves, cheaper
    assert freed.cost < kept.cost
    assert rf.predict(freed.x[None, :])[0] == 1 and rf.predict(kept.x[None, :])[0] == 1
    assert feature_actions(ens, schema, X[row], fixed=None) == ["fixed", "free", "free"]
    assert feature_actions(ens, schema, X[row], fixed=["c"]) == ["free", "free", "fixed"]
    assert feature_actions(ens, schema, X[row], fixed=None, increase_only=["b"]) == ["fixed", "increase", "free"]


def test_names_and_indices_are_the_same_query(case):
    ens, rf, schema, X, row = case
    by_name = optimal_counterfactual(ens, X[row], 1, schema=schema, fixed=["b"], decrease_only=["c"])
    by_index = optimal_counterfactual(ens, X[row], 1, schema=schema, fixed=[1], decrease_only=[2])
    assert by_name.cost == by_index.cost and np.array_equal(by_name.x, by_index.x)
    assert by_name.x[1] == X[row, 1] and by_name.x[2] <= X[row, 2]
    ex_name = exact_counterfactual(ens, X[row], 1, schema=schema, fixed=["a"], norm="l1")
    ex_index = exact_counterfactual(ens, X[row], 1, schema=schema, fixed=[0], norm="l1")
    assert ex_name.cost == pytest.approx(ex_index.cost, abs=0) and ex_name.x[0] == X[row, 0]
    assert ex_name.cost == pytest.approx(optimal_counterfactual(ens, X[row], 1, schema=schema, fixed=["a"]).cost,
                                         rel=1e-9, abs=1e-12)


def test_a_missing_state_left_out_of_a_list_stays_decrease_only():
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"income": rng.uniform(0, 1, 300), "age": rng.uniform(0, 1, 300)})
    df.loc[rng.random(300) < 0.3, "income"] = np.nan
    y = (df.income.fillna(0.9) > 0.6).astype(int)
    hgb = HistGradientBoostingClassifier(max_iter=10, random_state=0).fit(df, y)
    ws = build_workspace(df.assign(y=y), "y", hgb, name="hgb")
    ens, names = ws.ensemble, list(ws.ensemble.feature_names)
    j = next(k for k, n in enumerate(names) if "missing" in n)
    Z = np.asarray(ws.X, dtype=float)
    x = Z[int(np.flatnonzero(Z[:, j] == 0)[0])]                 # a row with a known income
    assert feature_actions(ens, ws.schema, x)[j] == "decrease"         # the schema's default
    schema = ws.schema.with_updates(names[j], actionability="fixed")
    assert feature_actions(ens, schema, x, fixed=[])[j] == "decrease"       # never free: no value goes missing
    assert feature_actions(ens, schema, x, fixed=None, increase_only=None, decrease_only=[])[j] == "fixed"    # only the fixed list was replaced
    assert feature_actions(ens, schema, x, fixed=[], increase_only=[names[j]])[j] == "increase"  # named: obeyed
