"""Class names the analyst sets (#29 item 5): checked, and used by the pages, the story and the report."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ROOT, demo_credit
from streamlit.testing.v1 import AppTest

from core.audit import run_audit
from core.audit.story import case_story
from core.errors import SchemaError
from core.intake.workspace import build_workspace
from core.shown import outcome_text


@pytest.fixture(scope="module")
def named_ws():
    df, target, model, *_ = demo_credit()
    return build_workspace(df, target, model, name="credit", protected=["sex"]).with_class_names({0: "refused", 1: "approved"})


def test_outcome_text():
    assert outcome_text(np.int64(1), {"1": "approved"}) == "approved (1)"
    assert outcome_text(np.int64(1)) == "1"
    assert outcome_text((194.63063523197212, 313.57924108345725)) == "(194.6, 313.6)"


def test_class_names_are_checked(named_ws):
    with pytest.raises(SchemaError, match="not a class"):
        named_ws.with_class_names({"7": "maybe"})
    with pytest.raises(SchemaError, match="same name"):
        named_ws.with_class_names({0: "x", 1: "x"})
    assert named_ws.with_class_names({0: " ", 1: "approved"}).class_names == {"1": "approved"}


def test_story_and_report_use_the_names(named_ws):
    ws = named_ws
    row = int(np.flatnonzero(ws.predictions == 0)[0])
    story = case_story(ws, row, 1, time_limit=10)
    assert story.title == f"Case {row}: refused (0) → approved (1)"
    assert "**approved (1)**" in " ".join(dict(story.sections)["The decision"])
    audit = run_audit(ws.ensemble, ws.X.to_numpy(float), schema=ws.schema, target=1, max_rows=20, n_jobs=1,
                      model=ws.model, n_perm=20, n_boot=10, tcrex=False, local_rules_per_group=0, scan=False,
                      class_names=ws.class_names)
    assert "favourable outcome: approved (1)" in audit.to_html()


def test_pages_show_the_names():
    app = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=180)
    app.run()
    app.text_input(key="dm_class_0").set_value("refused")
    app.text_input(key="dm_class_1").set_value("approved")
    app.button[[b.label for b in app.button].index("Apply class names")].click().run()
    assert not app.exception, app.exception
    assert app.session_state["workspace"].class_names == {"0": "refused", "1": "approved"}
    app.switch_page("../pages/optimal_cf.py").run()
    assert not app.exception, app.exception
    box = app.selectbox(key="ocf_target")
    assert "approved (1)" in box.options and "refused (0)" in box.options
    assert any("approved (1)" in m.value or "refused (0)" in m.value for m in app.markdown)
