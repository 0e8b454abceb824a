"""Every export in the analyst's columns, numbers as numbers (#38 item 3).

Each export is parsed back (``json.loads``, ``pandas.read_csv``) and checked value by
value against the analyst's raw table and the original model:

* an optimal counterfactual of a row with missing values (HistGradientBoosting, XGBoost):
  the query and the counterfactual as ``{column: value}``, ``null`` where a value is
  missing (also one that stays missing), the fill of a missing value one change
  ``from: null``, no "is missing" feature anywhere; the counterfactual written back
  into the row gives the target on the original model;
* the per-row CSV and JSON of an audit and of a model comparison: beside each change
  text, the counterfactual's value of every column at full precision, which, read
  back from the file, gives the target on the original model; whole numbers as
  ``42``, never ``42.0``;
* a one-hot pipeline's counterfactual rule and T-CREx rules: conditions on the raw
  columns, a category column as its set of categories, exact bounds, nested objects
  (never JSON inside a string); each condition agrees with the box on every row;
* the metarule text names the target as the analyst does (never ``np.int64(1)``); a gap
  that cannot be computed reads "—", never "inf%".
"""

from __future__ import annotations

import io
import json
import math
from functools import partial

import numpy as np
import pandas as pd
import pytest
from conftest import missing_values_workspace, one_hot_pipeline_workspace
from sklearn.ensemble import HistGradientBoostingClassifier

from core.audit import run_audit
from core.audit.compare import compare_models
from core.counterfactual import CounterfactualResult
from core.intake.columns import (
    apply_values,
    box_record,
    change_records,
    result_record,
    row_record,
    value_of,
)
from core.intake.csvsafe import to_csv
from core.intake.workspace import build_workspace
from core.optimal import optimal_counterfactual
from core.rules import CounterfactualRules
from core.shown import NOT_KNOWN, csv_cell, percent_text
from core.tcrex import TCREx

N = 900


def _missing_ws(family: str):
    return missing_values_workspace(family, N)


@pytest.fixture(autouse=True)
def _one_thread():  # noqa: PT004
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="openmp"):
        yield


def _raw_equal(raw, value) -> bool:
    """A raw table's cell and an exported value are the same: both missing, or equal."""
    gone = raw is None or (isinstance(raw, float) and math.isnan(raw))
    return (value is None) if gone else (value is not None and value == raw)


def _predict_record(ws, model, x_codes: np.ndarray, record: dict) -> object:
    """The original model's output on the row ``x_codes`` with the exported values written in."""
    return model.predict(ws.to_raw(apply_values(ws.columns, x_codes, record)[None, :]))[0]


@pytest.mark.parametrize("family", ["hgb", "xgb"])
def test_an_optimal_counterfactual_with_missing_values_exports_as_the_table(family):
    ws, model = _missing_ws(family)
    X, raw = ws.X.to_numpy(float), ws.raw
    gaps = raw.drop(columns="y").isna()
    kinds = {"fill": 0, "kept": 0}
    for r in np.flatnonzero((ws.predictions == 0) & gaps.any(axis=1).to_numpy())[:25]:
        res = optimal_counterfactual(ws.ensemble, X[r], 1, schema=ws.schema, fixed=["sex"], X_ref=X, model=model)
        assert res.found
        text = json.dumps(result_record(ws.columns, res), allow_nan=False)
        d = json.loads(text)
        assert "is missing" not in text and d["status"] == "optimal" and d["proven_optimal"]
        assert set(d["x_query"]) == set(d["x"]) == {"age", "income", "hours", "sex"}
        for col in d["x_query"]:                                  # the query is the analyst's row, value by value
            assert _raw_equal(raw.at[r, col], d["x_query"][col]), (r, col)
        assert _predict_record(ws, model, X[r], d["x"]) == 1     # the counterfactual, as exported, gets the target
        changed = {c["column"] for c in d["changes"]}
        for col, v in d["x"].items():
            if col not in changed:
                assert _raw_equal(raw.at[r, col], v), (r, col)    # a value that stays missing stays null
                kinds["kept"] += v is None
        for c in d["changes"]:
            assert c["from"] == d["x_query"][c["column"]] and c["to"] == d["x"][c["column"]]
            if c["from"] is None:
                kinds["fill"] += 1
                assert c["text"].startswith(f"{c['column']}: missing → ")
            if c["column"] in ("age", "hours") and c["to"] is not None:
                assert isinstance(c["to"], int)                   # whole-number columns as integers
        kernel = json.loads(json.dumps(res.to_dict(), allow_nan=False))   # the library's own form too
        assert all(not c["feature"].endswith(" is missing") for c in kernel["changes"])
        assert [c["from"] for c in kernel["changes"] if c["feature"] in changed] == \
            [None if c["from"] is None else float(c["from"]) for c in d["changes"]]
    assert kinds["fill"] >= 1 and kinds["kept"] >= 1, kinds


def test_a_gap_that_cannot_be_computed_reads_as_such():
    assert percent_text(float("inf")) == NOT_KNOWN and percent_text(None) == NOT_KNOWN
    assert percent_text(0.1234, 2) == "12.34%"
    empty = CounterfactualResult(x=None, cost=np.inf, status="time_limit", gap=np.inf, solve_time=1.0, changes=(),
                                 backend="cpsat", params={"fixed": ("a",), "time_limit": np.inf})
    d = json.loads(json.dumps(empty.to_dict(), allow_nan=False))
    assert d["gap"] is None and d["cost"] is None and d["params"] == {"fixed": ["a"], "time_limit": None}
    assert [csv_cell(v) for v in (42.0, 0.1, np.nan, 8256.5, -3.0, 7)] == ["42", "0.1", "", "8256.5", "-3", 7]


def _check_per_row(ws, model, frame: pd.DataFrame, prefix: str, changes: str, found: str) -> int:
    """Each row of a per-row export read back: its counterfactual rebuilt from the
    ``{prefix}<column>`` values gives the target on the original model; its unchanged
    columns hold the row's own raw values; the change text names exactly the changed columns."""
    X, raw, checked = ws.X.to_numpy(float), ws.raw, 0
    names = [c.name for c in ws.columns]
    for _, rec in frame.iterrows():
        if rec[found] != 1:
            continue
        r = int(rec["row"])
        values = {n: (None if pd.isna(rec[f"{prefix}{n}"]) else rec[f"{prefix}{n}"]) for n in names}
        assert _predict_record(ws, model, X[r], values) == 1
        said = {part.split(":")[0] for part in str(rec[changes]).split("; ") if part}
        for n in names:
            same = _raw_equal(raw.at[r, n], values[n])
            assert same == (n not in said), (r, n, raw.at[r, n], values[n], rec[changes])
        checked += 1
    return checked


def test_the_audit_and_comparison_rows_carry_the_values_beside_the_changes():
    ws, model = _missing_ws("hgb")
    audit = run_audit(ws.ensemble, ws.X, schema=ws.schema, target=1, model=model, max_rows=25, n_jobs=1,
                      tcrex=False, local_rules_per_group=0, scan=False, n_boot=50, n_perm=50)
    text = audit.rows_csv()
    assert "is missing" not in text                              # no internal "is missing" feature
    back = pd.read_csv(io.StringIO(text))
    assert _check_per_row(ws, model, back, "cf:", "changes", "feasible") >= 20
    ages = back["cf:age"].dropna()
    assert len(ages) and not any(",%s.0," % int(v) in text for v in ages)   # whole numbers as 42, not 42.0
    d = json.loads(audit.to_json())
    rows = pd.DataFrame(d["rows"]["data"], columns=d["rows"]["columns"])
    assert _check_per_row(ws, model, rows, "cf:", "changes", "feasible") >= 20
    at = d["rows"]["columns"].index("cf:age")
    assert all(isinstance(rec[at], int) for rec in d["rows"]["data"] if rec[at] is not None)
    for t, f, n in zip(rows["changes"], rows["feasible"], rows["n_changed"]):
        if f == 1:
            assert n == len(t.split("; "))                        # a fill and its value: one change

    other = HistGradientBoostingClassifier(max_iter=15, max_depth=2, random_state=1).fit(
        ws.raw.drop(columns="y"), ws.raw["y"])
    wb = build_workspace(ws.raw, "y", other, name="b", protected=["sex"])
    cmp = compare_models(ws.ensemble, wb.ensemble, ws.X, schema=ws.schema, target=1, max_rows=15, n_jobs=1,
                         model_a=model, model_b=other, n_boot=50, n_perm=50)
    back = pd.read_csv(io.StringIO(cmp.rows_csv()))
    assert _check_per_row(ws, model, back, "cf_a:", "changes_a", "found_a") >= 10
    assert _check_per_row(ws, model, back, "cf_both:", "changes_both", "found_both") >= 10
    js = json.loads(cmp.to_json())
    assert all(isinstance(v, int) for rec in js["rows"] for k, v in rec.items() if k == "cf_a:age" and v is not None)
    assert not [k for rec in js["rows"] for k in rec if k.endswith(" is missing")]


@pytest.fixture(scope="module")
def pipeline():
    return one_hot_pipeline_workspace()[0]


def _holds(cond: dict, value) -> bool:
    """Does an analyst's value meet one exported condition?"""
    if "in" in cond:
        return value in cond["in"]
    if cond.get("missing") is True:
        return value is None
    if value is None:
        return False
    ok = True
    if "greater_than" in cond:
        ok &= value > cond["greater_than"]
    if "at_least" in cond:
        ok &= value >= cond["at_least"]
    if "at_most" in cond:
        ok &= value <= cond["at_most"]
    return ok


def _same_box(ws, conds: list[dict], lower, upper, features=None) -> None:
    """The exported conditions hold on exactly the rows the box holds on (its bounded features)."""
    X = ws.X.to_numpy(float)
    feats = list(range(X.shape[1])) if features is None else list(features)
    inside = np.all((X[:, feats] > np.asarray(lower)[feats]) & (X[:, feats] <= np.asarray(upper)[feats]), axis=1)
    for x, want in zip(X[:400], inside[:400]):
        got = all(_holds(c, value_of(next(col for col in ws.columns if col.name == c["column"]), x)) for c in conds)
        assert got == want


def test_a_pipelines_rules_export_as_raw_columns_and_category_sets(pipeline):
    ws = pipeline
    X, names, groups = ws.X.to_numpy(float), list(ws.ensemble.feature_names), list(ws.schema.groups().values())
    pred = ws.predictions
    cr = CounterfactualRules(groups=groups, random_state=0).fit(X, pred, feature_names=names)
    cats = {c.name: set(c.categories) for c in ws.columns if c.categories}
    seen_sets = 0
    for r in np.flatnonzero(pred == 0)[:6]:
        rule = cr.local_rule(X[r], 1)
        d = json.loads(json.dumps(rule.to_dict(names, partial(box_record, ws.columns)), allow_nan=False))
        text = json.dumps(d)
        assert "=" not in "".join(c["column"] for c in d["conditions"])      # raw columns, not job=clerk
        assert all(isinstance(a, dict) and isinstance(a["conditions"], list) for a in d["alternatives"])
        for c in d["conditions"]:
            assert c["column"] in {col.name for col in ws.columns}
            if "in" in c:
                seen_sets += 1
                assert set(c["in"]) - {None} <= cats[c["column"]]
        assert "0.5000000" not in text
        _same_box(ws, d["conditions"], rule.lower, rule.upper, rule.features)
        for alt, box in zip(d["alternatives"], rule.alternatives):
            _same_box(ws, alt["conditions"], box.lower, box.upper, rule.features)
    assert seen_sets >= 1

    tc = TCREx(rho=0.02, tau=0.9, groups=groups, random_state=0).fit(X, pred, np.int64(1), feature_names=names)
    assert "np.int64" not in tc.to_text() and tc.to_text().startswith("T-CREx rules for target 1 ")
    assert tc.to_text("approved (1)").startswith("T-CREx rules for target approved (1) ")
    d = json.loads(json.dumps(tc.to_dict(partial(box_record, ws.columns), "approved (1)"), allow_nan=False))
    assert d["params"]["target"] == 1 and d["params"]["outcome"] == "approved (1)"
    for rec, rule in zip(d["rules"], tc.rules_):
        assert "lower" not in rec and all("=" not in c["column"] for c in rec["conditions"])
        _same_box(ws, rec["conditions"], rule.lower, rule.upper)
    for rec, m in zip(d["metarules"], tc.metarules_):
        _same_box(ws, rec["conditions"], m.lower, m.upper)


def test_a_rule_on_a_missing_state_reads_as_the_column():
    ws, _ = _missing_ws("hgb")
    cols = {c.name: c for c in ws.columns}
    inc = cols["income"]
    d = ws.ensemble.n_features
    lower, upper = np.full(d, -np.inf), np.full(d, np.inf)
    lower[inc.missing] = 0.5                                      # income is missing
    assert box_record(ws.columns, lower, upper) == [{"column": "income", "missing": True}]
    lower[inc.missing], upper[inc.missing] = -np.inf, 0.5         # income has a value, above 20,000.5
    lower[inc.features[0]] = 20000.5
    age = cols["age"]
    upper[age.features[0]] = 40.5                                 # whole years: at most 40
    assert box_record(ws.columns, lower, upper) == [
        {"column": "age", "at_most": 40}, {"column": "income", "missing": False, "greater_than": 20000.5}]


def test_demo_rows_and_changes_read_in_whole_numbers():
    from core.intake.demo import build_demo

    df, target, model, _ = build_demo("credit-lightgbm")
    ws = build_workspace(df, target, model, name="demo")
    X = ws.X.to_numpy(float)
    rec = row_record(ws.columns, X[0])
    for col in ("age", "credit_history_years", "late_payments", "owns_home", "sex"):
        assert isinstance(rec[col], int) and rec[col] == df.at[0, col]
    assert rec["employment"] == next(c.split("=", 1)[1] for c in df.columns
                                     if c.startswith("employment=") and df.at[0, c] == 1)
    view = ws.analyst_view(X[:5], list(range(5)))
    assert "30.0" not in to_csv(view) and view["age"].tolist() == df["age"].head(5).tolist()
    res = optimal_counterfactual(ws.ensemble, X[3], 1, schema=ws.schema, X_ref=X, model=model)
    recs = change_records(ws.columns, X[3], res.x)
    assert recs and all(not r["text"].split("→")[-1].strip().endswith(".0") for r in recs)
    assert _predict_record(ws, model, X[3], result_record(ws.columns, res)["x"]) == 1
