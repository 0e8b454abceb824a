"""The Compare models page (#25) on the demo and its updated model: agreement, the
invalidation study with per-group figures, exports; bad model B refused, nothing lost."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ROOT
from streamlit.testing.v1 import AppTest


def _page():
    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=300)
    at.run()
    at.switch_page("../pages/compare_models.py").run()
    assert not at.exception, at.exception
    return at


@pytest.fixture(scope="module")
def studied():
    """The page with the demo's update loaded and a study of 30 rows run, shared by the two tests
    below (the second goes on to audit both models; the study is the same in both)."""
    at = _page()
    at.button(key="cm_load_demo").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    labels = {m.label: m.value for m in at.metric}
    assert labels["Rows"] == "3,000" and 0 < float(labels["Decisions alike"].rstrip("%")) < 100
    at.number_input(key="cm_rows").set_value(30)
    at.number_input(key="cm_jobs").set_value(1).run()
    at.button(key="cm_go").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    return at


def test_demo_update_is_compared_and_studied(studied):
    at = studied
    c = at.session_state["cm_result"]["c"]
    assert len(c.rows) == 30 and set(c.groups["group"]) == {"0", "1"}
    ws = at.session_state["workspace"]
    b = at.session_state["cm_b"]["ws"]
    found = (c.rows["found_a"] == 1).to_numpy()
    assert found.sum() >= 20
    for k in np.flatnonzero(found):                                   # invalidated = B does not give the target
        r = int(c.rows["row"].iloc[k])                                # at A's recourse, both as loaded
        assert ws.predictions[r] != 1 and ws.model.predict(ws.to_raw(c.points_a[k][None]))[0] == 1
        assert int(c.rows["invalidated"].iloc[k]) == int(b.model.predict(b.to_raw(c.points_a[k][None]))[0] != 1)
        assert ws.model.predict(ws.to_raw(c.points_both[k][None]))[0] == 1
        assert b.model.predict(b.to_raw(c.points_both[k][None]))[0] == 1
    assert any("would not get" in s.value for s in [*at.warning, *at.success])
    assert c.meta["model_b"]["content_sha256"] == b.ensemble.content_hash() != c.meta["model_a"]["content_sha256"]
    assert [b.label for b in at.get("download_button")][:3] == ["Report (HTML)", "Per-row results (CSV)",
                                                                 "Comparison (JSON)"]


def test_a_model_for_other_columns_is_refused_and_nothing_is_lost(tmp_path):
    import lightgbm as lgb
    import pandas as pd

    at = _page()
    at.button(key="cm_load_demo").click().run()
    before = at.session_state["cm_b"]
    rng = np.random.default_rng(0)
    other = lgb.LGBMClassifier(n_estimators=5, verbose=-1).fit(pd.DataFrame(rng.normal(size=(100, 3)),
                                                                            columns=["p", "q", "r"]),
                                                               rng.integers(0, 2, 100))
    path = tmp_path / "other.txt"
    other.booster_.save_model(str(path))
    at.radio(key="cm_source").set_value("Upload a model file").run()
    at.file_uploader(key="cm_model_file").upload("other.txt", path.read_bytes(), "text/plain")
    at.run()
    at.button(key="cm_load_file").click().run()
    assert not at.exception
    assert any("could not be loaded" in e.value for e in at.error), [e.value for e in at.error]
    assert at.session_state["cm_b"] is before                          # the loaded model B is kept


def test_fairness_audits_of_both_side_by_side(studied):
    at = studied
    assert len(at.session_state["cm_result"]["c"].rows) == 30
    at.button(key="cm_audit_go").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    audits = at.session_state["cm_audits"]
    assert len(audits["a"].rows) == 30 and len(audits["b"].rows) == 30
    # B's gaps are measured against A's reference groups: only gaps between the same groups compare
    assert audits["b"].params["reference"] == audits["a"].references == audits["b"].references
    labels = [m.label for m in at.metric]
    assert "Gaps opened" in labels and "Gaps closed" in labels


def test_model_b_from_an_earlier_audit(fresh_history):
    """An audit stored with its model (as the Fairness audit page stores it) gives model B."""
    from core.audit import run_audit
    from core.intake.demo import updated_model
    from core.intake.workspace import build_workspace
    from dashboard.history import store

    at = _page()
    ws = at.session_state["workspace"]
    wb = build_workspace(ws.raw, ws.target, updated_model("credit-lightgbm")[0], name="v2")
    audit = run_audit(wb.ensemble, wb.X, schema=ws.schema, target=1, max_rows=20, n_jobs=1, n_perm=50, n_boot=20,
                      tcrex=False, local_rules_per_group=0, scan=False)
    audit_id = store().save(audit, title="version 2", ensemble=wb.ensemble)
    assert store().with_models() == [audit_id]
    at.radio(key="cm_source").set_value("A model from an earlier audit").run()
    at.selectbox(key="cm_audit_id").set_value(audit_id).run()
    at.button(key="cm_load_audit").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    got = at.session_state["cm_b"]["ws"]
    assert (got.predictions == wb.predictions).all() and got.ensemble.content_hash() == wb.ensemble.content_hash()
    assert store().delete(audit_id) and store().with_models() == []


def test_a_model_with_other_classes_is_refused_in_plain_words(tmp_path):
    """A model B for the same columns deciding between three classes: the message names
    both models and their classes as the analyst reads them (no numpy reprs)."""
    from core.intake.demo import DEMOS, build_demo
    from core.intake.io import sha256, train_model

    df, target, _, _ = build_demo("credit-lightgbm")
    y3 = (df[target] + (df["income"] > 60)).astype(int)
    m3 = train_model(df.drop(columns=[target]), y3, DEMOS["credit-lightgbm"].family, random_state=0,
                     **DEMOS["credit-lightgbm"].params).model
    path = tmp_path / "three.txt"
    m3.booster_.save_model(str(path))
    at = _page()
    at.radio(key="cm_source").set_value("Upload a model file").run()
    at.file_uploader(key="cm_model_file").upload("three.txt", path.read_bytes(), "text/plain")
    at.run()
    at.button(key="cm_load_file").click().run()
    assert not at.exception
    text = " ".join(e.value for e in at.error)
    assert "Model B has the classes 0, 1, 2, model A 0, 1" in text, text
    assert "np." not in text and "the first" not in text
    assert at.session_state.get("cm_b") is None

    # an accepted upload is fingerprinted by its file
    good = tmp_path / "good.txt"
    build_demo("credit-lightgbm")[2].booster_.save_model(str(good))
    at.file_uploader(key="cm_model_file").upload("good.txt", good.read_bytes(), "text/plain")
    at.run()
    at.button(key="cm_load_file").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.session_state["cm_b"]["ws"].model_sha256 == sha256(good.read_bytes())


def test_the_regions_of_both_models_draw_as_many_as_asked(studied):
    """Both slices were cut at 2,000 regions with no way to draw more (a trial's model B left the
    row's own area blank): the page takes "Most regions drawn", kept as a setting, and says
    what to do when a slice is drawn in part."""
    at = studied                                 # the regions are drawn below the study's result
    assert at.number_input(key="cm_max").value == 2000 and not any("Only the first" in w.value for w in at.warning)
    at.number_input(key="cm_max").set_value(50).run()
    assert not at.exception, at.exception
    cut = [w.value for w in at.warning if w.value.startswith("Only the first")]
    assert len(cut) == 2 and all("Only the first 50 regions" in w and "Most regions drawn" in w for w in cut), cut
