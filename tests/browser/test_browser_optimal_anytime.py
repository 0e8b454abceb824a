"""The Optimal counterfactual page while a query runs, in the real app (issue 41, item 3).

What a data scientist would hand over: scikit-learn's breast cancer table as CSV and
a random forest of 100 trees of depth 8 saved with skops, and the Solver set to
CP-SAT, which needs far more than a minute for its proof there. (At depth 5 CP-SAT
proves the first row's answer in under a second on a quiet machine, outside the page:
too soon to press Stop on a fast one. The app runs the query in its own process, where
the test cannot hold it as the page test does.) While the query runs the page shows the best
valid point's cost, the proven lower bound and the gap, updating; Stop keeps the
best point with its gap. Screenshots of both moments go to ``shots_dir``.
"""

from __future__ import annotations

import re

import pytest
from browser_util import browser_page, click_until, shots_dir, upload

pytestmark = pytest.mark.browser

LONG = 120_000


@pytest.fixture(scope="module")
def cancer_files(tmp_path_factory):
    import skops.io as sio
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import RandomForestClassifier

    data = load_breast_cancer(as_frame=True)
    model = RandomForestClassifier(n_estimators=100, max_depth=8, random_state=0).fit(data.data, data.target)
    assert model.predict(data.data.iloc[[0]])[0] == 0           # row 0, the page's first, is to be changed
    out = tmp_path_factory.mktemp("cancer")
    table, forest = out / "cancer.csv", out / "cancer_forest.skops"
    data.frame.to_csv(table, index=False)
    sio.dump(model, forest)
    return table, forest


def _metric(page, label: str) -> str:
    box = page.locator('[data-testid="stMetric"]').filter(has=page.get_by_text(label, exact=True)).first
    return box.locator('[data-testid="stMetricValue"]').inner_text().strip()


def _number(text: str) -> float:
    return float(text.replace(",", "").rstrip("%s ").strip())


def _shot(page, path) -> None:
    page.locator('[data-testid="stMain"]').evaluate("e => e.scrollTo(0, e.scrollHeight)")
    page.wait_for_timeout(300)
    page.screenshot(path=str(path), full_page=True)


@pytest.mark.slow
def test_the_gap_shows_while_the_query_runs_and_stop_keeps_the_best_point(app_url, cancer_files, tmp_path):
    from playwright.sync_api import expect

    table, forest = cancer_files
    shots = shots_dir(tmp_path)
    with browser_page(height=1400) as page:
        page.goto(app_url)
        page.get_by_role("heading", name="Data & model").wait_for(timeout=LONG)
        click_until(page, page.get_by_text("Upload your own"),
                    page.locator('[data-testid="stFileUploader"]').filter(has_text="Data (CSV or Parquet)"))
        upload(page, "Data (CSV or Parquet)", str(table), timeout=LONG)
        page.get_by_text("Target column").wait_for(timeout=LONG)
        upload(page, "Model file", str(forest), timeout=LONG)
        load = page.get_by_role("button", name="Load data and model")
        expect(load).to_be_enabled(timeout=LONG)
        click_until(page, load, page.get_by_text("Loaded cancer.csv and cancer_forest.skops", exact=False))
        click_until(page, page.get_by_role("link", name="Optimal counterfactual"),
                    page.get_by_role("heading", name="Optimal counterfactual"))
        limit = page.get_by_role("spinbutton", name="Time limit (s)")
        limit.fill("300")
        limit.press("Tab")
        solver = page.locator('[data-testid="stSelectbox"]').filter(has_text="Solver").first   # the single query's
        click_until(page, solver, page.get_by_role("option", name="cpsat", exact=True))
        page.get_by_role("option", name="cpsat", exact=True).click()
        expect(solver.locator("input")).to_have_value("cpsat", timeout=30_000)
        click_until(page, page.get_by_role("button", name="Find the optimal counterfactual"),
                    page.get_by_role("button", name="Stop"))

        # the best cost, the proven lower bound and the gap, updating while it runs
        lower = page.locator('[data-testid="stMetric"]').filter(has=page.get_by_text("Lower bound", exact=True))
        expect(lower.locator('[data-testid="stMetricValue"]')).not_to_have_text("–", timeout=LONG)
        first = _metric(page, "Elapsed")
        expect(page.locator('[data-testid="stMetric"]').filter(has=page.get_by_text("Elapsed", exact=True))
               .locator('[data-testid="stMetricValue"]')).not_to_have_text(first, timeout=30_000)
        cost, bound, gap = _metric(page, "Best cost so far"), _metric(page, "Lower bound"), _metric(page, "Gap")
        assert 0 < _number(bound) <= _number(cost) and gap.endswith("%"), (cost, bound, gap)
        assert page.get_by_text("Searching", exact=False).first.is_visible()
        _shot(page, shots / "optimal_running.png")

        click_until(page, page.get_by_role("button", name="Stop"),
                    page.get_by_text("Best valid counterfactual when stopped", exact=False))
        status = page.locator('[data-testid="stMetric"]').filter(has=page.get_by_text("Status", exact=True))
        expect(status).to_contain_text("stopped", timeout=LONG)
        assert re.fullmatch(r"\d+(\.\d+)?%", _metric(page, "Gap")), _metric(page, "Gap")
        assert 0 < _number(_metric(page, "Lower bound")) <= _number(_metric(page, "Cost"))
        assert _number(_metric(page, "Solve time")) < 250                 # stopped, long before its limit
        expect(page.get_by_text("within a gap of", exact=False).first).to_be_visible()
        expect(page.get_by_role("button", name="Download result (JSON)")).to_be_visible()
        assert page.locator('[data-testid="stException"]').count() == 0
        _shot(page, shots / "optimal_stopped.png")
