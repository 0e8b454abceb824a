"""The constraints editor on Data & model (issue #61 item 5), in the real app: every
line's problem is named with its line as it is entered, the examples read with the data's
own columns, applied constraints reach the schema every analysis reads, the Optimal page
keeps them and says so beside its answer."""

from __future__ import annotations

import pandas as pd
from conftest import ROOT
from streamlit.testing.v1 import AppTest

APP = str(ROOT / "dashboard" / "app.py")


def test_constraints_are_checked_applied_and_kept_by_the_optimal_page():
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception
    code = "\n".join(c.value for c in at.code)
    assert "delta(age) >= 0" in code and "employment: employed ->" in code      # the demo's own columns
    at.text_area(key="dm_constraints").set_value("delta(incom) >= 0\nincome * age <= 3").run()
    errors = [e.value for e in at.error]
    assert any("Line 1" in e and "Did you mean 'income'" in e for e in errors), errors
    assert any("Line 2" in e and "not linear" in e for e in errors), errors
    assert at.button(key="dm_apply_constraints").disabled
    texts = ["delta(income) <= 5", "delta(credit_history_years) == 0"]
    at.text_area(key="dm_constraints").set_value("\n".join(texts)).run()
    assert not at.error
    at.button(key="dm_apply_constraints").click().run()
    ws = at.session_state["workspace"]
    assert list(ws.schema.constraints) == texts
    assert any("2 constraints between features in force" in s.value for s in at.success)
    at.switch_page("../pages/optimal_cf.py").run()
    assert not at.exception, at.exception
    next(b for b in at.button if b.label.startswith("Find the optimal counterfactual")).click().run()
    assert not at.exception, at.exception
    res = at.session_state["ocf_result"]
    shown = " ".join(c.value for c in at.caption)
    assert "Constraints between features in force: delta(income) <= 5; delta(credit_history_years) == 0" in shown
    assert res.params["constraints"] == texts and res.found, (res.status, res.message)
    assert ws.schema.parsed_constraints().violated(res.x_query, res.x) == []
    assert ws.ensemble.predict(res.x[None, :])[0] == res.prediction != ws.predictions[0]
    assert ws.model.predict(pd.DataFrame(res.x[None, :], columns=ws.X.columns))[0] == res.prediction
