"""Group fairness (core.audit.groupfair): fairlearn's own metrics and disparities, with
intervals that contain the point estimates, for attributes and intersections."""

from __future__ import annotations

import numpy as np
import pytest

from core.audit.groupfair import group_fairness


@pytest.fixture(scope="module")
def decisions():
    rng = np.random.default_rng(0)
    n = 3000
    sex = rng.choice(["f", "m"], n)
    race = rng.choice(["a", "b", "c"], n, p=[.6, .3, .1])
    y = (rng.random(n) < np.where(sex == "m", 0.6, 0.4)).astype(int)
    pred = np.where(rng.random(n) < 0.8, y, 1 - y)
    pred[(race == "c") & (rng.random(n) < 0.3)] = 0          # a biased group
    return {"sex": sex, "race": race}, y, pred


def test_matches_fairlearn_and_intervals_contain_the_estimates(decisions):
    from fairlearn.metrics import (
        demographic_parity_difference,
        demographic_parity_ratio,
        equalized_odds_difference,
        equalized_odds_ratio,
        selection_rate,
        true_positive_rate,
    )

    labels, y, pred = decisions
    gf = group_fairness(labels, pred, favourable=1, y_true=y, n_boot=200)
    d = gf.disparities.set_index(["attribute", "measure"])["value"]
    for attr in ("sex", "race"):
        s = labels[attr]
        assert d[(attr, "demographic parity difference")] == pytest.approx(
            demographic_parity_difference(y, pred, sensitive_features=s))
        assert d[(attr, "demographic parity ratio")] == pytest.approx(demographic_parity_ratio(y, pred,
                                                                                           sensitive_features=s))
        assert d[(attr, "equalised odds difference")] == pytest.approx(equalized_odds_difference(
            y, pred, sensitive_features=s))
        assert d[(attr, "equalised odds ratio")] == pytest.approx(equalized_odds_ratio(y, pred, sensitive_features=s))
    g = gf.by_group.set_index(["attribute", "group"])
    m = labels["sex"] == "m"
    assert g.loc[("sex", "m"), "selection rate"] == pytest.approx(selection_rate(y[m], pred[m]))
    assert g.loc[("sex", "m"), "TPR"] == pytest.approx(true_positive_rate(y[m], pred[m]))
    assert g.loc[("sex", "m"), "n"] == m.sum()
    inter = gf.by_group[gf.by_group["attribute"] == "sex × race"]
    assert len(inter) == 6 and inter["n"].sum() == len(y)
    assert "sex × race" in set(gf.disparities["attribute"])
    for metric in ("selection rate", "TPR", "FPR", "accuracy"):
        ok = (gf.by_group[f"{metric}_lo"] <= gf.by_group[metric] + 1e-12) & \
             (gf.by_group[metric] <= gf.by_group[f"{metric}_hi"] + 1e-12)
        assert ok.all(), metric
    assert ((gf.disparities["lo"] <= gf.disparities["value"] + 1e-12)
            & (gf.disparities["value"] <= gf.disparities["hi"] + 1e-12)).all()
    race_dp = d[("race", "demographic parity difference")]
    assert race_dp > d[("sex", "demographic parity difference")] * 0 and race_dp > 0.05


def test_without_labels_tiny_groups_and_regression():
    rng = np.random.default_rng(1)
    labels = {"sex": np.array(["f"] * 50 + ["m"] * 49 + ["x"])}
    pred = rng.integers(0, 2, 100)
    gf = group_fairness(labels, pred, favourable=1, n_boot=50, min_group=2)
    assert set(gf.disparities["measure"]) == {"demographic parity difference", "demographic parity ratio"}
    assert gf.disparities["groups"].iloc[0] == 2 and any("no labels" in n for n in gf.notes)
    assert gf.by_group.set_index("group").loc["x", "n"] == 1
    reg = group_fairness(labels, rng.normal(size=100), y_true=rng.normal(size=100), target_interval=(0.5, 9.0),
                         n_boot=50)
    assert {"mean prediction", "in target", "MAE"} <= set(reg.by_group.columns)
    assert reg.disparities["measure"].iloc[0] == "in-target rate difference"


def test_the_bootstrap_is_drawn_in_blocks_with_the_same_draws(monkeypatch):
    """The replicates' row indices come a block at a time: the intervals are those of one
    draw of them all, and the memory does not grow with replicates times rows."""
    import tracemalloc

    import core.audit.groupfair as gfm

    rng = np.random.default_rng(2)
    n, n_boot = 2000, 120
    sex = rng.choice(["f", "m", "x"], n, p=[.5, .45, .05])
    pred = rng.integers(0, 2, n)
    whole = np.random.default_rng(7).integers(0, n, size=(n_boot, n))        # every replicate at once
    rate = np.stack([[pred[i][sex[i] == g].mean() for g in ("f", "m", "x")] for i in whole])
    monkeypatch.setattr(gfm, "BLOCK", 3 * n + 1)                             # 3 replicates a block
    gf = group_fairness({"sex": sex}, pred, favourable=1, n_boot=n_boot, random_state=7)
    g = gf.by_group.set_index("group")
    lo, hi = np.quantile(rate, 0.025, axis=0), np.quantile(rate, 0.975, axis=0)
    assert np.allclose(g.loc[["f", "m", "x"], "selection rate_lo"], lo, rtol=0, atol=1e-12)
    assert np.allclose(g.loc[["f", "m", "x"], "selection rate_hi"], hi, rtol=0, atol=1e-12)
    monkeypatch.undo()

    n, n_boot = 40_000, 300                 # at once: 300 x 40,000 indices, 96 MB, and their masks
    sex, pred, y = rng.choice(["f", "m"], n), rng.integers(0, 2, n), rng.integers(0, 2, n)
    tracemalloc.start()
    try:
        gf = group_fairness({"sex": sex}, pred, favourable=1, y_true=y, n_boot=n_boot)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40e6, peak
    assert gf.by_group["n"].sum() == n and {"TPR", "FPR"} <= set(gf.by_group.columns)
