"""The constraints between features beside the global analyses' answers (issue #61 item 5), in
the real app on the demo: written on Data & model, they are in force on the Metarule tree,
Counterfactual rules, FCCA and the batch of optimal counterfactuals, each says so beside its
answer, and the rules say how many were dropped as unreachable."""

from __future__ import annotations

import numpy as np
from conftest import ROOT
from streamlit.testing.v1 import AppTest

APP = str(ROOT / "dashboard" / "app.py")
#: late payments may not fall (the demo's rules ask for at most one), income rise by at most 20
TEXTS = ["delta(income) <= 20", "delta(late_payments) >= 0"]
SHOWN = "Constraints between features in force: delta(income) <= 20; delta(late_payments) >= 0."


def _app_with_constraints() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    at.text_area(key="dm_constraints").set_value("\n".join(TEXTS)).run()
    at.button(key="dm_apply_constraints").click().run()
    assert not at.exception and list(at.session_state["workspace"].schema.constraints) == TEXTS
    return at


def _captions(at) -> str:
    return " ".join(c.value for c in at.caption)


def test_the_rules_pages_show_the_constraints_and_the_rules_dropped():
    at = _app_with_constraints()
    ws = at.session_state["workspace"]
    cons = ws.schema.parsed_constraints()
    at.switch_page("../pages/metarule_tree.py").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    shown = _captions(at)
    assert SHOWN in shown and "does not take the constraints" not in shown
    table = at.dataframe[0].value
    lost = table["fitting rows it is out of reach for"]
    rules, rows = int((lost > 0).sum()), int(lost.sum())
    assert rules >= 1 and rows > 0
    assert f"dropped as unreachable for some rows: {rows:,} rows lacking the target cannot reach" in shown
    assert f"{rules} rule{'s' * (rules != 1)} dropped" in shown

    at.switch_page("../pages/counterfactual_rules.py").run()
    row = int(np.flatnonzero(ws.predictions == 0)[0])
    at.number_input(key="cr_row").set_value(row).run()
    at.button(key="cr_go").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    shown = _captions(at)
    assert SHOWN in shown and "dropped as unreachable" in shown, shown
    *_, rule, samples = at.session_state["cr_result"]
    X = ws.X.to_numpy(float)
    assert rule.params["constraints"] == TEXTS and rule.unreachable_cells > 0
    assert len(samples) and all(cons.violated(X[row], z) == [] for z in samples)


def test_fcca_and_the_batch_show_the_constraints_they_honour():
    at = _app_with_constraints()
    ws = at.session_state["workspace"]
    cons = ws.schema.parsed_constraints()
    at.switch_page("../pages/fcca.py").run()
    at.number_input(key="fcca_max").set_value(20)
    at.button[0].click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    shown = _captions(at)
    assert SHOWN in shown and "does not take the constraints" not in shown
    run = at.session_state["fcca_run"]["result"]
    assert run.params["constraints"] == TEXTS
    assert all(cons.violated(a, c) == [] for a, c in zip(run.x0, run.x_ce))

    at.switch_page("../pages/optimal_cf.py").run()
    at.number_input(key="ocb_n").set_value(4).run()
    next(b for b in at.button if b.label.startswith("Run on 4 rows")).click().run()
    assert not at.exception, at.exception
    table = at.session_state["ocb_results"]
    assert len(table) == 4 and SHOWN in _captions(at)
