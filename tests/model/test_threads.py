"""A counterfactual checked on the uploaded model is predicted in one thread: the
libraries' OpenMP and BLAS pools cost many times a one-row prediction
(``core.model.threads``). Larger batches keep the libraries' own pools, and the
limit is lifted after the call."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingClassifier
from threadpoolctl import threadpool_info

from core.cells.result import check_on_model, check_rows
from core.counterfactual import make_target
from core.intake.models import from_model
from core.model.threads import SMALL_BATCH


def _openmp_threads() -> set[int]:
    return {p["num_threads"] for p in threadpool_info() if p["user_api"] == "openmp"}


@pytest.fixture(scope="module")
def recorded():
    """A HistGradientBoosting classifier whose predictions note the OpenMP pools' sizes."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 4))
    y = (X[:, 0] + X[:, 1] ** 2 > 1).astype(int)
    model = HistGradientBoostingClassifier(max_iter=10, max_depth=3, random_state=0).fit(X, y)
    ens = from_model(model)
    seen: list[set[int]] = []
    own = model.predict_proba

    def noting(Z):
        seen.append(_openmp_threads())
        return own(Z)

    model.predict_proba = noting
    return model, ens, X, seen


def test_one_row_is_checked_in_one_thread_and_the_pools_are_given_back(recorded):
    model, ens, X, seen = recorded
    before = _openmp_threads()
    assert before, "scikit-learn's OpenMP runtime is not loaded"
    target = make_target(ens, 1 - int(model.predict(X[:1])[0]))
    seen.clear()
    assert check_on_model(model, ens, X[0], target) is False          # the row as it is: not at the target
    assert seen and all(s == {1} for s in seen), seen
    seen.clear()
    assert check_rows(model, ens, X[:5], target) is not None
    assert seen and all(s == {1} for s in seen), seen
    assert _openmp_threads() == before


def test_a_large_batch_keeps_the_librarys_pools(recorded):
    model, ens, X, seen = recorded
    before = _openmp_threads()
    target = make_target(ens, 1)
    seen.clear()
    assert len(X) > SMALL_BATCH
    got = check_rows(model, ens, X, target)
    assert got is not None and seen and all(s == before for s in seen), (seen, before)
    assert got == [bool(v == 1) for v in model.predict(X)]


def test_lightgbm_is_asked_for_one_thread_on_a_small_batch_only():
    """LightGBM sets its threads itself on every call: a small batch passes it
    ``num_threads=1``, a large one leaves its default."""
    import lightgbm as lgb

    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, 4))
    y = (X[:, 0] - X[:, 2] > 0).astype(int)
    model = lgb.LGBMClassifier(n_estimators=10, num_leaves=7, verbose=-1, random_state=0).fit(X, y)
    ens = from_model(model)
    asked: list[dict] = []
    inside: list[bool] = []                  # the classifier's predict asks its booster in turn: not noted
    booster_predict, own_predict = model.booster_.predict, model.predict

    def noting_booster(Z, **kw):
        if not inside:
            asked.append(kw)
        return booster_predict(Z, **kw)

    def noting(Z, **kw):
        asked.append(kw)
        inside.append(True)
        try:
            return own_predict(Z, **kw)
        finally:
            inside.pop()

    model.booster_.predict, model.predict = noting_booster, noting
    check_on_model(model, ens, X[0], make_target(ens, 1))
    assert asked and all(kw.get("num_threads") == 1 for kw in asked), asked
    expected = [bool(v == 1) for v in own_predict(X)]
    asked.clear()
    assert check_rows(model, ens, X, make_target(ens, 1)) == expected
    assert asked and all("num_threads" not in kw for kw in asked), asked


def test_models_that_set_their_own_threads_are_checked_without_the_pools_limit(recorded, monkeypatch):
    """Setting and restoring the pools costs 20-30 us a check (a query checks about once):
    LightGBM, XGBoost set to one thread and scikit-learn's trees, forests and gradient
    boosting predict the same without it, and are checked without it, with the same verdicts;
    HistGradientBoosting still gets its one thread."""
    import lightgbm as lgb
    import xgboost as xgb
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier

    from core.model import threads

    rng = np.random.default_rng(2)
    X = rng.normal(size=(400, 4))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    models = [RandomForestClassifier(20, max_depth=4, n_jobs=2, random_state=0),
              GradientBoostingClassifier(n_estimators=10, max_depth=2, random_state=0),
              lgb.LGBMClassifier(n_estimators=10, num_leaves=7, verbose=-1, random_state=0),
              xgb.XGBClassifier(n_estimators=10, max_depth=3, n_jobs=2, random_state=0)]
    limited: list[int] = []
    own = threads._controller
    monkeypatch.setattr(threads, "_controller", lambda: limited.append(1) or own())
    for model in models:
        model.fit(X, y)
        ens = from_model(model)
        target = make_target(ens, 1)
        got = [check_on_model(model, ens, X[i], target) for i in range(5)] + [check_rows(model, ens, X[:5], target)]
        want = [bool(v == 1) for v in model.predict(X[:5])]
        assert got == want + [want], type(model).__name__
        assert not limited, type(model).__name__
    hgb, ens, Xh, _ = recorded
    check_on_model(hgb, ens, Xh[0], make_target(ens, 1))
    assert limited
