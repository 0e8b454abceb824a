"""Benchmark: a counterfactual checked on the uploaded model, one row at a time.

Prints JSON. Each answer of the optimal counterfactual is checked on the model the
user uploaded (``core.cells.result.check_on_model``); the libraries predict that one
row in their thread pools (OpenMP for HistGradientBoosting and LightGBM). Models:
a HistGradientBoostingClassifier (100 iterations) and a LightGBM classifier (100
trees) on a synthetic table of 8 numbers; 200 rows each.

* ``one_thread``: the check as the library runs it, the pools limited to one thread
  for a small batch (:func:`core.model.threads.small_batch`);
* ``pools``: the same check with that limit switched off (``SMALL_BATCH = 0``): the
  reference, in the same process.

Each figure is CPU seconds per row (``time.process_time``: every thread of the
process), the two cases interleaved over :data:`ROUNDS` rounds; the ratio is the
median over the rounds of pools / one_thread. The machines are shared: the load
moves the pools' cost most (their threads spin while they wait for a core).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import core.model.threads as threads  # noqa: E402
from core.cells.result import check_on_model  # noqa: E402
from core.counterfactual import make_target  # noqa: E402
from core.intake.models import from_model  # noqa: E402

ROUNDS = 5
ROWS = 200


def _models(X: np.ndarray, y: np.ndarray) -> dict:
    import lightgbm as lgb
    from sklearn.ensemble import HistGradientBoostingClassifier

    return {"hgb_100": HistGradientBoostingClassifier(max_iter=100, random_state=0).fit(X, y),
            "lightgbm_100": lgb.LGBMClassifier(n_estimators=100, verbose=-1, random_state=0).fit(X, y)}


def _per_row(model, ens, X: np.ndarray, small: int) -> float:
    threads.SMALL_BATCH = small
    target = make_target(ens, 1)
    t = time.process_time()
    for x in X:
        check_on_model(model, ens, x, target)
    return (time.process_time() - t) / len(X)


def main() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(4000, 8))
    y = (X[:, 0] + X[:, 1] ** 2 - X[:, 2] * X[:, 3] > 0.5).astype(int)
    rows = X[:ROWS]
    out = {}
    for name, model in _models(X, y).items():
        ens = from_model(model)
        _per_row(model, ens, rows[:20], 256)                 # warm both paths
        _per_row(model, ens, rows[:20], 0)
        one, pools = [], []
        for _ in range(ROUNDS):
            one.append(_per_row(model, ens, rows, 256))
            pools.append(_per_row(model, ens, rows, 0))
        out[name] = {"one_thread_cpu_s_per_row": statistics.median(one),
                     "pools_cpu_s_per_row": statistics.median(pools),
                     "ratio_pools_over_one_thread": statistics.median(p / o for p, o in zip(pools, one)),
                     "rounds": ROUNDS, "rows": ROWS}
    threads.SMALL_BATCH = 256
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
