"""The HTML reports open with a summary a reader outside the field follows in a minute, its key figure
drawn (#38 item 5): the audit (cost gap per group with its interval), the model comparison
(invalidation per group, and its other figures), the case story; self-contained and printable."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from conftest import demo_credit
from sklearn.ensemble import RandomForestClassifier

from core.audit import run_audit
from core.audit.compare import compare_models
from core.audit.report import plain_summary
from core.figures import interval_chart_svg
from core.intake.demo import DEMOS
from core.intake.workspace import build_workspace
from core.schema import infer_schema
from core.shown import approx_text


def _summary(html: str) -> str:
    """The text of the report's summary section."""
    part = html.split('<section class="summary">', 1)[1].split("</section>", 1)[0]
    return re.sub(r"<[^>]+>", " ", part)


def _self_contained(html: str) -> None:
    """Opens offline: no element that fetches an address (scripts are inlined: Plotly's and the JSON)."""
    markup = re.sub(r"<script\b.*?</script>", "", html, flags=re.S)
    assert not re.search(r"""<script[^>]*\ssrc=""", html)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", markup)
    assert "<svg" in html


@pytest.fixture(scope="module")
def audit():
    df, target, model, *_ = demo_credit()
    ws = build_workspace(df, target, model, name="credit", protected=["sex"]).with_class_names(DEMOS["credit-lightgbm"].class_names)
    return run_audit(ws.ensemble, ws.X.to_numpy(float), schema=ws.schema, target=1, max_rows=200, n_jobs=1,
                     model=ws.model, class_names=ws.class_names, local_rules_per_group=2, scan=False)


def test_the_audit_report_opens_with_a_plain_summary_and_the_cost_gap_drawn(audit):
    html = audit.to_html()
    assert html.index("In one minute") < html.index("<h2>Per group</h2>") < html.index("<h2>Figures</h2>")
    lead, body = plain_summary(audit)
    text = _summary(html)
    # the finding in plain words, from the worse-off group's side, in the class's name
    assert lead == "sex = 1 must change more than sex = 0 to get approved (1): a mean recourse cost of " \
        f"{approx_text(audit.groups.set_index('group').at['1', 'cost'], 3)} against " \
        f"{approx_text(audit.groups.set_index('group').at['0', 'cost'], 3)} ({lead.split('(')[-1]}"
    assert lead in text and "permutation" not in text and "Holm-adjusted p at most 0.05" in text
    assert len(text.split()) < 260                      # a minute's reading, the figure's labels included
    # the key figure: the cost gap of each group with its interval, as the tests table has it
    t = audit.tests[audit.tests["metric"] == "cost"].iloc[0]
    svg = html.split('<section class="summary">', 1)[1].split("</section>", 1)[0]
    assert "<svg" in svg and "sex = 0 compared with sex = 1" in svg
    assert (f"{approx_text(t['gap'], 3)} [{approx_text(t['gap_lo'], 3)}, {approx_text(t['gap_hi'], 3)}]"
            in svg), svg
    assert "@media print" in html and "break-inside:avoid" in html and "break-after:page" in html
    _self_contained(html)


def test_a_report_without_a_significant_gap_says_so_plainly():
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"income": rng.uniform(0, 100, 1500), "sex": rng.integers(0, 2, 1500).astype(float)})
    model = RandomForestClassifier(10, max_depth=4, random_state=0).fit(X, (X.income > 50).astype(int))
    a = run_audit(model, X, schema=infer_schema(X, protected=["sex"]), target=1, max_rows=60, n_jobs=1,
                  n_perm=200, n_boot=100, tcrex=False, local_rules_per_group=0, scan=False)
    assert not a.tests["significant"].any()
    lead, body = plain_summary(a)
    assert lead == "No group has to change significantly more than another to get 1."
    assert any("small differences may go unseen" in b for b in body)


@pytest.fixture(scope="module")
def comparison():
    rng = np.random.default_rng(0)
    n = 3000
    X = pd.DataFrame({"income": rng.uniform(0, 100, n), "age": rng.uniform(18, 70, n),
                      "sex": rng.integers(0, 2, n).astype(float)})
    y_a = (X.income > 50).astype(int)
    y_b = (X.income > np.where(X.sex == 1, 60, 50)).astype(int)     # version 2 moves one threshold, women only
    a = RandomForestClassifier(5, max_depth=4, bootstrap=False, max_features=None, random_state=0).fit(X, y_a)
    b = RandomForestClassifier(5, max_depth=4, bootstrap=False, max_features=None, random_state=0).fit(X, y_b)
    return compare_models(a, b, X, schema=infer_schema(X, protected=["sex"]), target=1, max_rows=120,
                          time_limit=10, model_a=a, model_b=b, n_boot=300, n_perm=1000,
                          provenance={"class_names": {"0": "declined", "1": "approved"}})


def test_the_comparison_report_opens_with_a_summary_and_carries_its_figures(comparison):
    c = comparison
    html = c.to_html()
    assert html.index("In one minute") < html.index("<h2>Agreement of decisions</h2>")
    text = _summary(html)
    g = c.groups.set_index("group")
    assert g.at["1", "invalidated"] == 1.0 and g.at["0", "invalidated"] == 0.0
    # the planted harm, in words: women's recourse fails under B, men's does not
    assert "The change model A asks of sex = 1 fails under model B more often than for sex = 0: 100.0% against " \
           "0.0%" in text, text
    assert "approved (1)" in text and len(text.split()) < 260
    # the key figure in the summary: invalidation per group with its interval; the others after it
    key = html.split('<section class="summary">', 1)[1].split("</section>", 1)[0]
    lo, hi = g.at["0", "ci_low"], g.at["0", "ci_high"]
    assert key.count("<svg") == 1 and f"0.0% [{lo:.1%}, {hi:.1%}]" in key and "sex = 1 (n = " in key
    rest = html.split("</section>", 1)[1]
    assert rest.count("<svg") >= 2 and "decided alike" in rest and "extra cost" in rest
    assert "<script>" not in html                      # no code: the JSON block only
    _self_contained(html)


def test_a_story_of_an_audited_group_opens_with_its_summary(audit):
    from core.audit.story import case_story

    df, target, model, *_ = demo_credit()
    ws = build_workspace(df, target, model, name="credit", protected=["sex"]).with_class_names(DEMOS["credit-lightgbm"].class_names)
    story = case_story(ws, 0, 1, audit=audit, time_limit=10)
    html = story.to_html()
    assert html.index("In brief") < html.index("<h2>The decision</h2>")
    brief = _summary(html)
    assert "declined (0)" in brief and "income" in brief and "sex = 1 is worse off than sex = 0" in brief
    assert "<svg" in brief or "<svg" in html.split("</section>")[0]
    assert "http" not in html and "<script" not in html


def test_the_interval_chart_escapes_its_labels_and_draws_what_it_is_given():
    svg = interval_chart_svg(["<b>a</b>", "b & c"], [0.2, -0.1], [0.1, -0.3], [0.3, 0.05], title="t <x>",
                             axis="gap")
    assert "<b>" not in svg and "&lt;b&gt;a&lt;/b&gt;" in svg and "b &amp; c" in svg and "t &lt;x&gt;" in svg
    assert "0.2 [0.1, 0.3]" in svg and "-0.1 [-0.3, 0.05]" in svg
    assert svg.count("<circle") == 2
    share = interval_chart_svg(["x"], [0.25], [np.nan], [np.nan], title="s", axis="a", share=True)
    assert "25.0%" in share and "100%" in share and "[" not in share.split("<text")[-1]


def test_the_audit_figures_draw_the_groups_in_one_order(audit):
    """The bar chart of a metric drew the groups in the audit table's order (the largest first),
    the box plot of costs in their labels' order: the same group sat in different places."""
    from core.audit.figures import cost_figure, metric_figure

    groups = audit.groups[audit.groups["attribute"] == "sex"]["group"].astype(str).tolist()
    assert groups == ["1", "0"], groups                    # the table's order: the largest group first
    bars = [str(x).split(" = ", 1)[1] for x in metric_figure(audit, "sex", "feasible").data[0].x]
    boxes = [t.name.split(" = ", 1)[1].rsplit(" (n=", 1)[0] for t in cost_figure(audit, "sex").data]
    assert bars == boxes == ["0", "1"], (bars, boxes)
