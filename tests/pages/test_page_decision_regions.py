"""AppTest of the Decision regions page on the built-in demo."""

from __future__ import annotations

import pytest


@pytest.fixture
def at(page_app):
    return page_app("decision_regions.py")


def _metrics(at):
    return {m.label: m.value for m in at.metric}


def test_slice_and_exact_counterfactual(at):
    m = _metrics(at)
    assert int(m["Regions drawn"].replace(",", "")) > 10
    assert m["Counterfactual"] == "optimal"
    assert any("Exact counterfactual" in md.value for md in at.markdown)
    assert not at.error


def test_projection_and_feature_choice(at):
    at.radio(key="dr_mode").set_value("projection").run()
    assert not at.exception
    assert int(_metrics(at)["Regions drawn"].replace(",", "")) >= 1
    at.selectbox(key="dr_fb").set_value(at.selectbox(key="dr_fa").value).run()
    assert any("two different features" in e.value for e in at.error)


def test_regions_cap_warns(at):
    at.number_input(key="dr_max").set_value(50).run()
    assert _metrics(at)["Regions drawn"] == "50"
    assert any("Only the first" in w.value for w in at.warning)
