"""One result shape (issue #40 item 3): the analyses' results share ``params``,
``elapsed`` and ``guarantee`` under the same names, write themselves as strict JSON
with ``to_dict`` / ``to_json`` and read back equal with ``from_dict`` / ``from_json``;
their older names (``solve_time``, ``seconds``, ``fit_time_``) still read the same.

Each round trip is made on a real result of the credit demo, and the answers are the
ones the analyses gave before the change (the numbers below were computed on the
code as it was, on the same demo, the same rows and the same settings).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import demo_credit
from sklearn.linear_model import LogisticRegression

from core.counterfactual import CounterfactualResult
from core.errors import ResultFileError
from core.intake.columns import result_record
from core.intake.workspace import build_workspace
from core.model import Guarantee
from core.model.result import FORMAT, Result
from core.optimal import optimal_counterfactual
from core.regions import RegionSet, counterfactual_set
from core.solvers.linear_regions import LinearSlice, linear_slice
from core.tcrex import TCREx, TCRExResult

SHAPE = ("kind", "format", "version", "params", "elapsed", "guarantee")

# The answers before the change (credit demo, rows 0-2 are declined; l1 cost, CP-SAT).
BEFORE_COSTS = {0: 0.097913863, 1: 0.346671498, 2: 0.10935397}
BEFORE_CHANGED = {0: ["income"], 1: ["credit_history_years", "income"], 2: ["income"]}
BEFORE_REGIONS = {"n": 31, "complete": True, "n_nodes": 236,
                  "distances": [1.0, 1.0, 1.00156025, 1.00156025, 1.00172225, 1.00207025, 1.00207025, 1.00235225,
                                1.0025, 1.00406025]}
BEFORE_TCREX = {"n_rules": 2, "n_meta": 5, "n_cells": 24, "acc": [0.936, 0.929110106], "feas": [0.041666667, 0.221],
                "texts": ["38.45 < income <= 46.45 and credit_history_years > 5.5 and late_payments <= 1.5 and "
                          "employment = employed", "income > 46.45 and late_payments <= 1.5"]}
BEFORE_SLICE = {"n": 2, "areas": [104.467484, 26.332516], "preds": ["0", "1"], "guarantee": "exact"}


@pytest.fixture(scope="module")
def demo():
    df, target, model, ens, X, schema = demo_credit()
    return df, target, model, ens, X, schema, X.to_numpy(float)


@pytest.fixture(scope="module")
def optimal(demo):
    _, _, _, ens, _, schema, Xn = demo
    assert list(np.flatnonzero(ens.predict(Xn[:40]) == 0)[:3]) == [0, 1, 2]
    return {i: optimal_counterfactual(ens, Xn[i], 1, schema=schema, norm="l1", time_limit=60, n_workers=1)
            for i in (0, 1, 2)}


@pytest.fixture(scope="module")
def regions(demo):
    _, _, _, ens, _, _, Xn = demo
    best = optimal_counterfactual(ens, Xn[0], 1, norm="l2", time_limit=60, n_workers=1)
    return counterfactual_set(ens, Xn[0], 1, radius=best.cost * 1.05, norm="l2")


@pytest.fixture(scope="module")
def tcrex(demo):
    _, _, _, ens, X, schema, Xn = demo
    return TCREx(rho=0.02, tau=0.9, groups=list(schema.groups().values()) or None,
                 random_state=0).fit(Xn, ens.predict(Xn), 1, feature_names=list(X.columns))


@pytest.fixture(scope="module")
def linear(demo):
    _, _, _, ens, X, _, Xn = demo
    lr = LogisticRegression(max_iter=2000).fit(X, ens.predict(Xn))
    return lr, linear_slice(lr, Xn[0], (X.columns[1], X.columns[2]))


def _round_trip(r: Result) -> Result:
    text = r.to_json()
    d = json.loads(text)                      # strict JSON: no NaN or Infinity in the text
    assert "NaN" not in text and "Infinity" not in text
    assert all(k in d for k in SHAPE) and d["format"] == FORMAT and d["kind"] == type(r).kind
    assert d["guarantee"] == r.guarantee.to_dict() and d["elapsed"] == r.elapsed and d["params"] == r.params
    back = type(r).from_json(text)
    assert type(back) is type(r) and back == r
    assert type(r).from_dict(d) == r
    return back


def _shape(r: Result) -> None:
    assert isinstance(r, Result)
    assert isinstance(r.params, dict) and r.params
    assert isinstance(r.elapsed, float) and r.elapsed >= 0
    assert isinstance(r.guarantee, Guarantee) and r.guarantee.text()
    json.dumps(r.params, allow_nan=False)     # the settings are JSON values as they are


def test_a_counterfactual_has_the_shape_and_reads_back_equal(demo, optimal):
    model, Xn = demo[2], demo[6]
    for i, r in optimal.items():
        _shape(r)
        assert r.solve_time == r.elapsed        # the older name reads the same
        back = _round_trip(r)
        assert back.found and back.guarantee.kind == "proven_optimal"
        assert model.predict(back.x[None, :])[0] == 1 and model.predict(Xn[i][None, :])[0] == 0
        assert np.array_equal(back.x, r.x) and back.changes == r.changes and back.x_query is not None


def test_the_answers_are_those_before_the_change(optimal, regions, tcrex, linear):
    for i, r in optimal.items():
        assert r.status == "optimal" and r.gap == 0.0
        assert r.cost == pytest.approx(BEFORE_COSTS[i], abs=1e-8)
        assert sorted(c.feature for c in r.changes) == BEFORE_CHANGED[i]
    assert (len(regions.regions), regions.complete, regions.n_nodes) == \
        (BEFORE_REGIONS["n"], BEFORE_REGIONS["complete"], BEFORE_REGIONS["n_nodes"])
    assert [round(float(g.distance), 9) for g in regions.regions][:10] == BEFORE_REGIONS["distances"]
    assert (len(tcrex.rules_), len(tcrex.metarules_), tcrex.n_cells_) == \
        (BEFORE_TCREX["n_rules"], BEFORE_TCREX["n_meta"], BEFORE_TCREX["n_cells"])
    assert [round(float(r.accuracy), 9) for r in tcrex.rules_] == BEFORE_TCREX["acc"]
    assert [round(float(r.feasibility), 9) for r in tcrex.rules_] == BEFORE_TCREX["feas"]
    assert [tcrex.rule_text(k) for k in range(len(tcrex.rules_))] == BEFORE_TCREX["texts"]
    sl = linear[1]
    areas = [_area(p.vertices) for p in sl.polygons]
    assert areas == pytest.approx(BEFORE_SLICE["areas"], abs=1e-5)
    assert (len(sl.polygons), [str(p.prediction) for p in sl.polygons], sl.guarantee.kind) == \
        (BEFORE_SLICE["n"], BEFORE_SLICE["preds"], BEFORE_SLICE["guarantee"])


def _area(v: np.ndarray) -> float:
    """A polygon's area (shoelace)."""
    u, w = v[:, 0], v[:, 1]
    return float(abs(np.dot(u, np.roll(w, -1)) - np.dot(w, np.roll(u, -1))) / 2)


def test_a_counterfactual_that_does_not_exist_keeps_its_infinities():
    r = CounterfactualResult(x=None, cost=np.inf, status="time_limit", gap=np.inf, elapsed=1.5, changes=(),
                             backend="cpsat", params={"fixed": ("a",), "time_limit": np.inf}, lower_bound=-np.inf,
                             timings={"solve": 1.5, "bound": np.inf})
    d = r.to_dict()
    assert d["cost"] is None and d["gap"] is None and d["params"] == {"fixed": ["a"], "time_limit": None}
    assert d["nonfinite"]["lower_bound"] == "-inf"
    back = _round_trip(r)
    assert back.cost == np.inf and back.gap == np.inf and back.lower_bound == -np.inf
    assert back.timings == {"solve": 1.5, "bound": np.inf} and not back.found


def test_the_export_in_the_analysts_columns_reads_back_as_the_result(demo, optimal):
    df, target, model = demo[0], demo[1], demo[2]
    ws = build_workspace(df, target, model, name="credit")
    rec = result_record(ws.columns, optimal[1], list(demo[3].feature_names))
    json.dumps(rec, allow_nan=False)
    assert all(k in rec for k in SHAPE) and rec["solve_time_s"] == round(optimal[1].elapsed, 4)
    assert CounterfactualResult.from_json(json.dumps(rec)) == optimal[1]


def test_a_region_set_has_the_shape_and_reads_back_equal(regions):
    _shape(regions)
    assert regions.seconds == regions.elapsed and regions.guarantee.kind == "exact"
    back = _round_trip(regions)
    assert [g.distance for g in back.regions] == [g.distance for g in regions.regions]
    assert all(np.array_equal(a.lower, b.lower) and np.array_equal(a.upper, b.upper)
               for a, b in zip(back.regions, regions.regions))
    assert any(np.isinf(g.lower).any() or np.isinf(g.upper).any() for g in back.regions)


def test_a_linear_slice_has_the_shape_and_reads_back_equal(linear):
    sl = linear[1]
    _shape(sl)
    assert sl.seconds == sl.elapsed
    back = _round_trip(sl)
    assert all(np.array_equal(a.vertices, b.vertices) for a, b in zip(back.polygons, sl.polygons))


def test_tcrex_has_the_shape_and_its_estimator_comes_back(demo, tcrex):
    Xn = demo[6]
    r = tcrex.result_
    _shape(r)
    assert tcrex.fit_time_ == r.elapsed and r.guarantee.kind == "estimated"
    assert r.params["rho"] == 0.02 and r.params["tau"] == 0.9 and r.params["n_rows"] == len(Xn)
    back = _round_trip(r)
    again = TCREx.from_result(back)
    assert [again.rule_text(k) for k in range(len(again.rules_))] == BEFORE_TCREX["texts"]
    assert np.array_equal(again.explain(Xn[:200]), tcrex.explain(Xn[:200]))
    page = tcrex.to_dict()
    assert all(k in page for k in SHAPE) and TCRExResult.from_dict(page) == r


def test_a_file_of_another_kind_or_damaged_is_a_clear_error(optimal, regions):
    with pytest.raises(ResultFileError, match="set of decision regions, not a counterfactual"):
        CounterfactualResult.from_json(regions.to_json())
    with pytest.raises(ResultFileError, match="not JSON"):
        RegionSet.from_json("{not json")
    d = optimal[0].to_dict()
    del d["changes"]
    with pytest.raises(ResultFileError, match="incomplete"):
        CounterfactualResult.from_dict(d)
    with pytest.raises(ResultFileError, match="no result of Counterfactual Atlas"):
        LinearSlice.from_dict({"x": [1, 2]})
