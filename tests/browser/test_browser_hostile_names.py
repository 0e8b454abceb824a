"""Names from a file are shown as text in the browser (#37), on a public instance:
an upload whose column names, categories, class labels and file names hold a
remote image, links, bold, emoji and colour directives, LaTeX, HTML and bare
addresses is loaded through the Data & model page, and the pages that show
names (Data & model, Optimal counterfactual with the what-if editor open,
Counterfactual rules, Metarule tree, Fairness audit) hold no image or link to
the attacker's address, fetch nothing from it, and show no bold, italics or
strikethrough made from a name; the names read as written. A link whose row is
"²" gets the broken-link message, not a traceback."""

from __future__ import annotations

import hostile as h
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# what a name's own Markdown would make bold, italic or struck through if rendered
EMPHASISED = {"age", "income", "outcome", "m", "yes", "data", "pilot", "model", "zqe", "sex", "f", "audit"}

_DOM = """() => {
  const out = {img: [], a: [], marked: [], svg: []};
  document.querySelectorAll('img, image').forEach(e => out.img.push(e.getAttribute('src') || e.getAttribute('href') || ''));
  document.querySelectorAll('a').forEach(e => out.a.push(e.getAttribute('href') || e.getAttribute('xlink:href') || ''));
  document.querySelectorAll('strong, b, em, i, del, s, .katex').forEach(e => out.marked.push(e.textContent));
  document.querySelectorAll('svg text').forEach(e => out.svg.push(e.textContent));
  return out;
}"""


def _check(page, where: str, requests: list[str], shows: list[str]) -> None:
    """No image, link, request or emphasis from a name on the page; ``shows`` read as written.
    Looked at once the page's script run is over (an image or link from a name would be in
    the page, and its request sent, by then)."""
    from browser_util import wait_idle

    wait_idle(page, quiet=500)
    assert page.locator('[data-testid="stException"]').count() == 0, where
    dom = page.evaluate(_DOM)
    assert not [s for s in dom["img"] if h.ATTACKER in s], (where, dom["img"])
    assert not [s for s in dom["a"] if h.ATTACKER in s], (where, dom["a"])
    assert not [t for t in dom["marked"] if t.strip() in EMPHASISED], (where, dom["marked"])
    assert not requests, (where, requests)
    text = page.inner_text("body") + "\n".join(dom["svg"])
    for name in shows:
        assert name in text, (where, name)


def _go(page, title: str) -> None:
    page.get_by_role("link", name=title).first.click()
    page.get_by_role("heading", name=title).wait_for(timeout=90_000)


def _shot(page, path) -> None:
    """The whole page: Streamlit scrolls inside its main area, so the window is made as tall as it."""
    height = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": 1400, "height": min(max(1000, height + 100), 12000)})
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")   # laid out
    page.screenshot(path=str(path))
    page.set_viewport_size({"width": 1400, "height": 1000})


def _upload(page, label: str, name: str, data: bytes) -> None:
    box = page.locator('[data-testid="stFileUploader"]').filter(has_text=label)
    box.first.wait_for(timeout=60_000)
    box.first.locator('input[type="file"]').set_input_files(
        files=[{"name": name, "mimeType": "application/octet-stream", "buffer": data}])


def test_hostile_names_show_as_text_on_a_public_instance(tmp_path):
    from browser_util import browser_page, open_expander, running_app, shots_dir

    shots = shots_dir(tmp_path)
    df = h.table()
    with running_app(env={"ATLAS_PUBLIC": "1", "ATLAS_HISTORY_URL": f"sqlite:///{tmp_path / 'h.sqlite'}"}) as url, \
            browser_page() as page:
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url) if h.ATTACKER in r.url else None)
        page.goto(url)
        page.get_by_role("heading", name="Data & model").wait_for(timeout=90_000)
        page.get_by_text("Upload your own").click()
        _upload(page, "Data (CSV or Parquet)", h.DATA_FILE, h.csv_bytes(df))
        page.get_by_text("Target column").wait_for(timeout=120_000)
        _upload(page, "Model file", h.MODEL_FILE, h.model_file(df))
        page.wait_for_timeout(1500)
        page.get_by_role("button", name="Load data and model").click()
        page.get_by_role("heading").filter(has_text="zqp.skops").wait_for(timeout=120_000)   # the loaded upload
        open_expander(page, "Class names")
        _check(page, "Data & model", requests, [h.DATA_FILE, h.MODEL_FILE, h.TARGET, *h.CLASSES])
        _shot(page, shots / "hostile-data-model.png")

        _go(page, "Optimal counterfactual")
        page.get_by_text("What-if: edit the row before asking").click()
        page.locator('[data-testid="stWidgetLabel"]').filter(has_text=h.AGE).first.wait_for(timeout=60_000)
        _check(page, "Optimal counterfactual", requests, [h.AGE, h.INCOME, h.SCORE, h.SEX, h.JOB])
        page.get_by_role("button", name="Find the optimal counterfactual").click()
        page.get_by_text("Optimal counterfactual: cost", exact=False).first.wait_for(timeout=120_000)
        _check(page, "Optimal counterfactual (result)", requests, [h.AGE])
        _shot(page, shots / "hostile-optimal-cf.png")

        _go(page, "Counterfactual rules")
        page.get_by_role("button", name="Find the counterfactual rule").click()
        page.get_by_text("the other features kept", exact=False).first.wait_for(timeout=180_000)
        _check(page, "Counterfactual rules", requests, [h.CLASSES[1]])
        _shot(page, shots / "hostile-rules.png")

        _go(page, "Metarule tree")
        page.locator('[data-testid="stGraphVizChart"] svg').first.wait_for(timeout=180_000)
        _check(page, "Metarule tree", requests, [])
        _shot(page, shots / "hostile-metarule-tree.png")

        _go(page, "Fairness audit")
        page.get_by_text("Protected attributes").first.wait_for(timeout=60_000)
        page.locator('[data-testid="stMultiSelect"]').filter(has_text="Protected attributes").first.click()
        page.get_by_role("option", name=h.SEX).click()
        page.keyboard.press("Escape")
        rows = page.get_by_role("spinbutton", name="At most this many rows")
        rows.fill("20")
        rows.press("Enter")
        page.get_by_role("button", name="Audit 20 rows").click()
        page.get_by_role("button", name="Report (HTML)").wait_for(timeout=300_000)
        _check(page, "Fairness audit", requests, [h.SEX, *h.SEXES])
        _shot(page, shots / "hostile-fairness-audit.png")


def test_a_row_in_superscript_digits_gets_the_broken_link_message(app_url, tmp_path):
    from browser_util import app_view, shots_dir

    with app_view(app_url, "/?row=%C2%B2", "Data & model", shots_dir(tmp_path) / "row-superscript.png") as page:
        page.get_by_text("This link could not be followed as sent", exact=False).wait_for(timeout=60_000)
        text = page.inner_text("body")
        assert "row '²' is not a row number" in text and "Traceback" not in text
