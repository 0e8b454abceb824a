"""The pages' downloads in the analyst's columns (#38 item 3), read back as a user would
open them: the optimal counterfactual's JSON and CSV and the batch CSV of a model with
missing values, the counterfactual rule's JSON and samples CSV and the metarule text and
JSON of a one-hot pipeline. Every download the page offers is recorded as the page hands
it to Streamlit (the real ``dashboard.ui.download`` still runs)."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT, missing_values_workspace, one_hot_pipeline_workspace
from streamlit.testing.v1 import AppTest

from core.intake.columns import apply_values


@pytest.fixture(autouse=True)
def _one_thread():  # noqa: PT004
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="openmp"):
        yield


def _app_on(ws, page: str) -> AppTest:
    app = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=300)
    app.run()
    app.session_state["workspace"] = ws
    app.session_state["demo_key"] = None
    app.run()
    app.switch_page(f"../pages/{page}").run()
    assert not app.exception, app.exception
    return app


def _predict_record(ws, model, x_codes: np.ndarray, record: dict) -> object:
    """The original model's output on the row ``x_codes`` with the exported values written in."""
    return model.predict(ws.to_raw(apply_values(ws.columns, x_codes, record)[None, :]))[0]


def _click(app, label: str) -> None:
    app.button[[b.label for b in app.button].index(label)].click().run()
    assert not app.exception, app.exception


def test_optimal_counterfactual_downloads_of_a_model_with_missing_values(downloads):
    ws, model = missing_values_workspace("hgb")
    raw, X = ws.raw, ws.X.to_numpy(float)
    r = int(np.flatnonzero((ws.predictions == 0) & raw[["income", "hours"]].isna().any(axis=1).to_numpy())[0])
    app = _app_on(ws, "optimal_cf.py")
    app.number_input(key="ocf_row").set_value(r).run()
    _click(app, "Find the optimal counterfactual")
    res = app.session_state["ocf_result"]
    assert res.found
    assert all("inf" not in str(m.value) for m in app.metric)
    d = json.loads(downloads["ocf_dl_json"])
    assert "is missing" not in downloads["ocf_dl_json"]
    assert set(d["x"]) == {"age", "income", "hours", "sex"}
    for col, v in d["x_query"].items():
        assert (v is None) == bool(pd.isna(raw.at[r, col])) and (v is None or v == raw.at[r, col])
    assert _predict_record(ws, model, X[r], d["x"]) == 1
    table = pd.read_csv(io.StringIO(downloads["ocf_dl_csv"]))
    assert {"column", "original", "counterfactual", "original value", "counterfactual value"} <= set(table.columns)
    assert set(table["column"]) == {"age", "income", "hours", "sex"}
    back = {c: (None if pd.isna(v) else float(v)) for c, v in zip(table["column"], table["counterfactual value"])}
    assert model.predict(ws.to_raw(apply_values(ws.columns, X[r], back)[None, :]))[0] == 1
    for c, v in zip(table["column"], table["original value"]):
        assert pd.isna(v) == bool(pd.isna(raw.at[r, c]))

    app.number_input(key="ocb_n").set_value(4).run()
    _click(app, "Run on 4 rows")
    batch = pd.read_csv(io.StringIO(downloads["ocb_dl"]))
    assert len(batch) == 4 and {f"cf:{c}" for c in ("age", "income", "hours", "sex")} <= set(batch.columns)
    assert not [c for c in batch.columns if "is missing" in c]
    rows = np.flatnonzero(ws.predictions == 0)[:4]
    for rec, row in zip(batch.to_dict(orient="records"), rows):
        assert rec["row"] == row
        values = {c: (None if pd.isna(rec[f"cf:{c}"]) else rec[f"cf:{c}"]) for c in ("age", "income", "hours", "sex")}
        assert _predict_record(ws, model, X[row], values) == 1
        assert rec["features changed"] == len(str(rec["changes"]).split("; "))


def test_rule_and_metarule_downloads_of_a_pipeline(downloads):
    ws, _ = one_hot_pipeline_workspace()
    df = ws.raw
    app = _app_on(ws, "counterfactual_rules.py")
    app.button(key="cr_go").click().run()
    assert not app.exception, app.exception
    d = json.loads(downloads["cr_dl_json"])
    assert {c["column"] for c in d["conditions"]} <= {"age", "income", "job", "city"}
    assert all(isinstance(a["conditions"], list) for a in d["alternatives"])
    samples = pd.read_csv(io.StringIO(downloads["cr_dl_csv"]))
    assert {"model output", "reaches target"} <= set(samples.columns)

    app.switch_page("../pages/metarule_tree.py").run()
    assert not app.exception, app.exception
    text = downloads["mt_dl_txt"]
    assert "np." not in text and text.startswith("T-CREx rules for target ")
    rules = json.loads(downloads["mt_dl_json"])
    conds = [c for r in rules["rules"] for c in r["conditions"]]
    assert conds and all(c["column"] in {"age", "income", "job", "city"} for c in conds)
    assert any("in" in c for c in conds)
    assert all(set(c["in"]) - {None} <= set(df[c["column"]]) for c in conds if "in" in c)


def test_the_optimal_counterfactual_csv_has_one_shape_for_a_tree_model_and_a_pipeline(downloads):
    """#59 item 8: a tree ensemble read on the table's own columns and a one-hot pipeline
    give the same columns (before: feature / change for the one, column / value for the
    other), with what the answer guarantees; the values written in get the target."""
    from sklearn.ensemble import RandomForestClassifier

    from core.intake.workspace import build_workspace

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"age": rng.integers(18, 80, 400).astype(float), "income": rng.normal(50, 15, 400).round(2)})
    df["y"] = ((df.income > 55) | (df.age > 60)).astype(int)
    rf = RandomForestClassifier(20, max_depth=4, random_state=0).fit(df[["age", "income"]], df.y)
    tree_ws = build_workspace(df, "y", rf, name="rf")
    pipe_ws, pipe = one_hot_pipeline_workspace(n=600)
    shapes = []
    for ws, model in ((tree_ws, rf), (pipe_ws, pipe)):
        X = ws.X.to_numpy(float)
        r = int(np.flatnonzero(ws.predictions == 0)[0])
        app = _app_on(ws, "optimal_cf.py")
        app.number_input(key="ocf_row").set_value(r).run()
        _click(app, "Find the optimal counterfactual")
        table = pd.read_csv(io.StringIO(downloads["ocf_dl_csv"]))
        shapes.append(list(table.columns))
        assert set(table["column"]) == {c.name for c in ws.columns}
        assert set(table["guarantee"]) == {app.session_state["ocf_result"].guarantee.kind}
        values = {c: (v if isinstance(v, str) else float(v)) for c, v in zip(table["column"],
                                                                           table["counterfactual value"])}
        assert _predict_record(ws, model, X[r], values) == 1
    assert shapes[0] == shapes[1], shapes
