"""AppTest of the FCCA thresholds page on the built-in demo."""

from __future__ import annotations

import pytest


@pytest.fixture
def at(page_app):
    return page_app("fcca.py")


def _run(at, rows=60):
    at.number_input(key="fcca_max").set_value(rows)
    at.button[0].click().run()   # the form's submit button
    assert not at.exception, at.exception
    return at


def test_prompt_then_thresholds_heatmap_tree_and_exports(at):
    assert any("Press the button" in i.value for i in at.info)
    _run(at)
    metrics = {m.label: m.value for m in at.metric}
    assert int(metrics["Counterfactuals"].replace(",", "")) > 0
    assert int(metrics["Thresholds"]) > 0
    assert 0.0 <= float(metrics["Compression rate"]) <= 1.0
    assert 0.0 <= float(metrics["Tree accuracy (held out)"]) <= 1.0
    assert not at.error
    labels = [b.label for b in at.get("download_button")]
    assert any("Thresholds" in lab for lab in labels) and any("Discretised" in lab for lab in labels)
    kept0 = int(metrics["Thresholds kept"])
    at.slider(key="fcca_q").set_value(0.9).run()
    assert not at.exception
    kept9 = int({m.label: m.value for m in at.metric}["Thresholds kept"])
    assert kept9 <= kept0
    # a Q change keeps the counterfactuals: nothing is recomputed
    assert {m.label: m.value for m in at.metric}["Counterfactuals"] == metrics["Counterfactuals"]


def test_cart_and_depth_change_update_the_tree(at):
    _run(at, rows=40)
    at.radio(key="fcca_method").set_value("CART").run()
    at.select_slider(key="fcca_depth").set_value(2).run()
    assert not at.exception and not at.error
    assert any("Depth-2 tree" in md.value for md in at.markdown)


def test_the_tree_is_named_by_its_own_depth(at):
    """At Q = 1 few thresholds are kept and the tree stops short of the depth allowed: its heading
    names the depth it has."""
    import re

    _run(at, rows=40)
    at.select_slider(key="fcca_depth").set_value(4)
    at.slider(key="fcca_q").set_value(1.0).run()
    assert not at.exception and not at.error
    head = next(md.value for md in at.markdown if " tree at Q = " in md.value)
    d, leaves = map(int, re.search(r"Depth-(\d) tree .*?(\d+) leaves", head).groups())
    assert d + 1 <= leaves <= 2 ** d, head             # a binary tree of depth d
    assert d < 4 and "depth 4 allowed" in head, head


def test_bad_settings_are_explained_and_keep_the_previous_result(at):
    _run(at, rows=40)
    before = {m.label: m.value for m in at.metric}["Counterfactuals"]
    at.number_input(key="fcca_p0").set_value(0.9)
    at.number_input(key="fcca_p1").set_value(0.6)
    at.button[0].click().run()
    assert not at.exception
    assert any("p0 <= p1" in e.value for e in at.error)
    assert {m.label: m.value for m in at.metric}["Counterfactuals"] == before


def test_a_cancel_reaching_a_run_after_it_ended_never_says_no_result_was_kept(at):
    """Cancel pressed as a run ends reaches the script only after the run kept its result: the
    page once said "Cancelled: no new result was kept — the previous result is shown below."
    above the new result. It says the run had ended; a Cancel that stopped a run says so."""
    _run(at, rows=40)
    kept = {m.label: m.value for m in at.metric}["Counterfactuals"]
    at.session_state["fcca_cancel"] = True          # the rerun a late press starts: the run has ended
    at.run()
    assert not at.exception
    assert not any("no new result was kept" in w.value for w in at.warning)
    assert any("ended before Cancel reached it" in i.value for i in at.info)
    assert {m.label: m.value for m in at.metric}["Counterfactuals"] == kept
    at.session_state["fcca_cancel__run_going"] = True   # a press that stopped a run while it went
    at.session_state["fcca_cancel"] = True
    at.run()
    assert any(w.value.startswith("Cancelled: no new result was kept") for w in at.warning)
    assert not any("ended before Cancel" in i.value for i in at.info)
