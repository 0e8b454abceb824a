"""Constraints between features in the browser (issue #61, acceptance): the analyst writes
constraints on the demo's Data & model page, runs the fairness audit, sees the rows precluded
per group, and opens the story of a precluded case, which says it has no recourse under the
constraints and names the lines that block it. One session, as a user goes from page to page;
the screenshots go to $ATLAS_SHOTS for a look."""

from __future__ import annotations

import re

import pytest
from browser_util import browser_page, choose, open_expander, shots_dir, sidebar_view, wait_idle

pytestmark = pytest.mark.browser

# two constraints, each after a comment: they sit on lines 2 and 4
TEXT = ("# a late payment stays on record\ndelta(late_payments) >= 0\n"
        "# a raise of at most 5 (thousands)\ndelta(income) <= 5")


def test_constraints_on_the_demo_preclude_rows_and_a_precluded_case_tells_its_story(app_url, tmp_path):
    from playwright.sync_api import expect

    shots = shots_dir(tmp_path)
    with browser_page(height=1400) as page:
        page.goto(app_url)
        page.get_by_role("heading", name="Data & model").wait_for(timeout=90_000)
        box = page.get_by_label("Constraints (one per line; # starts a comment)")
        box.fill(TEXT)
        box.press("Control+Enter")                       # the text area sends its text
        expect(page.get_by_text("2 constraints read without a problem; apply them", exact=False)).to_be_visible(
            timeout=60_000)
        page.get_by_role("button", name="Apply constraints").click()
        expect(page.get_by_text("2 constraints between features in force.")).to_be_visible(timeout=60_000)
        wait_idle(page)
        page.get_by_role("heading", name="Constraints between features").evaluate(
            "e => e.scrollIntoView({block: 'start'})")
        page.screenshot(path=str(shots / "constraints_1_data_model.png"))

        with sidebar_view(page, "Fairness audit", shots / "constraints_2_fairness_audit.png", 2600):
            # Streamlit's Markdown draws " >= " as "≥" and " <= " as "≤"
            said = re.compile(r"Constraints between features in force: delta\(late_payments\) (>=|≥) 0; "
                              r"delta\(income\) (<=|≤) 5\.")
            expect(page.get_by_text(said).first).to_be_visible(timeout=60_000)
            rows = page.get_by_role("spinbutton", name="At most this many rows")
            rows.fill("12")
            rows.press("Enter")
            open_expander(page, "Statistics and rules")          # the recourse alone: no rules to fit
            local = page.get_by_role("spinbutton", name="Local rules per group")
            local.fill("0")
            local.press("Enter")
            page.get_by_text("T-CREx rules per group").click()
            wait_idle(page)
            page.get_by_role("button", name="Audit 12 rows").click()
            page.get_by_role("heading", name="Rows precluded per group").wait_for(timeout=240_000)
            counted = page.get_by_text(re.compile(r"^Precluded: \d+ of the 12 audited rows \(sex = "))
            expect(counted).to_be_visible(timeout=60_000)
            n = int(re.match(r"Precluded: (\d+)", counted.inner_text()).group(1))
            assert n >= 1
            expect(page.get_by_text(said)).to_have_count(2)          # before the run, and beside the result
            pick = page.locator('[data-testid="stSelectbox"]').filter(has_text="A precluded case")
            case = choose(page, pick, n)[0]
            link = page.get_by_role("link", name=f"Open the story of case {case}")
            link.wait_for(timeout=60_000)
            wait_idle(page)

        link.click()
        with sidebar_view(page, "Case story", shots / "constraints_3_case_story.png", 2000):
            expect(page.get_by_role("spinbutton", name="Row")).to_have_value(case, timeout=60_000)
            page.get_by_text("Include a counterfactual rule", exact=False).click()     # no rule: the story alone
            wait_idle(page)
            page.get_by_role("button", name="Tell the story").click()
            no_way = ("This case has no recourse under the constraints between features: no change that keeps them "
                      "gets approved (1) (proven).")
            expect(page.get_by_text(no_way).first).to_be_visible(timeout=120_000)
            blocks = page.get_by_text("What blocks it: line ", exact=False).first
            expect(blocks).to_be_visible(timeout=30_000)
            assert re.search(r"line [24] \(delta\((late_payments|income)\) ([<>]=|≥|≤) [05]\)", blocks.inner_text())
            wait_idle(page)
