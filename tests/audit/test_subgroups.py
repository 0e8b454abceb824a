"""Subgroup scan (core.audit.subgroups): a planted costly subgroup is found first; shuffled
recourse does not raise alarms once the scan's multiplicity is accounted for."""

from __future__ import annotations

import numpy as np
import pandas as pd

from core.audit.subgroups import scan_subgroups


def _data(seed, planted=True, n=400):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"sex": rng.integers(0, 2, n).astype(float), "age": rng.integers(18, 80, n).astype(float),
                          "job=a": 0.0, "job=b": 0.0})
    job = rng.integers(0, 2, n)
    frame.loc[job == 0, "job=a"], frame.loc[job == 1, "job=b"] = 1.0, 1.0
    cost = rng.gamma(2.0, 0.1, n)
    feasible = rng.random(n) < 0.9
    if planted:                                   # young women in job b: twice the cost
        bad = (frame["sex"] == 1) & (frame["age"] < 35) & (job == 1)
        cost[bad.to_numpy()] *= 3
    rows = pd.DataFrame({"feasible": feasible.astype(float), "cost": np.where(feasible, cost, np.nan)})
    return rows, frame, {"job": ["job=a", "job=b"]}


def test_planted_subgroup_is_found_first():
    rows, frame, groups = _data(0)
    t = scan_subgroups(rows, frame, groups=groups, min_size=15, n_perm=500, n_boot=100).table
    top = t.iloc[0]
    assert top["significant"] and top["worse"] and top["metric"] in ("cost", "burden")
    # the planted group is three conditions; the scan goes to pairs: the first two found are its
    # pairs with the age band, the costliest first, then the age band alone
    assert list(t["subgroup"].iloc[:3]) == ["job = b and age in [18, 34]", "sex = 1 and age in [18, 34]",
                                            "age in [18, 34]"], t.head(3)
    assert (t["metric"].iloc[:3] == "cost").all() and t["significant"].iloc[:3].all()
    assert top["gap_lo"] <= top["gap"] <= top["gap_hi"]
    assert {"feasible", "cost", "burden", "effective"} <= set(t["metric"]) and len(t) == 20    # top=20


def test_shuffled_recourse_does_not_cry_wolf():
    alarms = 0
    for seed in range(8):
        rows, frame, groups = _data(seed, planted=False)
        t = scan_subgroups(rows, frame, groups=groups, min_size=15, n_perm=400, n_boot=50, random_state=seed).table
        alarms += bool(t["significant"].any())
    assert alarms <= 1
