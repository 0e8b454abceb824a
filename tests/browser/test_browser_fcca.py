"""FCCA in the real app as a new user meets it: a 3-class random forest trained on
scikit-learn's wine data, saved with skops, uploaded with its data as CSV; a run
cancelled while it goes, a run to the end, then two browser sessions running
FCCA at once, one of them cancelling while the other's run goes on.

The page once stopped with "unexpected RuntimeError: The executor underlying
Parallel has been shutdown": every session's run shared joblib's one executor,
so one run's end (a Cancel, a rerun) shut the workers down under the others.
Each run now holds a pool of its own (core/optimal/batch.py), kept per session
(dashboard/memory.py); this test drives that path through Streamlit's reruns.
"""

from __future__ import annotations

import re
import time

import pytest
from browser_util import browser_page, shots_dir, upload

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LONG = 120_000                     # ms: a 2-core CI machine running two sessions' workers
COMPUTE = "Compute counterfactuals and thresholds"
CANCELLED = "Cancelled: no new result was kept"


@pytest.fixture(scope="module")
def wine_files(tmp_path_factory):
    """What a data scientist would hand over: the wine table as CSV and a forest saved with skops."""
    import skops.io as sio
    from sklearn.datasets import load_wine
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.model_selection import train_test_split

    wine = load_wine(as_frame=True)
    X, y = wine.data, wine.target
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, stratify=y, random_state=0)
    model = RandomForestClassifier(n_estimators=30, max_depth=3, random_state=0).fit(X_train, y_train)
    assert list(model.classes_) == [0, 1, 2] and model.score(X_test, y_test) > 0.85
    out = tmp_path_factory.mktemp("wine")
    data, forest = out / "wine.csv", out / "wine_forest.skops"
    wine.frame.to_csv(data, index=False)              # the 13 features and "target", last
    sio.dump(model, forest)
    return data, forest


def _alerts(page) -> str:
    return "\n".join(page.locator('[data-testid="stAlert"], [data-testid="stException"]').all_inner_texts())


def _no_error(page) -> None:
    text = page.inner_text("body")
    assert page.locator('[data-testid="stException"]').count() == 0, _alerts(page)
    for bad in ("unexpected", "could not be run", "shutdown", "Traceback"):
        assert bad not in text, f"{bad!r} on the page:\n{_alerts(page)}"


def _click(page, button, done, timeout: float = LONG, wait: float = 15_000) -> None:
    """Click until ``done`` shows: a click that lands while Streamlit swaps the
    page's elements (a rerun) can be swallowed, and a button being redrawn is
    not clickable for a moment."""
    from playwright.sync_api import expect

    deadline = time.monotonic() + timeout / 1000
    while not done.first.is_visible():
        try:
            button.first.click(timeout=10_000)
        except Exception:  # noqa: BLE001 - playwright's TimeoutError: gone or redrawn; look again
            pass
        try:
            expect(done.first).to_be_visible(timeout=wait)
        except AssertionError:
            if time.monotonic() > deadline:
                raise


def _open_with_upload(page, url: str, data, forest) -> None:
    """Upload the two files on Data & model, load them, and go to the FCCA page by its link."""
    from playwright.sync_api import expect

    page.goto(url)
    page.get_by_role("heading", name="Data & model").wait_for(timeout=LONG)
    _click(page, page.get_by_text("Upload your own"),
           page.locator('[data-testid="stFileUploader"]').filter(has_text="Data (CSV or Parquet)"))
    upload(page, "Data (CSV or Parquet)", str(data), timeout=LONG)
    page.get_by_text("wine.csv: 178 rows × 14 columns").wait_for(timeout=LONG)
    page.get_by_text("Target column").wait_for(timeout=LONG)
    upload(page, "Model file", str(forest), timeout=LONG)
    load = page.get_by_role("button", name="Load data and model")
    expect(load).to_be_enabled(timeout=LONG)
    _click(page, load, page.get_by_text(f"Loaded wine.csv and {forest.name}", exact=False))
    _no_error(page)
    link = page.get_by_role("link", name="FCCA thresholds")
    _click(page, link, page.get_by_role("heading", name="FCCA thresholds"))
    expect(page.get_by_role("button", name=COMPUTE)).to_be_visible(timeout=LONG)


def _submit(page, rows: int, *, running: bool = False) -> None:
    """Ask for ``rows`` rows on 2 processes and press the form's button; the run is on
    once its Cancel button shows. ``running``: a run is going, which this submit
    interrupts; the new one is on once its progress counts ``rows``."""
    box = page.get_by_role("spinbutton", name="At most this many rows")
    box.fill(str(rows))
    box.press("Tab")
    done = (page.get_by_text(re.compile(rf"^\d+ of {rows} counterfactuals$")) if running
            else page.get_by_role("button", name="Cancel"))
    _click(page, page.get_by_role("button", name=COMPUTE), done, wait=60_000 if running else 15_000)


def _progress(page):
    """The run's progress text once a chunk of rows is done: the workers are up and solving."""
    return page.get_by_text(re.compile(r"^\d+ of \d+ counterfactuals$"))


def _running(page) -> bool:
    return page.get_by_role("button", name="Cancel").count() > 0


def _cancel(page) -> None:
    from playwright.sync_api import expect

    _click(page, page.get_by_role("button", name="Cancel"), page.get_by_text(CANCELLED, exact=False))
    expect(page.get_by_role("button", name="Cancel")).to_have_count(0, timeout=LONG)


def _metric(page, label: str):
    """The value of the metric labelled exactly ``label``."""
    metric = page.locator('[data-testid="stMetric"]').filter(
        has=page.locator('[data-testid="stMetricLabel"]').get_by_text(label, exact=True))
    return metric.locator('[data-testid="stMetricValue"]')


def _finished(page, rows: int) -> None:
    """The run has ended with a real result of ``rows`` counterfactuals: metrics,
    heatmap, curves, tree and table, none of them left over from an earlier run."""
    from playwright.sync_api import expect

    expect(page.get_by_role("button", name="Cancel")).to_have_count(0, timeout=LONG)
    expect(_metric(page, "Counterfactuals")).to_have_text(f"{rows:,}", timeout=LONG)
    fresh = page.locator('[data-testid="stElementContainer"]:not([data-stale="true"])')
    expect(fresh.locator('[data-testid="stMetricLabel"]').get_by_text("Thresholds kept", exact=True)
           ).to_be_visible(timeout=LONG)
    expect(fresh.locator(".js-plotly-plot")).to_have_count(2, timeout=LONG)         # heatmap and curves
    expect(fresh.locator('[data-testid="stGraphVizChart"]')).to_have_count(1, timeout=LONG)
    expect(fresh.locator('[data-testid="stDataFrame"]')).to_have_count(1, timeout=LONG)
    expect(page.locator('[data-stale="true"]')).to_have_count(0, timeout=LONG)    # the script run is over
    assert "not run" not in page.inner_text("body")              # every selected row was solved
    assert int(_metric(page, "Thresholds").inner_text()) > 0
    _no_error(page)


def test_fcca_on_an_uploaded_wine_forest_cancels_reruns_and_runs_in_two_sessions(app_url, wine_files, tmp_path):
    from playwright.sync_api import expect

    data, forest = wine_files
    shots = shots_dir(tmp_path)
    with browser_page(height=2400) as a, browser_page(height=2400, own_context=True) as b:   # b: another user
        _open_with_upload(a, app_url, data, forest)

        # 1. one session: a run of every row cancelled while its workers solve
        _submit(a, 178)
        expect(_progress(a)).to_be_visible(timeout=LONG)
        _cancel(a)
        expect(a.get_by_text("Press the button to compute", exact=False)).to_be_visible(timeout=LONG)
        _no_error(a)
        # a run interrupted by a new submit (a Streamlit rerun mid-run), then that run to the end
        _submit(a, 178)
        expect(_progress(a)).to_be_visible(timeout=LONG)
        _submit(a, 30, running=True)
        _finished(a, 30)
        a.screenshot(path=str(shots / "fcca_wine_result.png"), full_page=True)

        # 2. a second session (its own browser context) beside the first: B starts, A starts,
        # B cancels while A's workers solve; A's run goes on, B reruns, both finish
        _open_with_upload(b, app_url, data, forest)
        _submit(b, 178)
        _submit(a, 120)
        expect(_progress(a)).to_be_visible(timeout=LONG)
        _cancel(b)
        assert _running(a), "A's run ended before B cancelled: the test would prove nothing"
        expect(b.get_by_text("Press the button to compute", exact=False)).to_be_visible(timeout=LONG)
        _submit(b, 30)
        assert _running(a)                                  # both sessions run at once
        _finished(b, 30)
        _finished(a, 120)
        expect(a.get_by_text(CANCELLED, exact=False)).to_have_count(0)
        a.screenshot(path=str(shots / "fcca_wine_two_sessions_a.png"), full_page=True)
        b.screenshot(path=str(shots / "fcca_wine_two_sessions_b.png"), full_page=True)
