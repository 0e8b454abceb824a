"""Minimal recourse (#38 item 2): no returned change can be undone with the target kept.

A fill of a missing value at the column's median costs 0 (the "is missing" feature's
default weight), so among the optima some fill values the target never needed. The
kernel's last pass (:func:`core.cells.result.minimal_point`) undoes every change it can,
a number and its "is missing" feature as one change, a one-hot group as one, and checks
each undo on the original model; the cost never goes up, and a proven optimum stays
proven (a change of positive cost that could go would disprove it: such a point is
returned as "feasible", never "optimal").

* The acceptance: over 100 audit rows per model (HistGradientBoosting, XGBoost and
  LightGBM trained with missing values, a one-hot pipeline), every change of every
  returned recourse is undone in turn and the original model predicts the row: never
  the target. The audit's "features to change" counts the analyst's columns.
* The pass itself on a forest: a point with a needless costly change handed over as
  "optimal" comes back without it as "feasible" (the proof did not hold); handed over
  as "time_limit", with the lower cost and its gap recomputed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import carried_data
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder

from core.audit import run_audit
from core.cells import QueryRun, build_problem
from core.cells.result import NOT_PROVEN, change_units, minimal_point
from core.intake.columns import changed_columns, value_of
from core.intake.models import from_model
from core.intake.workspace import build_workspace
from core.model.missing import indicator_of
from core.optimal import optimal_counterfactual

FAMILIES = ["hgb", "xgb", "lgbm", "pipeline"]
CATEGORIES = ["MaritalStatus", "Occupation", "Relationship", "WorkClass"]


@pytest.fixture(autouse=True)
def _one_thread():  # noqa: PT004
    """HGB predicts with OpenMP threads, which spin for their share of a busy machine
    (a second per one-row check when other tests run): one thread is as exact."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="openmp"):
        yield


def adult_workspace(family: str, n: int = 2000):
    """The carried Adult sample, its numbers 15% missing (except for the pipeline, whose
    categories are text one-hot encoded), a model of ``family`` trained on it, and the
    workspace of both (Sex protected)."""
    df = pd.read_csv(carried_data("adult_sample.csv"), header=[0, 1])
    df.columns = [c[0] for c in df.columns]
    df = df.iloc[:n].copy()
    y = df.pop("Class")
    if family == "pipeline":
        df[CATEGORIES] = df[CATEGORIES].astype(int).astype(str).radd("c")
        pre = ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), CATEGORIES)],
                                remainder="passthrough")
        model = Pipeline([("pre", pre), ("rf", RandomForestClassifier(20, max_depth=5, random_state=0))]).fit(df, y)
    else:
        rng = np.random.default_rng(0)
        for c in ("HoursPerWeek", "CapitalGain", "Age"):
            df.loc[rng.random(len(df)) < 0.15, c] = np.nan
        if family == "hgb":
            model = HistGradientBoostingClassifier(max_iter=20, max_depth=3, random_state=0).fit(df, y)
        elif family == "xgb":
            import xgboost as xgb

            model = xgb.XGBClassifier(n_estimators=20, max_depth=3, n_jobs=1).fit(df, y)
        else:
            import lightgbm as lgb

            model = lgb.LGBMClassifier(n_estimators=20, num_leaves=8, verbose=-1, n_jobs=1).fit(df, y)
    ws = build_workspace(df.assign(Class=y), "Class", model, name=f"adult-{family}", protected=["Sex"])
    if family == "pipeline":          # capital gains aside, a recourse has to switch categories
        ws = ws.with_schema(ws.schema.with_updates("CapitalGain", actionability="fixed")
                            .with_updates("CapitalLoss", actionability="fixed"))
    return ws, model


def undone(columns, x: np.ndarray, cf: np.ndarray, column) -> np.ndarray:
    """``cf`` with ``column`` back at the row's own value (its "is missing" feature too)."""
    out = cf.copy()
    out[list(column.every_feature)] = x[list(column.every_feature)]
    return out


@pytest.fixture(scope="module", params=FAMILIES)
def audited(request):
    ws, model = adult_workspace(request.param)
    audit = run_audit(ws.ensemble, ws.X, schema=ws.schema, target=1, model=model, max_rows=100, n_jobs=1,
                      tcrex=False, local_rules_per_group=0, scan=False, n_boot=50, n_perm=50, time_limit=20,
                      random_state=0)
    return request.param, ws, model, audit


@pytest.mark.slow
def test_no_change_of_an_audited_recourse_can_be_undone(audited):
    family, ws, model, audit = audited
    rows, X, cols = audit.rows, ws.X.to_numpy(float), ws.columns
    assert len(rows) == 100 and int(rows["feasible"].sum()) >= 95
    assert set(rows["status"]) <= {"optimal", "time_limit_found"}     # never "feasible": no proof was disproved
    states = list(indicator_of(ws.ensemble).values())
    undos, fills, switches = 0, 0, 0
    for k, r in enumerate(rows["row"].to_numpy(dtype=int)):
        if not rows.at[k, "feasible"]:
            continue
        x, cf = X[r], audit.counterfactuals[k]
        changed = changed_columns(cols, x, cf)
        assert len(changed) == rows.at[k, "n_changed"] >= 1          # the audit counts the analyst's columns
        trials = np.array([cf] + [undone(cols, x, cf, c) for c in changed])
        out = model.predict(ws.to_raw(trials))
        assert out[0] == 1, f"row {r}: the recourse itself misses the target"
        needless = [c.name for c, o in zip(changed, out[1:]) if o == 1]
        assert not needless, f"row {r}: {rows.at[k, 'changes']} reaches the target without {needless}"
        undos += len(changed)
        fills += sum(value_of(c, x) is None for c in changed)
        switches += sum(c.one_hot for c in changed)
    assert undos >= 95
    if family == "pipeline":
        assert switches >= 1, "no recourse switches a category: the one-hot case was not exercised"
    else:
        assert states and X[rows["row"].to_numpy(dtype=int)][:, states].max(axis=1).sum() >= 20
        assert fills >= 1, "no recourse fills a missing value: the missing case was not exercised"


def _forest():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 3))
    y = (X[:, 0] > 0.3).astype(int)                       # only feature 0 matters
    return RandomForestClassifier(10, max_depth=3, random_state=0).fit(X, y), X


def test_a_needless_costly_change_disproves_an_optimum():
    rf, X = _forest()
    x = X[np.flatnonzero(rf.predict(X) == 0)[0]]
    best = optimal_counterfactual(rf, x, 1, model=rf)
    assert best.status == "optimal" and [c.feature for c in best.changes] == ["x0"]
    prob = build_problem(from_model(rf), x, 1)
    padded = best.x.copy()
    padded[2] += 1.0                                      # a change the target does not need, at a cost
    worse = prob.cost_of(prob.interval_of(padded)[0])
    assert worse > best.cost + 0.1
    run = QueryRun(prob, {}, model=rf)
    got = run.result(padded, worse, "optimal", backend="test", lower_bound=worse)
    assert got.found and got.status == "feasible" and got.message == NOT_PROVEN
    assert np.array_equal(got.x, best.x) and got.cost == pytest.approx(best.cost)
    late = run.result(padded, worse, "time_limit", backend="test", gap=0.5, lower_bound=0.5 * best.cost)
    assert late.status == "time_limit" and np.array_equal(late.x, best.x)
    assert late.cost == pytest.approx(best.cost)
    assert late.gap == pytest.approx(max(0.0, (best.cost - late.lower_bound) / best.cost))
    assert late.lower_bound <= late.cost
    assert rf.predict(late.x[None])[0] == 1


def test_the_pass_stops_where_every_change_is_needed():
    rf, X = _forest()
    prob = build_problem(from_model(rf), X[np.flatnonzero(rf.predict(X) == 0)[0]], 1)
    x = prob.x_hat.copy()
    x[0] = 3.0
    x[1] = -2.0                                           # needless
    out, saved = minimal_point(prob, x)
    cell = prob.interval_of(x)[0][1]                      # the cost is the cell's (its end nearest the row)
    assert out[0] == 3.0 and out[1] == prob.x_hat[1] and saved == pytest.approx(prob.costs[1][cell])
    assert [list(u) for u in change_units(prob)] == [[0], [1], [2]]
    same, none = minimal_point(prob, out)
    assert np.array_equal(same, out) and none == 0.0


def test_a_fill_and_its_value_are_one_change():
    ws, model = adult_workspace("hgb", n=800)
    prob = build_problem(ws.ensemble, ws.X.to_numpy(float)[0], 1, schema=ws.schema)
    units = {tuple(u) for u in change_units(prob)}
    for j, k in indicator_of(ws.ensemble).items():
        assert (j, k) in units
