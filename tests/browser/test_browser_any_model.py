"""Any model in the real app: a data scientist's MLP pipeline exported to ONNX (skl2onnx, one
input per column, the job as text), uploaded with its table; the data page says what kind of
model it is, and every page of the sidebar runs on it, says when its answers come from the
surrogate, and the optimal counterfactual says it is valid on the uploaded model.

The pages share one browser session (the upload is what they analyse), each a test of its
own, in the sidebar's order."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest
from browser_util import browser_page, shots_dir, upload

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LONG = 180_000
N = 500


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import FloatTensorType, StringTensorType
    from sklearn.compose import ColumnTransformer
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    rng = np.random.default_rng(3)
    df = pd.DataFrame({"age": rng.integers(18, 80, N).astype(float), "income": rng.normal(50, 15, N).round(1),
                       "job": rng.choice(["clerk", "nurse", "pilot"], N), "sex": rng.integers(0, 2, N).astype(float)})
    y = ((df.income - 50) / 15 + (df.job == "pilot") - 0.02 * (df.age - 45) - 0.3 * df.sex
         + rng.normal(0, .5, N) > 0).astype(int)
    pre = ColumnTransformer([("num", StandardScaler(), ["age", "income", "sex"]),
                             ("cat", OneHotEncoder(handle_unknown="ignore"), ["job"])])
    pipe = make_pipeline(pre, MLPClassifier(hidden_layer_sizes=(32, 32), max_iter=600, random_state=0)).fit(df, y)
    onx = to_onnx(pipe, initial_types=[("age", FloatTensorType([None, 1])), ("income", FloatTensorType([None, 1])),
                                       ("job", StringTensorType([None, 1])), ("sex", FloatTensorType([None, 1]))],
                  target_opset=17)
    out = tmp_path_factory.mktemp("mlp")
    data, model = out / "applicants.csv", out / "mlp.onnx"
    df.assign(approved=y).to_csv(data, index=False)
    model.write_bytes(onx.SerializeToString())
    return {"data": data, "model": model, "pipe": pipe, "frame": df}


def _click(page, button, done, timeout: float = LONG) -> None:
    from playwright.sync_api import expect

    deadline = time.monotonic() + timeout / 1000
    while not done.first.is_visible():
        try:
            button.first.click(timeout=10_000)
        except Exception:  # noqa: BLE001 - redrawn by a rerun: look again
            pass
        try:
            expect(done.first).to_be_visible(timeout=15_000)
        except AssertionError:
            if time.monotonic() > deadline:
                raise


def _settled(page) -> None:
    """The script run is over: no element left stale and no running icon, for a moment."""
    from browser_util import wait_idle

    wait_idle(page, timeout=LONG)


def _no_error(page) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0
    text = page.inner_text('[data-testid="stMain"]')
    assert "Traceback" not in text and "could not be" not in text, text[:3000]


def _go(page, title: str) -> None:
    link = page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=title, exact=True)
    _click(page, link, page.get_by_role("heading", name=title, exact=True))


@pytest.fixture(scope="module")
def app(app_url, files, tmp_path_factory):
    from playwright.sync_api import expect

    shots = shots_dir(tmp_path_factory.mktemp("shots"))
    with browser_page(height=2400) as page:
        page.goto(app_url)
        page.get_by_role("heading", name="Data & model").wait_for(timeout=LONG)
        _click(page, page.get_by_text("Upload your own"),
               page.locator('[data-testid="stFileUploader"]').filter(has_text="Data (CSV or Parquet)"))
        upload(page, "Data (CSV or Parquet)", str(files["data"]), timeout=LONG)
        page.get_by_text("Target column").wait_for(timeout=LONG)
        upload(page, "Model file", str(files["model"]), timeout=LONG)
        load = page.get_by_role("button", name="Load data and model")
        expect(load).to_be_enabled(timeout=LONG)
        _settled(page)
        load.click()                 # once: the model starts in its worker and its surrogate is fitted
        expect(page.get_by_text("Loaded applicants.csv and mlp.onnx", exact=False)).to_be_visible(timeout=LONG)
        yield page, shots


def test_the_data_page_says_what_kind_of_model_it_is(app):
    page, shots = app
    _settled(page)
    page.screenshot(path=str(shots / "any_data_model.png"), full_page=True)
    main = page.inner_text('[data-testid="stMain"]')
    assert "Any other" in main and "Surrogate agreement" in main, main[:2000]
    assert "not read exactly" in main
    _no_error(page)


def test_the_optimal_counterfactual_is_valid_on_the_uploaded_model(app, files):
    page, shots = app
    _go(page, "Optimal counterfactual")
    _settled(page)
    _settled(page)
    page.get_by_role("button", name="Find the optimal counterfactual").click()
    page.get_by_text("Counterfactual valid on the model", exact=False).first.wait_for(timeout=LONG)
    _settled(page)
    page.get_by_text("Valid on the uploaded model (checked on it)", exact=False).first.wait_for(timeout=LONG)
    page.screenshot(path=str(shots / "any_optimal_cf.png"), full_page=True)
    _no_error(page)


@pytest.mark.parametrize("title, button, done", [
    ("Metarule tree", None, "Metarule tree"),
    ("Counterfactual rules", "Find the counterfactual rule", "CRP"),
    ("Decision regions", None, "surrogate"),
    ("FCCA thresholds", None, "surrogate"),
    ("Case story", "Tell the story", "Download the story"),
])
def test_every_page_runs_on_it(app, title, button, done):
    page, shots = app
    _go(page, title)
    _settled(page)
    if button is not None:
        page.get_by_role("button", name=button).first.click()
        page.get_by_text(done, exact=False).first.wait_for(timeout=LONG)
        _settled(page)
    page.get_by_text(done, exact=False).first.wait_for(timeout=LONG)
    page.screenshot(path=str(shots / f"any_{title.replace(' ', '_').lower()}.png"), full_page=True)
    _no_error(page)
