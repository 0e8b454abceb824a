"""Every analysis page on a regression model and on a multiclass model: no traceback, sensible output."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ROOT
from streamlit.testing.v1 import AppTest

PAGES = ["optimal_cf.py", "metarule_tree.py", "decision_regions.py"]


def _load(csv: bytes, target: str, family: str, trees: int = 30) -> AppTest:
    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=180)
    at.run()
    at.radio(key="dm_source").set_value("Upload your own").run()
    at.file_uploader(key="dm_data_file").upload("data.csv", csv, "text/csv")
    at.run()
    at.selectbox(key="dm_target").set_value(target).run()
    at.radio(key="dm_how").set_value("Train a model here").run()
    at.selectbox(key="dm_family").set_value(family)
    at.number_input(key="dm_trees").set_value(trees)
    at.number_input(key="dm_depth").set_value(4)
    at.button(key="dm_train_go").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    return at


@pytest.fixture(scope="module")
def regression_csv():
    from sklearn.datasets import load_diabetes

    d = load_diabetes(as_frame=True)
    return d.frame.to_csv(index=False).encode()


@pytest.fixture(scope="module")
def multiclass_csv():
    from sklearn.datasets import load_wine

    d = load_wine(as_frame=True)
    return d.frame.to_csv(index=False).encode()


@pytest.mark.parametrize("page", PAGES)
def test_pages_on_a_regression_model(regression_csv, page):
    at = _load(regression_csv, "target", "random_forest")
    assert at.session_state["workspace"].ensemble.task == "regression"
    at.switch_page(f"../pages/{page}").run()
    assert not at.exception, at.exception
    if page == "optimal_cf.py":
        next(b for b in at.button if b.label.startswith("Find")).click().run()
        assert not at.exception
        res = at.session_state["ocf_result"]
        ws = at.session_state["workspace"]
        assert res.found, res.message     # the default interval is one the predictions reach
        v = ws.ensemble.predict(res.x[None, :])[0]
        lo, hi = at.number_input(key="ocf_lo").value, at.number_input(key="ocf_hi").value
        assert lo <= v <= hi
    # the default settings find rules above the mean prediction on diabetes: no error on any page
    assert not at.error, [e.value for e in at.error]
    if page == "metarule_tree.py":
        assert int({m.label: m.value for m in at.metric}["Rules"]) >= 1


@pytest.mark.parametrize("page", PAGES)
def test_pages_on_a_multiclass_model(multiclass_csv, page):
    at = _load(multiclass_csv, "target", "xgboost", trees=10)     # 10 trees a class: 30 in all
    ws = at.session_state["workspace"]
    assert ws.ensemble.n_classes == 3
    at.switch_page(f"../pages/{page}").run()
    assert not at.exception, at.exception
    if page == "optimal_cf.py":
        next(b for b in at.button if b.label.startswith("Find")).click().run()
        res = at.session_state["ocf_result"]
        assert res.found and ws.ensemble.predict(res.x[None, :])[0] == res.prediction
        assert not np.array_equal(res.x, res.x_query)
    assert not at.exception and not at.error, [e.value for e in at.error]
