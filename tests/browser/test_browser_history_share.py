"""Browser tests of issue 17: audits survive a server restart and compare in the
History page; a copied link opened in a fresh browser shows the same page, row,
target and result."""

from __future__ import annotations

import re

import pytest
from browser_util import browser_page, open_expander, running_app, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _fill(page, label: str, value: int) -> None:
    box = page.get_by_role("spinbutton", name=label)
    box.wait_for(timeout=120_000)
    box.fill(str(value))
    box.press("Tab")
    wait_idle(page)


def _audit(page, rows: int) -> None:
    """An audit of ``rows`` rows in this session's own process: what is checked is that audits
    are kept and compared, not their statistics, and the fewest rows the page takes (the audit
    of test_browser.py runs a pool). Before: 80 and 100 rows in two processes each, 10.5 of the
    module's CPU-s in the pools' workers."""
    from playwright.sync_api import expect

    _fill(page, "At most this many rows", rows)
    open_expander(page, "Compute: local processes or a Dask cluster")
    _fill(page, "Local processes", 1)
    page.get_by_role("button", name=f"Audit {rows} rows").click()
    expect(page.get_by_role("button", name="Report (HTML)")).to_be_visible(timeout=240_000)


def test_audits_survive_a_restart_reopen_and_compare(tmp_path):
    from playwright.sync_api import expect

    env = {"ATLAS_HISTORY_URL": f"sqlite:///{tmp_path / 'history.sqlite'}"}
    with running_app(env=env) as url, browser_page() as page:
        page.goto(url + "/fairness_audit")
        _audit(page, 10)
        page.goto(url + "/fairness_audit")          # a new session: no result shown until the next audit ends
        _audit(page, 20)
    with running_app(env=env) as url, browser_page(height=1600) as page:      # a new server process
        page.goto(url + "/history")
        page.get_by_role("tab", name="Compare two").click(timeout=120_000)   # needs two stored audits
        expect(page.get_by_text("Gaps persisting", exact=True)).to_be_visible(timeout=60_000)
        expect(page.get_by_text("Same data · same model.", exact=True)).to_be_visible()
        page.get_by_role("tab", name="Re-open").click()
        page.get_by_role("button", name="Open in the Fairness audit page").click()
        expect(page.get_by_text("is open on the Fairness audit page", exact=False)).to_be_visible(timeout=60_000)
        page.get_by_role("link", name="Show it").click()
        expect(page.get_by_text("Rows audited", exact=True)).to_be_visible(timeout=120_000)
        assert page.locator('[data-testid="stException"]').count() == 0


def test_a_copied_link_shows_the_same_view_in_a_fresh_browser(app_url):
    """On the worker's server (conftest.app_url): a link needs no server of its own, and the
    fresh browser is a new browser context, with no cookie and no session of the first."""
    from playwright.sync_api import expect

    def find(page) -> str:
        page.get_by_role("button", name="Find the optimal counterfactual").first.click()
        msg = page.get_by_text(re.compile(r"Optimal counterfactual: cost [0-9.e+-]+")).first
        expect(msg).to_be_visible(timeout=120_000)
        return msg.inner_text()

    with browser_page() as page:
        page.goto(app_url + "/optimal_cf")
        row = page.get_by_role("spinbutton", name="Row").first
        row.wait_for(timeout=120_000)
        row.fill("7")
        row.press("Tab")
        expect(page).to_have_url(re.compile(r"row=7"), timeout=60_000)
        first = find(page)
        link = page.url
    assert "demo=" in link and "target=" in link
    with browser_page(own_context=True) as fresh:     # a new browser: no cookie, no session
        fresh.goto(link)
        row = fresh.get_by_role("spinbutton", name="Row").first
        row.wait_for(timeout=120_000)
        assert row.input_value() == "7"
        assert find(fresh) == first
        assert fresh.locator('[data-testid="stException"]').count() == 0
