"""Many users on one server, in the real app and headless Chromium: one
session's Cancel leaves another session's audit running to its end (each run
owns its worker pool), and a crafted ``?demo=`` link shows its text as text."""

from __future__ import annotations

import threading
from urllib.parse import quote

import pytest
from browser_util import app_view
from browser_util import shots_dir as _shots

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _start_audit(page, rows: int) -> None:
    box = page.get_by_role("spinbutton", name="At most this many rows")
    box.fill(str(rows))
    box.press("Tab")
    page.get_by_role("button", name=f"Audit {rows} rows").click()


def test_one_sessions_cancel_does_not_stop_another_sessions_audit(app_url, tmp_path):
    """Both audits run on 2 local processes each; B cancels while A is still running."""
    from playwright.sync_api import expect

    shots = _shots(tmp_path)
    b_done = threading.Event()
    errors: list[BaseException] = []

    def session_b():
        try:
            with app_view(app_url, "/fairness_audit", "Fairness audit", shots / "sessions_b_cancelled.png",
                          1600) as page:
                _start_audit(page, 400)
                page.get_by_text("recourse:", exact=False).first.wait_for(timeout=120_000)
                page.get_by_role("button", name="Cancel").click(timeout=60_000)
                expect(page.get_by_text("Cancelled: no new result was kept", exact=False)).to_be_visible(
                    timeout=60_000)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
        finally:
            b_done.set()

    with app_view(app_url, "/fairness_audit", "Fairness audit", shots / "sessions_a_finished.png", 2600) as page:
        _start_audit(page, 800)
        page.get_by_text("recourse:", exact=False).first.wait_for(timeout=120_000)
        other = threading.Thread(target=session_b)
        other.start()
        other.join(300)
        assert b_done.is_set() and not errors, errors
        # B has cancelled while A is still running (else this test would prove nothing)
        assert page.get_by_role("button", name="Report (HTML)").count() == 0
        report = page.get_by_role("button", name="Report (HTML)")
        expect(report.or_(page.get_by_text("could not be run", exact=False))).to_be_visible(timeout=400_000)
        assert page.get_by_text("could not be run", exact=False).count() == 0, page.locator(
            '[data-testid="stAlert"]').all_inner_texts()
        expect(page.get_by_text("Rows audited", exact=True)).to_be_visible()
        assert page.get_by_text("shutdown", exact=False).count() == 0
        assert page.get_by_text("could not be run", exact=False).count() == 0


def test_a_crafted_demo_link_shows_its_text_as_text(app_url, tmp_path):
    # (under the 40 characters a message quotes of a parameter, so all of it is shown)
    crafted = "[go](//a.invalid) ![i](//a.in/p) **b**"
    with app_view(app_url, "/?demo=" + quote(crafted), "Data & model", _shots(tmp_path) / "crafted_demo.png",
                  1000) as page:
        alert = page.locator('[data-testid="stAlert"]').filter(has_text="this app does not have")
        alert.first.wait_for(timeout=60_000)
        text = alert.first.inner_text()
        assert crafted in text
        assert alert.first.locator("a").count() == 0
        assert alert.first.locator("img").count() == 0
        assert alert.first.locator("strong").count() == 0
