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
    at.select_slider(key="mt_tau").set_value(0.99).run()
    assert not at.exception
    at.select_slider(key="mt_rho").set_value(0.1).run()
    at.select_slider(key="mt_tau").set_value(0.99).run()
    assert not at.exception
    if at.error:  # no valid rule: the message says what to change
        assert any("lower tau or rho" in e.value for e in at.error)
