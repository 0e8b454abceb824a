"""A saved audit in which no row has a recourse reopens (its cost columns hold no
number at all: JSON writes them as null), and reads back equal."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier

from core.audit import run_audit
from core.audit.result import Audit
from core.intake.models import from_model
from core.schema import infer_schema


def test_an_audit_without_any_recourse_reopens_equal():
    rng = np.random.default_rng(0)
    n = 300
    X = pd.DataFrame({"age": rng.integers(18, 80, n).astype(float), "income": rng.normal(50, 20, n),
                      "sex": rng.integers(0, 2, n).astype(float)})
    y = ((X.age > 40) & (X.income > 55)).astype(int)
    ens = from_model(RandomForestClassifier(20, max_depth=4, random_state=0).fit(X, y))
    a = run_audit(ens, X, schema=infer_schema(X, protected=["sex"]), target=1, max_rows=20, n_jobs=1,
                  constraints=["delta(age) <= 0", "delta(income) <= 0"], tcrex=False, local_rules_per_group=0,
                  n_perm=50, n_boot=50)
    assert set(a.rows["status"]) == {"infeasible"} and a.groups["cost_q25"].isna().all()
    again = Audit.from_dict(json.loads(a.to_json()))
    assert again.rows["cost"].dtype == np.float64 and again.groups["cost_q90"].dtype == np.float64
    pd.testing.assert_frame_equal(again.groups, a.groups, check_dtype=False)
    assert list(again.rows["status"]) == list(a.rows["status"])
