"""Leaves read as category sets (core.cells.groups) are exact.

On native categorical models expanded to one-hot columns: every point with one
category per group reaches, in each tree, exactly one merged leaf, the one its
own leaf maps to, with the same value; the merged block is smaller than the
expanded one (the subtree copies are one leaf again); and the cell model that
uses it (CP-SAT, no start, so it always runs) finds brute force's optimum,
with the copies merged and without.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from oracles import categorical_brute_force, returned_cost

from core.cells.groups import grouped_leaves
from core.cells.problem import build_problem
from core.intake.workspace import build_workspace
from core.optimal import optimal_counterfactual


def _table(n=900, seed=1):
    rng = np.random.default_rng(seed)
    jobs = [f"j{i}" for i in range(9)]
    df = pd.DataFrame({"x": rng.normal(size=n).round(2), "job": rng.choice(jobs, n),
                       "town": rng.choice(["n", "s", "e", "w", "c"], n), "z": rng.normal(size=n).round(2)})
    df["y"] = ((df.x > 0.1) ^ df.job.isin(["j1", "j4", "j6", "j7"]) | (df.town.isin(["e", "c"]) & (df.z > 0.5))
               ).astype(int)
    return df


def _lightgbm(df):
    import lightgbm as lgb

    X = df.drop(columns="y").astype({"job": "category", "town": "category"})
    return lgb.LGBMClassifier(n_estimators=6, num_leaves=6, min_data_per_group=5, cat_smooth=1, verbose=-1,
                              n_jobs=1).fit(X, df.y)


def _xgboost(df):
    import xgboost as xgb

    X = df.drop(columns="y").astype({"job": "category", "town": "category"})
    return xgb.XGBClassifier(n_estimators=5, max_depth=3, enable_categorical=True, max_cat_to_onehot=1,
                             n_jobs=1).fit(X, df.y)


def _one_category_points(ws, n, seed=0):
    """Random rows with one category per group: numerical columns from the data, groups at random levels."""
    rng = np.random.default_rng(seed)
    X = ws.X.to_numpy(float)[rng.integers(0, len(ws.X), n)].copy()
    for g in ws.schema.groups().values():
        X[:, g] = 0.0
        X[np.arange(n), np.asarray(g)[rng.integers(0, len(g), n)]] = 1.0
    return X


@pytest.mark.parametrize("make", [_lightgbm, _xgboost], ids=["lightgbm", "xgboost"])
def test_merged_leaves_hold_exactly_the_points_of_their_members(make):
    df = _table()
    ws = build_workspace(df, "y", make(df), name="groups")
    ens = ws.ensemble
    prob = build_problem(ens, ws.X.to_numpy(float)[0], 1, schema=ws.schema)
    assert prob.groups, "the expanded model has one-hot groups"
    blk, row = grouped_leaves(prob, prob.model_leaves)
    raw = prob.model_leaves
    assert blk.tree_of.size < raw.tree_of.size, "expanding copied subtrees: merging must shrink the block"
    P = _one_category_points(ws, 400)
    cells = prob.interval_of(P)
    reached = ens.apply(P)
    for p in range(len(P)):
        inside = np.all((blk.lo <= cells[p]) & (cells[p] <= blk.hi), axis=1)
        for t in range(ens.n_trees):
            rows = np.flatnonzero(inside & (blk.tree_of == t))
            assert rows.size == 1, f"point {p} lies in {rows.size} merged leaves of tree {t}"
            own = np.flatnonzero((raw.tree_of == t) & (raw.node == reached[p, t]))[0]
            assert row[own] == rows[0]
            np.testing.assert_array_equal(blk.value[rows[0]], raw.value[own])


@pytest.mark.parametrize("merge", [True, False], ids=["merged", "copies"])
@pytest.mark.parametrize("make", [_lightgbm, _xgboost], ids=["lightgbm", "xgboost"])
def test_cell_model_on_merged_leaves_matches_brute_force(make, merge, monkeypatch):
    monkeypatch.setattr("core.cells.groups.MERGE_COPIES", merge)
    df = _table()
    model = make(df)
    ws = build_workspace(df, "y", model, name="groups")
    ens, X = ws.ensemble, ws.X.to_numpy(float)
    rows = np.flatnonzero(ws.predictions == 0)[:5]
    assert len(rows) == 5
    for r in rows:
        res = optimal_counterfactual(ens, X[r], 1, schema=ws.schema, norm="l1", warm=False, model=model)
        assert res.found and res.status == "optimal" and res.backend == "cpsat", res.message
        assert returned_cost(res, ens, X[r], "l1", ws.schema) == pytest.approx(
            categorical_brute_force(ens, ws.schema, X[r], 1), rel=1e-6, abs=1e-9)
        assert int(model.predict(ws.to_raw(np.asarray(res.x, dtype=float)[None, :]))[0]) == 1
