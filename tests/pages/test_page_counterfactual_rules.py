"""AppTest of the Counterfactual rules page on the built-in demo."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def at(page_app):
    return page_app("counterfactual_rules.py")


def _first_rejected(at):
    from dashboard.caching import demo_workspace

    ws = demo_workspace("credit-lightgbm")
    return int(np.flatnonzero(ws.predictions == 0)[0])


def test_local_rule_samples_and_export(at):
    row = _first_rejected(at)
    at.number_input(key="cr_row").set_value(row).run()
    at.button(key="cr_go").click().run()
    assert not at.exception
    assert not at.error, [e.value for e in at.error]
    metrics = {m.label: m.value for m in at.metric}
    assert float(metrics["Rule probability (CRP)"]) >= 0.9
    assert any(s.value.startswith("**If**") for s in at.success)
    table = at.dataframe[0].value
    assert len(table) >= 1 and table["reaches target"].mean() >= 0.6


def test_no_rule_is_a_message_not_a_traceback(at):
    row = _first_rejected(at)
    at.number_input(key="cr_row").set_value(row).run()
    at.select_slider(key="cr_pic").set_value(0.99).run()
    columns = list(at.multiselect(key="cr_fixed").options)   # the analyst's columns: employment is one
    assert columns[-1] == "sex" and "employment" in columns
    at.multiselect(key="cr_fixed").set_value(columns[:-1]).run()
    at.button(key="cr_go").click().run()
    assert not at.exception
    # sex alone cannot reach pi_C 0.99: the best rule is shown, flagged below pi_C (no refusal)
    no_rule = any("No counterfactual rule" in e.value or "No region" in e.value for e in at.error)
    flagged = any(w.value.startswith("Below pi_C") for w in at.warning) and any(
        i.value.startswith("**If**") for i in at.info)
    assert flagged and not no_rule, ([e.value for e in at.error], [w.value for w in at.warning])


def test_regional_rules_from_tree_and_filter(at):
    at.button(key="cr_reg_go").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    table = at.dataframe[-1].value
    assert len(table) >= 1 and (table["coverage"] > 0).all()
    at.radio(key="cr_source").set_value("A filter I write").run()
    # the sub-population reads as written (">= 30" was shown "> 29.9999"), and a rule whose set
    # falls short of pi says so under the table, as a missing rule does
    at.text_input(key="cr_filter").set_value("late_payments < 2 and income >= 30").run()
    at.select_slider(key="cr_pic").set_value(0.5).run()          # a rule is found; its set's CDP is below pi
    at.button(key="cr_reg_go").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    table = at.dataframe[-1].value
    assert table["sub-population"].tolist() == ["income >= 30 and late_payments < 2"], table
    (row,) = table.itertuples()
    assert row.rule != "—" and row.CDP < 0.9, table
    said = [c.value for c in at.caption if c.value.startswith("The rule for income >= 30 and late_payments < 2: ")]
    assert row.note.startswith("No set of the changeable features reaches the level pi 0.9 (CDP); the rule uses "
                               "the best set found, CDP 0.")
    assert said == [f"The rule for income >= 30 and late_payments < 2: {row.note}"], said
    # at pi_C 0.6 no rule reaches it: its best (0.5990-0.5995) read "0.60", as if it had
    at.select_slider(key="cr_pic").set_value(0.6).run()
    at.button(key="cr_reg_go").click().run()
    said = [c.value for c in at.caption if c.value.startswith("No rule for income >= 30 and late_payments < 2: ")]
    assert len(said) == 1 and "No rule reaches probability 0.6 (best 0.599)" in said[0], said
    at.text_input(key="cr_filter").set_value("nonsense here").run()
    at.button(key="cr_reg_go").click().run()
    assert not at.exception
    assert any("Cannot read the clause" in e.value for e in at.error)


def test_increase_and_decrease_only_reach_the_rule(at):
    """The page passes the picked names: the samples never lower an
    increase-only column nor raise a decrease-only one."""
    from dashboard.caching import demo_workspace

    ws = demo_workspace("credit-lightgbm")
    row = _first_rejected(at)
    options = list(at.multiselect(key="cr_inc").options)
    assert "income" in options and "employment" not in options        # a category has no direction
    at.number_input(key="cr_row").set_value(row).run()
    at.multiselect(key="cr_inc").set_value(["income", "credit_history_years"]).run()
    at.multiselect(key="cr_dec").set_value(["debt_ratio", "late_payments"]).run()
    at.button(key="cr_go").click().run()
    assert not at.exception
    assert not at.error, [e.value for e in at.error]
    table = at.dataframe[0].value
    before = ws.analyst_view(ws.X.to_numpy(float)[row][None, :], [row]).iloc[0]
    moved = [c for c in ("income", "credit_history_years", "debt_ratio", "late_payments") if c in table.columns]
    assert moved, table.columns.tolist()        # the rule moves a column with a direction (income, up)
    for col, sign in (("income", 1), ("credit_history_years", 1), ("debt_ratio", -1), ("late_payments", -1)):
        if col in moved:
            assert (sign * (table[col].astype(float) - float(before[col])) >= 0).all(), (col, table[col].tolist())


def test_a_sub_population_without_a_rule_says_why_beside_the_table(at):
    """With every column fixed no sub-population has a rule: each says so, and why, in a caption
    under the table (the table's note column is its last, off screen)."""
    at.multiselect(key="cr_fixed").set_value(list(at.multiselect(key="cr_fixed").options)).run()
    at.button(key="cr_reg_go").click().run()
    assert not at.exception, at.exception
    table = at.dataframe[-1].value
    assert len(table) >= 1 and (table["rule"] == "—").all()
    said = [c.value for c in at.caption if c.value.startswith("No rule for ")]
    assert len(said) == len(table), said
    for text, (where, note) in zip(said, table[["sub-population", "note"]].itertuples(index=False)):
        assert text.startswith(f"No rule for {where}") and (not note or note in text), (text, note)
