"""Two browser sessions on one server: a model file that segfaults XGBoost when
read unchecked is refused with a clear message in session A, and both
sessions then load a normal model and compute an optimal counterfactual; the
server process is alive throughout."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest


def _files(tmp_path):
    import xgboost as xgb

    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(300, 4)), columns=["income", "debt", "age", "tenure"])
    y = (X["income"] - X["debt"] > 0).astype(int)
    data = tmp_path / "data.csv"
    X.assign(approved=y).to_csv(data, index=False)
    good = tmp_path / "good.json"
    xgb.XGBClassifier(n_estimators=10, max_depth=3, n_jobs=1).fit(X, y).save_model(good)
    obj = json.loads(good.read_text())
    obj["learner"]["gradient_booster"]["model"]["trees"][0]["left_children"][0] = -7
    bad = tmp_path / "crasher.json"
    bad.write_text(json.dumps(obj))
    return data, good, bad


def test_the_crasher_really_crashes_xgboost_unchecked(tmp_path):
    _, _, bad = _files(tmp_path)
    code = ("import sys, numpy as np, xgboost as xgb; b = xgb.Booster(); b.load_model(sys.argv[1]); "
            "b.predict(xgb.DMatrix(np.zeros((3, 4)), feature_names=b.feature_names))")
    proc = subprocess.run([sys.executable, "-c", code, str(bad)], capture_output=True, timeout=120)
    assert proc.returncode < 0, proc.returncode       # killed by a signal (SIGSEGV)


def _upload_both(page, upload, data, model):
    page.get_by_text("Upload your own").click()
    upload(page, "Data (CSV or Parquet)", str(data))
    page.get_by_text("Target column").wait_for(timeout=120_000)
    _model_upload(page, upload, model)
    page.get_by_role("button", name="Load data and model").click()


def _model_upload(page, upload, model) -> None:
    """Put ``model`` into the model uploader and wait until the server has it: the page's
    caption under the uploader names it. The uploader lists a file as soon as it is picked,
    before it is sent; replacing a file, Load is already enabled, and pressed then on a busy
    machine it loaded the previous file (a fixed 1.5 s, then the listing and a quiet page,
    were both too early)."""
    from browser_util import wait_idle

    upload(page, "Model file", str(model))
    page.locator('[data-testid="stCaptionContainer"]').filter(
        has_text=f"{model.name}: {model.stat().st_size:,} bytes received").first.wait_for(timeout=120_000)
    wait_idle(page, quiet=500)


def _counterfactual(page):
    page.get_by_role("link", name="Optimal counterfactual").click()
    page.get_by_role("heading", name="Optimal counterfactual").wait_for(timeout=90_000)
    page.get_by_role("button", name="Find the optimal counterfactual").click()
    page.get_by_text("Optimal counterfactual: cost", exact=False).first.wait_for(timeout=120_000)
    assert page.locator('[data-testid="stException"]').count() == 0


@pytest.mark.browser
@pytest.mark.slow
def test_a_crashing_model_file_leaves_the_server_and_other_sessions_running(tmp_path):
    from browser_util import browser_page, running_app, upload

    data, good, bad = _files(tmp_path)
    with running_app() as url, browser_page() as a, browser_page(own_context=True) as b:   # b: another user
        for page in (a, b):
            page.goto(url)
            page.get_by_role("heading", name="Data & model").wait_for(timeout=90_000)
        _upload_both(a, upload, data, bad)
        err = a.get_by_text("The model could not be loaded", exact=False)
        try:
            err.first.wait_for(timeout=120_000)
        except Exception as e:
            a.screenshot(path=str(tmp_path / "a-crasher.png"), full_page=True)
            raise AssertionError(f"no error shown; the page read:\n{a.inner_text('body')[:3000]}") from e
        text = a.inner_text("body")
        assert "damaged" in text and "Re-save the model" in text and "Traceback" not in text
        assert a.locator('[data-testid="stException"]').count() == 0
        assert "unexpected" not in text
        # the server is alive and serves both sessions
        _upload_both(b, upload, data, good)
        b.get_by_text("Loaded data.csv and good.json", exact=False).wait_for(timeout=120_000)
        _counterfactual(b)
        _model_upload(a, upload, good)
        a.get_by_role("button", name="Load data and model").click()
        try:
            a.get_by_text("Loaded data.csv and good.json", exact=False).wait_for(timeout=120_000)
        except Exception as e:
            a.screenshot(path=str(tmp_path / "a-reload.png"), full_page=True)
            raise AssertionError(f"A's second load not seen; the page read:\n{a.inner_text('body')[:3000]}") from e
        _counterfactual(a)
        a.screenshot(path=str(tmp_path / "a-after.png"), full_page=True)
        import urllib.request

        assert urllib.request.urlopen(url + "/_stcore/health", timeout=5).read() == b"ok"
