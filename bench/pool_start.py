"""Benchmark: how long a run waits for a new pool of 2 workers (core.optimal.batch).

Each session of the app starts its own pool on its first parallel run (an
audit, FCCA, a batch of counterfactuals). Timed here: from the run's call to
its results, for a run of the optimal counterfactuals of 4 rows of a small random
forest (10 trees, depth 3, 5 features) on a new pool (a new owner each time),

* started as new interpreters (loky's context, ``ATLAS_POOL_FORK=0``): the
  reference, measured in the same run;
* forked from the fork server: the first pool (which starts the fork server)
  and the next ones (the server running, as for every later session).

Each median of ``--repeat`` pools; the CPU-seconds of the reference's
workers too. Prints JSON with the ratio reference / forked.

    python bench/pool_start.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.optimal import batch  # noqa: E402
from core.optimal.batch import POOL_OWNER, batch_counterfactuals, release_pools  # noqa: E402


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _case():
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier

    X, y = make_classification(n_samples=300, n_features=5, random_state=0)
    model = RandomForestClassifier(n_estimators=10, max_depth=3, random_state=0).fit(X, y)
    rows = X[:4]
    return model, rows, 1 - model.predict(rows)


def new_pool_seconds(owner: str, case) -> tuple[float, list[float]]:
    """Seconds from the call to the results of 4 rows on a new pool of 2 workers, and their costs."""
    model, rows, targets = case
    token = POOL_OWNER.set(owner)
    try:
        t0 = time.perf_counter()
        out = batch_counterfactuals(model, rows, targets, n_jobs=2)
        took = time.perf_counter() - t0
    finally:
        POOL_OWNER.reset(token)
    release_pools(owner)
    return took, [round(float(r.cost), 9) for r in out]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    case = _case()
    os.environ["ATLAS_POOL_FORK"] = "0"
    cpu0 = _children_cpu()
    spawned = [new_pool_seconds(f"spawned-{k}", case) for k in range(args.repeat)]
    spawned_cpu = (_children_cpu() - cpu0) / args.repeat
    os.environ["ATLAS_POOL_FORK"] = "1"
    first = new_pool_seconds("forked-first", case)
    forked = [new_pool_seconds(f"forked-{k}", case) for k in range(args.repeat)]
    costs = {tuple(c) for _, c in spawned + [first] + forked}
    assert len(costs) == 1, f"the costs differ between pools: {costs}"
    ref, new = statistics.median(t for t, _ in spawned), statistics.median(t for t, _ in forked)
    print(json.dumps({
        "bench": "pool_start", "workers": 2, "repeat": args.repeat, "preload": batch.PRELOAD,
        "new_interpreters_s": round(ref, 3), "new_interpreters_cpu_s": round(spawned_cpu, 2),
        "forked_first_pool_s": round(first[0], 3), "forked_next_pools_s": round(new, 4), "costs_equal": True,
        "ratio_new_interpreters_over_forked": round(ref / new, 1),
    }, indent=2))


if __name__ == "__main__":
    main()
