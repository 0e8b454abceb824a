"""XGBoost's margins through a proxy kept per thread (core.model.xgbmargin) are the
library's own ``inplace_predict`` margins, on every kind of model and of row."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import xgboost as xgb

import core.model.xgbmargin as xm


def _public(booster, X, it=(0, 0)):
    return booster.inplace_predict(X, predict_type="margin", missing=np.nan, validate_features=False,
                                   iteration_range=it)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(600, 6))
    X[rng.random(X.shape) < 0.1] = np.nan            # missing values take the trees' default sides
    y3 = np.digitize(np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]), [-0.5, 0.5])
    return X, y3


@pytest.mark.parametrize("kind", ["binary", "multiclass", "regression"])
def test_the_margins_are_the_librarys_on_every_row(data, kind):
    X, y3 = data
    if kind == "regression":
        model = xgb.XGBRegressor(n_estimators=30, max_depth=3, n_jobs=1).fit(X, np.nan_to_num(X[:, 2] - X[:, 3]))
    else:
        model = xgb.XGBClassifier(n_estimators=30, max_depth=3, n_jobs=1).fit(X, y3 if kind == "multiclass"
                                                                               else (y3 > 0).astype(int))
    booster = model.get_booster()
    X32 = np.ascontiguousarray(X, dtype=np.float32)
    assert xm._private() is not None, "the pinned xgboost has the pieces of the direct call"
    for rows in (X32[:1], X32[5:6], X32, np.full((1, 6), np.nan, dtype=np.float32), X32[:0]):
        got = xm.dense_margin(booster, rows)
        assert got.shape == _public(booster, rows).shape
        np.testing.assert_array_equal(got, _public(booster, rows))
    # a part of the trees only (an early-stopped model's best iteration)
    np.testing.assert_array_equal(xm.dense_margin(booster, X32, (0, 7)), _public(booster, X32, (0, 7)))
    assert not np.array_equal(xm.dense_margin(booster, X32, (0, 7)), xm.dense_margin(booster, X32))


def test_threads_each_keep_their_own_proxy(data):
    X, y3 = data
    booster = xgb.XGBClassifier(n_estimators=20, max_depth=3, n_jobs=1).fit(X, (y3 > 0).astype(int)).get_booster()
    X32 = np.ascontiguousarray(X, dtype=np.float32)
    want = _public(booster, X32)
    errors, proxies = [], []

    def work(seed):
        try:
            rng = np.random.default_rng(seed)
            for _ in range(200):
                i = int(rng.integers(len(X32)))
                got = xm.dense_margin(booster, X32[i:i + 1])
                if got[0] != want[i]:
                    errors.append((seed, i))
            proxies.append(xm._local.proxy)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len({id(p) for p in proxies}) == 4


def test_without_the_private_pieces_the_public_call_answers(data, monkeypatch):
    X, y3 = data
    booster = xgb.XGBClassifier(n_estimators=10, max_depth=3, n_jobs=1).fit(X, (y3 > 0).astype(int)).get_booster()
    X32 = np.ascontiguousarray(X, dtype=np.float32)
    monkeypatch.setattr(xm, "_parts", ())
    assert xm._private() is None
    np.testing.assert_array_equal(xm.dense_margin(booster, X32), _public(booster, X32))
