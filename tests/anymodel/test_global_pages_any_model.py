"""The global views with an MLP uploaded as a user would (skops): the metarule tree, the
counterfactual rules and FCCA each say, beside their answer, what it guarantees about the
uploaded model, in the one sentence every page uses, and their downloads carry it."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import ROOT
from test_pages_any_model import _app, _upload, files  # noqa: F401  (files: the module's fixture)

from core.model.guarantee import Guarantee, guarantee_line


def _shown(at) -> list[str]:
    return [e.value for e in [*at.caption, *at.success, *at.info, *at.warning, *at.markdown]]


def _page(at, name: str):
    at.switch_page(str(ROOT / "pages" / name)).run()
    assert not at.exception, (name, at.exception)


@pytest.mark.slow
def test_the_global_views_say_what_their_answers_guarantee_about_the_mlp(files, downloads):  # noqa: F811
    df, mlp, _, data = files
    at = _app()
    _upload(at, df, "mlp.skops", data["mlp.skops"])
    ws = at.session_state["workspace"]
    assert ws.model_kind == "black_box"

    _page(at, "metarule_tree.py")
    saved = json.loads(downloads["mt_dl_json"])
    g = Guarantee.from_dict(saved["guarantee"])
    assert g.model_kind == "black_box"
    assert guarantee_line(g, "this set of rules") in _shown(at)
    assert any(r["edge_rows"] for r in saved["rules"]) and "accepted by the model itself" in g.note

    _page(at, "counterfactual_rules.py")
    at.number_input(key="cr_row").set_value(int(np.flatnonzero(ws.predictions == 0)[0])).run()
    at.button(key="cr_go").click().run()
    assert not at.exception, at.exception
    said = [s for s in _shown(at) if s.startswith("What this rule guarantees: ")]
    assert said and "accepted by the model itself" in said[0], said
    rule = json.loads(downloads["cr_dl_json"])
    assert rule["guarantee"]["model_kind"] == "black_box"
    assert guarantee_line(Guarantee.from_dict(rule["guarantee"]), "this rule") in said
    assert "guarantee_text" in downloads["cr_dl_csv"].splitlines()[0]

    _page(at, "fcca.py")
    at.number_input(key="fcca_max").set_value(30)
    at.number_input(key="fcca_jobs").set_value(1)
    next(b for b in at.button if b.label == "Compute counterfactuals and thresholds").click().run()
    assert not at.exception, at.exception
    shown = _shown(at)
    assert any("The run stops after 120 s" in s for s in shown), shown
    said = [s for s in shown if s.startswith("What this set of thresholds guarantees: ")]
    assert said and "surrogate" in said[0] and "Proven" not in said[0], said
    head = downloads["fcca_dl_t"].splitlines()[0]
    assert "source" in head and "accepted by the model" in head and "guarantee_text" in head

