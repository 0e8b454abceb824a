"""AppTest of the Fairness audit page on the built-in demo (planted bias on sex)."""

from __future__ import annotations

import pytest


@pytest.fixture
def at(page_app):
    return page_app("fairness_audit.py")


def _run(at, rows=80):
    at.number_input(key="fa_rows").set_value(rows)
    at.number_input(key="fa_perm").set_value(500)
    at.number_input(key="fa_boot").set_value(200)
    at.number_input(key="fa_local").set_value(2)
    at.button(key="fa_go").click().run()
    assert not at.exception, at.exception
    return at


def test_audit_of_the_demo_finds_the_bias_and_exports(at):
    assert at.multiselect(key="fa_protected").value == ["sex"]
    assert any("Run an audit above" in i.value for i in at.info)
    _run(at, rows=150)
    assert not at.error
    assert any("sex = 1 is worse off" in w.value for w in at.warning)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Rows audited"] == "150"
    labels = [b.label for b in at.get("download_button")]
    assert {"Report (HTML)", "Per-row results (CSV)", "Audit (JSON)"} <= set(labels)
    # a Cancel pressed as the audit ended reaches the script after the audit was kept: never
    # "no new result was kept" above the new audit
    at.session_state["fa_cancel"] = True
    at.run()
    assert not any("no new result was kept" in w.value for w in at.warning)
    assert any("ended before Cancel reached it" in i.value for i in at.info)
    assert {m.label: m.value for m in at.metric}["Rows audited"] == "150"


@pytest.mark.slow
def test_bad_scheduler_address_is_explained_and_keeps_the_previous_audit(at):
    _run(at, rows=40)
    at.text_input(key="fa_scheduler").input("tcp://127.0.0.1:1")
    at.button(key="fa_go").click().run()
    assert not at.exception
    assert any("Cannot reach the Dask scheduler" in e.value for e in at.error)
    assert {m.label: m.value for m in at.metric}["Rows audited"] == "40"


def test_a_saved_audit_reopens(at, tmp_path):
    from core.audit import Audit

    _run(at, rows=40)
    held = at.session_state["fa_result"]["audit"]
    again = Audit.from_file(held.to_html().encode())
    assert again.summary == held.summary


def test_the_settings_are_as_left_after_another_page(at):
    """Streamlit forgets a widget's value on a page that does not draw it: the audit's row count,
    time limit and permutations went back to their defaults when the analyst came back."""
    at.number_input(key="fa_rows").set_value(40)
    at.number_input(key="fa_limit").set_value(7.0)
    at.number_input(key="fa_perm").set_value(700).run()
    at.switch_page("../pages/optimal_cf.py").run()
    at.run()                                                    # a second run there: the audit's widgets are gone
    assert not at.exception, at.exception
    at.switch_page("../pages/fairness_audit.py").run()
    assert not at.exception, at.exception
    assert (at.number_input(key="fa_rows").value, at.number_input(key="fa_limit").value,
            at.number_input(key="fa_perm").value) == (40, 7.0, 700)
