"""Counterfactuals valid for several models (#25): the brute-force optimum over the union
grid of two models of different families, for l0, l1 and l2; every point re-checked on
every original model; confident recourse (a probability margin)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import make_data
from oracles import returned_cost
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier, RandomForestRegressor

from core.counterfactual import make_cost_model
from core.errors import QueryError
from core.intake.models import from_model
from core.optimal import optimal_counterfactual

EPS = 1e-9


@pytest.fixture(scope="module")
def two_models():
    X, y = make_data("binary", n=300, d=3, seed=4)
    rf = RandomForestClassifier(5, max_depth=3, random_state=0).fit(X, y)
    shifted = ((X[:, 0] + 0.4 * X[:, 1]) > 0.3).astype(int)          # a retrain on shifted labels
    gb = GradientBoostingClassifier(n_estimators=5, max_depth=2, random_state=0).fit(X, shifted)
    return X, rf, gb


def brute_force_all(models, x, target, norm, margin=None):
    """Cheapest point of the union grid (x, each level of any model, each level + eps) that
    gets ``target`` from every model (with ``margin``: probability at least that), by enumeration."""
    ens = [from_model(m) for m in models]
    cm = make_cost_model(ens[0], norm)
    cands = []
    for j in range(ens[0].n_features):
        lv = np.unique(np.concatenate([e.split_levels(j) for e in ens]))
        cands.append(sorted({x[j], *lv, *(lv + EPS)}))
    P = np.array(list(itertools.product(*cands)))
    ok = np.ones(len(P), dtype=bool)
    for m in models:
        ok &= m.predict(P) == target
        if margin is not None:
            ok &= m.predict_proba(P)[:, list(m.classes_).index(target)] >= margin
    if not ok.any():
        return np.inf
    lvs = [np.unique(np.concatenate([e.split_levels(j) for e in ens])) for j in range(ens[0].n_features)]
    Pinf = P[ok].copy()
    for j, lv in enumerate(lvs):                # infimum convention: a point eps above a level costs the level
        hit = np.isin(Pinf[:, j], lv + EPS)
        Pinf[hit, j] -= EPS
    return float(cm.cost(x, Pinf).min())


@pytest.mark.parametrize("norm", ["l0", "l1", "l2"])
def test_valid_for_both_is_the_brute_force_optimum(two_models, norm):
    X, rf, gb = two_models
    rows = np.flatnonzero((rf.predict(X) == 0) | (gb.predict(X) == 0))[:8]
    for r in rows:
        res = optimal_counterfactual(rf, X[r], 1, model=rf, norm=norm, also_valid_for=[gb], time_limit=20)
        want = brute_force_all([rf, gb], X[r], 1, norm)
        assert np.isfinite(want)                            # unconstrained: some point convinces both
        assert res.status == "optimal" and res.found
        assert returned_cost(res, [from_model(rf), from_model(gb)], X[r], norm) == pytest.approx(want, rel=1e-6,
                                                                                                 abs=1e-9)
        assert rf.predict(res.x[None])[0] == 1 and gb.predict(res.x[None])[0] == 1   # re-checked on both
        alone = optimal_counterfactual(rf, X[r], 1, model=rf, norm=norm, time_limit=20)
        assert res.lower_bound >= alone.lower_bound - 1e-9  # more models can only cost more


def test_the_order_of_the_models_does_not_matter(two_models):
    X, rf, gb = two_models
    r = int(np.flatnonzero((rf.predict(X) == 0) & (gb.predict(X) == 0))[0])
    a = optimal_counterfactual(rf, X[r], 1, also_valid_for=[gb], model=rf)
    b = optimal_counterfactual(gb, X[r], 1, also_valid_for=[rf], model=gb)
    assert a.cost == pytest.approx(b.cost, rel=1e-9)


@pytest.mark.parametrize("which", ["rf", "gb"])
def test_confident_recourse_meets_the_margin_at_least_cost(two_models, which):
    X, rf, gb = two_models
    m = rf if which == "rf" else gb
    for r in np.flatnonzero(m.predict(X) == 0)[:5]:
        res = optimal_counterfactual(m, X[r], 1, model=m, margin=0.75, time_limit=20)
        want = brute_force_all([m], X[r], 1, "l1", margin=0.75)
        assert res.found and returned_cost(res, from_model(m), X[r], "l1") == pytest.approx(want, rel=1e-6, abs=1e-9)
        assert m.predict_proba(res.x[None])[0, 1] >= 0.75
        plain = optimal_counterfactual(m, X[r], 1, model=m, time_limit=20)
        assert res.lower_bound >= plain.lower_bound - 1e-9


def test_margin_and_several_models_together(two_models):
    X, rf, gb = two_models
    r = int(np.flatnonzero(rf.predict(X) == 0)[0])
    res = optimal_counterfactual(rf, X[r], 1, model=rf, also_valid_for=[gb], margin=0.7, time_limit=20)
    want = brute_force_all([rf, gb], X[r], 1, "l1", margin=0.7)
    assert returned_cost(res, [from_model(rf), from_model(gb)], X[r], "l1") == pytest.approx(want, rel=1e-6, abs=1e-9)
    assert min(rf.predict_proba(res.x[None])[0, 1], gb.predict_proba(res.x[None])[0, 1]) >= 0.7


def test_models_that_cannot_be_compared_are_refused(two_models):
    X, rf, gb = two_models
    other = RandomForestClassifier(3, max_depth=2, random_state=0).fit(X[:, :2], (X[:, 0] > 0).astype(int))
    with pytest.raises(QueryError, match="does not read the same features"):
        optimal_counterfactual(rf, X[0], 1, also_valid_for=[other])
    reg = RandomForestRegressor(3, max_depth=2, random_state=0).fit(X, X[:, 0])
    with pytest.raises(QueryError, match="regression model and the first model a classification"):
        optimal_counterfactual(rf, X[0], 1, also_valid_for=[reg])
    three = RandomForestClassifier(3, max_depth=2, random_state=0).fit(X, np.arange(len(X)) % 3)
    with pytest.raises(QueryError, match="classes"):
        optimal_counterfactual(rf, X[0], 1, also_valid_for=[three])
    with pytest.raises(QueryError, match="CP-SAT and the box search only"):
        optimal_counterfactual(rf, X[0], 1, also_valid_for=[gb], backend="highs")
    with pytest.raises(QueryError, match="strictly between 0 and 1"):
        optimal_counterfactual(rf, X[0], 1, margin=1.5)


def test_regressors_with_an_interval(two_models):
    X, *_ = two_models
    a = RandomForestRegressor(4, max_depth=3, random_state=0).fit(X, X[:, 0] + X[:, 1])
    b = RandomForestRegressor(4, max_depth=3, random_state=1).fit(X, X[:, 0] + 0.5 * X[:, 2])
    x = X[0]
    res = optimal_counterfactual(a, x, (1.0, 3.0), model=a, also_valid_for=[b], time_limit=20)
    assert res.found
    for m in (a, b):
        assert 1.0 <= m.predict(res.x[None])[0] <= 3.0


def test_three_classes_fixed_features_and_a_schema(two_models):
    import pandas as pd

    from core.schema import infer_schema

    X, *_ = two_models
    y3 = np.digitize(X[:, 0] + 0.5 * X[:, 2], [-0.5, 0.5])
    a = RandomForestClassifier(4, max_depth=3, random_state=0).fit(X, y3)
    b = RandomForestClassifier(4, max_depth=3, random_state=3).fit(X, np.digitize(X[:, 0] + 0.3 * X[:, 1], [-0.4, 0.6]))
    schema = infer_schema(pd.DataFrame(X, columns=["x0", "x1", "x2"]))
    ea, eb = from_model(a, feature_names=["x0", "x1", "x2"]), from_model(b, feature_names=["x0", "x1", "x2"])
    for r in np.flatnonzero((a.predict(X) != 2) | (b.predict(X) != 2))[:5]:
        res = optimal_counterfactual(ea, X[r], 2, model=a, also_valid_for=[(b)], schema=schema, fixed=["x1"],
                                     time_limit=20)
        assert res.found and a.predict(res.x[None])[0] == 2 and b.predict(res.x[None])[0] == 2
        assert res.x[1] == X[r, 1]                                           # fixed kept
        cm = make_cost_model(ea, "l1", schema=schema)
        lv = [np.unique(np.concatenate([ea.split_levels(j), eb.split_levels(j)])) for j in range(3)]
        cands = [sorted({X[r, j], *lv[j], *(lv[j] + EPS)}) if j != 1 else [X[r, 1]] for j in range(3)]
        P = np.array(list(itertools.product(*cands)))
        P = P[(a.predict(P) == 2) & (b.predict(P) == 2)]
        for j in range(3):
            P[np.isin(P[:, j], lv[j] + EPS), j] -= EPS
        assert returned_cost(res, [ea, eb], X[r], "l1", schema) == pytest.approx(float(cm.cost(X[r], P).min()),
                                                                                 rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_exact_regions_take_the_same_argument(two_models, norm):
    from core.regions import exact_counterfactual

    X, rf, gb = two_models
    for r in np.flatnonzero((rf.predict(X) == 0) | (gb.predict(X) == 0))[:6]:
        res = exact_counterfactual(rf, X[r], 1, norm=norm, also_valid_for=[gb], model=rf, time_limit=20)
        opt = optimal_counterfactual(rf, X[r], 1, norm=norm, also_valid_for=[gb], model=rf, time_limit=20)
        want = brute_force_all([rf, gb], X[r], 1, norm)
        both = [from_model(rf), from_model(gb)]
        assert res.status == "optimal" and returned_cost(res, both, X[r], norm) == pytest.approx(want, rel=1e-6,
                                                                                                 abs=1e-9)
        assert returned_cost(opt, both, X[r], norm) == pytest.approx(want, rel=1e-6, abs=1e-9)   # two exact methods agree
        assert rf.predict(res.x[None])[0] == 1 and gb.predict(res.x[None])[0] == 1
    r = int(np.flatnonzero(rf.predict(X) == 0)[0])
    res = exact_counterfactual(rf, X[r], 1, norm=norm, margin=0.8, also_valid_for=[gb], time_limit=20)
    assert returned_cost(res, [from_model(rf), from_model(gb)], X[r], norm) == pytest.approx(
        brute_force_all([rf, gb], X[r], 1, norm, margin=0.8), rel=1e-6, abs=1e-9)


def test_one_hot_groups_and_plausibility_with_two_model_versions():
    """The demo's one-hot employment group and its updated model: the point is valid on both original models,
    switches category as one feature, costs no less than either model alone, and the two exact methods agree."""
    from conftest import demo_credit

    from core.cells import Plausibility
    from core.intake.demo import updated_model
    from core.intake.workspace import build_workspace
    from core.regions import exact_counterfactual

    df, target, model, *_ = demo_credit()
    ws = build_workspace(df, target, model, name="v1")
    wb = build_workspace(df, target, updated_model("credit-lightgbm")[0], name="v2")
    X = ws.X.to_numpy(float)
    emp = [j for j, n in enumerate(ws.X.columns) if n.startswith("employment=")]
    plaus = Plausibility.fit(X[ws.predictions == 1], random_state=0)
    for r in np.flatnonzero((ws.predictions == 0) & (wb.predictions == 0))[:4]:
        kw = dict(schema=ws.schema, fixed=["sex"], time_limit=30)
        res = optimal_counterfactual(ws.ensemble, X[r], 1, model=ws.model, also_valid_for=[(wb.ensemble, wb.model)],
                                     **kw)
        assert res.status == "optimal"
        for w in (ws, wb):
            assert w.model.predict(w.to_raw(res.x[None]))[0] == 1
        assert res.x[emp].sum() == 1
        for e in (ws.ensemble, wb.ensemble):
            assert res.lower_bound >= optimal_counterfactual(e, X[r], 1, **kw).lower_bound - 1e-9
        ex = exact_counterfactual(ws.ensemble, X[r], 1, norm="l1", also_valid_for=[wb.ensemble], **kw)
        assert ex.lower_bound == pytest.approx(res.lower_bound, rel=1e-6, abs=1e-9)   # the proven optima
        # 3 s, not 10: the checks below hold for any point it returns, the data rows (X_ref) give it a
        # plausible start at once, and as with 10 s the first two rows stop at the limit, the others proven.
        sure = optimal_counterfactual(ws.ensemble, X[r], 1, also_valid_for=[wb.ensemble], plausibility=plaus,
                                      X_ref=X, **{**kw, "time_limit": 3})
        assert sure.found and plaus.holds(sure.x[None])[0] and sure.cost >= res.lower_bound - 1e-9
        assert all(e.predict(sure.x[None])[0] == 1 for e in (ws.ensemble, wb.ensemble))
