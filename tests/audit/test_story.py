"""The case story: every statement checked against the model and the data."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ROOT, demo_credit

from core.audit import run_audit
from core.audit.story import _region, case_story
from core.intake.workspace import build_workspace
from core.rules import CounterfactualRules


@pytest.fixture(scope="module")
def credit_ws():
    df, target, model, *_ = demo_credit()
    return build_workspace(df, target, model, name="credit", protected=["sex"])   # the demo's protected attribute


def test_story_statements_hold(credit_ws):
    ws = credit_ws
    X = ws.X.to_numpy(float)
    row = int(np.flatnonzero(ws.predictions == 0)[0])
    rules = CounterfactualRules(groups=list(ws.schema.groups().values()), random_state=0).fit(
        X, ws.predictions, feature_names=list(ws.X.columns))
    story = case_story(ws, row, 1, rules=rules)
    heads = [h for h, _ in story.sections]
    assert heads[:4] == ["The decision", "Where the case sits", "The smallest change", "A rule for cases like this one"]
    # the region: the row is inside, and every data row inside gets the same raw output
    lower, upper = _region(ws.ensemble, X[row])
    inside = np.all((X > lower) & (X <= upper), axis=1)
    assert inside[row]
    raw = ws.ensemble.predict_raw(X[inside])
    np.testing.assert_allclose(raw, np.repeat(raw[:1], len(raw), axis=0))
    assert f"of the {len(X)} cases in the data, {int(inside.sum())} l" in " ".join(dict(story.sections)["Where the case sits"])
    # the counterfactual: optimal, valid on the original model, shown in raw columns, protected columns kept
    res = story.facts["counterfactual"]
    assert res.found and res.status == "optimal" and res.valid
    assert list(story.table.index) == ["this case", "counterfactual"]
    from core.intake.columns import analyst_columns, apply_values

    cols = analyst_columns(ws.ensemble, ws.schema)      # the table is in the analyst's columns: type it back in
    typed = apply_values(cols, X[row], story.table.loc["counterfactual"].to_dict())
    assert int(ws.model.predict(ws.to_raw(typed[None, :]))[0]) == 1
    assert list(story.table.columns) == [c.name for c in cols]
    protected = {f.group or f.name for f in ws.schema.features if f.protected}
    assert protected, "the demo marks a protected column"
    for col in protected:
        assert story.table.at["this case", col] == story.table.at["counterfactual", col]
    for c in story.facts["changed"]:
        assert c in " ".join(dict(story.sections)["The smallest change"])
    assert "rule" in story.facts
    page = story.to_html()
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page and "http" not in page


def test_story_tells_the_audit_group(credit_ws):
    ws = credit_ws
    X = ws.X.to_numpy(float)
    audit = run_audit(ws.ensemble, X, schema=ws.schema, target=1, max_rows=80, n_jobs=1, model=ws.model, n_perm=100,
                      n_boot=50, local_rules_per_group=1, scan=False)
    row = int(audit.rows["row"].iloc[0])
    story = case_story(ws, row, 1, audit=audit)
    paras = dict(story.sections)["How the case's group fares"]
    label = str(audit.rows.set_index("row").at[row, "group:sex"])
    g = audit.groups[(audit.groups.attribute == "sex") & (audit.groups.group.astype(str) == label)].iloc[0]
    assert f"sex = {label}" in paras[0] and f"{g['feasible']:.0%}" in paras[0] and f"{g['cost']:.3g}" in paras[0]


def test_hostile_names_are_escaped_in_the_html(credit_ws):
    from dataclasses import replace

    story = case_story(credit_ws, 0, 1)
    story = replace(story, title="<script>alert(1)</script>")
    assert "<script>" not in story.to_html()


def test_case_story_page():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=240)
    at.run()
    at.switch_page("../pages/case_story.py").run()
    assert not at.exception
    at.button(key="cs_go").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    row, _, story = at.session_state["cs_result"]
    assert story.facts["counterfactual"].found
    assert [h.value for h in at.markdown if h.value.startswith("#### ")][:3] == [
        "#### The decision", "#### Where the case sits", "#### The smallest change"]


def test_story_of_a_categorical_model_speaks_in_its_columns():
    """One condition per categorical column in the region ("job = pilot", never also "job not nurse"), and the
    fixed columns named as the analyst's columns ("sex", not "sex=f, sex=m")."""
    import lightgbm as lgb
    import pandas as pd

    rng = np.random.default_rng(0)
    n = 1500
    df = pd.DataFrame({"age": rng.integers(18, 80, n).astype(float), "job": rng.choice(["clerk", "nurse", "cook",
                       "pilot"], n), "income": rng.normal(50, 20, n).round(1), "sex": rng.choice(["f", "m"], n)})
    df["approved"] = ((df.age > 40) ^ df.job.isin(["clerk", "cook"]) | (df.income > 70)).astype(int)
    X = df.drop(columns="approved").astype({"job": "category", "sex": "category"})
    model = lgb.LGBMClassifier(n_estimators=25, num_leaves=8, verbose=-1, min_data_per_group=5, cat_smooth=1,
                               n_jobs=1).fit(X, df.approved)
    ws = build_workspace(df, "approved", model, name="cat")
    for row in range(12):
        story = case_story(ws, row, 1 - int(ws.predictions[row]), fixed=["sex=f", "sex=m"])
        where = " ".join(dict(story.sections)["Where the case sits"])
        for col in ("job", "sex"):
            assert where.count(f"{col} =") + where.count(f"{col} not") <= 1, where
        change = " ".join(dict(story.sections)["The smallest change"])
        assert story.facts["counterfactual"].found, change     # age and income can always move
        assert "fixed: sex)" in change and "sex=" not in change, change


def test_a_weak_rule_is_told_with_its_caveat(credit_ws):
    """A rule whose divergent set reached a low CDP, or no rule reaching pi_C, is not told as a plain
    "rule for cases like this one" (#29: a CDP of 0.17 was)."""
    ws = credit_ws
    X = ws.X.to_numpy(float)
    rules = CounterfactualRules(groups=list(ws.schema.groups().values()), random_state=0).fit(
        X, ws.predictions, feature_names=list(ws.X.columns))
    told, kinds = 0, set()
    for row in np.flatnonzero(ws.predictions == 0)[:40]:
        story = case_story(ws, int(row), 1, rules=rules, time_limit=10)
        rule = story.facts.get("rule")
        if rule is None:
            continue
        text = " ".join(dict(story.sections)["A rule for cases like this one"])
        weak = rule.cdp < rules.pi - 1e-12
        assert ("Caveat" in text) == (weak or rule.below_pi_c), text
        assert (f"{rule.cdp:.0%} of cases like this one" in text) == weak, text
        told += 1
        kinds.add(weak)
    assert told >= 10 and kinds == {True, False}      # both kinds of rule were told


def test_a_score_never_reads_as_certain_when_it_is_not():
    from core.audit.story import _share_text

    assert _share_text(0.996) == "99.6%" and _share_text(0.004) == "0.4%" and _share_text(0.95) == "95%"
    assert _share_text(0.99999999) == "over 99.99%" and _share_text(1.0) == "100%"
