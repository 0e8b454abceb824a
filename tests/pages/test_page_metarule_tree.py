"""AppTest of the Metarule tree page on the built-in demo."""

from __future__ import annotations

import pytest


@pytest.fixture
def at(page_app):
    return page_app("metarule_tree.py")


def test_rules_metarules_and_a_local_explanation(at):
    metrics = {m.label: m.value for m in at.metric}
    assert int(metrics["Rules"]) >= 1 and int(metrics["Metarules"]) >= 1
    assert any(i.value.startswith("Row 0") and "Rule" in i.value for i in at.info)
    at.number_input(key="mt_row").set_value(5).run()
    assert any(i.value.startswith("Row 5") for i in at.info)
    assert not at.error


def test_stricter_tau_and_an_impossible_setting(at):
    """On the demo, tau 0.99 still gives rules; with rho 0.1 as well no rule holds 10% of
    the data at that accuracy (T-CREx refuses to fit) and the page says what to change."""
    at.select_slider(key="mt_tau").set_value(0.99).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    metrics = {m.label: m.value for m in at.metric}
    assert int(metrics["Rules"]) >= 1 and int(metrics["Metarules"]) >= 1
    at.select_slider(key="mt_rho").set_value(0.1).run()
    at.select_slider(key="mt_tau").set_value(0.99).run()
    assert not at.exception
    assert len(at.error) == 1, [e.value for e in at.error]
    text = at.error[0].value
    assert "No rule reaches accuracy 0.99 with at least 10% of the data" in text, text
    assert "lower tau or rho" in text, text
    assert "for target 1;" in text and "np." not in text, text          # the class as written, not its repr
    assert not at.metric                               # nothing learned is shown


def test_no_row_is_told_to_change_a_fixed_column(at):
    """sex is protected and fixed in the demo's feature settings: no row may be prescribed a rule
    that asks it to change sex (the page fitted T-CREx without the settings' roles, and row 10
    was told "change sex <= 0.5"). Row 10 as the page shows it, then every row of the demo
    through the rules the page fitted (its session's cache), with the text the page shows."""
    from dashboard.caching import demo_workspace

    ws = demo_workspace("credit-lightgbm")
    assert "sex" in ws.schema.by_actionability()["fixed"]
    at.select_slider(key="mt_tau").set_value(0.85)
    at.select_slider(key="mt_rho").set_value(0.01)
    at.number_input(key="mt_trees").set_value(3)
    at.number_input(key="mt_row").set_value(10).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    shown = [i.value for i in at.info if i.value.startswith("Row 10 ")]
    assert len(shown) == 1 and "change sex" not in shown[0], shown
    tc = list(at.session_state["_cache_tcrex"].values())[-1]       # the most recent fit last
    assert (tc.tau, tc.rho, tc.n_trees) == (0.85, 0.01, 3)
    X, pred = ws.X.to_numpy(dtype=float), ws.predictions
    told = [tc.recourse_text(X[row], pred[row]) for row in range(len(X))]
    assert sum("change" in t for t in told) >= 100, told[:5]            # rows are prescribed rules
    assert not [t for t in told if "change sex" in t], [t for t in told if "change sex" in t][:3]
    assert any("Each row is prescribed only a rule it can reach" in c.value and "fixed" in c.value
               for c in at.caption)
