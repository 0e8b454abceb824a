"""Missing values as one more level of their column's grid (issue 41, item 6).

* :func:`core.model.missing.banded` is exact: with "missing" read as the band of
  each column, its trees predict what the library predicts on the rows with NaN,
  for every family that routes missing values, with fewer leaves than the
  rewrite over "is missing" columns.
* The optimum of a query read through the band equals the rewrite's, norm by
  norm (l1, l0, l2, linf, a weight on "is missing"), and the band is what the
  query used when CP-SAT answers; the answer reads in the caller's columns and
  convinces the model on the raw row. A query a box search answers reads the
  rewrite (the band's costs do not rise away from the query), with the same optimum.
* The query-independent cache does not deadlock when an owner dies while it is
  being updated (found while building this).
"""

from __future__ import annotations

import gc
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn import ensemble as ske

import core.cells.band as band_module
from core.cells.band import Band, band_problem
from core.cells.cache import GridCache
from core.intake.workspace import build_workspace
from core.model.missing import band_cut, banded, info, settled, to_native
from core.optimal import optimal_counterfactual


def _table(n=1200, seed=11):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"age": rng.integers(18, 80, n).astype(float),
                       "income": rng.lognormal(3, 0.5, n).round(2),
                       "hours": rng.integers(10, 60, n).astype(float),
                       "tenure": rng.normal(5, 2, n).round(1)})
    y = (((df.income > 25) & (df.age > 30)) | (df.hours > 45) | (df.tenure > 8)).astype(int)
    y = y ^ (rng.random(n) < 0.05)
    for c, frac in (("income", 0.25), ("hours", 0.15), ("tenure", 0.1)):
        df.loc[rng.random(n) < frac, c] = np.nan
    return df, y


def _model(name, X, y):
    import lightgbm as lgb
    import xgboost as xgb

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name == "hgb":
            return ske.HistGradientBoostingClassifier(max_iter=30, max_leaf_nodes=8, random_state=0).fit(X, y)
        if name == "xgb":
            return xgb.XGBClassifier(n_estimators=20, max_depth=3, n_jobs=1).fit(X, y)
        if name == "lgbm":
            return lgb.LGBMClassifier(n_estimators=20, num_leaves=8, verbose=-1, n_jobs=1).fit(X, y)
        return ske.RandomForestClassifier(15, max_depth=4, random_state=0).fit(X, y)


@pytest.fixture(scope="module", params=["hgb", "xgb", "lgbm", "rf"])
def case(request):
    df, y = _table()
    model = _model(request.param, df, y)
    ws = build_workspace(df.assign(y=y), "y", model, name=request.param)
    return request.param, model, ws, ws.X.to_numpy(float)


def _bands(ws, feats):
    got = info(ws.ensemble)
    source = ws.ensemble._flat["missing_source"]
    out = {}
    for j, f in zip(got["features"], got["fill"]):
        if j in feats:
            out[j] = band_cut(source, j, f)
    return out


def test_the_banded_model_predicts_as_the_library(case):
    name, model, ws, C = case
    ens = ws.ensemble
    got = info(ens)
    feats, inds = got["features"], got["indicators"]
    rng = np.random.default_rng(0)
    for chosen in ([feats[0]], feats):
        cuts = _bands(ws, chosen)
        B = banded(ens, cuts)
        R = C[rng.choice(len(C), 800)].copy()
        R[:, inds] = 0.0
        for j, k, fill in zip(feats, inds, got["fill"]):
            if j in cuts:
                gone = rng.random(len(R)) < 0.5
                R[gone, k], R[gone, j] = 1.0, fill
        view = Band(ens, R[0], cuts, dict(zip(feats, inds)), dict(zip(feats, got["fill"])), {})
        inner = view.to_inner(R)
        assert np.array_equal(view.to_outer(inner)[:, inds], R[:, inds])
        raw = to_native(ens.meta, R)
        assert np.array_equal(np.isnan(to_native(B.meta, inner)), np.isnan(raw))
        frame = pd.DataFrame(raw, columns=list(ens.feature_names[:raw.shape[1]]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = model.predict_proba(frame)[:, 1]
        assert np.allclose(B.predict_proba(inner)[:, 1], theirs, atol=1e-6)
        assert np.allclose(B.predict_raw(inner), ens.predict_raw(R), atol=1e-9)
        held = settled(ens, {k: 0.0 for j, k in zip(feats, inds) if j not in cuts})
        assert B.n_leaves < held.n_leaves                   # no copy of the subtrees per state


def _used_band(monkeypatch):
    calls = []

    def spy(*a, **kw):
        prob = band_problem(*a, **kw)
        if band_module.ENABLED:
            calls.append(prob is not None)
        return prob

    monkeypatch.setattr("core.optimal.band_problem", spy)
    return calls


@pytest.mark.parametrize("norm, weights", [("l1", None), ("l0", None), ("l2", None), ("linf", None),
                                           ("l1", "indicator")])
def test_the_band_gives_the_rewrites_optimum(case, norm, weights, monkeypatch):
    name, model, ws, C = case
    ens = ws.ensemble
    got = info(ens)
    inds = got["indicators"]
    w = None
    if weights == "indicator":                               # giving a value has a price of its own
        w = np.ones(ens.n_features)
        w[inds] = 0.3
    rows = np.flatnonzero(C[:, inds].sum(axis=1) > 0)
    rows = rows[np.linspace(0, rows.size - 1, 6).astype(int)]
    calls = _used_band(monkeypatch)
    for r in rows:
        target = 1 - ws.predictions[r]
        kw = dict(schema=ws.schema, norm=norm, weights=w, X_ref=C, model=model, time_limit=30, backend="cpsat")
        res = optimal_counterfactual(ens, C[r], target, **kw)
        monkeypatch.setattr(band_module, "ENABLED", False)
        old = optimal_counterfactual(ens, C[r], target, **kw)
        monkeypatch.setattr(band_module, "ENABLED", True)
        assert res.status == old.status == "optimal", (res.message, old.message)
        assert res.cost == pytest.approx(old.cost, rel=1e-6, abs=1e-9)
        assert np.array_equal(res.x_query, C[r])                  # the caller's columns
        assert set(np.unique(res.x[inds])) <= {0.0, 1.0}
        assert np.all(res.x[inds] <= C[r, inds])                  # a known value never becomes missing
        still = res.x[inds] > 0.5                                  # still missing: the fill, untouched
        assert np.array_equal(res.x[got["features"]][still], C[r, got["features"]][still])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert model.predict(ws.to_raw(res.x[None, :]))[0] == target
        assert ens.predict(res.x[None, :])[0] == target
        for ch in res.changes:
            assert not ch.feature.endswith(" is missing")
    assert calls and all(calls)


def test_alternatives_through_the_band_are_the_rewrites(case, monkeypatch):
    name, model, ws, C = case
    ens = ws.ensemble
    inds = info(ens)["indicators"]
    seen = 0
    for r in np.flatnonzero(C[:, inds].sum(axis=1) > 0)[:6]:
        target = 1 - ws.predictions[r]
        kw = dict(schema=ws.schema, X_ref=C, model=model, n_solutions=3, backend="cpsat")
        res = optimal_counterfactual(ens, C[r], target, **kw)
        monkeypatch.setattr(band_module, "ENABLED", False)
        old = optimal_counterfactual(ens, C[r], target, **kw)
        monkeypatch.setattr(band_module, "ENABLED", True)
        assert res.found and old.found
        assert [a.cost for a in res.alternatives] == pytest.approx([a.cost for a in old.alternatives], abs=1e-9)
        first = {c.feature for c in res.changes}
        for alt in res.alternatives:
            assert ens.predict(alt.x[None, :])[0] == target
            assert not first <= {c.feature for c in alt.changes}     # one of the first's changes is left out
        seen += len(res.alternatives)
    assert seen > 0                                                # some row has alternatives to compare


@pytest.mark.parametrize("norm", ["l1", "linf"])
def test_a_query_a_box_search_answers_reads_the_rewrite(case, norm, monkeypatch):
    """Where a box search answers (the probe or the LP box search for a sum of costs, the
    race for L-infinity), the band would send the query to CP-SAT alone: the query reads
    the rewrite, and its optimum is the band's."""
    name, model, ws, C = case
    ens = ws.ensemble
    inds = info(ens)["indicators"]
    rows = np.flatnonzero(C[:, inds].sum(axis=1) > 0)
    rows = rows[np.linspace(0, rows.size - 1, 4).astype(int)]
    calls = _used_band(monkeypatch)
    for r in rows:
        target = 1 - ws.predictions[r]
        kw = dict(schema=ws.schema, norm=norm, X_ref=C, model=model, time_limit=30)
        calls.clear()
        res = optimal_counterfactual(ens, C[r], target, **kw)
        assert calls == []                                         # the band was not asked for
        banded_ = optimal_counterfactual(ens, C[r], target, backend="cpsat", **kw)
        assert calls == [True]
        assert res.status == banded_.status == "optimal"
        assert res.cost == pytest.approx(banded_.cost, rel=1e-6, abs=1e-9)
        assert res.backend != "cpsat"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert model.predict(ws.to_raw(res.x[None, :]))[0] == target


def test_the_cache_survives_an_owner_dying_while_it_is_updated():
    import threading

    cache = GridCache(max_owners=2, max_entries=1)

    class Owner:
        pass

    def work():
        outer = Owner()
        value = cache.get(outer, "a", Owner)                   # a value that is itself an owner
        cache.get(value, "b", lambda: 1)
        del value
        gc.collect()
        for i in range(4):                                     # evicting it forgets its entries, under the lock
            cache.get(outer, f"k{i}", Owner)
        more = [Owner() for _ in range(4)]
        for o in more:
            cache.get(o, "x", lambda: 2)
        done.append(cache.get(more[-1], "x", lambda: 3))

    done: list[int] = []
    t = threading.Thread(target=work, daemon=True)
    t.start()
    t.join(20)
    assert done == [2], "the cache deadlocked"
