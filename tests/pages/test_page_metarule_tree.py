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
    assert not at.metric                               # nothing learned is shown
