"""Many users on one server, in the real app and headless Chromium: one
session's Cancel leaves another session's audit running to its end (each run
owns its worker pool), and a crafted ``?demo=`` link shows its text as text.

B's Cancel must land while both audits run, on a machine much faster or slower
than this one: B's audit, the long one (cancelled, it costs nothing past the
Cancel), starts first; A's starts; B's page presses Cancel itself the moment A's
workers solve (browser_util.press_when), and what the runs left tells whether
it landed while both ran. A try where a run ended first proves nothing but must
have ended cleanly; it is tried again (B with 10 rows fewer, so its kept result
can never pass for the next run's), at most ATTEMPTS times."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from browser_util import app_view, browser_page, outcome, press_when, soon, wait_idle
from browser_util import shots_dir as _shots

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ATTEMPTS = 3
A_ROWS = 300                      # the audit that runs to its end
CANCELLED = "Cancelled: no new result was kept"


def _start_audit(page, rows: int) -> None:
    """Audit ``rows`` rows; the run is on once its Cancel button shows."""
    box = page.get_by_role("spinbutton", name="At most this many rows")
    box.fill(str(rows))
    box.press("Tab")
    page.get_by_role("button", name=f"Audit {rows} rows").click()
    soon(page, "^Cancel$")


def _recourse(rows: int) -> str:
    """An audit's progress once a chunk of its rows has its recourse: its workers are up and solving."""
    return rf"^recourse: \d+ of {rows}$"


def _running(page) -> bool:
    return page.get_by_role("button", name="Cancel").count() > 0


def _ended_cleanly(page) -> None:
    """The page's audit has ended with its result, no error."""
    from playwright.sync_api import expect

    expect(page.get_by_role("button", name="Cancel")).to_have_count(0, timeout=400_000)
    wait_idle(page)
    assert page.get_by_text("could not be run", exact=False).count() == 0, page.locator(
        '[data-testid="stAlert"]').all_inner_texts()
    expect(page.get_by_role("button", name="Report (HTML)")).to_be_visible()
    expect(page.get_by_text("Rows audited", exact=True)).to_be_visible()
    assert page.get_by_text("shutdown", exact=False).count() == 0


def _b_cancels_while_a_audits(a, b, rows: int) -> bool:
    """B audits ``rows`` rows, then A audits A_ROWS; B's Cancel is pressed the moment A's workers
    solve. True when it stopped B's audit (no new result kept) with A's still running; False when
    a run had ended before, each run that ended then with its result."""
    from playwright.sync_api import expect

    _start_audit(b, rows)
    _start_audit(a, A_ROWS)
    soon(a, _recourse(A_ROWS))
    press_when(b, _recourse(rows), "Cancel")
    stopped = outcome(b, "^Run an audit above, or open a saved one", r"^Rows audited\s+([\d,]+)$") != f"{rows:,}"
    if stopped and _running(a):
        expect(b.get_by_text(CANCELLED, exact=False)).to_be_visible()
        expect(b.get_by_role("button", name="Cancel")).to_have_count(0, timeout=60_000)
        assert b.get_by_text("could not be run", exact=False).count() == 0
        return True
    _ended_cleanly(a)
    if not stopped:
        _ended_cleanly(b)
        expect(b.get_by_text(CANCELLED, exact=False)).to_have_count(0)        # never above the new audit
    return False


def test_one_sessions_cancel_does_not_stop_another_sessions_audit(app_url, tmp_path):
    """Both audits run on 2 local processes each; B cancels while A is still running."""
    shots = _shots(tmp_path)
    with app_view(app_url, "/fairness_audit", "Fairness audit", shots / "sessions_a_finished.png", 2600) as a, \
            browser_page(height=1600, own_context=True) as b:                     # b: another user
        b.goto(app_url + "/fairness_audit")
        b.get_by_role("heading", name="Fairness audit").wait_for(timeout=90_000)
        for rows in range(800, 800 - 10 * ATTEMPTS, -10):
            if _b_cancels_while_a_audits(a, b, rows):
                break
        else:
            raise AssertionError(f"in each of {ATTEMPTS} tries, a run ended before B's Cancel had landed")
        assert b.locator('[data-testid="stException"]').count() == 0
        b.screenshot(path=str(shots / "sessions_b_cancelled.png"), full_page=True)
        _ended_cleanly(a)


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
