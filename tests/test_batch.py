"""core.batch: parallel map in input order, early stop, and a run interrupted
while another starts (as when the app reruns a page during a long run)."""

from __future__ import annotations

import gc
import time
import warnings

import numpy as np
import pytest

from core.batch import map_rows


def _double(x):
    time.sleep(0.02)
    return 2 * x


@pytest.mark.parametrize("chunk", [1, 3])
def test_parallel_results_are_in_input_order(chunk):
    assert map_rows(_double, list(range(23)), n_jobs=2, chunk_size=chunk) == [2 * i for i in range(23)]


def test_should_stop_skips_the_rest():
    out = map_rows(_double, list(range(40)), n_jobs=2, should_stop=lambda: True)
    assert out[0] == 0 and out.count(None) > 0


class _Interrupt(Exception):
    pass


def test_an_interrupted_run_does_not_break_the_next_one():
    kept = {}

    def interrupt(done, total):
        if done >= 4:
            raise _Interrupt()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            map_rows(_double, list(range(200)), n_jobs=2, progress=interrupt)
        except _Interrupt as exc:
            kept["exc"] = exc   # its traceback keeps the interrupted run's frame alive

        def release_old(done, total):
            if done == 2:
                kept.clear()
                gc.collect()    # the old run is collected while the new one is running

        assert map_rows(_double, list(range(10)), n_jobs=2, progress=release_old) == [2 * i for i in range(10)]


def test_dask_cluster_gives_the_same_results_as_local_joblib(dask_scheduler):
    from sklearn.ensemble import RandomForestClassifier

    from core.batch import batch_counterfactuals
    from conftest import make_data

    X, y = make_data("binary", n=300, d=5, seed=4)
    model = RandomForestClassifier(n_estimators=20, max_depth=4, random_state=0).fit(X, y)
    rows = X[:12]
    targets = [1 - p for p in model.predict(rows)]
    seen = []
    local = batch_counterfactuals(model, rows, targets, n_jobs=2, X_ref=X)
    remote = batch_counterfactuals(model, rows, targets, scheduler=dask_scheduler, X_ref=X, chunk_size=5,
                                   progress=lambda d, t: seen.append((d, t)))
    assert [r.status for r in remote] == [r.status for r in local] == ["optimal"] * 12
    assert [r.cost for r in remote] == pytest.approx([r.cost for r in local], rel=1e-9)
    assert all(np.array_equal(a.x, b.x) for a, b in zip(local, remote))
    assert seen[-1] == (12, 12) and [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_dask_stop_and_a_bad_address(dask_scheduler):
    from core.batch import ClusterError

    out = map_rows(_double, list(range(30)), scheduler=dask_scheduler, should_stop=lambda: True)
    assert out.count(None) > 0
    with pytest.raises(ClusterError, match="Cannot reach the Dask scheduler"):
        map_rows(_double, [1, 2], scheduler="tcp://127.0.0.1:1")
