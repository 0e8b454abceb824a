"""Benchmark: the rows that reach every leaf the probe rows miss (issue 62, item 2).

Prints JSON. Random forests grown in full on Adult (``../shared/data/adult.csv``; scikit-learn's
default depth: thousands of leaves per tree, most of them missed by the random and threshold
rows), and one of depth 8. For each, in CPU seconds of this process (``time.process_time``,
the fewest of a few runs; the machines are shared):

* ``leaves``, ``missed``: the ensemble's leaves, and those the probe rows miss;
  ``fewest_rows``: the most missed leaves of one tree (no fewer rows reach them all);
* ``rows``, ``left``: the rows :func:`core.model.cover.covering_rows` makes and the leaves it
  leaves missed (its bound: ``core.model.cover.MAX_STEPS`` rows times trees);
* ``cover_cpu_s``: making those rows;
* ``library_cpu_s``: scikit-learn's ``predict_proba`` on the probe rows and those rows, which
  the verification runs anyway (the reference), and ``ratio_to_library``.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

warnings.filterwarnings("ignore")
DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult.csv"


def _fewest(fn, runs=3):
    out, got = [], None
    for _ in range(runs):
        t0 = time.process_time()
        got = fn()
        out.append(time.process_time() - t0)
    return min(out), got


def main() -> None:
    import pandas as pd
    from sklearn.ensemble import RandomForestClassifier

    from core.intake.models import from_model
    from core.intake.parsing import probe_points
    from core.model.cover import covering_rows, reached_leaves

    df = pd.read_csv(DATA, skiprows=[1])
    X, y = df.drop(columns=["Class"]).to_numpy(float), df["Class"].to_numpy()
    out: dict = {"data": "adult", "rows": len(X), "time": "CPU seconds (process_time), fewest of 3 runs"}
    for trees, depth in ((20, None), (100, None), (500, 8)):
        rf = RandomForestClassifier(trees, max_depth=depth, random_state=0, n_jobs=1).fit(X, y)
        ens = from_model(rf, verify=False)
        P = probe_points(ens)
        _, seen = reached_leaves(ens, P)
        leaf = ens._flat["packed"]["feature"] == -1
        missed = np.flatnonzero(leaf & (seen == 0))
        per_tree = np.bincount(np.searchsorted(ens._flat["packed_roots"], missed, side="right") - 1)
        cover_s, (rows, done) = _fewest(lambda: covering_rows(ens, seen, P[:64], 3.4e38))
        both = np.vstack([P, rows])
        library_s, _ = _fewest(lambda: rf.predict_proba(both))
        out[f"random_forest_{trees}_depth_{depth or 'full'}"] = {
            "leaves": int(leaf.sum()), "missed": int(missed.size), "fewest_rows": int(per_tree.max(initial=0)),
            "rows": done.rows, "covered": done.covered, "left": done.left, "dead": done.dead,
            "cover_cpu_s": round(cover_s, 3), "library_cpu_s": round(library_s, 3),
            "ratio_to_library": round(cover_s / library_s, 2)}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
