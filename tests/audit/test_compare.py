"""Model versions (#25): a planted invalidation is found for the one group it hits,
identical models invalidate nothing, and the comparison's figures are those of the models."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier

from core.audit.compare import compare_models, decision_agreement, groups_shown
from core.errors import AuditError, QueryError
from core.schema import infer_schema


@pytest.fixture(scope="module")
def planted():
    rng = np.random.default_rng(0)
    n = 3000
    X = pd.DataFrame({"income": rng.uniform(0, 100, n), "age": rng.uniform(18, 70, n),
                      "sex": rng.integers(0, 2, n).astype(float)})
    y_a = (X.income > 50).astype(int)
    y_b = (X.income > np.where(X.sex == 1, 60, 50)).astype(int)     # the retrain moves one threshold, women only
    # deterministic trees (no bootstrap, every feature): both versions split income at the same data midpoints,
    # so only the moved threshold differs
    a = RandomForestClassifier(5, max_depth=4, bootstrap=False, max_features=None, random_state=0).fit(X, y_a)
    b = RandomForestClassifier(5, max_depth=4, bootstrap=False, max_features=None, random_state=0).fit(X, y_b)
    schema = infer_schema(X, protected=["sex"])
    return X, a, b, schema


def test_a_planted_invalidation_is_found_for_its_group(planted):
    X, a, b, schema = planted
    c = compare_models(a, b, X, schema=schema, target=1, max_rows=120, time_limit=10, model_a=a, model_b=b,
                       n_boot=300, n_perm=1000)
    g = c.groups.set_index("group")
    assert g.loc["1", "invalidated"] == 1.0 and g.loc["0", "invalidated"] == 0.0
    t = c.tests.iloc[0]
    assert t["significant"] and t["p_adjusted"] < 0.01
    assert c.meta["parameters"]["held_fixed"] == ["sex"]
    found = c.rows["found_a"].to_numpy() == 1
    assert np.all(c.points_a[found, 2] == X.to_numpy()[c.rows["row"].to_numpy()[found], 2])   # sex kept
    # invalidated means exactly: model B, as loaded, does not approve the recourse given under A
    np.testing.assert_array_equal(c.rows["invalidated"].to_numpy()[found],
                                  (b.predict(pd.DataFrame(c.points_a[found], columns=X.columns)) != 1).astype(int))
    assert np.all(a.predict(pd.DataFrame(c.points_both[found], columns=X.columns)) == 1)
    assert np.all(b.predict(pd.DataFrame(c.points_both[found], columns=X.columns)) == 1)
    assert np.all(c.rows["extra_cost"].to_numpy()[found] >= -1e-9)
    assert any("income" in r for r in c.rules)                      # where the decisions flip
    html = c.to_html()
    assert html.startswith("<!DOCTYPE html>") and "<script>" not in html and c.meta["model_b"]["content_sha256"] in html


def test_identical_models_invalidate_nothing(planted):
    X, a, _, schema = planted
    c = compare_models(a, a, X, schema=schema, target=1, max_rows=40, n_boot=100, n_perm=200)
    assert c.invalidated == 0.0 and (c.rows["extra_cost"].dropna() == 0).all()
    assert c.agreement.iloc[0]["agree"] == 1.0 and len(c.flips) == 0


def test_a_small_group_reads_its_share_with_wilsons_interval(planted):
    """A group of one row with a recourse: its share has Wilson's interval (the bootstrap's was
    none, and the page wrote "nan%"; of 2 rows out of 2 it was [100%, 100%]). The page and the
    report show the same table."""
    X, a, b, schema = planted
    one = X.index[(X.sex == 1) & (X.income < 40)][:1]
    rows = pd.concat([X[X.sex == 0].iloc[:200], X.loc[one]])
    c = compare_models(a, b, rows, schema=schema, target=1, max_rows=None, model_a=a, model_b=b, n_boot=100,
                       n_perm=100)
    g = c.groups.set_index("group")
    assert g.loc["1", "with recourse"] == 1 and g.loc["1", "invalidated"] == 1.0
    assert (g.loc["1", "ci_low"], g.loc["1", "ci_high"]) == pytest.approx((0.2065, 1.0), abs=1e-4)   # Wilson, 1 of 1
    n0 = int(g.loc["0", "with recourse"])
    assert g.loc["0", "ci_low"] == 0.0 and 0 < g.loc["0", "ci_high"] < 1                              # 0 of n0
    shown = groups_shown(c.groups).set_index("group")
    assert shown.loc["1", "invalidated [95% CI]"] == "100.0% [20.7%, 100.0%]"
    assert shown.loc["0", "invalidated [95% CI]"] == f"0.0% [0.0%, {g.loc['0', 'ci_high']:.1%}]" and n0 > 50
    cells = " ".join(str(v) for v in shown.to_numpy().ravel())
    assert "nan" not in cells.lower() and "missing" not in cells, cells
    assert "nan%" not in c.to_html().lower()


def test_agreement_per_group():
    t = decision_agreement(np.array([1, 1, 0, 0]), np.array([1, 0, 0, 1]), {"sex": np.array(["0", "0", "1", "1"])})
    assert list(t["agree"]) == [0.5, 0.5, 0.5] and list(t["flips"]) == [2, 1, 1]


def test_models_that_cannot_be_compared_say_why(planted):
    X, a, _, schema = planted
    other = RandomForestClassifier(3, random_state=0).fit(X[["income", "age"]], (X.income > 50).astype(int))
    with pytest.raises(QueryError, match="does not read the same features"):
        compare_models(a, other, X, schema=schema, target=1)


def test_cli_compares_two_model_files(tmp_path, capsys):
    """python -m core.audit ... --compare-model other.txt: the comparison report and its rows."""
    from conftest import demo_credit

    from core.audit.cli import main
    from core.intake.demo import updated_model

    df, target, model, *_ = demo_credit()
    data = tmp_path / "credit.csv"
    df.to_csv(data, index=False)
    a, b = tmp_path / "v1.txt", tmp_path / "v2.txt"
    model.booster_.save_model(str(a))
    updated_model("credit-lightgbm")[0].booster_.save_model(str(b))
    out = tmp_path / "compare.html"
    rc = main(["--data", str(data), "--model", str(a), "--compare-model", str(b), "--protected", "sex",
               "--target", "1", "--target-column", target, "--rows", "25", "--permutations", "200",
               "--bootstrap", "100", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "Decisions alike" in text and "sex = 1" in text
    rows = pd.read_csv(out.with_suffix(".csv"))
    assert len(rows) == 25 and {"row", "group:sex", "invalidated", "extra_cost"} <= set(rows.columns)
    assert 'id="atlas-comparison"' in out.read_text()


def test_where_decisions_differ_reads_in_the_analysts_columns():
    """The shallow tree's leaves read as the table's columns: a one-hot group by level name,
    a 0/1 column as "= 0"/"= 1", an integer column in whole numbers, a native categorical
    feature by its categories (never "job=cook <= 0.5" or "sex <= 0.5")."""
    import lightgbm as lgb

    from core.audit.compare import disagreement_rules
    from core.intake.columns import analyst_columns
    from core.intake.demo import build_demo, updated_model
    from core.intake.workspace import build_workspace

    df, target, model, _ = build_demo("credit-lightgbm")
    ws = build_workspace(df, target, model, name="demo")
    wb = build_workspace(df, target, updated_model("credit-lightgbm")[0], name="v2")
    A = ws.X.to_numpy(float)
    flipped = ws.ensemble.predict(A) != wb.ensemble.predict(A)
    rules = disagreement_rules(A, list(ws.ensemble.feature_names), flipped, max_depth=6,
                               columns=analyst_columns(ws.ensemble, ws.schema),
                               kinds=[f.kind for f in ws.schema.features])
    assert rules
    text = " ".join(rules)
    assert "employment=" not in text and "sex <=" not in text and "sex >" not in text, rules
    conditions = [c for r in rules for c in r.split(":")[0].removeprefix("if ").split(" and ")]
    assert {c for c in conditions if c.startswith("sex")} == {"sex = 0", "sex = 1"}, rules   # by its values
    assert ".5" not in " ".join(p for r in rules for p in r.split(" and ") if "late_payments" in p), rules

    rng = np.random.default_rng(0)
    n = 1500
    raw = pd.DataFrame({"job": pd.Categorical(rng.choice(["cook", "nurse", "pilot", "clerk"], n)),
                        "pay": rng.uniform(0, 100, n)})
    y_a = ((raw.pay > 50) | (raw.job == "pilot")).astype(int)
    y_b = ((raw.pay > 50) | raw.job.isin(["pilot", "nurse"])).astype(int)       # version 2 also favours nurses
    kw = dict(n_estimators=30, num_leaves=8, min_child_samples=5, random_state=0, verbose=-1)
    wa = build_workspace(raw.assign(y=y_a), "y", lgb.LGBMClassifier(**kw).fit(raw, y_a), name="a")
    wb = build_workspace(raw.assign(y=y_a), "y", lgb.LGBMClassifier(**kw).fit(raw, y_b), name="b")
    X = wa.X.to_numpy(float)
    flipped = wa.ensemble.predict(X) != wb.ensemble.predict(X)
    assert flipped.sum() > 50
    rules = disagreement_rules(X, list(wa.ensemble.feature_names), flipped,
                               columns=analyst_columns(wa.ensemble, wa.schema),
                               kinds=[f.kind for f in wa.schema.features])
    assert any("job = nurse" in r or "job in {nurse}" in r for r in rules), rules
    assert not any("job=" in r or "job <=" in r or "job >" in r for r in rules), rules
    # a feature holding category codes reads by its categories
    from core.intake.columns import Column

    codes = rng.integers(0, 4, n).astype(float)
    pay = rng.uniform(0, 100, n)
    flipped = (codes == 2) & (pay <= 50)
    rules = disagreement_rules(np.c_[codes, pay], ["job", "pay"], flipped,
                               columns=[Column("job", (0,), ("clerk", "cook", "nurse", "pilot")), Column("pay", (1,))],
                               kinds=["categorical", "numerical"])
    assert any(r.startswith("if job in {nurse} and pay <= ") for r in rules), rules


def test_a_comparison_without_a_schema_says_what_to_give(planted):
    X, a, b, _ = planted
    with pytest.raises(AuditError, match="give schema=core.infer_schema"):
        compare_models(a, b, X, schema=None, target=1, max_rows=20)

