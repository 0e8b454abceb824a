"""Exact decision regions: hand-built ensembles with known regions, tiling, brute force, agreement with the MILP."""

from __future__ import annotations

import numpy as np
import pytest
from oracles import grid_brute_force, returned_cost, tiny_models

from core.intake.models import from_model
from core.model import Tree, TreeEnsemble
from core.optimal import optimal_counterfactual
from core.regions import counterfactual_set, decompose, exact_counterfactual, projection_regions, slice_regions


def _stump(feature, t, left, right, d=2):
    return Tree([1, -1, -1], [2, -1, -1], [feature, -1, -1], [t, np.nan, np.nan], [[0.0], [left], [right]])


@pytest.fixture
def two_stumps():
    """x0 <= 1 gives -1, else +1; x1 <= 2 gives -1, else +2: four known regions."""
    return TreeEnsemble((_stump(0, 1.0, -1.0, 1.0), _stump(1, 2.0, -1.0, 2.0)), n_features=2,
                        feature_names=("a", "b"), task="classification", aggregation="sum", link="sigmoid",
                        base_score=[0.0], classes=np.array([0, 1]))


def test_hand_built_regions(two_stumps):
    rs = decompose(two_stumps)
    assert rs.complete and len(rs.regions) == 4
    got = sorted((tuple(r.lower), tuple(r.upper), float(r.raw[0])) for r in rs.regions)
    inf = np.inf
    assert got == sorted([((-inf, -inf), (1.0, 2.0), -2.0), ((1.0, -inf), (inf, 2.0), 0.0),
                          ((-inf, 2.0), (1.0, inf), 1.0), ((1.0, 2.0), (inf, inf), 3.0)])


def test_closed_form_stump_distance(two_stumps):
    x = np.array([0.0, 0.0])  # raw -2: class 0; class 1 needs b > 2 (raw 1) or a > 1 and b > 2 ...
    res = exact_counterfactual(two_stumps, x, 1, norm="l1")
    assert res.status == "optimal" and returned_cost(res, two_stumps, x, "l1") == pytest.approx(2.0)  # |b - 2|
    assert two_stumps.predict(res.x[None, :])[0] == 1 and res.x[1] > 2.0
    res2 = exact_counterfactual(two_stumps, x, 1, norm="l2", fixed=["b"])
    assert res2.status == "infeasible"


@pytest.mark.parametrize("fid", ["sk-rf-bin", "xgb-multi", "lgb-bin", "sk-gb-reg"])
def test_every_region_score_equals_predict_raw(fitted, fid):
    model, X, *_ = fitted(fid)
    ens = from_model(model)
    lo, hi = np.quantile(X, 0.3, axis=0), np.quantile(X, 0.7, axis=0)
    lo[2:], hi[2:] = X[0, 2:] - 1e-3, X[0, 2:]
    rs = decompose(ens, lo, hi, max_regions=3000)
    assert rs.regions
    centres = np.array([(r.lower + r.upper) / 2 for r in rs.regions])
    raws = np.array([r.raw for r in rs.regions])
    np.testing.assert_allclose(ens.predict_raw(centres), raws, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(ens.predict_raw(np.array([r.point for r in rs.regions])), raws, atol=1e-9)


@pytest.mark.parametrize("fid", ["sk-rf-bin", "xgb-bin", "lgb-multi"])
def test_slice_regions_tile_the_slice(fitted, fid):
    model, X, *_ = fitted(fid)
    ens = from_model(model)
    lo, hi = X[:, :2].min(axis=0), X[:, :2].max(axis=0)
    rs = slice_regions(ens, X[3], (0, 1), bounds={0: (lo[0], hi[0]), 1: (lo[1], hi[1])})
    assert rs.complete
    boxes = [(np.clip(r.lower[:2], lo, hi), np.clip(r.upper[:2], lo, hi)) for r in rs.regions]
    area = sum(np.prod(b - a) for a, b in boxes)
    assert area == pytest.approx(np.prod(hi - lo), rel=1e-9)  # no gaps, no overlaps (with the check below)
    rng = np.random.default_rng(0)
    pts = rng.uniform(lo, hi, size=(400, 2))
    inside = np.array([[np.all(p > a) and np.all(p <= b) for a, b in boxes] for p in pts])
    assert np.all(inside.sum(axis=1) == 1)
    full = np.repeat(X[3][None, :], len(pts), axis=0)
    full[:, :2] = pts
    owner = inside.argmax(axis=1)
    np.testing.assert_array_equal(ens.predict(full), [rs.regions[i].prediction for i in owner])
    for r in rs.regions:  # other features stay at x
        assert np.all(r.point[2:] == X[3, 2:])


@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_exact_counterfactual_equals_brute_force_and_milp(norm):
    X, _, models = tiny_models()
    compared = 0
    for model in models:
        ens = from_model(model)
        for q in range(4):
            x = X[q * 7]
            target = 1 - model.predict(x[None, :])[0]
            fixed = (2,) if q == 3 else ()
            res = exact_counterfactual(ens, x, target, norm=norm, fixed=fixed, model=model)
            ref = grid_brute_force(ens, x, target, norm, fixed)
            milp = optimal_counterfactual(ens, x, target, norm=norm, fixed=fixed, X_ref=X)
            if not np.isfinite(ref):
                assert res.status == milp.status == "infeasible"
                continue
            assert res.status == "optimal" and milp.status == "optimal"
            assert returned_cost(res, ens, x, norm) == pytest.approx(ref, rel=1e-6, abs=1e-12)
            assert returned_cost(milp, ens, x, norm) == pytest.approx(ref, rel=1e-6, abs=1e-12)
            assert model.predict(res.x[None, :])[0] == target
            assert all(res.x[j] == x[j] for j in fixed)
            compared += 1
    assert compared > 0, "every query was infeasible: nothing was compared"


def test_counterfactual_set_and_projection(fitted):
    model, X, *_ = fitted("sk-rf-bin")
    ens = from_model(model)
    x = X[5]
    target = 1 - model.predict(x[None, :])[0]
    best = exact_counterfactual(ens, x, target, norm="l2")
    rs = counterfactual_set(ens, x, target, radius=best.cost * 1.05, norm="l2")
    assert rs.complete and rs.regions
    assert rs.regions[0].distance == pytest.approx(best.lower_bound, rel=1e-9)     # (the cells' infimum)
    assert all(best.lower_bound - 1e-12 <= r.distance <= best.cost * 1.05 + 1e-12 for r in rs.regions)
    assert all(r.prediction == target for r in rs.regions)
    pr = projection_regions(ens, x, target, (0, 1), radius=best.cost * 1.05, norm="l2")
    assert pr.params["features"] == ["x0", "x1"] and len(pr.regions) == len(rs.regions)
