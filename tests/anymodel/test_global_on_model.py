"""The global analyses on a model that is not a tree ensemble (an MLP pipeline trained as an
analyst would, run in its worker): T-CREx's and the counterfactual rules' prescriptions are
checked on the MLP itself, and what each result reports of them is recomputed here with the
MLP's own ``predict``; FCCA labels what comes from the surrogate and keeps to its time limit;
every result says what kind of model it reasoned about."""

from __future__ import annotations

import json
from functools import partial

import numpy as np
import pandas as pd
import pytest
import skops.io as sio
from sklearn.compose import ColumnTransformer
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from core.compression import fcca
from core.intake.columns import box_record
from core.intake.worker import ModelWorker
from core.intake.workspace import build_workspace
from core.rules import CounterfactualRules
from core.rules.onmodel import on_model
from core.rules.results import LocalRule, RegionalRule
from core.tcrex import TCREx, TCRExResult

COLUMNS = ["age", "income", "job", "sex"]


def _table(seed: int = 0, n: int = 600) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"age": rng.integers(18, 80, n).astype(float), "income": rng.normal(50, 15, n).round(2),
                       "job": rng.choice(["clerk", "nurse", "pilot"], n), "sex": rng.integers(0, 2, n)})
    df["label"] = ((df.income - 50) / 15 + (df.job == "pilot") + 0.03 * (df.age - 45) - 0.3 * df.sex
                   + rng.normal(0, .5, n) > 0.6).astype(int)
    return df


@pytest.fixture(scope="module")
def mlp_ws():
    df = _table()
    pre = ColumnTransformer([("num", StandardScaler(), ["age", "income", "sex"]),
                             ("cat", OneHotEncoder(handle_unknown="ignore"), ["job"])])
    pipe = make_pipeline(pre, MLPClassifier(hidden_layer_sizes=(16,), max_iter=500, random_state=0))
    pipe.fit(df[COLUMNS], df.label)
    worker = ModelWorker(sio.dumps(pipe), "mlp.skops")
    ws = build_workspace(df, "label", worker.model("mlp"), name="mlp")
    yield pipe, ws
    worker.stop()


def _on_mlp(pipe, ws, Z: np.ndarray) -> np.ndarray:
    """The MLP's own answers (the scikit-learn object in this process) on rows of the workspace's view."""
    return pipe.predict(ws.to_raw(Z)[COLUMNS])


def _at_edge(x: np.ndarray, lower: np.ndarray, upper: np.ndarray, ws) -> np.ndarray:
    """One row moved into the box at its nearest edge, written out here from the rule's words:
    a whole-number feature to the first whole number inside, another number to its closed upper
    end or just above its open lower end (a millionth of its span), a category to the one asked."""
    z = x.copy()
    groups = [list(g) for g in ws.schema.groups().values()]
    grouped = {j for g in groups for j in g}
    for j, f in enumerate(ws.schema.features):
        if j in grouped or lower[j] < z[j] <= upper[j]:
            continue
        whole = f.kind in ("integer", "binary", "ordinal")
        if z[j] <= lower[j]:
            z[j] = np.floor(lower[j]) + 1 if whole else lower[j] + 1e-6 * f.span
        else:
            z[j] = np.floor(upper[j]) if whole else upper[j]
    for g in groups:
        if not np.all((z[g] > lower[g]) & (z[g] <= upper[g])):
            hot = [j for j in g if lower[j] >= 0.5]          # the category asked, else the most common allowed
            ones = ws.X.to_numpy(float)[:, g].sum(axis=0)
            k = hot[0] if hot else max((j for j in g if upper[j] >= 1), key=lambda j: ones[g.index(j)])
            z[g] = 0.0
            z[k] = 1.0
    return z


def test_tcrex_on_an_mlp_reports_the_share_of_its_moves_the_mlp_accepts(mlp_ws):
    pipe, ws = mlp_ws
    X, pred = ws.X.to_numpy(float), ws.predictions
    solve_on, extra = ws.query_model()
    tc = TCREx(rho=0.05, tau=0.85, groups=list(ws.schema.groups().values()), random_state=0).fit(
        X, pred, 1, feature_names=list(ws.ensemble.feature_names), model=on_model(solve_on, **extra),
        schema=ws.schema)
    exported = json.loads(json.dumps(tc.to_dict(partial(box_record, ws.columns))))
    assert exported["guarantee"]["model_kind"] == "black_box"
    assert TCRExResult.from_json(tc.result_.to_json()) == tc.result_     # the checks are saved with the rules
    assigned = tc.explain(X)
    total = accepted = 0
    for k, rule in enumerate(tc.rules_):
        rows = np.flatnonzero((assigned == k) & (pred != 1))
        assert rule.edge_rows == len(rows)
        if not len(rows):
            continue
        Z = np.array([_at_edge(X[i], rule.lower, rule.upper, ws) for i in rows])
        assert rule.contains(Z).all()
        share = float(np.mean(_on_mlp(pipe, ws, Z) == 1))
        assert rule.edge_accepted == pytest.approx(share), (k, tc.rule_text(k))
        total, accepted = total + len(rows), accepted + int(round(share * len(rows)))
    assert total > 0
    g = tc.result_.guarantee
    assert g.kind == ("valid_on_model" if accepted == total else "estimated")
    assert f"{accepted:,} ({accepted / total:.1%})" in g.text()
    table = tc.rule_table(X)
    assert table["accepted by the model at its edge"].tolist() == [round(r.edge_accepted, 3) for r in tc.rules_]


@pytest.fixture(scope="module")
def mlp_fcca(mlp_ws):
    """FCCA on :data:`COPIES` copies of the data's rows, stopped by :data:`RUN_LIMIT`."""
    pipe, ws = mlp_ws
    solve_on, extra = ws.query_model()
    X, y = np.tile(ws.X.to_numpy(float), (COPIES, 1)), np.tile(ws.y.to_numpy(), COPIES)
    res = fcca(ws.ensemble, X, y, schema=ws.schema, n_jobs=1, time_limit=5,
               model=on_model(solve_on, **extra), surrogate=ws.surrogate, run_time_limit=RUN_LIMIT)
    return pipe, ws, res


RUN_LIMIT = 3.0
#: the rows FCCA is given, copies of the data's: the limit must end the run on a fast machine too.
#: One copy's M, 526 rows, took 33 s here (25 ms of CPU a row, on a 2-core machine shared with other
#: work): a machine a few times faster would reach every row within the limit, and leave none to
#: show it stops. Five copies (2,630 rows) take a machine fifty times faster than this one; the rows
#: reached come first in the run's shuffled order, whose third row already lies past M's median
COPIES = 5


def test_fcca_on_an_mlp_keeps_to_its_run_time_limit(mlp_fcca):
    _, _, res = mlp_fcca
    reached = sum(v for k, v in res.statuses.items() if k != "not reached")
    assert res.statuses.get("not reached", 0) > 0 and reached >= len(res.rows) > 0     # M takes more than 3 s
    assert res.params["run_time_limit"] == RUN_LIMIT
    # the rows reached are spread over M, not its first rows
    assert res.rows.max() > np.median(np.flatnonzero(res.y == res.pred))
    # a bound on the run's own clock (what the page states), with room for the last row's stop
    assert res.timings["counterfactuals"] <= RUN_LIMIT + 2.0, res.timings


def test_fcca_on_an_mlp_labels_the_surrogates_thresholds_and_checks_its_pairs_on_the_mlp(mlp_fcca):
    pipe, ws, res = mlp_fcca
    g = res.guarantee
    assert (g.kind, g.model_kind) == ("estimated", "black_box") and not g.proven
    assert g.surrogate_fidelity == ws.surrogate.fidelity
    assert json.loads(res.to_json())["guarantee"]["model_kind"] == "black_box"
    assert set(res.thresholds["source"]) == {"surrogate"}
    theirs = _on_mlp(pipe, ws, res.x_ce)
    found_for = ws.ensemble.predict(res.x_ce)                        # the class each was found for, on the surrogate
    valid = (theirs == found_for) & (theirs != res.pred[res.rows])
    assert res.valid_on_model.tolist() == valid.tolist()
    ok_rows = set(res.rows[valid].tolist())
    by_threshold: dict[tuple[str, float], int] = {}
    for row, j, t in res.pair_thresholds:
        key = (res.feature_names[j], t)
        by_threshold[key] = by_threshold.get(key, 0) + (row in ok_rows)
    table = res.thresholds
    assert [by_threshold[(f, t)] for f, t in zip(table.index, table["threshold"])] == \
        table["accepted by the model"].tolist()
    assert f"{int(valid.sum()):,} of the {len(valid):,} counterfactuals" in g.text()
    assert res.pairs_frame()["valid on the model"].tolist() == \
        [bool(valid[list(res.rows).index(r)]) for r, _, _ in res.pair_thresholds]


@pytest.fixture(scope="module")
def mlp_rules(mlp_ws):
    pipe, ws = mlp_ws
    solve_on, extra = ws.query_model()
    cr = CounterfactualRules(n_estimators=10, max_depth=6, groups=list(ws.schema.groups().values()), random_state=0)
    cr.fit(ws.X.to_numpy(float), ws.predictions, feature_names=list(ws.ensemble.feature_names),
           model=on_model(solve_on, **extra), schema=ws.schema)
    return pipe, ws, cr


def test_a_local_rule_on_an_mlp_reports_what_the_mlp_answers_at_its_edge_and_inside_it(mlp_rules):
    pipe, ws, cr = mlp_rules
    X = ws.X.to_numpy(float)
    refused = np.flatnonzero(ws.predictions == 0)[:3]
    for i in refused:
        rule = cr.local_rule(X[i], 1)
        assert rule.edge_rows == 1 and rule.params["checked_on"] == "black_box"
        edge = _at_edge(X[i], rule.lower, rule.upper, ws)
        assert rule.contains(edge[None, :])[0]
        assert rule.edge_accepted == float(_on_mlp(pipe, ws, edge[None, :])[0] == 1)
        S = list(rule.features)
        inside = np.all((cr.X_[:, S] > rule.lower[S]) & (cr.X_[:, S] <= rule.upper[S]), axis=1)
        P = np.repeat(X[i][None, :], int(inside.sum()), axis=0)
        P[:, S] = cr.X_[inside][:, S]
        assert rule.model_crp_rows == len(P) and rule.model_crp == pytest.approx(np.mean(_on_mlp(pipe, ws, P) == 1))
        g = rule.guarantee
        assert g.model_kind == "black_box" and g.kind == ("valid_on_model" if rule.edge_accepted == 1 else "estimated")
        assert LocalRule.from_json(rule.to_json()) == rule


def test_regional_rules_on_an_mlp_report_the_share_of_their_moves_the_mlp_accepts(mlp_rules):
    pipe, ws, cr = mlp_rules
    rules = cr.regional_rules(cr.propose_regions(1, max_depth=2), 1)
    found = [r for r in rules if r.found]
    assert found
    for r in found:
        rows = np.flatnonzero((cr.y_ != 1) & np.all((cr.X_ > r.region_lower) & (cr.X_ <= r.region_upper), axis=1))
        assert r.edge_rows == len(rows) > 0
        Z = np.array([_at_edge(x, r.lower, r.upper, ws) for x in cr.X_[rows]])
        assert r.edge_accepted == pytest.approx(np.mean(_on_mlp(pipe, ws, Z) == 1))
        assert r.guarantee.model_kind == "black_box" and r.guarantee.kind in ("valid_on_model", "estimated")
        assert RegionalRule.from_json(r.to_json()) == r
