"""The Compare models page in the browser (#25): the demo's updated model, the study, both slices."""

from __future__ import annotations

import pytest
from browser_util import app_view, shots_dir

pytestmark = pytest.mark.browser


def test_compare_models_on_the_demo(app_url, tmp_path):
    from playwright.sync_api import expect

    with app_view(app_url, "/compare_models", "Compare models", shots_dir(tmp_path) / "compare_models.png",
                  3200) as page:
        page.get_by_role("button", name="Load model B").click()
        alike = page.locator('[data-testid="stMetric"]').filter(has_text="Decisions alike")
        expect(alike).to_be_visible(timeout=120_000)
        rows = page.get_by_role("spinbutton", name="At most this many rows")
        rows.fill("40")
        rows.press("Tab")
        page.get_by_role("button", name="Study 40 rows").click()
        expect(page.get_by_text("would not get", exact=False)).to_be_visible(timeout=240_000)
        page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
        expect(page.get_by_role("button", name="Report (HTML)")).to_be_visible()
        page.get_by_text("Model B: slice through row", exact=False).first.wait_for(timeout=120_000)
        assert page.locator('[data-testid="stAlert"]').filter(has_text="could not").count() == 0
