"""The audit under constraints between features (issue #61 item 4): every recourse it counts
keeps the constraints and is valid on the model, and per group it counts the rows proven
*precluded* (no action under the constraints gives the target), with a test of the gap."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import demo_credit

from core.audit import run_audit
from core.optimal import verify_recourse

TEXTS = ["delta(income) <= 3", "delta(credit_history_years) == 0"]


@pytest.fixture(scope="module")
def audited():
    df, target, model, ens, X, schema = demo_credit()
    schema = schema.with_constraints(TEXTS)
    a = run_audit(ens, X, schema=schema, target=1, max_rows=40, n_jobs=1, model=model, n_perm=200, n_boot=50,
                  local_rules_per_group=1, tcrex=False, scan=False)
    return a, ens, X.to_numpy(float), schema, model


def test_every_recourse_keeps_the_constraints_and_every_precluded_row_is_proven(audited):
    a, ens, Xn, schema, model = audited
    cons = schema.parsed_constraints()
    assert a.meta["schema"]["constraints"] == TEXTS               # the audit records the constraints it kept
    found = a.rows["feasible"] == 1
    assert found.any() and (a.rows["precluded"] == 1).any()         # both kinds of row on this demo
    for k in np.flatnonzero(found.to_numpy()):
        i, cf = int(a.rows["row"].iloc[k]), a.counterfactuals[k]
        assert cons.violated(Xn[i], cf) == [] and ens.predict(cf[None, :])[0] == 1
    for k in np.flatnonzero((a.rows["precluded"] == 1).to_numpy()):
        i = int(a.rows["row"].iloc[k])
        check = verify_recourse(ens, Xn[i], 1, schema=schema, explain=False)
        assert check.precluded, i                                      # the audit's count is a proof


def test_precluded_rows_per_group_with_a_test_of_the_gap(audited):
    a = audited[0]
    p = a.precluded
    assert list(p.columns) == ["attribute", "group", "rows", "precluded", "share"]
    labels = a.rows["group:sex"].astype(str)
    for _, r in p.iterrows():
        here = labels == r["group"]
        assert r["rows"] == int(here.sum()) and r["precluded"] == int(a.rows.loc[here, "precluded"].sum())
    assert p["precluded"].sum() == int(a.rows["precluded"].sum())
    test = a.tests[a.tests["metric"] == "precluded"]
    assert len(test) == 1 and 0.0 <= float(test["p_value"].iloc[0]) <= 1.0
    assert "precluded" in a.groups.columns
