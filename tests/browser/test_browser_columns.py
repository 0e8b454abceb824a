"""The analyst's columns in the browser (#29): the what-if editor picks one category of a
column the model reads as one-hot features, and the rules page counts the table's columns."""

from __future__ import annotations

import pytest
from browser_util import app_view, choose, shots_dir, wait_idle

pytestmark = pytest.mark.browser


def test_what_if_category_picker(app_url, tmp_path):
    from playwright.sync_api import expect

    with app_view(app_url, "/optimal_cf", "Optimal counterfactual", shots_dir(tmp_path) / "what_if.png",
                  1800) as page:
        page.get_by_text("What-if: edit the row before asking").click()
        box = page.locator('[data-testid="stSelectbox"]').filter(has_text="employment")
        box.wait_for(timeout=60_000)
        expect(box.locator("input")).to_have_value("student", timeout=60_000)   # row 0: one category, by name
        names = choose(page, box, 4, "employed")
        assert sorted(names) == ["employed", "self_employed", "student", "unemployed"], names
        page.get_by_role("button", name="Find the optimal counterfactual").click()
        page.get_by_text("Optimal counterfactual: cost", exact=False).first.wait_for(timeout=90_000)
        wait_idle(page)                                  # the run is over: a stale notice would be up by now
        assert page.get_by_text("for an earlier query", exact=False).count() == 0   # the edited row was asked
        assert page.locator('[data-testid="stAlert"]').filter(has_text="not used").count() == 0


def test_rules_page_counts_the_tables_columns(app_url, tmp_path):
    from playwright.sync_api import expect

    with app_view(app_url, "/counterfactual_rules", "Counterfactual rules", shots_dir(tmp_path) / "rules_cols.png",
                  1800) as page:
        page.get_by_role("button", name="Find the counterfactual rule").click()
        metric = page.locator('[data-testid="stMetric"]').filter(has_text="Columns to change")
        expect(metric).to_be_visible(timeout=90_000)
        value = int(metric.locator('[data-testid="stMetricValue"]').inner_text())
        assert 1 <= value <= 8                                      # the demo table has 8 columns (11 features)
        rule = page.locator('[data-testid="stAlert"]').filter(has_text="then")
        expect(rule).not_to_contain_text("employment=")
