"""AppTest of the Optimal counterfactual page on the built-in demo."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def at(page_app):
    return page_app("optimal_cf.py")


def _submit(at, form_label):
    next(b for b in at.button if b.label.startswith(form_label)).click().run()
    assert not at.exception, at.exception


def test_one_query_on_the_demo(at):
    ws = at.session_state["workspace"]
    assert [t.value for t in at.title] == ["Optimal counterfactual"]
    at.number_input(key="ocf_row").set_value(3).run()
    _submit(at, "Find the optimal counterfactual")
    res = at.session_state["ocf_result"]
    assert res.status == "optimal" and res.found
    x0 = ws.X.to_numpy(float)[3]
    assert ws.model.predict(ws.X.iloc[[3]])[0] != res.prediction
    assert ws.ensemble.predict(res.x[None, :])[0] == res.prediction
    assert np.array_equal(res.x_query, x0)
    assert any("Optimal counterfactual" in s.value for s in at.success)
    labels = {m.label: m.value for m in at.metric}
    assert labels["Status"] == "optimal"
    assert res.x[ws.schema.index("sex")] == x0[ws.schema.index("sex")]  # protected: fixed


def test_the_mix_weights_are_set_before_the_first_query(at):
    """The mix cost's weights are in the form from the start: they were drawn only once "mix" was
    submitted, so the first mix query ran on default weights the analyst never saw."""
    at.number_input(key="ocf_row").set_value(3).run()
    at.selectbox(key="ocf_norm").set_value("l2")
    _submit(at, "Find the optimal counterfactual")
    l2 = at.session_state["ocf_result"]
    at.selectbox(key="ocf_norm").set_value("mix")
    for name, value in (("l0", 0.0), ("l1", 0.0), ("l2", 1.0)):     # set before the mix is ever submitted
        at.number_input(key=f"ocf_{name}").set_value(value)
    _submit(at, "Find the optimal counterfactual")
    mix = at.session_state["ocf_result"]
    assert mix.params["norm"] == {"l0": 0.0, "l1": 0.0, "l2": 1.0}
    assert l2.status == mix.status == "optimal" and mix.cost == pytest.approx(l2.cost, rel=1e-9, abs=1e-12)
    ens = at.session_state["workspace"].ensemble
    assert ens.predict(mix.x[None, :])[0] == mix.prediction


def test_each_further_solution_says_when_it_came(at):
    """With several solutions the time metric was "Solve time", the first solution's alone: it now
    says so, and each alternative gives when it came, timed from the query's start as well."""
    at.number_input(key="ocf_row").set_value(3).run()
    at.number_input(key="ocf_k").set_value(3)                  # in the form: sent with its submit
    _submit(at, "Find the optimal counterfactual")
    res = at.session_state["ocf_result"]
    assert res.found and res.alternatives, res.params.get("notice")         # row 3 has 2 in all
    labels = {m.label: m.value for m in at.metric}
    assert "Solve time" not in labels and labels["First solution after"] == f"{res.elapsed:.2f} s"
    lines = [md.value for md in at.markdown if md.value.startswith("**Alternative ")]
    assert [line.split(" · ")[2] for line in lines] == [f"after {a.elapsed:.2f} s" for a in res.alternatives]
    times = [res.elapsed] + [a.elapsed for a in res.alternatives]
    assert times == sorted(times)


def test_infeasible_query_is_explained(at):
    ws = at.session_state["workspace"]
    columns = list(at.multiselect(key="ocf_fixed").options)   # one option per column of the analyst's table
    assert "employment" in columns and len(columns) == len(ws.X.columns) - 3
    at.multiselect(key="ocf_fixed").set_value(columns)
    _submit(at, "Find the optimal counterfactual")
    assert at.session_state["ocf_result"].status == "infeasible"
    assert any("No counterfactual" in e.value for e in at.error)


def test_batch_of_rows(at):
    at.number_input(key="ocb_n").set_value(3).run()
    _submit(at, "Run on 3 rows")
    table, g = at.session_state["ocb_results"]
    assert len(table) == 3 and set(table["status"]) == {"optimal"}
    assert (table["features changed"] >= 1).all()
    assert g.kind == "proven_optimal"
    assert any(c.value.startswith("What this batch guarantees: Proven optimal on the tree ensemble.") for c in at.caption)


def test_plausible_counterfactual(at):
    at.checkbox(key="ocf_plaus").check()
    _submit(at, "Find the optimal counterfactual")
    res = at.session_state["ocf_result"]
    assert res.found and res.params["plausibility"] is not None


def test_unticking_a_column_the_schema_fixes_frees_it(at):
    """An explicit list replaces the schema's actionability (issue 28): with no column
    ticked as fixed, the page's query is the library's ``fixed=[]``, where the
    schema's protected ``sex`` may move."""
    from core.optimal import optimal_counterfactual

    ws = at.session_state["workspace"]
    assert "sex" in at.multiselect(key="ocf_fixed").value       # the schema fixes it: ticked by default
    at.number_input(key="ocf_row").set_value(3).run()
    at.multiselect(key="ocf_fixed").set_value([])
    _submit(at, "Find the optimal counterfactual")
    res = at.session_state["ocf_result"]
    assert res.found and res.params["fixed"] == []
    X = ws.X.to_numpy(float)
    target = res.prediction
    free = optimal_counterfactual(ws.ensemble, X[3], target, schema=ws.schema, fixed=[], X_ref=X)
    held = optimal_counterfactual(ws.ensemble, X[3], target, schema=ws.schema, X_ref=X)
    assert res.cost == pytest.approx(free.cost, rel=1e-9, abs=1e-12)
    assert free.cost <= held.cost + 1e-12


def test_results_of_the_previous_table_and_model_go_when_another_is_loaded(at):
    """An outside trial: after another table and model were loaded, the Optimal counterfactual page
    drew the previous result against the new columns (IndexError, "All arrays must be of the same
    length") and the Case story told the previous model's story ("Proven optimal") under the new
    one. Loading another demo drops every result kept without its workspace's key; a new feature
    setting keeps them (the same table and model)."""
    _submit(at, "Find the optimal counterfactual")
    ws = at.session_state["workspace"]
    at.switch_page("../pages/case_story.py").run()
    next(b for b in at.button if b.label.startswith("Tell the story")).click().run()
    assert not at.exception and "cs_result" in at.session_state
    kept = ("ocf_result", "cs_result")
    at.switch_page("../pages/data_model.py").run()
    at.selectbox(key="dm_demo").set_value("cancer-rf").run()
    next(b for b in at.button if b.key == "dm_load_demo").click().run()
    assert not at.exception, at.exception
    assert at.session_state["workspace"].name != ws.name
    assert all(k not in at.session_state for k in kept), [k for k in kept if k in at.session_state]
    for page in ("optimal_cf.py", "case_story.py"):
        at.switch_page(f"../pages/{page}").run()
        assert not at.exception, (page, at.exception)
        assert not any("Proven optimal" in s.value for s in at.success), page
