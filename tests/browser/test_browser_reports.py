"""The HTML reports print (#38 item 5): opened in Chromium and printed to A4, the summary
has a page of its own, nothing is wider than the page (no table cut at its right
edge), and the file prints to several pages. The PDFs and screenshots go to
$ATLAS_SHOTS for a look."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from browser_util import browser_page, shots_dir
from conftest import demo_credit
from sklearn.ensemble import RandomForestClassifier

from core.audit import run_audit
from core.audit.compare import compare_models
from core.audit.story import case_story
from core.intake.workspace import build_workspace
from core.schema import infer_schema

pytestmark = pytest.mark.browser

A4_CONTENT_PX = 703          # 210 mm less 2 x 12 mm of margin, at 96 px per inch


@pytest.fixture(scope="module")
def reports():
    df, target, model, *_ = demo_credit()
    ws = build_workspace(df, target, model, name="credit").with_class_names({"0": "declined", "1": "approved"})
    audit = run_audit(ws.ensemble, ws.X.to_numpy(float), schema=ws.schema, target=1, max_rows=80, n_jobs=1,
                      model=ws.model, n_perm=300, n_boot=200, local_rules_per_group=2, class_names=ws.class_names)
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"income": rng.uniform(0, 100, 2000), "age": rng.uniform(18, 70, 2000),
                      "sex": rng.integers(0, 2, 2000).astype(float)})
    a = RandomForestClassifier(5, max_depth=4, random_state=0).fit(X, (X.income > 50).astype(int))
    b = RandomForestClassifier(5, max_depth=4, random_state=0).fit(X, (X.income > np.where(X.sex == 1, 60, 50))
                                                                   .astype(int))
    comparison = compare_models(a, b, X, schema=infer_schema(X, protected=["sex"]), target=1, max_rows=60,
                                model_a=a, model_b=b, n_boot=200, n_perm=300)
    story = case_story(ws, 0, 1, audit=audit, time_limit=10)
    return {"audit": audit.to_html(), "comparison": comparison.to_html(), "story": story.to_html()}


@pytest.mark.parametrize("name", ["audit", "comparison", "story"])
def test_a_report_prints_on_a4_without_cut_tables(reports, name, tmp_path):
    shots = shots_dir(tmp_path)
    path = tmp_path / f"{name}.html"
    path.write_text(reports[name], encoding="utf-8")
    with browser_page(width=1200, height=1400) as page:
        page.goto(path.as_uri())
        page.wait_for_load_state("load")
        page.screenshot(path=str(shots / f"report_{name}.png"))
        summary = page.locator("section.summary")
        assert summary.count() == 1
        page.emulate_media(media="print")
        page.set_viewport_size({"width": A4_CONTENT_PX, "height": 1000})
        page.wait_for_timeout(300)
        assert summary.evaluate("e => getComputedStyle(e).breakInside") == "avoid"
        if name != "story":                                  # a report's summary is its first page
            assert summary.evaluate("e => getComputedStyle(e).breakAfter") == "page"
        wide = page.evaluate("""() => [...document.querySelectorAll('table, svg, figure, pre, .summary')]
            .map(e => [e.tagName, Math.round(e.getBoundingClientRect().right)])
            .filter(([, right]) => right > document.documentElement.clientWidth + 1)""")
        assert not wide, wide
        assert page.evaluate("document.documentElement.scrollWidth") <= A4_CONTENT_PX + 1
        pdf = page.pdf(format="A4", margin={"top": "12mm", "bottom": "12mm", "left": "12mm", "right": "12mm"},
                       print_background=True)
    (shots / f"report_{name}.pdf").write_bytes(pdf)
    pages = len(re.findall(rb"/Type\s*/Page(?![s\w])", pdf))
    assert pages >= (1 if name == "story" else 2), pages
