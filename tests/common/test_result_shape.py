"""One result shape (issue #40 item 3): the analyses' results (an optimal
counterfactual, a set of decision regions, a linear model's slice, T-CREx, FCCA,
the audit, the model comparison, a local or regional counterfactual rule, a case story,
a batch of optimal counterfactuals; the audit history keeps their params and elapsed) share ``params``, ``elapsed`` and ``guarantee``
under the same names, write themselves as strict JSON
with ``to_dict`` / ``to_json`` and read back equal with ``from_dict`` / ``from_json``;
their older names (``solve_time``, ``seconds``, ``time``, ``fit_time_``) still read the same, and
warn that they will be removed.

Each round trip is made on a real result of the credit demo, and the answers are the
ones the analyses gave before the change (the numbers below were computed on the
code as it was, on the same demo, the same rows and the same settings).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import demo_credit
from sklearn.linear_model import LogisticRegression

from core.audit import Audit, AuditError, run_audit
from core.audit.compare import compare_models
from core.audit.story import CaseStory, case_story
from core.compression import fcca
from core.compression.result import FCCAResult
from core.counterfactual import CounterfactualResult
from core.errors import ResultFileError
from core.intake.columns import result_record
from core.intake.demo import updated_model
from core.intake.models import from_model
from core.intake.workspace import build_workspace
from core.model import Guarantee
from core.model.result import FORMAT, Result, same, settings
from core.optimal import optimal_counterfactual
from core.optimal.batch import BatchResult, batch_counterfactuals
from core.regions import RegionSet, counterfactual_set
from core.rules import CounterfactualRules, LocalRule, RegionalRule
from core.solvers.linear_regions import LinearSlice, linear_slice
from core.tcrex import TCREx, TCRExResult

SHAPE = ("kind", "format", "version", "params", "elapsed", "guarantee")

# The answers before the change (credit demo, rows 0-2 are declined; l1 cost, CP-SAT): the
# proven optima, which results now give as their lower bound (their cost is the point's own).
# The figures below that add up costs (the audit's cost sum and mean costs, the comparison's
# extra cost, FCCA's cost sum, the story's cost) were measured again when a result's cost became
# its returned point's own (issue #62): the points are the same, their costs up to 1e-4 higher.
BEFORE_COSTS = {0: 0.097913863, 1: 0.346671498, 2: 0.10935397}
BEFORE_CHANGED = {0: ["income"], 1: ["credit_history_years", "income"], 2: ["income"]}
BEFORE_REGIONS = {"n": 31, "complete": True, "n_nodes": 236,
                  "distances": [1.0, 1.0, 1.00156025, 1.00156025, 1.00172225, 1.00207025, 1.00207025, 1.00235225,
                                1.0025, 1.00406025]}
BEFORE_TCREX = {"n_rules": 2, "n_meta": 5, "n_cells": 24, "acc": [0.936, 0.929110106], "feas": [0.041666667, 0.221],
                "texts": ["38.45 < income <= 46.45 and credit_history_years > 5.5 and late_payments <= 1.5 and "
                          "employment = employed", "income > 46.45 and late_payments <= 1.5"]}
# The slice's areas are not stored: where lbfgs stops depends on the CPU's floating-point
# kernels (two machines' areas differed in the fifth decimal at tol 1e-12), so they are
# checked against the fitted model's own line (``_side_areas``), whatever machine fits it.
BEFORE_SLICE = {"n": 2, "preds": ["0", "1"], "guarantee": "exact"}


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
    # Fitted to the optimum (tol 1e-12), not to the default tolerance: where lbfgs stops early
    # depends on the CPU's floating-point kernels (the areas moved by 0.05 between two machines).
    lr = LogisticRegression(max_iter=100_000, tol=1e-12).fit(X, ens.predict(Xn))
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
        with pytest.warns(DeprecationWarning, match="older name of elapsed"):
            assert r.solve_time == r.elapsed    # the older name reads the same, and warns
        back = _round_trip(r)
        assert back.found and back.guarantee.kind == "proven_optimal"
        assert model.predict(back.x[None, :])[0] == 1 and model.predict(Xn[i][None, :])[0] == 0
        assert np.array_equal(back.x, r.x) and back.changes == r.changes and back.x_query is not None


def test_the_answers_are_those_before_the_change(optimal, regions, tcrex, linear):
    for i, r in optimal.items():
        assert r.status == "optimal" and r.gap == 0.0
        # the proven optimum as before; the cost is now the returned point's own (issue #62), at
        # most the step inside its cell and the shortening of its digits above it
        assert r.lower_bound == pytest.approx(BEFORE_COSTS[i], abs=1e-8)
        assert BEFORE_COSTS[i] - 1e-9 <= r.cost <= BEFORE_COSTS[i] + 1e-4 * len(r.x)
        assert sorted(c.feature for c in r.changes) == BEFORE_CHANGED[i]
    assert (len(regions.regions), regions.complete, regions.n_nodes) == \
        (BEFORE_REGIONS["n"], BEFORE_REGIONS["complete"], BEFORE_REGIONS["n_nodes"])
    assert [round(float(g.distance), 9) for g in regions.regions][:10] == BEFORE_REGIONS["distances"]
    assert (len(tcrex.rules_), len(tcrex.metarules_), tcrex.n_cells_) == \
        (BEFORE_TCREX["n_rules"], BEFORE_TCREX["n_meta"], BEFORE_TCREX["n_cells"])
    assert [round(float(r.accuracy), 9) for r in tcrex.rules_] == BEFORE_TCREX["acc"]
    assert [round(float(r.feasibility), 9) for r in tcrex.rules_] == BEFORE_TCREX["feas"]
    assert [tcrex.rule_text(k) for k in range(len(tcrex.rules_))] == BEFORE_TCREX["texts"]
    lr, sl = linear
    areas = [_area(p.vertices) for p in sl.polygons]
    assert areas == pytest.approx(_side_areas(lr, sl), rel=1e-9, abs=1e-9)
    assert (len(sl.polygons), [str(p.prediction) for p in sl.polygons], sl.guarantee.kind) == \
        (BEFORE_SLICE["n"], BEFORE_SLICE["preds"], BEFORE_SLICE["guarantee"])


def _side_areas(lr: LogisticRegression, sl: LinearSlice) -> list[float]:
    """The oracle for the slice: the areas of the view on the model's side 0 and side 1.

    The score on the slice is ``c + a u + b v``, read off ``lr`` itself. The length of the
    side-1 segment of the column at ``u`` is piecewise linear in ``u``, with kinks only where
    the line meets the view's bottom or top edge, so the trapezoid rule on the view's ends and
    those crossings is exact (an integration, independent of the polygon clipping it checks)."""
    (u0, u1), (v0, v1) = sl.view
    fa, fb = sl.features
    a, b = float(lr.coef_[0, fa]), float(lr.coef_[0, fb])
    base = sl.x.copy()
    base[fa] = base[fb] = 0.0
    c = float(lr.decision_function(pd.DataFrame(base[None, :], columns=lr.feature_names_in_))[0])

    def length(u: float) -> float:                # side 1 of the column at u: c + a u + b v > 0
        if b == 0:
            return (v1 - v0) * (c + a * u > 0)
        cut = -(c + a * u) / b
        return max(0.0, v1 - max(v0, cut)) if b > 0 else max(0.0, min(v1, cut) - v0)

    knots = [u0, u1] + ([(-c - b * v) / a for v in (v0, v1)] if a != 0 else [])
    us = sorted({min(max(k, u0), u1) for k in knots})
    one = sum((q - p) * (length(p) + length(q)) / 2 for p, q in zip(us, us[1:]))
    return [(u1 - u0) * (v1 - v0) - one, one]


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


def test_the_export_in_the_analysts_columns_has_the_shape(demo, optimal):
    df, target, model = demo[0], demo[1], demo[2]
    ws = build_workspace(df, target, model, name="credit")
    rec = result_record(ws.columns, optimal[1], list(demo[3].feature_names))
    json.dumps(rec, allow_nan=False)
    assert all(k in rec for k in SHAPE) and rec["solve_time_s"] == round(optimal[1].elapsed, 4)
    assert rec["kind"] == "counterfactual" and rec["elapsed"] == optimal[1].elapsed
    assert rec["guarantee"] == optimal[1].guarantee.to_dict() and "result" not in rec


def test_a_region_set_has_the_shape_and_reads_back_equal(regions):
    _shape(regions)
    with pytest.warns(DeprecationWarning, match="RegionSet.seconds is the older name"):
        assert regions.seconds == regions.elapsed
    assert regions.guarantee.kind == "exact"
    back = _round_trip(regions)
    assert [g.distance for g in back.regions] == [g.distance for g in regions.regions]
    assert all(np.array_equal(a.lower, b.lower) and np.array_equal(a.upper, b.upper)
               for a, b in zip(back.regions, regions.regions))
    assert any(np.isinf(g.lower).any() or np.isinf(g.upper).any() for g in back.regions)


def test_a_linear_slice_has_the_shape_and_reads_back_equal(linear):
    sl = linear[1]
    _shape(sl)
    with pytest.warns(DeprecationWarning, match="LinearSlice.seconds"):
        assert sl.seconds == sl.elapsed
    back = _round_trip(sl)
    assert all(np.array_equal(a.vertices, b.vertices) for a, b in zip(back.polygons, sl.polygons))


def test_tcrex_has_the_shape_and_its_estimator_comes_back(demo, tcrex):
    Xn = demo[6]
    r = tcrex.result_
    assert isinstance(r, TCRExResult)
    _shape(r)
    assert tcrex.elapsed_ == r.elapsed and r.guarantee.kind == "estimated"
    with pytest.warns(DeprecationWarning, match="TCREx.fit_time_ is the older name of elapsed_"):
        assert tcrex.fit_time_ == r.elapsed
    assert r.params["rho"] == 0.02 and r.params["tau"] == 0.9 and r.params["n_rows"] == len(Xn)
    back = _round_trip(r)
    again = TCREx.from_result(back)
    assert [again.rule_text(k) for k in range(len(again.rules_))] == BEFORE_TCREX["texts"]
    assert np.array_equal(again.explain(Xn[:200]), tcrex.explain(Xn[:200]))
    page = tcrex.to_dict()
    assert all(k in page for k in SHAPE) and page["kind"] == "tcrex" and page["elapsed"] == r.elapsed


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


# The audit of the same demo before the change (120 rows, 100 bootstrap draws, 300 permutations).
# Since the shares of rows take Wilson's interval, they draw no bootstrap from the audit's seeded
# generator, so the draws after them come from elsewhere in the same stream: the gap's interval
# read "+0.0363 to +0.0926" and two p-values of the tests 0.019933555 and 0.225913621 before
# (300 permutations each). Every other figure is as before.
BEFORE_AUDIT = {"summary": ["sex = 1 is worse off than sex = 0 on the mean recourse cost: 0.142 vs 0.0797 (+0.0621, "
                            "95% CI +0.0332 to +0.0884; permutation p = 0.0033, Holm-adjusted 0.02)."],
                "n_rows": 120, "feasible": 120, "cost_sum": 14.096286528,
                "p": [1.0, 0.003322259, 0.016611296, 0.069767442, 1.0, 0.239202658]}


@pytest.fixture(scope="module")
def audit(demo):
    _, _, model, ens, X, schema, _ = demo
    return run_audit(ens, X, schema=schema, target=1, max_rows=120, n_jobs=1, model=model, n_perm=300,
                     n_boot=100, local_rules_per_group=1)


def test_an_audit_has_the_shape_reads_back_equal_and_gives_the_same_answers(audit):
    _shape(audit)
    assert audit.params == settings(audit.meta["parameters"]) and audit.elapsed == audit.meta["timings"]["total"]
    assert audit.guarantee.kind == "estimated"
    assert audit.summary == BEFORE_AUDIT["summary"]
    assert (len(audit.rows), int(audit.rows["feasible"].sum())) == (BEFORE_AUDIT["n_rows"], BEFORE_AUDIT["feasible"])
    assert float(audit.rows["cost"].sum()) == pytest.approx(BEFORE_AUDIT["cost_sum"], abs=1e-6)
    assert [round(float(v), 9) for v in audit.tests["p_value"]] == BEFORE_AUDIT["p"]
    d = json.loads(audit.to_json())
    assert all(k in d for k in SHAPE) and d["kind"] == "audit" and d["params"] == audit.params
    back = Audit.from_json(audit.to_json())
    assert back == audit and back.summary == audit.summary
    assert back.to_dict() == audit.to_dict()


def test_an_audit_saved_before_the_shape_still_opens(audit):
    old = audit.to_dict()
    for k in SHAPE:
        del old[k]
    old.update(format="counterfactual-atlas-audit", version=1)
    back = Audit.from_dict(old)
    assert back == audit and back.elapsed == audit.elapsed
    with pytest.raises(AuditError, match="not a saved audit"):
        Audit.from_json(CounterfactualResult(x=None, cost=np.inf, status="infeasible", gap=np.inf, elapsed=0.1,
                                             changes=(), backend="cpsat", params={"norm": "l1"}).to_json())


# The demo's model against its second version, before the change (60 rows studied).
BEFORE_COMPARISON = {"invalidated": 0.816666667, "agree": [0.903, 0.880139373, 0.923961661], "n_flips": 291,
                     "rules": ["if income > 34.1499 and late_payments >= 2 and sex = 0: 79 of 220 rows flip (36%)"],
                     "extra": 4.017188707, "p": [0.099502488]}


def test_a_model_comparison_has_the_shape_reads_back_equal_and_gives_the_same_answers(demo):
    _, _, model, ens, X, schema, _ = demo
    m2, _, _ = updated_model("credit-lightgbm")
    c = compare_models(ens, from_model(m2), X, schema=schema, target=1, max_rows=60, time_limit=10, model_a=model,
                       model_b=m2, n_boot=100, n_perm=200, n_jobs=1)
    _shape(c)
    assert c.elapsed == c.meta["timings"]["total"] and c.guarantee.kind == "estimated"
    assert round(c.invalidated, 9) == BEFORE_COMPARISON["invalidated"]
    assert [round(float(v), 9) for v in c.agreement["agree"]] == BEFORE_COMPARISON["agree"]
    assert (len(c.flips), c.rules) == (BEFORE_COMPARISON["n_flips"], BEFORE_COMPARISON["rules"])
    assert float(c.rows["extra_cost"].sum()) == pytest.approx(BEFORE_COMPARISON["extra"], abs=1e-6)
    assert [round(float(v), 9) for v in c.tests["p_value"]] == BEFORE_COMPARISON["p"]
    back = _round_trip(c)
    assert back.invalidated == c.invalidated and list(back.rows.dtypes) == list(c.rows.dtypes)
    assert np.array_equal(back.points_a, c.points_a, equal_nan=True)
    with pytest.raises(ResultFileError, match="holds a model comparison, not a counterfactual"):
        CounterfactualResult.from_json(c.to_json())


# FCCA on the demo before the change (30 rows, labels from the data).
BEFORE_FCCA = {"statuses": {"optimal": 30}, "cost_sum": 7.885195155,
               "thresholds": [(21.75, 1), (24.55, 2), (26.25, 2), (28.25, 1), (28.45, 3), (29.55, 1), (32.65, 1),
                              (34.25, 1), (37.85, 1), (38.45, 2), (41.45, 1), (46.45, 1), (47.25, 4), (53.35, 2),
                              (55.95, 1), (57.85, 2), (59.15, 2), (60.85, 1), (76.6, 1)],
               "compression": 0.993333333, "inconsistency": 0.227666667}


def test_fcca_has_the_shape_reads_back_equal_and_gives_the_same_answers(demo):
    df, target, _, ens, X, schema, _ = demo
    r = fcca(ens, X, df[target].to_numpy(), schema=schema, max_points=30, n_jobs=1, time_limit=20)
    _shape(r)
    assert r.elapsed == r.timings["total"] and r.guarantee.kind == "proven_optimal"
    assert r.statuses == BEFORE_FCCA["statuses"] and set(r.thresholds.index) == {"income"}
    assert float(r.costs.sum()) == pytest.approx(BEFORE_FCCA["cost_sum"], abs=1e-6)
    assert [(round(float(t), 9), int(c)) for t, c in zip(r.thresholds["threshold"], r.thresholds["count"])] == \
        [tuple(tc) for tc in BEFORE_FCCA["thresholds"]]
    assert round(r.compression_rate(0.5), 9) == BEFORE_FCCA["compression"]
    assert round(r.inconsistency_rate(0.5), 9) == BEFORE_FCCA["inconsistency"]
    back = _round_trip(r)
    assert isinstance(back, FCCAResult) and back.ensemble.content_hash() == r.ensemble.content_hash()
    for q in (0.0, 0.5, 0.9):                  # what is read at a level Q is the same off the file
        assert back.compression_rate(q) == r.compression_rate(q)
        assert back.inconsistency_rate(q) == r.inconsistency_rate(q)
    assert back.discretize(Q=0.5).equals(r.discretize(Q=0.5))


# Counterfactual rules, the case story and the batch of the same demo before the change (rules: seeded
# surrogate, sex fixed, row 0 and the first three proposed regions).
BEFORE_LOCAL = {"features": (0, 1, 6, 7, 8, 9), "cdp": 0.402809215, "crp": 0.927684646, "n_alternatives": 4,
                "text": "31.5 < age <= 74.5 and income > 47.8 and employment=unemployed <= 0.5 and "
                        "employment=student <= 0.5 (any value of employment=employed, employment=self_employed)"}
BEFORE_REGIONAL = [((0, 1, 2), 0.418, 0.90374339, 0.189666667),
                   ((0, 1, 2), 0.418, 0.90374339, 0.156666667),
                   ((1, 2), 0.538343564, 0.900275587, 0.130666667)]
BEFORE_STORY = {"title": "Case 0: 0 → 1",
                "summary": ("The model decides **0** for this case, with a score of 95% for that outcome.",
                            "The model: lightgbm.LGBMClassifier, tree ensemble, read exactly.",
                            "Changing income from 32.7 to 47.26 gives the outcome asked for.",
                            "What this change guarantees: Proven optimal on the tree ensemble."),
                "change": "Changing income from 32.7 to 47.26 gives the outcome asked for. This is proven to be the "
                          "smallest such change (cost 0.098, with each feature measured against its range; fixed: "
                          "sex). The original model was asked again and agrees."}


@pytest.fixture(scope="module")
def rules(demo):
    _, _, _, ens, X, schema, Xn = demo
    return CounterfactualRules(groups=list(schema.groups().values()) or None, random_state=0).fit(
        Xn, ens.predict(Xn), feature_names=list(X.columns))


def test_a_local_rule_has_the_shape_reads_back_equal_and_is_the_same_rule(demo, rules):
    _, _, model, _, X, _, Xn = demo
    r = rules.local_rule(Xn[0], 1, fixed=["sex"])
    assert isinstance(r, LocalRule)
    _shape(r)
    with pytest.warns(DeprecationWarning, match="LocalRule.time"):
        assert r.time == r.elapsed
    assert r.guarantee.kind == "estimated" and not r.guarantee.proven
    assert r.params["fixed"] == ["sex"] and r.params["n_rows"] == len(Xn) and r.params["pi_c"] == 0.9
    assert f"{len(Xn):,} rows" in r.guarantee.text() and "not checked on the model" in r.guarantee.text()
    assert (r.features, round(r.cdp, 9), round(r.crp, 9), len(r.alternatives)) == \
        (BEFORE_LOCAL["features"], BEFORE_LOCAL["cdp"], BEFORE_LOCAL["crp"], BEFORE_LOCAL["n_alternatives"])
    assert r.to_text(list(X.columns)) == BEFORE_LOCAL["text"]
    back = _round_trip(r)
    assert back.to_text(list(X.columns)) == BEFORE_LOCAL["text"] and same(back.alternatives, r.alternatives)
    assert np.array_equal(back.contains(Xn), r.contains(Xn)) and back.contains(Xn).any()
    assert back.divergent_sets == r.divergent_sets and back.record(list(X.columns)) == r.record(list(X.columns))
    assert r.to_dict(list(X.columns)) == r.record(list(X.columns))      # the view in names, as before


def test_regional_rules_have_the_shape_and_read_back_equal(demo, rules):
    regs = rules.propose_regions(1)[:3]
    out = rules.regional_rules(regs, 1, fixed=["sex"])
    assert [(g.features, round(g.cdp, 9), round(g.crp, 9), round(g.coverage, 9)) for g in out] == BEFORE_REGIONAL
    for g in out:
        assert isinstance(g, RegionalRule) and g.found
        _shape(g)
        assert g.guarantee.kind == "estimated" and g.params["fixed"] == ["sex"]
        back = _round_trip(g)
        assert np.array_equal(back.region_lower, g.region_lower) and np.isinf(back.region_upper).any()
    empty = RegionalRule(np.zeros(3), np.zeros(3), 1, 0.0, 0, note="No fitted row lies in this region.")
    back = _round_trip(empty)
    assert not back.found and back.lower is None and back.note == empty.note


def test_a_case_story_has_the_shape_reads_back_equal_and_tells_the_same(demo, rules):
    df, target, model = demo[0], demo[1], demo[2]
    ws = build_workspace(df, target, model, name="credit", protected=["sex"])
    story = case_story(ws, 0, 1, rules=rules)
    assert isinstance(story, CaseStory)
    _shape(story)
    assert (story.title, story.summary) == (BEFORE_STORY["title"], BEFORE_STORY["summary"])
    assert dict(story.sections)["The smallest change"] == (BEFORE_STORY["change"],)
    assert story.params["row"] == 0 and story.params["fixed"] == ["sex"] and story.params["rules"] is True
    # a rule is told: the story as a whole is an estimate, and says which part is proven
    assert story.guarantee.kind == "estimated" and "Proven optimal" in story.guarantee.text()
    back = _round_trip(story)
    assert back.to_html() == story.to_html() and back.to_markdown() == story.to_markdown()
    assert isinstance(back.facts["counterfactual"], CounterfactualResult) and isinstance(back.facts["rule"], LocalRule)
    res = back.facts["counterfactual"]
    assert model.predict(ws.to_raw(res.x[None, :]))[0] == 1
    alone = case_story(ws, 0, 1)
    assert alone.guarantee.kind == "proven_optimal" and "exact on the model" in alone.guarantee.text()
    _round_trip(alone)


def test_a_batch_has_the_shape_reads_back_equal_and_gives_the_same_answers(demo):
    _, _, model, ens, _, schema, Xn = demo
    b = batch_counterfactuals(ens, Xn[:3], 1, schema=schema, norm="l1", time_limit=60, n_jobs=1)
    assert isinstance(b, BatchResult) and len(b) == 3
    _shape(b)
    assert [r.lower_bound for r in b] == pytest.approx([BEFORE_COSTS[i] for i in range(3)], abs=1e-8)
    assert b[0] is b.results[0] and list(b) == list(b.results)
    assert b.params["n_rows"] == 3 and b.params["targets"] == ["1"] and b.params["norm"] == "l1"
    assert b.guarantee.kind == "proven_optimal" and "3 proven optimal" in b.guarantee.text()
    assert b.elapsed >= max(r.elapsed for r in b)
    back = _round_trip(b)
    assert all(model.predict(r.x[None, :])[0] == 1 for r in back)
    stopped = batch_counterfactuals(ens, Xn[:3], 1, schema=schema, n_jobs=1, should_stop=lambda: True)
    assert len(stopped) == 3 and all(r is None for r in stopped)
    assert stopped.guarantee.kind == "not_found" and "3 not reached" in stopped.guarantee.text()
    _round_trip(stopped)


def test_the_history_keeps_the_results_params_and_elapsed(audit, tmp_path):
    import sqlalchemy as sa

    from core.audit.history import AuditStore

    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    old = sa.create_engine(url)                   # a history made before the column was kept
    with old.begin() as con:
        con.execute(sa.text("CREATE TABLE atlas_audits (id INTEGER PRIMARY KEY, owner VARCHAR(64) NOT NULL, "
                            "created VARCHAR(32) NOT NULL, title VARCHAR(300) NOT NULL, data_name VARCHAR(300) "
                            "NOT NULL, data_sha256 VARCHAR(64) NOT NULL, model_sha256 VARCHAR(64) NOT NULL, "
                            "model_source VARCHAR(100) NOT NULL, target VARCHAR(200) NOT NULL, protected TEXT NOT "
                            "NULL, n_rows INTEGER NOT NULL, n_significant INTEGER NOT NULL, summary TEXT NOT NULL, "
                            "audit BLOB NOT NULL)"))
        con.execute(sa.text("INSERT INTO atlas_audits VALUES (1, 'local', 'then', 'old', 'd', '', '', 'm', '1', "
                            "'[]', 3, 0, '[\"s\"]', x'00')"))
    old.dispose()
    store = AuditStore(url)
    k = store.save(audit)
    past = store.list().set_index("id")
    assert past.at[k, "elapsed"] == audit.elapsed and np.isnan(past.at[1, "elapsed"])
    assert past.at[k, "target"] == str(audit.params["target"])
    assert store.load(k) == audit
